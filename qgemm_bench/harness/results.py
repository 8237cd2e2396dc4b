"""Result rows and the run folder: rows.jsonl appended as rows are measured
(a crash loses nothing measured), then results.csv, results.json (metadata and
rows with raw samples), report.md and plots at the end."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import pandas as pd

from qgemm_bench.errors import InputError

# Statuses. Only "ok" rows are ever shown as a speedup.
OK, INCORRECT, ERROR, OOM, UNAVAILABLE = "ok", "incorrect", "error", "oom", "unavailable"


@dataclass
class Row:
    op: str
    backend: str
    M: int
    K: int
    N: int
    dtype: str
    settings: dict  # the operator's settings as data (e.g. {"group_size": 128}); rows match on it
    device: str
    timing: str  # graph | events | cpu-wall | "" when not timed
    status: str
    reason: str = ""
    p50_us: float | None = None
    p20_us: float | None = None
    p80_us: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    sol_pct: float | None = None  # floor time (bytes or flops at the ceilings) / p50
    speedup: float | None = None  # baseline p50 / this p50, same shape, same run
    weight_mib: float | None = None
    peak_extra_mib: float | None = None
    rel_err: float | None = None
    tolerance: float | None = None
    prepare_s: float | None = None
    first_call_s: float | None = None  # includes compilation / JIT / autotuning not done in prepare
    measure_s: float | None = None  # wall time of the timing itself: rotating copies, capture, replays
    compile_s: float | None = None  # compiling in prepare, for backends that report it (Helion)
    autotune_s: float | None = None  # autotuning in prepare (Helion --autotune)
    copies: int | None = None
    calls_per_sample: int | None = None
    samples_us: list = field(default_factory=list)
    round_p50_us: list = field(default_factory=list)  # with --repeats N: each round's median (compare's unit)
    settings_label: str = ""  # the settings for display ("group=128")

    @property
    def shape(self) -> str:
        return f"{self.M}x{self.K}x{self.N}"

    def to_dict(self) -> dict:
        d = asdict(self)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


CSV_COLUMNS = [f.name for f in fields(Row) if f.name not in ("samples_us", "round_p50_us")]


def settings_key(settings: dict) -> str:
    """The settings as one canonical string (row matching, CSV)."""
    return json.dumps(settings, sort_keys=True)


def row_from_dict(d: dict) -> Row:
    """A row as results.json / rows.jsonl hold it. Rows written before settings
    were structured carry only their label ("group=128"): the operator parses it."""
    d = dict(d)
    if isinstance(d.get("settings"), str):
        from qgemm_bench import operators

        label = d["settings"]
        d["settings"] = operators.get(d["op"]).Settings.from_label(label).as_dict()
        d.setdefault("settings_label", label)
    return Row(**d)


class RunFolder:
    @staticmethod
    def check_new(path: Path) -> None:
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise InputError(f"--output-dir {path} already holds files; choose a new folder")

    def __init__(self, path: Path):
        self.path = Path(path)
        self.check_new(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._rows = open(self.path / "rows.jsonl", "a", encoding="utf-8")

    def append(self, row: Row) -> None:
        self._rows.write(json.dumps(row.to_dict()) + "\n")
        self._rows.flush()

    def log_error(self, text: str) -> None:
        with open(self.path / "errors.log", "a", encoding="utf-8") as f:
            f.write(text.rstrip() + "\n\n")

    def write(self, rows: list[Row], metadata: dict) -> None:
        self._rows.close()
        frame(rows).to_csv(self.path / "results.csv", index=False)
        doc = {"metadata": metadata, "rows": [r.to_dict() for r in rows]}
        (self.path / "results.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def frame(rows: list[Row]) -> pd.DataFrame:
    return pd.DataFrame([{**r.to_dict(), "settings": settings_key(r.settings)} for r in rows], columns=CSV_COLUMNS)


def load(path: str | Path) -> tuple[dict, list[Row]]:
    """Read a run back from its folder or its results.json."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    doc = json.loads(p.read_text(encoding="utf-8"))
    return doc["metadata"], [row_from_dict(r) for r in doc["rows"]]
