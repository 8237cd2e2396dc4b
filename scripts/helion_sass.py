#!/usr/bin/env python3
"""No GPU needed: the Triton source Helion emits for kernels.fused (int4 or
NVFP4, bf16, the PTX decodes: what the H200 runs) at a config, compiled for sm_90
with this machine's Triton as scripts/fused_sass.py compiles fused_kernel,
and its main loop (the loop with the wgmmas) counted by opcode; the memory
instructions also by width (LDGSTS.E: 4-byte cp.async, LDS.U8: byte loads).

  python3 scripts/helion_sass.py [--m 16] [--block-sizes 128,16] [--block-k 128] [--split 8]
                                 [--warps 4] [--stages 3] [--acc] [--frag] [--tma] [--fmt int4] [--bf16-scales] [--rot]
                                 [--tiled] [--k 8192] [--n 8192] [--out PREFIX]

--block-sizes is Helion's [BLOCK_N, BLOCK_M]; --acc the config's acc_scale,
--frag its frag (int4 weights in fragment order), --tma its tma (x and
weight tiles by tensor descriptors, indexing tensor_descriptor), --bf16-scales its
bf16_scales (NVFP4: block scales as bf16 E4M3 x 2^118, FusedGemm's), --rot its rot (NVFP4
on ROT_DECODE's permuted weights: the shorter PTX decode), --tiled its tiled (the
weights in the Triton fused kernel's 64 x 128 tiles). The x, weight and scale
tensors are zeros on the CPU: only their shapes and strides reach the code
(static shapes), as helion_ops passes them (x transposed, M = 1 as two rows
of stride 0, K-major weights, int4 groups of 128; --fmt nvfp4: E4M3 scales
of 16). --out PREFIX writes PREFIX.py (Helion's Triton), .ttgir, .ptx and .sass."""

from __future__ import annotations

import collections
import importlib.util
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench
sys.path.insert(0, str(Path(__file__).resolve().parent))  # fused_sass: one copy of the SASS readers

from qgemm_bench.errors import InputError, one_line  # noqa: E402
from qgemm_bench.harness.args import Parser, int_in  # noqa: E402

GROUP = 128
MEMORY = ("LDGSTS", "LDS", "LDSM", "LDG", "STS", "STSM")  # counted with their width modifiers too
# kernels.fused's tensors' element types (the rest are constexprs Helion folds in).
TYPES = {"st": "*bf16", "wt": "*u8", "xt": "*bf16", "ws": "*fp32", "count": "*i32", "out": "*bf16",
         "tensor_scale": "*fp32", "x3": "*bf16", "xk": "*bf16", "w3": "*u8",
         "w_runs": "*u8"}  # x3, xk, w3: tma's views; w_runs: tiled's


