#!/usr/bin/env python3
"""qgemm-bench: benchmark low-bit GEMM backends (int4, NVFP4, split-K).
The command line lives in qgemm_bench/cli.py (also installed as `qgemm-bench`);
`python runner.py --help` lists the options."""

import sys

from qgemm_bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
