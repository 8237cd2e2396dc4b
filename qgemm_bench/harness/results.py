"""Result rows: the Row, its statuses, its table form, and reading a run's
results.json back (every field checked). The run folder is outputs.py."""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

import pandas as pd

from qgemm_bench.backends.checks import INTERPRETER
from qgemm_bench.errors import InputError
from qgemm_bench.harness import files
from qgemm_bench.types import DTYPES, dtype_name

# Statuses. Only "ok" rows are ever shown as a speedup.
# skipped: not run because an earlier failure (a lost CUDA context) made it impossible.
OK, INCORRECT, ERROR, OOM, UNAVAILABLE, SKIPPED = "ok", "incorrect", "error", "oom", "unavailable", "skipped"
STATUSES = (OK, INCORRECT, ERROR, OOM, UNAVAILABLE, SKIPPED)


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
    # Weight-only ops: the weight-read floor, bytes(shape) at the run's copy bandwidth, and 100 x it / p50.
    floor_us: float | None = None
    pct_of_floor: float | None = None
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
    rank: int | None = None  # under torchrun: the rank (GPU) that measured it; None in a single process

    @property
    def shape(self) -> str:
        return f"{self.M}x{self.K}x{self.N}"

    def to_dict(self) -> dict:
        d = asdict(self)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


CSV_COLUMNS = [f.name for f in fields(Row) if f.name not in ("samples_us", "round_p50_us")]


def interpreted(r: Row) -> bool:
    """Timed in the Triton interpreter: the time of Python emulating a kernel."""
    return INTERPRETER in r.reason


def settings_key(settings: dict) -> str:
    """The settings as one canonical string (row matching, CSV)."""
    return json.dumps(settings, sort_keys=True)


_TEXT = {"op", "backend", "dtype", "device", "timing", "status", "reason", "settings_label"}
_SIZES = {"M", "K", "N"}
_LISTS = {"samples_us", "round_p50_us"}
_LATENCIES = {"p50_us", "p20_us", "p80_us"}
_DTYPES = tuple(dict.fromkeys(dtype_name(d) for d in DTYPES.values()))  # what a sweep runs in
_FIELDS = {f.name: f for f in fields(Row)}
_REQUIRED = {n for n, f in _FIELDS.items() if f.default is MISSING and f.default_factory is MISSING}


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _field_problem(name: str, v) -> str | None:
    # A row the report would show: its status and dtype among the sweep's, its latencies positive.
    if name == "status" and isinstance(v, str):
        return None if v in STATUSES else f"expected one of {', '.join(STATUSES)}"
    if name == "dtype" and isinstance(v, str):
        return None if v in _DTYPES else f"expected {' or '.join(_DTYPES)}"
    if name in _LATENCIES:
        return None if v is None or (_number(v) and v > 0) else "expected a positive finite number or null"
    if name in _TEXT:
        return None if isinstance(v, str) else "expected text"
    if name in _SIZES:
        return None if isinstance(v, int) and not isinstance(v, bool) and v > 0 else "expected a positive integer"
    if name in _LISTS:  # latencies: a zero or negative one is no measurement (compare takes logs)
        return None if isinstance(v, list) and all(_number(x) and x > 0 for x in v) \
            else "expected a list of positive finite numbers (latencies)"
    if name == "settings":  # the operator's settings: flat, scalar values
        flat = isinstance(v, dict) and all(x is None or isinstance(x, (str, int, float)) for x in v.values())
        return None if flat or isinstance(v, str) else "expected an object of names and plain values"
    return None if v is None or _number(v) else "expected a finite number or null"


def row_from_dict(d, where: str = "row") -> Row:
    """A row as results.json / rows.jsonl hold it, checked field by field
    (InputError naming the field). Rows written before settings were
    structured carry only their label ("group=128"): the operator parses it."""
    if not isinstance(d, dict):
        raise InputError(f"{where}: expected an object, not {type(d).__name__}")
    if unknown := sorted(set(d) - set(_FIELDS)):
        raise InputError(f"{where}: unknown field {unknown[0]!r}")
    if missing := sorted(_REQUIRED - set(d)):
        raise InputError(f"{where}: missing field {missing[0]!r}")
    for name, v in d.items():
        if problem := _field_problem(name, v):
            raise InputError(f"{where}: {name}={json.dumps(v)[:40]}: {problem}")
    d = dict(d)
    from qgemm_bench import operators

    try:
        op = operators.get(d["op"])
    except InputError as e:
        raise InputError(f"{where}: {e}") from None
    if isinstance(d.get("settings"), str):
        label = d["settings"]
        try:
            d["settings"] = op.Settings.from_label(label).as_dict()
        except ValueError as e:
            raise InputError(f"{where}: settings {label!r}: {e}") from None
        d.setdefault("settings_label", label)
    try:  # the operator's own settings, not another's (report builds them: assemble.py)
        settings = op.Settings(**d["settings"])
    except TypeError:
        raise InputError(f"{where}: settings {json.dumps(d['settings'])[:60]} are not {op.NAME}'s") from None
    # The label is what tables show, the settings what rows match on: a row whose two disagree reads as another.
    if d.get("settings_label") and d["settings_label"] != settings.label():
        raise InputError(f"{where}: settings_label {d['settings_label']!r} is not the label of settings "
                         f"{json.dumps(d['settings'])[:60]} ({settings.label()!r})")
    return Row(**d)


def frame(rows: list[Row]) -> pd.DataFrame:
    return pd.DataFrame([{**r.to_dict(), "settings": settings_key(r.settings)} for r in rows], columns=CSV_COLUMNS)


def load(path: str | Path) -> tuple[dict, list[Row]]:
    """Read a run back from its folder or its results.json; InputError (one
    line naming the file and what is wrong) for anything else."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    doc = files.read_json(p)  # a regular file, bounded in size and nesting
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict) or not isinstance(doc.get("rows"), list):
        raise InputError(f'{p}: not a qgemm-bench results file (expected {{"metadata": {{...}}, "rows": [...]}})')
    meta = doc["metadata"]
    if isinstance(meta.get("model"), dict):  # model/outputs.py's run: rows of another kind
        raise InputError(f"{p}: a model benchmark run (--model); this reads the GEMM benchmarks' runs (--op)")
    for k in ("settings", "ceilings"):
        if k in meta and not isinstance(meta[k], dict):
            raise InputError(f"{p}: metadata.{k} must be an object, not {type(meta[k]).__name__}")
    return meta, [row_from_dict(r, f"{p}: row {i + 1}") for i, r in enumerate(doc["rows"])]