def parse_args(argv=None):
    p = Parser(description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("--m", type=int_in(1, 4096), default=16, help="M (default 16)")
    p.add_argument("--block-sizes", default="128,16", metavar="BN,BM", help="Helion's block_sizes (default 128,16)")
    p.add_argument("--block-k", type=int, choices=(32, 64, 128, 256), default=128, help="block_k (default 128)")
    p.add_argument("--split", type=int_in(1, 64), default=1, help="split_k (default 1)")
    p.add_argument("--warps", type=int, choices=(4, 8), default=4, help="num_warps (default 4)")
    p.add_argument("--stages", type=int_in(1, 8), default=3, help="num_stages (default 3)")
    p.add_argument("--acc", action="store_true", help="acc_scale")
    p.add_argument("--frag", action="store_true", help="frag: int4 weights in fragment order")
    p.add_argument("--tma", action="store_true", help="tma: x and weight tiles by tensor descriptors")
    p.add_argument("--fmt", choices=["int4", "nvfp4"], default="int4",
                   help="int4 (groups of 128) or nvfp4 (E2M1 codes, E4M3 scales of 16), as fused_sass.py's")
    p.add_argument("--bf16-scales", action="store_true",
                   help="bf16_scales: NVFP4's block scales as bf16 E4M3 x 2^118 (decode.bf16_x2_118), not E4M3")
    p.add_argument("--rot", action="store_true",
                   help="rot: NVFP4 on ROT_DECODE's permuted weights (decode.NVFP4_ROT_BF16X2_PTX), not with --tma")
    p.add_argument("--tiled", action="store_true",
                   help="tiled: the weights in kmajor_layout.TILE tiles, as the Triton fused kernel reads them "
                   "(pointer loads, --block-k up to 128)")
    p.add_argument("--group", choices=["32", "64", "128", "channel", "none"], default=str(GROUP),
                   help="int4's scale groups: k per group, channel (one group of K) or none (unscaled; default "
                   f"{GROUP})")
    p.add_argument("--k", type=int_in(256, 1 << 16), default=8192, help="K, a multiple of 256 (default 8192)")
    p.add_argument("--n", type=int_in(16, 1 << 16), default=8192, help="N, a multiple of 256 (default 8192)")
    p.add_argument("--out", default=None, metavar="PREFIX", help="also write PREFIX.py, .ttgir, .ptx, .sass")
    args = p.parse_args(argv)
    if args.bf16_scales and args.fmt != "nvfp4":
        raise InputError("--bf16-scales needs --fmt nvfp4 (int4's scales are bf16 already)")
    if args.rot and (args.fmt != "nvfp4" or args.tma):
        raise InputError("--rot needs --fmt nvfp4 and pointer loads (no --tma), as helion_ops takes it")
    if args.group != str(GROUP) and args.fmt != "int4":
        raise InputError("--group is int4's (NVFP4's blocks are 16)")
    if args.tiled and (args.tma or args.block_k > 128):
        raise InputError("--tiled needs pointer loads (no --tma) and --block-k up to 128, as helion_ops takes it")
    found = re.fullmatch(r"(\d+),(\d+)", args.block_sizes)
    if not found:
        raise InputError(f"--block-sizes {args.block_sizes!r}: expected BLOCK_N,BLOCK_M, e.g. 128,16")
    args.bn, args.bm = map(int, found.groups())
    if args.k % 256 or args.n % 256:
        raise InputError(f"--k {args.k} / --n {args.n}: multiples of 256 (the K-major layout's padding)")
    if args.out is not None and not Path(args.out).resolve().parent.is_dir():
        raise InputError(f"--out {args.out}: its folder does not exist")
    return args


def config(args) -> dict:
    from qgemm_bench.tuning.candidates import tma_twin

    cfg = {"block_sizes": [args.bn, args.bm], "block_k": args.block_k, "split_k": args.split, "decode_asm": True,
           "num_warps": args.warps, "num_stages": args.stages}
    cfg = {**cfg, **({"acc_scale": True} if args.acc else {}), **({"frag": True} if args.frag else {}),
           **({"bf16_scales": True} if args.bf16_scales else {}), **({"rot": True} if args.rot else {}),
           **({"tiled": True} if args.tiled else {})}
    return tma_twin(cfg) if args.tma else cfg


def helion_source(args) -> str:
    """kernels.fused's Triton for the config, bound as helion_ops binds it."""
    import helion
    import torch

    from qgemm_bench.backends.helion_kernels import kernels
    from qgemm_bench.backends.helion_kernels.tuning import helion_settings
    from qgemm_bench.backends.helion_ops import FUSED_ARGUMENTS, fused_scale_mode

    m, k, n = max(args.m, 2), args.k, args.n  # helion_ops binds M = 1 as two rows (stride 0)
    split = args.split
    xt = torch.zeros(1 if args.m == 1 else m, k, dtype=torch.bfloat16).expand(m, k).t()
    group = k if args.group == "channel" else None if args.group == "none" else int(args.group)
    fmt, group = (1, 16) if args.fmt == "nvfp4" else (0, group)
    mode = fused_scale_mode(fmt, group, k, args.block_k)
    e4m3 = args.fmt == "nvfp4" and not args.bf16_scales
    if group is None:  # unscaled: helion_ops passes the weights as a placeholder, never read
        st = torch.zeros(n, k // 2, dtype=torch.uint8)
    else:
        st = torch.zeros(k // group, n, dtype=torch.float8_e4m3fn if e4m3 else torch.bfloat16).t()
    ws = torch.zeros(m, n) if split > 1 else None
    count = torch.zeros(-(-m // 16), n // 16, dtype=torch.int32) if split > 1 else None
    bound = kernels.fused.bind((xt, torch.zeros(n, k // 2, dtype=torch.uint8), st, torch.ones(1), n, fmt, mode,
                                group or 2, args.block_k, True, split, ws, count, args.tma, args.acc, 0, args.frag,
                                args.bf16_scales, args.rot, args.tiled))
    return bound.to_triton_code(helion.Config(**helion_settings(config(args), FUSED_ARGUMENTS)))


def compile_source(code: str, args, workdir: Path):
    """The emitted module's @triton.jit kernel compiled for sm_90 (16-byte
    aligned pointers, as a launch specializes them)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    path = workdir / "helion_fused.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location("helion_fused_sm90", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = module._helion_fused
    # Sizes Helion passes as constexpr arguments (tma's reshapes: _RDIM_SIZE_n), set in its host code.
    consts = {a: int(re.search(rf"^\s*{a} = (\d+)$", code, flags=re.M).group(1)) for a in fn.arg_names
              if a not in TYPES}
    sig = {a: "constexpr" if a in consts else TYPES[a] for a in fn.arg_names}
    if args.fmt == "nvfp4" and not args.bf16_scales:
        sig["st"] = "*fp8e4nv"
    if args.group == "none" and "st" in sig:
        sig["st"] = "*u8"
    attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names) if a not in consts}
    constexprs = {(fn.arg_names.index(a),): v for a, v in consts.items()}
    return triton.compile(ASTSource(fn, sig, constexprs=constexprs, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": args.warps, "num_stages": args.stages})


def full_opcode(line: str) -> str | None:
    found = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
    return found.group(1) if found else None


def main(argv=None) -> int:
    import os

    os.environ.pop("TRITON_INTERPRET", None)  # compiled, not interpreted (read when triton.jit first runs)
    try:
        args = parse_args(argv)
        import fused_sass

        try:
            code = helion_source(args)
            with tempfile.TemporaryDirectory() as tmp:
                k = compile_source(code, args, Path(tmp))
                sass, regs = fused_sass.sass_and_registers(k.asm["cubin"], Path(tmp))
        except Exception as e:  # a config Helion or Triton refuses, or a Triton without its CUDA tools
            raise InputError(f"binding or compiling for sm_90 failed: {one_line(e, 240)}") from None
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.out:
        for ext, text in (("py", code), ("ttgir", k.asm["ttgir"]), ("ptx", k.asm["ptx"]), ("sass", sass)):
            Path(f"{args.out}.{ext}").write_text(text)
    body = fused_sass.main_loop(sass)
    ops = fused_sass.opcodes(body)
    spills = fused_sass.spill_count(sass)
    print(f"helion {args.fmt} M={args.m} {config(args)} K={args.k} N={args.n}, sm_90: "
          f"{regs} registers, "
          f"{k.metadata.shared} bytes of shared memory, {spills} local-memory (spill) loads and stores")
    if not ops:
        print("main loop: not found (no loop with HGMMA)")
        return 1
    print(f"main loop (one K block): {len(ops)} instructions")
    print("  " + ", ".join(f"{op} {n}" for op, n in collections.Counter(ops).most_common()))
    widths = collections.Counter(op for b in body if (op := full_opcode(b)) and op.split(".")[0] in MEMORY)
    print("  memory: " + ", ".join(f"{op} {n}" for op, n in sorted(widths.items())))
    print(f"writes to a pending wgmma's A-operand registers: {fused_sass.operand_overwrites(body)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
