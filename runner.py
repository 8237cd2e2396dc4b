#!/usr/bin/env python3
"""qgemm-bench: benchmark low-bit GEMM backends (int4, NVFP4, split-K).
The command line lives in qgemm_bench/cli.py; `python runner.py --help` lists
the options."""

import sys


def main(argv: list[str] | None = None) -> int:
    try:  # importing torch takes seconds: a Ctrl-C then is no traceback either
        from qgemm_bench.cli import main as cli_main
    except KeyboardInterrupt:
        print("\ninterrupted (Ctrl-C)", file=sys.stderr)
        return 130
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
