#!/usr/bin/env python3
"""No GPU needed: compile the fused weight-only kernel (fused_gemm.fused_kernel)
for sm_90 with this machine's Triton and print what its main loop costs:
registers, shared memory, and the loop's SASS instructions by opcode (the
loop with the wgmmas, HGMMA), and how many of its instructions write a
register that a wgmma still pending reads as its A operand (undefined in the
PTX ISA; fused_gemm.wrong_on_sm90 tells what such writes did on the H100).
How the docs' instruction counts were taken,
with Triton 3.6, the GPU machine's (NVFP4 16x128x128 split 8: 742 -> 561
per K block with bf16 scales); other Triton versions schedule differently.

  python3 scripts/fused_sass.py [--fmt int4|nvfp4] [--tile 16x128x128] [--split 8] [--warps 4]
                                [--stages 3] [--tma | --tma-x] [--acc] [--scale8] [--maxnreg N] [--group 128] [--k 8192]
                                [--ws [--ws-split 2 | --ws-splits N | --ws-stream-k] [--ws-pdl [2]] [--ws-acc]]
                                [--stalls]
                                [--out PREFIX]
                                [--probe-stage 1|2|3 [--halves]]
  python3 scripts/fused_sass.py --probe-table

--ws compiles the warp-specialized Gluon kernel (ws_gemm.py) instead, with
--tile and --stages as its WS tiles (its first consumer warpgroup's loop).

--probe-stage 1|2|3 compiles scripts/decode_probe.py's stage_kernel (S1
read, S2 decode, S3 dot) instead, at --tile/--split/--warps/--stages/--acc/
--fold/--maxnreg/--halves, PDL 0; its loop is the longest (S2 has no HGMMA),
or "unrolled" where none is left. --probe-table prints docs/fused_gemm.md's
table ("What the 8-warp dot adds"): S2 and S3 of the M = 1 tile,
16x128x128 split 8 s3 acc, int4 g128, K = 8192, over warps, FOLD, the
128-register cap, HALVES and BLOCK_K 64, per K block and warp by kind
(about 15 s; the doc's numbers are Triton 3.6's: `pip install --target
/tmp/t36 triton==3.6.0`, then PYTHONPATH=/tmp/t36:$PWD):

  python3 scripts/fused_sass.py --probe-stage 3 --tile 16x128x128 --split 8 --warps 8 --acc --halves
  python3 scripts/fused_sass.py --probe-table

--stalls adds the loop's static schedule, read from the scheduling bits
ptxas puts in each instruction (schedule(): stall cycles, yields, and each
scoreboard wait with the loads or stores it waits for, per warp).

--out PREFIX writes PREFIX.ttgir, .ptx and .sass beside the summary (and
with --stalls PREFIX.hex, nvdisasm's listing with the encodings). The
weights are tiled fragment-order bytes (kmajor_layout.TILE), int4 in groups
of --group (128: BLOCK scales), NVFP4 with bf16 block scales (--scale8: their
E4M3 bytes, fused_gemm's SCALE8), bf16 activations, as FusedGemm launches them
on an H100."""

from __future__ import annotations

import collections
import functools
import inspect
import re
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench

from qgemm_bench.errors import InputError  # noqa: E402
from qgemm_bench.harness.args import Parser, int_in  # noqa: E402

POINTERS = ("x_ptr", "w_ptr", "s_ptr", "ts_ptr", "out_ptr", "ws_ptr", "count_ptr")


