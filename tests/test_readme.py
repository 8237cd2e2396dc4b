"""The README a newcomer reads: at most 300 lines (issue 56), and its result
tables exactly what scripts/readme_tables.py prints from the committed H200
baselines, one GPU and two (a baseline replaced without the README, or the
README edited by hand, fails here)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- results-tables: begin", "<!-- results-tables: end -->"


def test_the_readme_fits_300_lines():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


def test_the_readme_tables_are_the_committed_baselines():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("\n", text.index(BEGIN)) + 1
    block = text[start:text.index(END)]
    made = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_tables.py"), str(ROOT / "results" / "h200"),
                           str(ROOT / "results" / "h200x2")], capture_output=True, text=True, check=True).stdout
    assert block.rstrip("\n") == made.rstrip("\n")
