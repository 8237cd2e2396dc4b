#!/usr/bin/env python3
"""GPU: the decode step's flex attention (model/decode.flex_decode, as
`runner.py --model ... --attention flex` compiles it) at one query token per
sequence, with flex_attention's default kernel options against --split
values of SPLIT_KV (the flex decoding kernel's KV splits: Inductor's default
is 2 x SMs // (batch x KV heads), 32 for Llama-3-8B at batch 1, 2 at batch
16, 66 for 70B's 4 KV heads a rank under TP2), and our split-KV kernel
(`--attention triton`: backends/triton_kernels/decode_attention.py, one
launch; its default splits, BLOCK_N 32 and 128, 2 and 8 warps, and each
--split value as its splits). Each flex variant is compiled
alone (torch.compile, the step's default mode); each variant is checked against an fp32
softmax over the keys up to the position, then timed in --rounds rounds
(graph timing over rotating K/V copies > 2x L2, the runner's windows),
reverse order every other round. Its time is the attention kernel and the
kernel that combines its splits, as in the step. Prints each variant's
median p50 (us) and its rounds, fastest first. Exit 1 when a variant failed
or was wrong, 2 on bad input.

  python3 scripts/flex_ab.py --case 1,32,8 --case 16,32,8 --split 1,2,4,8,16
  python3 scripts/flex_ab.py --cpu-smoke   # CPU Inductor, tiny case: the script runs

A case is BATCH,Q_HEADS,KV_HEADS (head dim 128, bf16; --cache 640 slots,
the runner's for a 512-token prompt and 100 steps; --pos 560)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench

from qgemm_bench.errors import InputError, one_line  # noqa: E402
from qgemm_bench.harness.args import Parser, int_in, parsed  # noqa: E402

HEAD_DIM = 128
TOL = 2e-2  # bf16 output against the fp32 reference


def parse_args(argv=None):
    import argparse

    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", action="append", default=[], metavar="B,HQ,HKV", help="repeat for more cases")
    p.add_argument("--split", default="", metavar="N,...", help="SPLIT_KV values beside the default")
    p.add_argument("--cache", type=int_in(128, 1 << 20), default=640, help="cache slots (default 640)")
    p.add_argument("--pos", type=int_in(0, 1 << 20), default=560, help="the token's position (default 560)")
    p.add_argument("--rounds", type=int_in(1, 20), default=3, help="timed rounds (default 3)")
    p.add_argument("--seed", type=int_in(0, 2**31), default=0, help="inputs' seed (default 0)")
    p.add_argument("--cpu-smoke", action="store_true", help="CPU Inductor, case 1,4,2, cache 256, default only")
    args = p.parse_args(argv)
    if args.cpu_smoke:
        args.case, args.split, args.cache, args.pos, args.rounds = ["1,4,2"], "", 256, 200, 1
    if not args.case:
        raise InputError("--case B,HQ,HKV: at least one")
    try:
        args.cases = [tuple(int(v) for v in c.split(",")) for c in args.case]
        args.splits = [int(v) for v in args.split.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--case {args.case} / --split {args.split!r}: expected integers") from None
    for b, hq, hkv in (c if len(c) == 3 else (0, 0, 0) for c in args.cases):
        if min(b, hq, hkv) < 1 or hq % hkv:
            raise InputError(f"--case {args.case}: expected B,HQ,HKV positive, HQ a multiple of HKV")
    if any(s < 1 for s in args.splits) or len(set(args.splits)) < len(args.splits):
        raise InputError(f"--split {args.split!r}: positive and each once")
    if args.pos >= args.cache:
        raise InputError(f"--pos {args.pos}: must be under --cache {args.cache}")
    return args


def reference(q, k, v, pos: int, scale: float):
    """fp32 softmax attention of q [B, HQ, 1, D] over keys 0..pos, GQA."""
    import torch

    g = q.shape[1] // k.shape[1]
    kk = k[:, :, : pos + 1].float().repeat_interleave(g, 1)
    vv = v[:, :, : pos + 1].float().repeat_interleave(g, 1)
    return torch.softmax(q.float() @ kk.transpose(-1, -2) * scale, -1) @ vv


def check_variant(label: str, make, q, kvs, want, ready: dict) -> int:
    """make() -> fn(q, k, v): built (compiled), checked on the first K/V copy
    against `want`; a right one goes into ready[label] as one call per copy.
    Returns 1 for a variant that failed or was wrong (reported), else 0."""
    from qgemm_bench.operators.common import rel_error

    try:
        fn = make()
        err = rel_error(fn(q, *kvs[0]), want)
    except Exception as e:  # noqa: BLE001 - a variant that does not build or run is reported, not fatal
        print(f"  FAILED {label}: {one_line(e, 160)}", flush=True)
        return 1
    if not err <= TOL:
        print(f"  WRONG {label}: rel. error {err:.2e} over {TOL}", flush=True)
        return 1
    ready[label] = [lambda fn=fn, kv=kv: fn(q, *kv) for kv in kvs]
    return 0


def run_case(case, splits, cache: int, pos: int, rounds: int, dev, dtype, seed: int = 0) -> int:
    import torch

    from qgemm_bench.harness.measure import Settings
    from qgemm_bench.harness.sweep import print_rounds, time_rounds
    from qgemm_bench.model import decode, ops
    from qgemm_bench.tuning.timing import n_copies, p50_us

    b, hq, hkv = case
    scale = HEAD_DIM ** -0.5
    per_copy = 2 * b * hkv * cache * HEAD_DIM * torch.finfo(dtype).bits // 8
    n = n_copies(per_copy, per_copy, dev)
    g = torch.Generator(device="cpu").manual_seed(seed)
    q = torch.randn(b, hq, 1, HEAD_DIM, generator=g).to(dev, dtype)
    kvs = [(torch.randn(b, hkv, cache, HEAD_DIM, generator=g).to(dev, dtype),
            torch.randn(b, hkv, cache, HEAD_DIM, generator=g).to(dev, dtype)) for _ in range(n)]
    position_ids = torch.full((b, 1), pos, dtype=torch.long, device=dev)
    want = reference(q, *kvs[0], pos, scale)
    print(f"case B={b} HQ={hq} HKV={hkv} cache {cache} pos {pos} ({n} K/V copies of {per_copy / 2**20:.1f} MiB, "
          f"seed {seed})", flush=True)
    ready, bad = {}, 0
    for split in [None, *splits]:
        label = "default" if split is None else f"SPLIT_KV={split}"
        opts = None if split is None else {"SPLIT_KV": split}

        def attend(q, k, v, position_ids, opts=opts):
            return decode.flex_decode(q, k, v, ops.last_position(position_ids), scale, opts)

        def compiled(attend=attend):
            torch._dynamo.reset()
            fn = torch.compile(attend, fullgraph=True)
            return lambda q, k, v: fn(q, k, v, position_ids)

        bad += check_variant(label, compiled, q, kvs, want, ready)
    from qgemm_bench import target
    from qgemm_bench.backends.triton_kernels.decode_attention import decode_attention

    sms = target.of(dev).sms if dev.type == "cuda" else 4
    pos_t = position_ids.reshape(-1)[-1:]
    for label, kw in [("triton", {}), ("triton BLOCK_N=32", {"block_n": 32}), ("triton BLOCK_N=64", {"block_n": 64}),
                      ("triton BLOCK_N=128", {"block_n": 128}),
                      ("triton w2", {"num_warps": 2}), ("triton w8", {"num_warps": 8}),
                      *((f"triton splits={s}", {"splits": s}) for s in splits)]:
        def ours(kw=kw):
            return lambda q, k, v: decode_attention(q.reshape(b, hq, HEAD_DIM), k, v, pos_t, scale, sms,
                                                    **kw).reshape(q.shape)

        bad += check_variant(label, ours, q, kvs, want, ready)
    settings = Settings(warmup_ms=1.0, rep_ms=1.0) if dev.type == "cpu" else None
    times, failed = time_rounds(list(ready), rounds, lambda key: p50_us(ready[key], settings, dev))
    return bad + print_rounds(times, failed)


def main(argv=None) -> int:
    if (args := parsed(parse_args, argv)) is None:
        return 2
    if args.cpu_smoke:
        import os

        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    if args.cpu_smoke:  # our kernel on the Triton interpreter (set before triton's first import)
        dev, dtype = torch.device("cpu"), torch.float32
    elif not torch.cuda.is_available():
        print("error: flex_ab.py needs a CUDA device (--cpu-smoke: CPU Inductor)", file=sys.stderr)
        return 2
    else:
        dev, dtype = torch.device("cuda"), torch.bfloat16
    from qgemm_bench.harness.sweep import exit_on_lost_context

    def body() -> int:
        bad = sum(run_case(c, args.splits, args.cache, args.pos, args.rounds, dev, dtype, args.seed)
                  for c in args.cases)
        if bad:
            print(f"error: {bad} variant(s) failed or were wrong (the rows above)", file=sys.stderr)
        return 1 if bad else 0

    return exit_on_lost_context(body)


if __name__ == "__main__":
    sys.exit(main())