def parse_args(argv=None):
    p = Parser(description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("--fmt", choices=["int4", "nvfp4"], default="int4")
    p.add_argument("--tile", default="16x128x128", help="BLOCK_M x BLOCK_N x BLOCK_K (default 16x128x128)")
    p.add_argument("--split", type=int_in(1, 64), default=1, help="SPLIT_K (default 1)")
    p.add_argument("--warps", type=int, choices=(4, 8), default=4, help="num_warps (default 4)")
    p.add_argument("--stages", type=int_in(1, 8), default=3, help="num_stages (default 3)")
    p.add_argument("--tma", action="store_true", help="TMA loads of x and the weights")
    p.add_argument("--tma-x", action="store_true", help="TMA loads of x alone (TMA_W false)")
    p.add_argument("--acc", action="store_true", help="ACC_SCALE: int4 scales on each K block's fp32 product")
    p.add_argument("--fold", action="store_true",
                   help="FOLD (with --acc, int4): the decode's offset subtracted from each K block's fp32 product")
    p.add_argument("--residual", action="store_true", help="split_k_parts._store's RESIDUAL and NORM_W: the "
                   "output plus a residual, its rows' sums of squares and its norm-weighted copy")
    p.add_argument("--rms-scale", action="store_true", help="split_k_parts._store's RMS_SCALE: the output's rows "
                   "times 1 / RMS of x")
    p.add_argument("--swiglu", action="store_true", help="SWIGLU: x = silu(gate) * up of h = [gate | up], "
                   "computed as x loads (by pointers; with --tma the weights alone by TMA)")
    p.add_argument("--swiglu-out", action="store_true", help="split_k_parts._store's SWIGLU_OUT: the output's "
                   "(gate, up) column pairs stored as silu(gate) * up")
    p.add_argument("--scale-ahead", action="store_true",
                   help="SCALE_AHEAD (with --acc, int4): each K block's scale row loaded a block ahead")
    p.add_argument("--short-decode", action="store_true",
                   help="SHORT_DECODE (NVFP4, pointer loads): the 18-instruction PTX decode")
    p.add_argument("--rot-decode", action="store_true",
                   help="ROT_DECODE (NVFP4, pointer loads): the 13-instruction PTX decode of permuted words")
    p.add_argument("--scale8", action="store_true",
                   help="SCALE8 (NVFP4, pointer loads): block scales read as E4M3 bytes, converted on the small tile")
    p.add_argument("--maxnreg", type=int_in(24, 255), default=None, help="cap the registers per thread (maxnreg)")
    p.add_argument("--group", default="128", metavar="G",
                   help="int4 scale groups: an even integer dividing K, 'channel' or 'none' (run, as FusedGemm "
                        "runs unscaled weights, with scales of one per channel; default 128)")
    p.add_argument("--k", type=int_in(256, 1 << 20), default=8192, help="K, a multiple of 256 (default 8192)")
    p.add_argument("--ws", action="store_true",
                   help="the warp-specialized Gluon kernel (ws_gemm.ws_kernel) with --tile and --stages as its WS "
                        "tiles (BLOCK_N 64 or 128); its first consumer's loop is reported")
    p.add_argument("--ws-split", type=int, choices=(1, 2), default=1,
                   help="--ws: 2 for two consumers sharing a 64-row tile's K blocks (WS K_SPLIT; BLOCK_N 64)")
    p.add_argument("--ws-splits", type=int_in(1, 4), default=1,
                   help="--ws: programs sharing a tile's K blocks, their sums meeting in global memory (WS SPLITS, "
                        "1-4; not --ws-split, which splits them between two warpgroups of one program)")
    p.add_argument("--ws-stream-k", action="store_true",
                   help="--ws: the programs, one per SM, share all tiles' K blocks (WS STREAM_K; BLOCK_N 128)")
    p.add_argument("--ws-pdl", type=int, nargs="?", const=1, default=0, choices=(1, 2),
                   help="--ws: launched with programmatic dependent launch (WS PDL 1: ws_gemm._pdl_wait; 2: the "
                        "first weights loaded before the wait, ws_gemm._producer)")
    p.add_argument("--ws-m-group", type=int_in(1, 16), default=1, metavar="G",
                   help="--ws: tiles in groups of G x-row blocks (WS M_GROUP: ws_gemm._grouped; default 1)")
    p.add_argument("--ws-acc", action="store_true",
                   help="--ws, int4 groups of whole K blocks: the scales on each block's product (WS ACC 1)")
    p.add_argument("--ws-stamps", action="store_true",
                   help="--ws: with each consumer's timeline stamped (WS STAMPS 1: ws_gemm.stamp_slots; not with "
                        "--ws-stream-k)")
    p.add_argument("--probe-stage", type=int, choices=(1, 2, 3), default=None,
                   help="scripts/decode_probe.py's stage_kernel cut after stage 1 (read), 2 (decode) or 3 (dot), "
                        "PDL 0, instead of fused_kernel")
    p.add_argument("--halves", action="store_true",
                   help="HALVES (each K block's weights and x as two half-K tiles; int4 with --acc, pointer loads): "
                        "fused_kernel's (fused_gemm.halved), or with --probe-stage 3 stage_kernel's (not --fold)")
    p.add_argument("--probe-table", action="store_true",
                   help="docs/fused_gemm.md's table of stage_kernel variants (no other options)")
    p.add_argument("--stalls", action="store_true",
                   help="also the loop's static schedule from ptxas's control bits: stall cycles (by opcode), "
                        "yields, scoreboard waits and what set them")
    p.add_argument("--out", default=None, metavar="PREFIX", help="also write PREFIX.ttgir, .ptx, .sass")
    args = p.parse_args(argv)
    if args.probe_table and (argv if argv is not None else sys.argv[1:]) != ["--probe-table"]:
        raise InputError("--probe-table: the doc's variants, with no other options")
    found = re.fullmatch(r"(\d+)x(\d+)x(\d+)", args.tile)
    if not found:
        raise InputError(f"--tile {args.tile!r}: expected BLOCK_MxBLOCK_NxBLOCK_K, e.g. 16x128x128")
    args.bm, args.bn, args.bk = map(int, found.groups())
    if args.k % 256:
        raise InputError(f"--k {args.k}: a multiple of 256 (the layout's K_ALIGN)")
    if args.group not in ("channel", "none"):
        try:
            g = int(args.group)
        except ValueError:
            g = 0
        if g <= 0 or g % 2 or args.k % g:
            raise InputError(f"--group {args.group!r}: an even integer dividing K={args.k}, 'channel' or 'none'")
    if args.fmt == "nvfp4" and args.group != "128":
        raise InputError("--group: int4 only (NVFP4 scales blocks of 16)")
    if args.tma and args.tma_x:
        raise InputError("--tma and --tma-x: one or the other")
    if args.swiglu and (args.tma_x or args.ws or args.probe_stage):
        raise InputError("--swiglu: fused_kernel's prologue, x by pointers (not --tma-x, --ws, --probe-stage)")
    for flag, on in (("--short-decode", args.short_decode), ("--rot-decode", args.rot_decode)):
        if on and (args.fmt != "nvfp4" or args.tma or args.ws or args.probe_stage):
            raise InputError(f"{flag}: NVFP4's fused_kernel with pointer loads (not --tma, --ws, --probe-stage)")
    if args.scale8 and (args.fmt != "nvfp4" or args.tma or args.tma_x or args.ws or args.probe_stage):
        raise InputError("--scale8: NVFP4's fused_kernel with pointer loads (not --tma, --tma-x, --ws, --probe-stage)")
    if args.ws and (args.tma or args.tma_x or args.acc or args.fold or args.split != 1 or args.maxnreg or
                    args.warps != 4):
        raise InputError("--ws: with --fmt, --tile, --stages, --group, --k and the --ws-* options only (its own "
                         "TMA loads and warps, no split)")
    if (args.ws_split != 1 or args.ws_splits != 1 or args.ws_stream_k or args.ws_pdl or args.ws_m_group != 1 or
            args.ws_stamps or args.ws_acc) and not args.ws:
        raise InputError("--ws-split, --ws-splits, --ws-stream-k, --ws-pdl, --ws-m-group, --ws-acc and --ws-stamps: "
                         "the warp-specialized kernel's (--ws)")
    if args.ws_stamps and args.ws_stream_k:
        raise InputError("--ws-stamps: not with --ws-stream-k (its consumers are not stamped)")
    if args.halves and (args.probe_stage not in (None, 3) or args.fmt != "int4" or not args.acc or args.ws or
                        args.tma or args.tma_x or args.group not in ("128", "channel", "none") and int(args.group) %
                        args.bk or args.probe_stage and args.fold):
        raise InputError("--halves: int4 with --acc, groups of whole K blocks, pointer loads; with --probe-stage: "
                         "3, without --fold (stage_kernel's HALVES)")
    if args.probe_stage and (args.ws or args.tma or args.tma_x):
        raise InputError("--probe-stage: stage_kernel's pointer loads (not with --ws, --tma or --tma-x)")
    if args.out is not None and not Path(args.out).resolve().parent.is_dir():
        raise InputError(f"--out {args.out}: its folder does not exist")
    return args


def compile_kernel(args):
    """The compiled kernel (triton.compile's result) for sm_90."""
    from qgemm_bench.backends.kmajor_layout import TILE
    from qgemm_bench.backends.triton_kernels import fused_gemm
    from qgemm_bench.backends.triton_kernels.weight_only_configs import check_config
    from qgemm_bench.operators.formats import INT4, NVFP4
    from qgemm_bench.target import Target

    fmt = INT4 if args.fmt == "int4" else NVFP4
    tma = "x" if args.tma_x else args.tma
    c = fused_gemm.config(args.bm, args.bn, args.bk, args.split, args.warps, args.stages, tma=tma, acc=args.acc,
                          maxnreg=args.maxnreg, fold=args.fold, scale8=args.scale8) | \
        ({"HALVES": True} if args.halves else {}) | ({"SHORT_DECODE": True} if args.short_decode else {}) | \
        ({"ROT_DECODE": True} if args.rot_decode else {}) | ({"SCALE_AHEAD": True} if args.scale_ahead else {})
    try:
        check_config(c, "the config", fmt)
    except ValueError as e:
        raise InputError(str(e)) from None
    group = launch_group(args)
    if fused_gemm.wrong_on_sm90(fmt, c) and not fused_gemm.halved(fmt, group, args.k, c):  # as FusedGemm takes them
        raise InputError(f"{args.tile} split {args.split} w{args.warps}: refused on the H100 "
                         "(fused_gemm.wrong_on_sm90)")
    if (args.tma or args.tma_x) and not fused_gemm.tma_usable(fmt, group, args.k, args.bk, Target.cpu(),
                                                               args.bm):
        raise InputError(f"--group {args.group} at {args.tile}: FusedGemm loads these tiles by pointer "
                         "(fused_gemm.tma_usable)")
    sig = {"x_ptr": "*bf16", "w_ptr": "*i8", "s_ptr": "*u8" if args.scale8 else "*bf16", "ts_ptr": "*fp32",
           "out_ptr": "*bf16", "ws_ptr": "*fp32", "count_ptr": "*i32", "M": "i32", "N": "i32", "K": "constexpr",
           "stride_xm": "i32",
           "stride_wn": "i32", "stride_sg": "i32", "stride_om": "i32"}
    const = {"K": args.k, "FMT": fmt, "GROUP": group or 2,
             "SCALE_MODE": fused_gemm.scale_mode(fmt, group, args.k, args.bk, True, fused_gemm.channel_block(c)),
             "EVEN_K": True, "FRAG": True,
             "TILE_N": TILE[0], "TILE_K": TILE[1], "PDL": 0,
             **{x: c.get(x, False) for x in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "DECODE_ASM", "TMA",
                                             "ACC_SCALE", "FOLD", "SCALE_AHEAD", "HALVES", "SCALE8",
                                             "SHORT_DECODE", "ROT_DECODE")},
             "TMA_W": c.get("TMA_W", True)}
    sig.update({x: "constexpr" for x in const})
    if args.residual:
        sig |= {"res_ptr": "*bf16", "sq_ptr": "*fp32", "RESIDUAL": "constexpr", "nw_ptr": "*bf16", "xw_ptr": "*bf16",
                "NORM_W": "constexpr"}
        const |= {"RESIDUAL": True, "NORM_W": True}
    if args.rms_scale:
        sig |= {"sqin_ptr": "*fp32", "eps": "fp32", "RMS_SCALE": "constexpr"}
        const["RMS_SCALE"] = True
    if args.swiglu:
        const["SWIGLU"] = True
        sig["SWIGLU"] = "constexpr"
    if args.swiglu_out:
        const["SWIGLU_OUT"] = True
        sig["SWIGLU_OUT"] = "constexpr"
    if (args.tma or args.tma_x) and not args.swiglu:  # FusedGemm.descriptors: the prologue's x by pointers
        sig["x_desc"] = f"tensordesc<bf16[{args.bm}, {args.bk}]>"
    else:
        sig["x_desc"], const["x_desc"] = "constexpr", None
    if args.tma:
        sig["w_desc"] = f"tensordesc<i8[{args.bn // TILE[0]}, {TILE[0]}, {args.bk // 2}]>"
    else:
        sig["w_desc"], const["w_desc"] = "constexpr", None
    extra = (("res_ptr", "sq_ptr", "nw_ptr", "xw_ptr") if args.residual else ()) + \
        (("sqin_ptr",) if args.rms_scale else ())
    return compile_jit(fused_gemm.fused_kernel, sig, const,
                       (*POINTERS, *extra, "N", "stride_xm", "stride_wn", "stride_sg", "stride_om"), c)


