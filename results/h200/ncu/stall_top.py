"""Where a kernel's warps stall, per SASS instruction: the top rows and the
opcode totals of Nsight Compute's source page (`ncu --section SourceCounters
--page source --csv --print-source sass ...`, PC sampling, all samples).

  python3 results/h200/ncu/stall_top.py results/h200/ncu/src_ws_m16_8192x8192_int4.csv [--top 14]
"""

import argparse
import csv
from collections import Counter


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv", nargs="+")
    p.add_argument("--top", type=int, default=14)
    args = p.parse_args()
    for path in args.csv:
        lines = open(path).read().splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith('"Address"'))
        header, *rows = csv.reader(lines[start:])
        samples, source = header.index("Warp Stall Sampling (All Samples)"), header.index("Source")
        rows = [r for r in rows if len(r) > samples and r[samples].isdigit()]
        total = sum(int(r[samples]) for r in rows)
        print(f"{path}: {total} samples over {len(rows)} instructions")
        for r in sorted(rows, key=lambda r: -int(r[samples]))[:args.top]:
            n = int(r[samples])
            print(f"  {n:6d} {100 * n / total:5.1f}%  {r[0][-5:]}  {r[source].strip()[:80]}")
        ops = Counter()
        for r in rows:
            words = r[source].split()
            ops[(words[1] if words[0].startswith("@") else words[0]).split(".")[0]] += int(r[samples])
        print("  by opcode: " + ", ".join(f"{op} {n} ({100 * n / total:.1f}%)" for op, n in ops.most_common(12)))


if __name__ == "__main__":
    main()
