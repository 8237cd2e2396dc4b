"""Every file the code and the docs cite is in the repository: a measurement
quoted from a script nobody can run is a claim, not a result (the project's
standard). Checked over the tracked Python, Markdown and shell files; a
path given to an option that writes it (`--out PATH`, `--output-dir PATH`)
is an output, not a citation. results/h100/ is the H100's record as it was
written and is left out."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"(?<![\w/.-])((?:exp|scripts|tests|docs|results|qgemm_bench|\.ci)/[\w./-]*\w"
                   r"\.(?:py|md|sh|json|txt|csv))")
OUTPUT = re.compile(r"--(?:out|output-dir)[ =]$")


def test_every_cited_file_is_in_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    missing = []
    for f in files:
        if not f.endswith((".py", ".md", ".sh")) or f.startswith("results/h100/"):
            continue
        text = (ROOT / f).read_text(encoding="utf-8", errors="replace")
        for m in CITED.finditer(text):
            if not (ROOT / m.group(1)).exists() and not OUTPUT.search(text[max(0, m.start() - 14):m.start()]):
                missing.append(f"{f}: {m.group(1)}")
    assert not missing, "cited but not in the repository:\n" + "\n".join(sorted(set(missing)))
