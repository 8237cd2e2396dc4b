#!/usr/bin/env python3
"""GPU: the read floor of an operator's shapes (qgemm_bench/harness/read_floor.py):
per shape, the p50 us of reading the shape's bytes once and of an empty
launch, timed as the runner times, next to the copy-bandwidth floor the
reports use and, with --baseline, the backends' p50 from a run's results.

  python3 scripts/read_floor.py OUT.md [--op split_k_gemm] [--preset skinny] [--shape M,K,N ...]
                                [--baseline results/h100/split_k_gemm/results.csv]
  python3 scripts/read_floor.py OUT.md --from MEASURED.json --baseline NEWER/results.csv   (no GPU)

Writes OUT.md (a table and the run's metadata) and OUT.json beside it, after
every shape; a shape that fails is a row saying why, and the rest go on."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench

from qgemm_bench.errors import InputError  # noqa: E402
from qgemm_bench.harness.args import Parser  # noqa: E402
from qgemm_bench.harness.plan import parse_shape  # noqa: E402

ROW_KEYS = ("shape", "bytes", "copy_floor_us", "read_us", "read_GBps", "empty_us")


def parse_args(argv=None):
    p = Parser(description=__doc__.split("\n\n")[0], epilog="Writes OUT.md and OUT.json.")
    p.add_argument("out", type=Path, help="the markdown table to write (OUT.json goes beside it)")
    p.add_argument("--op", help="operator whose shapes and bytes to use (default split_k_gemm)")
    p.add_argument("--preset", help="the operator's shape preset (default: its GPU preset)")
    p.add_argument("--shape", action="append", default=[], metavar="M,K,N",
                   help="a shape instead of the preset (repeatable)")
    p.add_argument("--dtype", choices=("bfloat16", "float16"), help="activation dtype (default bfloat16)")
    p.add_argument("--baseline", type=Path, metavar="RUN",
                   help="a run (its folder, results.json or results.csv) whose backends' p50 (rows of the "
                        "operator's default settings) to show")
    p.add_argument("--from", dest="source", type=Path, metavar="OUT.json",
                   help="no GPU: re-render a measured OUT.json (e.g. beside a newer --baseline)")
    return p.parse_args(argv)


def baseline_p50(path: Path, op, dtype: str) -> dict:
    """{(M, K, N): {backend: p50 us}} of a run's ok rows of this op, dtype and
    the op's default settings (those the floor's bytes assume). path: the run
    folder, its results.json or its results.csv (read through the results.json
    beside it: harness.results.load, one-line errors)."""
    from qgemm_bench.harness import results

    try:
        _, rows = results.load(path.parent if path.name == "results.csv" else path)
    except InputError as e:
        raise InputError(f"--baseline {e}") from None
    want = op.Settings().as_dict()
    out = {}
    for r in rows:
        if r.op == op.NAME and r.dtype == dtype and r.status == "ok" and r.settings == want:
            out.setdefault((r.M, r.K, r.N), {})[r.backend] = r.p50_us
    return out


def render(meta: dict, rows: list) -> str:
    """The markdown table: each row's measurements (or why it failed), then
    the backends' p50 the row carries."""
    backends = sorted({b for r in rows for b in r.get("backends", {})})
    head = ["shape MxKxN", "MiB", "copy floor us", "read us", "read GB/s", "empty launch us"] + \
        [f"{b} us" for b in backends]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r.get("error"):
            cells = [r["shape"], f"{r['bytes'] / 2**20:.2f}", f"failed: {r['error']}", "", "", ""]
        else:
            cells = [r["shape"], f"{r['bytes'] / 2**20:.2f}", f"{r['copy_floor_us']:.2f}", f"{r['read_us']:.2f}",
                     f"{r['read_GBps']:.0f}", f"{r['empty_us']:.2f}"]
        cells += [f"{r['backends'][b]:.2f}" if b in r.get("backends", {}) else "" for b in backends]
        lines.append("| " + " | ".join(cells) + " |")
    return (f"# Read floor: {meta['op']} on {meta['gpu']}\n\n"
            "read us: p50 of the fastest plain reader of the shape's bytes (qgemm_bench/harness/read_floor.py), "
            "graph timing over rotating copies > 2x L2, as the runner times; empty launch us: an empty kernel "
            "the same way; copy floor: bytes / the copy bandwidth measured in this run"
            + (f"; the backends' columns: {meta['baseline']}" if meta.get("baseline") else "") + ".\n\n"
            + "\n".join(lines) + "\n\n```\n" + json.dumps(meta, indent=1) + "\n```\n")


