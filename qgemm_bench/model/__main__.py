"""python -m qgemm_bench.model --model tiny (until runner.py --model is wired)."""

import sys

from qgemm_bench.model.cli import main

if __name__ == "__main__":
    sys.exit(main())
