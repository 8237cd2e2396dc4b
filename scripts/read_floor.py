#!/usr/bin/env python3
"""GPU: the read floor of an operator's shapes (qgemm_bench/harness/read_floor.py):
per shape, the p50 us of reading the shape's bytes once and of an empty
launch, timed as the runner times, next to the copy-bandwidth floor the
reports use and, with --baseline, the backends' p50 from a results.csv.

  python3 scripts/read_floor.py OUT.md [--op split_k_gemm] [--preset skinny] [--shape M,K,N ...]
                                [--baseline results/h100/split_k_gemm/results.csv]
  python3 scripts/read_floor.py OUT.md --from MEASURED.json --baseline NEWER/results.csv   (no GPU)

Writes OUT.md (a table and the run's metadata) and OUT.json beside it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench

from qgemm_bench.errors import InputError  # noqa: E402
from qgemm_bench.harness.args import Parser  # noqa: E402
from qgemm_bench.harness.plan import parse_shape  # noqa: E402


def parse_args(argv=None):
    p = Parser(description=__doc__.split("\n\n")[0], epilog="Writes OUT.md and OUT.json.")
    p.add_argument("out", type=Path, help="the markdown table to write (OUT.json goes beside it)")
    p.add_argument("--op", default="split_k_gemm", help="operator whose shapes and bytes to use (default split_k_gemm)")
    p.add_argument("--preset", help="the operator's shape preset (default: its GPU preset)")
    p.add_argument("--shape", action="append", default=[], metavar="M,K,N",
                   help="a shape instead of the preset (repeatable)")
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"), help="activation dtype")
    p.add_argument("--baseline", type=Path, help="a results.csv whose backends' p50 to show beside the floor")
    p.add_argument("--from", dest="source", type=Path, metavar="OUT.json",
                   help="no GPU: re-render a measured OUT.json (e.g. beside a newer --baseline)")
    return p.parse_args(argv)


def baseline_p50(path: Path, op: str, dtype: str) -> dict:
    """{(M, K, N): {backend: p50 us}} of the ok rows of a results.csv."""
    import pandas as pd

    if not path.is_file():
        raise InputError(f"--baseline {path}: no such file")
    df = pd.read_csv(path)
    df = df[(df.op == op) & (df.dtype == dtype) & (df.status == "ok")]
    out = {}
    for r in df.itertuples():
        out.setdefault((int(r.M), int(r.K), int(r.N)), {})[r.backend] = float(r.p50_us)
    return out


def render(meta: dict, rows: list, base: dict) -> str:
    """The markdown table: each row's measurements, then the backends' p50
    from `base` ({(M, K, N): {backend: us}}), or those stored in the row."""
    per_row = [base.get(tuple(int(v) for v in r["shape"].split("x")), r.get("backends", {})) if base
               else r.get("backends", {}) for r in rows]
    backends = sorted({b for v in per_row for b in v})
    head = ["shape MxKxN", "MiB", "copy floor us", "read us", "read GB/s", "empty launch us"] + \
        [f"{b} us" for b in backends]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r, bs in zip(rows, per_row, strict=True):
        cells = [r["shape"], f"{r['bytes'] / 2**20:.2f}", f"{r['copy_floor_us']:.2f}", f"{r['read_us']:.2f}",
                 f"{r['read_GBps']:.0f}", f"{r['empty_us']:.2f}"]
        cells += [f"{bs[b]:.2f}" if b in bs else "" for b in backends]
        lines.append("| " + " | ".join(cells) + " |")
    return (f"# Read floor: {meta['op']} on {meta['gpu']}\n\n"
            "read us: p50 of the fastest plain reader of the shape's bytes (qgemm_bench/harness/read_floor.py), "
            "graph timing over rotating copies > 2x L2, as the runner times; empty launch us: an empty kernel "
            "the same way; copy floor: bytes / the copy bandwidth measured in this run"
            + (f"; the backends' columns: {meta['baseline']}" if meta.get("baseline") else "") + ".\n\n"
            + "\n".join(lines) + "\n\n```\n" + json.dumps(meta, indent=1) + "\n```\n")


def write(out: Path, meta: dict, rows: list, base: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(meta, rows, base))
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"wrote {out}")


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        from qgemm_bench import operators

        if args.source is not None:  # re-render a measured table, no GPU
            if not args.source.is_file():
                raise InputError(f"--from {args.source}: no such file")
            try:
                doc = json.loads(args.source.read_text())
                meta, rows = doc["meta"], doc["rows"]
            except (ValueError, KeyError, TypeError) as e:
                raise InputError(f"--from {args.source}: not a read_floor.py JSON ({type(e).__name__})") from None
            base = baseline_p50(args.baseline, meta["op"], meta["dtype"]) if args.baseline else {}
            if args.baseline:
                meta = {**meta, "baseline": str(args.baseline)}
                rows = [{**r, "backends": base.get(tuple(int(v) for v in r["shape"].split("x")), {})} for r in rows]
            write(args.out, meta, rows, base)
            return 0
        op = operators.get(args.op)
        preset = args.preset or op.GPU_PRESET
        if preset not in op.PRESETS:
            raise InputError(f"--preset {preset!r}: {args.op} has {', '.join(op.PRESETS)}")
        shapes = [parse_shape(t) for t in args.shape] or op.PRESETS[preset]
        base = baseline_p50(args.baseline, args.op, args.dtype) if args.baseline else {}
        import torch

        if not torch.cuda.is_available():
            raise InputError("read_floor.py needs a CUDA GPU (or --from a measured OUT.json)")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from qgemm_bench.harness import environment, read_floor

    dev = torch.device("cuda")
    dtype = getattr(torch, args.dtype)
    t0 = time.monotonic()
    ceil = environment.measure_ceilings(dev)
    rows = []
    for s in shapes:
        nbytes = op.bytes(s, dtype, op.Settings())
        r = read_floor.measure(nbytes, dev)
        r.update(shape=f"{s.M}x{s.K}x{s.N}", copy_floor_us=nbytes / (ceil["copy_GBps"] * 1e3),
                 backends=base.get((s.M, s.K, s.N), {}))
        rows.append(r)
        print(f"{r['shape']:>14} {nbytes / 2**20:8.2f} MiB  copy floor {r['copy_floor_us']:6.2f}  "
              f"read {r['read_us']:6.2f} ({r['read_GBps']:.0f} GB/s)  empty {r['empty_us']:5.2f}", flush=True)
    meta = {"op": args.op, "dtype": args.dtype, "gpu": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "triton": __import__("triton").__version__,
            "git_commit": environment.git_commit(), "ceilings": ceil, "wall_s": round(time.monotonic() - t0, 1),
            "baseline": str(args.baseline) if args.baseline else None,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write(args.out, meta, rows, base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