def write(out: Path, meta: dict, rows: list) -> None:
    from qgemm_bench.harness.outputs import write_atomic

    write_atomic(out, render(meta, rows))
    write_atomic(out.with_suffix(".json"), json.dumps({"meta": meta, "rows": rows}, indent=1))


def with_baseline(rows: list, base: dict) -> list:
    return [{**r, "backends": base.get(tuple(int(v) for v in r["shape"].split("x")), {})} for r in rows]


def load_measured(path: Path) -> tuple[dict, list]:
    """(meta, rows) of a read_floor.py OUT.json, checked."""
    if not path.is_file():
        raise InputError(f"--from {path}: no such file")
    try:
        doc = json.loads(path.read_text())
        meta, rows = doc["meta"], doc["rows"]
        for k in ("op", "dtype", "gpu"):
            str(meta[k])
        for r in rows:
            for k in ROW_KEYS if not r.get("error") else ("shape", "bytes"):
                r[k]  # noqa: B018
            m, k, n = (int(v) for v in r["shape"].split("x"))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise InputError(f"--from {path}: not a read_floor.py JSON ({type(e).__name__}: {e})") from None
    return meta, rows


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        from qgemm_bench import operators

        if args.source is not None:  # re-render a measured table, no GPU
            given = [f for f, v in (("--op", args.op), ("--preset", args.preset), ("--shape", args.shape),
                                    ("--dtype", args.dtype)) if v]
            if given:
                raise InputError(f"--from re-renders a measured table: {', '.join(given)} do not apply")
            meta, rows = load_measured(args.source)
            if args.baseline:
                base = baseline_p50(args.baseline, operators.get(meta["op"]), meta["dtype"])
                meta, rows = {**meta, "baseline": str(args.baseline)}, with_baseline(rows, base)
            write(args.out, meta, rows)
            print(f"wrote {args.out}")
            return 0
        op = operators.get(args.op or "split_k_gemm")
        dtype_name = args.dtype or "bfloat16"
        preset = args.preset or op.GPU_PRESET
        if preset not in op.PRESETS:
            raise InputError(f"--preset {preset!r}: {op.NAME} has {', '.join(op.PRESETS)}")
        shapes = [parse_shape(t) for t in args.shape] or op.PRESETS[preset]
        base = baseline_p50(args.baseline, op, dtype_name) if args.baseline else {}
        import torch

        if not torch.cuda.is_available():
            raise InputError("read_floor.py needs a CUDA GPU (or --from a measured OUT.json)")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from qgemm_bench.harness import environment, read_floor

    dev = torch.device("cuda")
    dtype = getattr(torch, dtype_name)
    t0 = time.monotonic()
    ceil = environment.measure_ceilings(dev)
    meta = {"op": op.NAME, "dtype": dtype_name, "gpu": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "triton": __import__("triton").__version__,
            "git_commit": environment.git_commit(), "ceilings": ceil,
            "baseline": str(args.baseline) if args.baseline else None,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    rows = []
    for s in shapes:
        nbytes = op.bytes(s, dtype, op.Settings())
        row = {"shape": f"{s.M}x{s.K}x{s.N}", "bytes": nbytes, "backends": base.get((s.M, s.K, s.N), {})}
        try:
            r = read_floor.measure(nbytes, dev)
            row.update(r, copy_floor_us=nbytes / (ceil["copy_GBps"] * 1e3))
            print(f"{row['shape']:>14} {nbytes / 2**20:8.2f} MiB  copy floor {row['copy_floor_us']:6.2f}  "
                  f"read {row['read_us']:6.2f} ({row['read_GBps']:.0f} GB/s)  empty {row['empty_us']:5.2f}", flush=True)
        except Exception as e:  # e.g. out of memory, or a reader that did not read every word
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
            print(f"{row['shape']:>14} failed: {row['error']}", flush=True)
            torch.cuda.empty_cache()
        rows.append(row)
        write(args.out, {**meta, "wall_s": round(time.monotonic() - t0, 1)}, rows)
    print(f"wrote {args.out}")
    return 1 if any(r.get("error") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