def launch_group(args) -> int:
    """The kernel's GROUP as FusedGemm launches it: NVFP4's blocks of 16,
    unscaled int4 as scales of one per channel."""
    from qgemm_bench.operators.formats import NVFP4_BLOCK

    if args.fmt == "nvfp4":
        return NVFP4_BLOCK
    return args.k if args.group in ("none", "channel") else int(args.group)


def compile_jit(kernel, sig: dict, const: dict, aligned, c: dict):
    """A triton.jit kernel compiled for sm_90: sig and const by parameter
    name, every other parameter at its default; aligned: the parameters a
    launch would specialize as 16-byte aligned; c: the launch config
    (num_warps, num_stages, maxnreg)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig, const = dict(sig), dict(const)
    # Every parameter, in the kernel's order (ASTSource reads positions).
    params = inspect.signature(kernel.fn).parameters
    for x, prm in params.items():
        if x not in sig:
            sig[x], const[x] = "constexpr", prm.default
    names = list(params)
    sig = {x: sig[x] for x in names}
    attrs = {(names.index(x),): [["tt.divisibility", 16]] for x in aligned}
    src = ASTSource(kernel, sig, constexprs={(names.index(x),): v for x, v in const.items()}, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={x: c[x] for x in ("num_warps", "num_stages", "maxnreg") if x in c})


@functools.cache
def load_probe():
    """scripts/decode_probe.py as a module (a script beside this one, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("decode_probe", Path(__file__).resolve().parent / "decode_probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_probe(args):
    """decode_probe.stage_kernel cut after --probe-stage, compiled for sm_90
    as decode_probe.stage_launch launches it (PDL 0)."""
    from qgemm_bench.backends.kmajor_layout import TILE
    from qgemm_bench.backends.triton_kernels import fused_gemm
    from qgemm_bench.operators.formats import INT4, NVFP4

    probe = load_probe()
    fmt = INT4 if args.fmt == "int4" else NVFP4
    c = fused_gemm.config(args.bm, args.bn, args.bk, args.split, args.warps, args.stages, acc=args.acc,
                          maxnreg=args.maxnreg, fold=args.fold)
    group = launch_group(args)
    sig = {"x_ptr": "*bf16", "w_ptr": "*i8", "w32_ptr": "*i32", "s_ptr": "*bf16", "ts_ptr": "*fp32",
           "out_ptr": "*i32" if args.probe_stage == probe.READ else "*fp32", "M": "i32", "N": "i32",
           "stride_xm": "i32", "stride_wn": "i32", "stride_ww": "i32", "stride_sg": "i32"}
    const = {"K": args.k, "STAGE": args.probe_stage, "FMT": fmt, "GROUP": group,
             "SCALE_MODE": fused_gemm.scale_mode(fmt, group, args.k, args.bk, True, fused_gemm.channel_block(c)),
             "BLOCK_M": args.bm, "BLOCK_N": args.bn, "BLOCK_K": args.bk, "SPLIT_K": args.split,
             "LOOP_STAGES": args.stages, "DECODE_ASM": True, "TILE_N": TILE[0], "TILE_K": TILE[1],
             "ACC_SCALE": args.acc, "PDL": 0, "FOLD": args.fold, "HALVES": args.halves}
    sig.update({x: "constexpr" for x in const})
    aligned = ("x_ptr", "w_ptr", "w32_ptr", "s_ptr", "ts_ptr", "out_ptr", "N", "stride_xm", "stride_wn",
               "stride_ww", "stride_sg")
    return compile_jit(probe.stage_kernel, sig, const, aligned, c)


def compile_ws(args):
    """The warp-specialized kernel (ws_gemm.ws_kernel) compiled for sm_90 with
    WS tiles --tile / --stages, as FusedGemm launches it."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from qgemm_bench.backends.kmajor_layout import TILE
    from qgemm_bench.backends.triton_kernels import ws_gemm
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles
    from qgemm_bench.operators.formats import INT4, NVFP4, NVFP4_BLOCK

    fmt = INT4 if args.fmt == "int4" else NVFP4
    c = ws_tiles(args.bm, args.bn, args.bk, args.stages, args.ws_split, args.ws_splits, stream_k=args.ws_stream_k,
                 pdl=args.ws_pdl, m_group=args.ws_m_group, acc=args.ws_acc)
    try:
        ws_gemm.check(c, fmt)
    except ValueError as e:
        raise InputError(str(e)) from None
    group = NVFP4_BLOCK if fmt == NVFP4 else args.k if args.group in ("none", "channel") else int(args.group)
    if fmt == INT4 and group < args.k and group % args.bk and group != 32:
        raise InputError(f"--group {args.group} at BLOCK_K {args.bk}: the kernel takes groups of whole K blocks "
                         "or of 32 (ws_gemm.usable)")
    if c.get("ACC") and not ws_gemm.acc_runs(fmt, group, args.k, c):
        raise InputError(f"--ws-acc with --group {args.group}: ACC runs at int4 groups of whole K blocks only "
                         "(ws_gemm.acc_runs)")
    sig = {x: f"tensordesc<{t}[{', '.join(map(str, shape))}],{layout!r}>"  # the kernel's first four parameters
           for x, (t, shape, layout) in ws_gemm.boxes(c, fmt, group).items()}
    kgroup = ws_gemm.kernel_group(fmt, group, args.k)  # per channel and unscaled: ts_ptr the scales' row
    sig.update(ts_ptr="*bf16" if kgroup == ws_gemm.CHANNEL else "*fp32", part_ptr="*fp32", count_ptr="*i32",
               st_ptr="*i64" if args.ws_stamps else "*bf16", N="i32",
               NP="i32", M="i32")
    const = {"K": args.k, "GROUP": kgroup, "FMT": fmt, "BLOCK_M": args.bm,
             "BLOCK_N": args.bn, "BLOCK_K": args.bk,
             "STAGES": args.stages, "TILE_N": TILE[0], "TILE_K": TILE[1], "K_SPLIT": args.ws_split}
    const["SPLITS"], const["PER"] = ws_gemm.split_blocks(args.k // args.bk, c)
    const["STREAM_K"] = c.get("STREAM_K", 0)
    const["PDL"] = c.get("PDL", 0)
    const["M_GROUP"] = c.get("M_GROUP", 1)
    const["STAMPS"] = int(args.ws_stamps)
    const["ACC"] = c.get("ACC", 0)
    sig.update({x: "constexpr" for x in const})
    names = list(sig)
    # NP: padded to 256; the workspace pointers 16-byte aligned, as a launch specializes them
    aligned = [["tt.divisibility", 16]]
    src = GluonASTSource(ws_gemm.ws_kernel, sig, constexprs={(names.index(x),): v for x, v in const.items()},
                         attrs={(names.index(x),): aligned for x in ("NP", "part_ptr", "count_ptr", "st_ptr")})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": 4, "maxnreg": ws_gemm.maxnreg(c)})


def tool(name: str) -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


def hex_listing(cubin: bytes) -> str:
    """nvdisasm's code with each instruction's two 64-bit words (-hex)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        return subprocess.run([tool("nvdisasm"), "-c", "-hex", str(path)], capture_output=True, text=True,
                              check=True).stdout


def sass_and_registers(cubin: bytes, workdir: Path) -> tuple[str, str]:
    """The cubin's SASS (nvdisasm) and registers per thread (cuobjdump's
    resource usage), with the tools bundled in Triton's wheel."""
    path = workdir / "kernel.cubin"
    path.write_bytes(cubin)
    sass = subprocess.run([tool("nvdisasm"), "-c", str(path)], capture_output=True, text=True, check=True).stdout
    usage = subprocess.run([tool("cuobjdump"), "-res-usage", str(path)], capture_output=True, text=True).stdout
    found = re.search(r"REG:(\d+)", usage)
    return sass, found.group(1) if found else "?"


OPCODE = re.compile(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")  # an instruction line's opcode


def loops(sass: str) -> list[list[str]]:
    """The lines of each loop, in order: from a label to a conditional
    branch back to it."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"^\.(L_x_\d+):", line))}
    found = []
    for i, line in enumerate(lines):
        back = re.search(r"@!?P\d+\s+BRA\s+`?\(\.(L_x_\d+)\)", line)
        if back and back.group(1) in labels and labels[back.group(1)] < i:
            found.append(lines[labels[back.group(1)]:i + 1])
    return found


def opcodes(lines) -> list[str]:
    return [m.group(1) for line in lines if (m := OPCODE.match(line))]


def main_loop(sass: str) -> list[str]:
    """The lines of the loop that holds the wgmmas."""
    return next((body for body in loops(sass) if "HGMMA" in opcodes(body)), [])


def probe_loop(sass: str) -> list[str]:
    """stage_kernel's K loop: its longest (S1 and S2 have no wgmma); [] where
    ptxas unrolled it."""
    return max(loops(sass), key=len, default=[])


def spill_count(sass: str) -> int:
    """Local-memory loads and stores (STL, LDL) in the kernel."""
    return sum(op in ("STL", "LDL") for op in opcodes(sass.splitlines()))


HGMMA_A = re.compile(r"HGMMA\.\S+\s+R\d+,\s+R(\d+),")  # A from registers: 4 of them (64x16 bf16 per warpgroup)
DEPBAR = re.compile(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s+0x([0-9a-f]+)")  # wait until at most N wgmmas pending
DEST = re.compile(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s+R(\d+)\b")  # an R destination


def dest_width(op: str) -> int:
    """Registers an instruction with an R destination writes."""
    if op.startswith("LDSM"):
        return int(op[-1])
    if ".128" in op:
        return 4
    return 2 if ".64" in op or ".WIDE" in op else 1


def operand_overwrites(body: list[str]) -> int:
    """Instructions of the loop (gone round twice, so across its back edge)
    that write a register a wgmma still pending reads as its A operand: the
    PTX ISA leaves touching them undefined until a wgmma.wait_group retires
    that wgmma, and the SASS orders them by WARPGROUP.DEPBAR only."""
    pending, hits = [], 0
    for lap in (0, 1):
        for line in body:
            if found := HGMMA_A.search(line):
                pending.append(set(range(int(found.group(1)), int(found.group(1)) + 4)))
            elif found := DEPBAR.search(line):
                keep = int(found.group(1), 16)
                pending = pending[len(pending) - keep:] if keep else []
            elif (found := DEST.match(line)) and not found.group(1).startswith("HGMMA"):
                regs = set(range(int(found.group(2)), int(found.group(2)) + dest_width(found.group(1))))
                hits += lap and any(regs & p for p in pending)
    return hits


# Volta and later: ptxas's scheduling controls fill each 128-bit instruction's
# bits 105-127 (41-63 of nvdisasm -hex's second word). From the low end: stall
# cycles before the warp's next issue (4 bits), yield (1), the scoreboard this
# instruction's result sets (write barrier, 3), the one its source reads set
# (read barrier, 3), the scoreboards it waits for (mask, 6), operand reuse (4).
# Barrier 7 is none; the yield bit is clear where the warp yields. (Jia et al.,
# arXiv:1804.06826 section 2.1; CuAssembler's CuSMVersion and decodeCtrlCodes.)
Control = collections.namedtuple("Control", "stall yields write read wait reuse")


def control(high: int) -> Control:
    """The controls in an instruction's high 64-bit word."""
    c = high >> 41
    return Control(c & 0xF, not c >> 4 & 1, *(None if b == 7 else b for b in (c >> 5 & 7, c >> 8 & 7)),
                   c >> 11 & 0x3F, c >> 17 & 0xF)


ADDRESS = re.compile(r"\s*/\*([0-9a-f]+)\*/")
HIGH = re.compile(r"\s*/\*\s*0x([0-9a-f]{16})\s*\*/\s*$")  # nvdisasm -hex: the high word's line
DEPBAR_SB = re.compile(r"\bDEPBAR\.LE\s+SB(\d),\s*0x([0-9a-f]+)")  # wait until at most N on scoreboard SB


def controls(listing: str) -> dict[int, Control]:
    """Each instruction's controls by address, from nvdisasm -c -hex's listing
    (an instruction's line, then a line with its high word)."""
    return {int(a.group(1), 16): control(int(h.group(1), 16)) for line, nxt in pairwise(listing.splitlines())
            if (a := ADDRESS.match(line)) and (h := HIGH.match(nxt))}


def schedule(body: list[str], ctl: dict[int, Control]) -> dict:
    """The loop's static schedule from its controls: stall cycles (the
    issue cycles a warp spends on one pass, scoreboard and barrier waits
    left out), by opcode, yields, and each wait on a scoreboard with the
    instructions it waits for (those that set it since its last wait; a
    DEPBAR.LE SBn, k all but the last k), each with how many stall cycles
    before the wait it issued. Gone round three times (a DEPBAR can wait for
    the pass before last), the last counted."""
    rows = [(int(a.group(1), 16), op.group(1), line) for line in body
            if (a := ADDRESS.match(line)) and (op := OPCODE.match(line))]
    stalls = collections.Counter()
    for addr, op, _ in rows:
        stalls[op] += ctl[addr].stall
    pending, waits, cycle = collections.defaultdict(list), [], 0
    for lap in (0, 0, 1):
        for addr, op, line in rows:
            c = ctl[addr]
            keeps = {b: 0 for b in range(6) if c.wait >> b & 1}  # the mask: until none is pending
            if counted := DEPBAR_SB.search(line):  # DEPBAR.LE SBn, k: until at most k are
                keeps[int(counted.group(1))] = int(counted.group(2), 16)
            for b, keep in keeps.items():
                done = max(len(pending[b]) - keep, 0)
                if lap:
                    waits.append((addr, op, b, [(o, how, cycle - at) for o, how, at in pending[b][:done]]))
                pending[b] = pending[b][done:]
            for b, how in ((c.write, "W"), (c.read, "R")):
                if b is not None:
                    pending[b].append((op, how, cycle))
            cycle += c.stall
    return {"cycles": sum(stalls.values()), "instructions": len(rows), "by_opcode": stalls,
            "yields": sum(ctl[addr].yields for addr, _, _ in rows), "waits": waits}


def print_schedule(s: dict):
    print(f"static schedule (ptxas's control bits, one K block, per warp): {s['cycles']} stall cycles over "
          f"{s['instructions']} instructions (scoreboard and barrier waits not counted), {s['yields']} yield")
    print("  stall cycles by opcode: " + ", ".join(f"{op} {n}" for op, n in s["by_opcode"].most_common()))
    kinds = collections.Counter(f"{o} ({how})" for *_, setters in s["waits"] for o, how, _ in setters)
    print(f"  scoreboard waits: {len(s['waits'])}, for (W: a result, R: sources read): " +
          (", ".join(f"{k} {n}" for k, n in kinds.most_common()) or "none"))
    for addr, op, b, setters in s["waits"]:
        print(f"    {addr:04x} {op} waits SB{b}: " + (", ".join(f"{o} ({how}) {d} cycles before"
                                                          for o, how, d in setters) or "nothing the loop set"))


def compiled(args):
    """(triton.compile's result, its SASS, registers per thread) for args'
    kernel; InputError where it does not compile."""
    import tempfile

    try:
        k = compile_probe(args) if args.probe_stage else compile_ws(args) if args.ws else compile_kernel(args)
        with tempfile.TemporaryDirectory() as tmp:
            sass, regs = sass_and_registers(k.asm["cubin"], Path(tmp))
    except InputError:
        raise
    except Exception as e:  # a config Triton cannot compile, or a Triton without its CUDA tools
        raise InputError(f"compiling for sm_90 failed: {type(e).__name__}: "
                         f"{(str(e).strip().splitlines() or [''])[-1][:200]}") from None
    return k, sass, regs


# docs/fused_gemm.md's table ("What the 8-warp dot adds"): stage_kernel at the M = 1 tile as the
# probe runs it on the H200, PDL 0.
PROBE_BASE = ["--split", "8", "--stages", "3", "--acc"]


def probe_row(stage: int, warps: int, reg: int = 0, fold: bool = False, halves: bool = False, bk: int = 128):
    """(label, options) of one variant."""
    label = f"S{stage} w{warps} {'fold' if fold else 'acc'} {f'r{reg}' if reg else 'no cap'}"
    return (label + (" halves" if halves else "") + (f" BLOCK_K {bk}" if bk != 128 else ""),
            ["--probe-stage", str(stage), "--tile", f"16x128x{bk}", "--warps", str(warps),
             *(["--maxnreg", str(reg)] if reg else []), *(["--fold"] if fold else []),
             *(["--halves"] if halves else [])])


def probe_rows(probe) -> list:
    """The table's variants: decode_probe's (its module) FOLD_SWEEP of S2 and S3 and its HALVES_SWEEP,
    then a 64-register cap without HALVES and BLOCK_K 64."""
    rows = [probe_row(stage, warps, reg, fold) for stage in (2, 3)
            for warps in dict.fromkeys(w for w, _ in probe.FOLD_SWEEP) for fold in (False, True)
            for w, reg in probe.FOLD_SWEEP if w == warps]
    rows += [probe_row(3, warps, reg, halves=True) for warps, reg in probe.HALVES_SWEEP]
    return rows + [probe_row(3, 8, 64), probe_row(2, 8, bk=64), probe_row(3, 8, bk=64), probe_row(3, 8, 64, bk=64)]
# Columns after the loop's total: instruction kinds by opcode (uniform: the U* ops, the ring indices).
KINDS = {"decode": ("LOP3", "HFMA2", "PRMT", "SHF"), "HGMMA": ("HGMMA",), "FFMA": ("FFMA",),
         "WARPGROUP": ("WARPGROUP",), "smem": ("LDS", "LDSM", "STS"), "BAR": ("BAR",), "SHFL": ("SHFL",)}
SM_REGISTERS, SM_THREADS, SM_SHARED, CTA_RESERVED = 65536, 2048, 233472, 1024  # sm_90, an SM's


def ctas_per_sm(regs: int, warps: int, shared: int) -> int:
    """CTAs an SM holds: registers in 8-a-thread granules, threads, shared memory."""
    per_warp = -(-regs // 8) * 8 * 32
    return min(SM_REGISTERS // per_warp // warps, SM_THREADS // (32 * warps), SM_SHARED // (shared + CTA_RESERVED))


def probe_table() -> int:
    """Print docs/fused_gemm.md's table of stage_kernel variants."""
    import triton

    print(f"stage_kernel for sm_90, Triton {triton.__version__}: 16x128x128 split 8 s3 acc PDL 0, int4 g128, "
          "K = 8192; SASS per K block and warp over the loop (label to back branch)")
    print()
    print("| variant | regs | spills | CTAs/SM | SASS / K block / warp | " + " | ".join(
        "smem (STS)" if x == "smem" else x for x in KINDS) + " | uniform |")
    print("|---" * (6 + len(KINDS)) + "|")
    failed = 0
    for label, opts in probe_rows(load_probe()):
        args = parse_args(PROBE_BASE + opts)
        try:
            k, sass, regs = compiled(args)
        except InputError as e:
            print(f"| {label} | {e} |")
            failed += 1
            continue
        ctas = ctas_per_sm(int(regs), args.warps, k.metadata.shared) if regs.isdigit() else "?"
        cells = [label, regs, spill_count(sass), ctas]
        ops = collections.Counter(opcodes(probe_loop(sass)))
        if ops:
            kinds = {x: sum(ops[op] for op in group) for x, group in KINDS.items()}
            kinds["smem"] = f"{kinds['smem']} ({ops['STS']})"
            cells += [sum(ops.values()), *kinds.values(), sum(n for op, n in ops.items() if op.startswith("U"))]
        else:
            cells += [f"loop unrolled: {len(opcodes(sass.splitlines()))} in the kernel"] + [""] * (len(KINDS) + 1)
        print("| " + " | ".join(map(str, cells)) + " |", flush=True)
    return 1 if failed else 0


def main(argv=None) -> int:
    import os

    # Compiled, not interpreted: triton.jit reads this when the kernel module
    # is first imported (in compile_kernel and the others).
    os.environ.pop("TRITON_INTERPRET", None)
    try:
        args = parse_args(argv)
        if args.probe_table:
            return probe_table()
        k, sass, regs = compiled(args)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    listing = hex_listing(k.asm["cubin"]) if args.stalls else None
    if args.out:
        for ext, text in (("ttgir", k.asm["ttgir"]), ("ptx", k.asm["ptx"]), ("sass", sass), ("hex", listing)):
            if text is not None:
                Path(f"{args.out}.{ext}").write_text(text)
    body = probe_loop(sass) if args.probe_stage else main_loop(sass)
    ops = opcodes(body)
    opts = "".join(f" {o}" for o, on in (("ws", args.ws), (f"pdl{args.ws_pdl if args.ws_pdl > 1 else ''}", args.ws_pdl),
                                         ("acc", args.ws_acc),
                                         ("stamps", args.ws_stamps),
                                         ("tma", args.tma),
                                         ("tma-x", args.tma_x), ("acc", args.acc), ("fold", args.fold),
                                         ("ahead", args.scale_ahead),
                                         ("scale8", args.scale8),
                                         ("halves", args.halves), ("swiglu", args.swiglu),
                                         ("swiglu-out", args.swiglu_out),
                                         (f"r{args.maxnreg}", args.maxnreg),
                                         (f"group {args.group}", args.fmt == "int4" and args.group != "128")) if on)
    launch = "" if args.ws else f" split {args.split} w{args.warps}"  # ws: its own partitions, no split
    kernel = f"stage_kernel S{args.probe_stage} " if args.probe_stage else ""
    print(f"{kernel}{args.fmt} {args.tile}{launch} s{args.stages}{opts} "
          f"K={args.k}, sm_90: {regs} registers, {k.metadata.shared} bytes of shared memory, "
          f"{spill_count(sass)} local-memory (spill) loads and stores")
    if not ops and args.probe_stage:
        print(f"main loop: unrolled ({len(opcodes(sass.splitlines()))} instructions in the kernel)")
        return 0
    if not ops:
        print("main loop: not found (no loop with HGMMA)")
        return 1
    print(f"main loop (one K block): {len(ops)} instructions")
    print("  " + ", ".join(f"{op} {n}" for op, n in collections.Counter(ops).most_common()))
    print(f"writes to a pending wgmma's A-operand registers: {operand_overwrites(body)}")
    if args.stalls:
        print_schedule(schedule(body, controls(listing)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
