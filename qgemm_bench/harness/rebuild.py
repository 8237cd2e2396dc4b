"""`runner.py report DIR`: rebuild results.csv, results.json, report.md and
the plots from DIR/rows.jsonl (and a torchrun run's rows.rank<r>.jsonl) and
DIR/metadata.json, e.g. after a run was killed (kill -9 loses at most the measurement in flight) or its final
writing failed on a full disk. A model benchmark run (--model) rebuilds into
its own outputs (model/outputs.py)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from qgemm_bench import operators
from qgemm_bench.errors import InputError
from qgemm_bench.harness import benchmark, files, signals
from qgemm_bench.harness.outputs import METADATA, RESULTS, ROWS, WriteError
from qgemm_bench.harness.results import Row, load, row_from_dict
from qgemm_bench.model import outputs as model_outputs


def read_records(path: Path) -> tuple[list[tuple[int, Row]], int]:
    """(round, row) records and the number of the last line when it was cut
    off (a kill mid-write: dropped; else 0). A bad line elsewhere is an InputError."""
    lines, truncated = read_lines(path)
    records = []
    for i, d in lines:
        r = d.get("round", 0)
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise InputError(f"{path}: line {i}: round={json.dumps(r)[:20]}: expected an integer >= 0")
        r = d.pop("round", 0)
        records.append((r, row_from_dict(d, f"{path}: line {i}")))
    return records, truncated


def read_lines(path: Path) -> tuple[list[tuple[int, dict]], int]:
    """A rows file's (line number, object) records and the number of its last
    line when that was cut off (dropped; else 0). A line that is not a JSON
    object is an InputError."""
    lines = files.read_text(path).split("\n")  # a regular file, bounded
    # A finished line ends in "\n": the piece after the last one is either
    # empty or a line the writer was killed in the middle of.
    truncated = len(lines) if lines[-1].strip() != "" else 0
    records = []
    for i, line in enumerate(lines[:-1], 1):
        if not line.strip():
            continue
        d = files.loads(line, f"{path}: line {i}")
        if not isinstance(d, dict):
            raise InputError(f"{path}: line {i}: expected a row object")
        records.append((i, d))
    return records, truncated


def cut_note(path: Path, line: int, what: str) -> str:
    """The one line that names a cut-off last line (stderr and report.md)."""
    return f"{path.name}: line {line} was cut off mid-{what} (the process writing it was killed, or the disk " \
           f"or its size limit ran out) and is left out"


# What report.md, the CSV and the plots read of a sweep's metadata: key -> (types, required).
_TEXT, _NUM, _OPT = (str,), (int, float), (str, type(None))
SWEEP_META = {"date": (_TEXT, True), "device": (_TEXT, True), "gpu": (_OPT, False), "driver": (_OPT, False),
              "torch": (_OPT, False), "triton": (_OPT, False), "helion": (_OPT, False),
              "git_commit": (_OPT, False), "wall_s": (_NUM + (type(None),), False), "phase_s": ((dict,), False),
              "ceilings": ((dict,), False), "ranks": ((list,), False), "world_size": ((int, type(None)), False),
              "stopped": (_OPT, False), "env": ((dict,), False)}
SWEEP_SETTINGS = {"baseline": (_TEXT, True), "dtype": (_TEXT, True), "timing": (_TEXT, True),
                  "op_settings": ((dict, str), True), "op_settings_label": (_TEXT, False), "op": (_OPT, False),
                  "warmup_ms": (_NUM, True), "rep_ms": (_NUM, True), "repeats": ((int,), False),
                  "shape_list": ((list,), False), "backends": ((list,), False)}


CEILING_KEYS = ("copy_GBps", "bf16_matmul_TFLOPs")  # what assemble.derive reads of metadata.ceilings


def metadata_problem(meta, model: bool = False) -> str:
    """What is wrong with a run's metadata for a rebuild ("" when nothing)."""
    if not isinstance(meta, dict):
        return "not an object"
    if not isinstance(meta.get("settings"), dict):
        return "no settings object"
    if model:
        return "" if model_outputs.is_model_run(meta) else "no model object"
    for where, spec, d in (("", SWEEP_META, meta), ("settings.", SWEEP_SETTINGS, meta["settings"])):
        for k, (types, required) in spec.items():
            if k not in d:
                if required:
                    return f"no {where}{k}"
            elif not isinstance(d[k], types) or isinstance(d[k], bool):
                return f"{where}{k}={json.dumps(d[k])[:40]}: expected {' or '.join(t.__name__ for t in types)}"
    s = meta["settings"]
    # Values no run writes, which would read as a run: no rounds, a baseline no row has, no timing window.
    if s.get("repeats", 1) < 1:
        return f"settings.repeats={s['repeats']}: expected 1 or more"
    if "backends" in s and s["baseline"] not in s["backends"]:
        return f"settings.baseline={json.dumps(s['baseline'])[:40]}: not one of settings.backends"
    if not (math.isfinite(s["warmup_ms"]) and math.isfinite(s["rep_ms"]) and s["warmup_ms"] >= 0 and s["rep_ms"] > 0):
        return f"settings.warmup_ms={s['warmup_ms']}, rep_ms={s['rep_ms']}: expected warmup >= 0 and rep > 0"
    for k in ("phase_s", "ceilings"):
        if any(not isinstance(v, _NUM) or isinstance(v, bool) for v in meta.get(k, {}).values()):
            return f"{k}: expected numbers"
    ceilings = meta.get("ceilings") or {}
    # The rows' %SOL and floor divide by them (assemble.derive): both, measured, positive.
    if ceilings and (set(CEILING_KEYS) - set(ceilings) or
                     any(not (math.isfinite(ceilings[c]) and ceilings[c] > 0) for c in CEILING_KEYS)):
        return f"ceilings={json.dumps(ceilings)[:80]}: expected {' and '.join(CEILING_KEYS)}, finite and positive"
    if any(not isinstance(r, dict) for r in meta.get("ranks", [])):
        return "ranks: expected objects"
    return ""


def _read_metadata(path: Path, key: str | None) -> tuple[dict | None, str]:
    """(metadata, "") or (None, why not): results.json's "metadata" (key) or metadata.json."""
    try:
        doc = files.read_json(path)
    except InputError as e:
        return None, str(e)
    meta = doc.get(key) if key and isinstance(doc, dict) else doc
    model = isinstance(meta, dict) and isinstance(meta.get("model"), dict)
    why = metadata_problem(meta, model)
    return (meta, "") if not why else (None, f"{path}: {'metadata: ' if key else ''}{why}")


def load_metadata(folder: Path) -> tuple[dict, bool]:
    """(metadata, whether the run finished): a finished run's results.json,
    else (or when that is not whole) the metadata.json the run wrote when it started."""
    finished, why_not = (None, "") if not (folder / RESULTS).exists() else _read_metadata(folder / RESULTS, "metadata")
    if finished is not None:
        return finished, True
    if not (folder / METADATA).exists():
        raise InputError(why_not or f"{folder}: no {METADATA} (written when a run starts) and no readable {RESULTS}")
    meta, why = _read_metadata(folder / METADATA, None)
    if meta is None:
        raise InputError(why if not why_not else f"{why_not}; and {why}")
    if why_not:
        print(f"note: {why_not}: rebuilt with {METADATA} (written when the run started)", file=sys.stderr)
    return meta, False


def main(args) -> int:
    if args.dir == "":
        raise InputError("report '': expected a run folder")
    folder = Path(args.dir)
    if not folder.is_dir():
        raise InputError(f"{folder}: {'a file, not a' if folder.exists() else 'no such'} run folder")
    if not (folder / ROWS).is_file():
        raise InputError(f"{folder}: no {ROWS} to rebuild from")
    meta, finished = load_metadata(folder)
    if model_outputs.is_model_run(meta):
        return _model(folder, meta, finished, args.no_plots)
    records, cut = read_records(folder / ROWS)
    notes = [cut_note(folder / ROWS, cut, "record")] if cut else []
    # Under torchrun the other ranks streamed to rows.rank<r>.jsonl (a run
    # that finished holds them in results.json too; a rebuild takes the files).
    for extra in sorted(folder.glob("rows.rank*.jsonl")):
        more, cut = read_records(extra)
        records += more
        notes += [cut_note(extra, cut, "record")] if cut else []
    if not records:
        raise InputError(f"{folder}/{ROWS}: holds no complete row" + (f" ({notes[0]})" if notes else ""))
    op = meta["settings"].get("op") or records[0][1].op
    try:
        plot_x = operators.get(op).PLOT_X
    except InputError as e:
        raise InputError(f"{folder}: the run's settings.op: {e}") from None
    if other := next((r for _, r in records if r.op != op), None):
        raise InputError(f"{folder}: a row of {other.op} ({other.backend} at {other.shape}) in a run of {op}")
    # A run measures one settings (report.md's header states them): a row of others would be computed as them.
    run_settings = meta["settings"]["op_settings"]
    if isinstance(run_settings, str):  # metadata from before settings were structured: its label
        try:
            run_settings = operators.get(op).Settings.from_label(run_settings).as_dict()
        except ValueError:
            run_settings = None
    if run_settings is not None and (other := next((r for _, r in records if r.settings != run_settings), None)):
        raise InputError(f"{folder}: a row with settings {json.dumps(other.settings)} ({other.backend} at "
                         f"{other.shape}) in a run of {json.dumps(run_settings)}")
    backends = meta["settings"].get("backends")
    if isinstance(backends, list) and (other := next((r for _, r in records if r.backend not in backends), None)):
        raise InputError(f"{folder}: a row of backend {other.backend!r} ({other.shape}), not one of the run's "
                         f"({', '.join(map(str, backends))})")
    meta["settings"]["op"] = op  # report.md and the plots name it; metadata without it took it from the rows
    if notes and (lost := _lost(folder, records)):
        raise InputError(f"{notes[0]}, and {lost[1]} holds what it measured ({lost[0]}): a rebuild from {ROWS} "
                         f"would lose it; {lost[1]}, report.md and the rest are left as they are (move {lost[1]} "
                         "aside to rebuild without it)")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if notes:
        meta["rebuild_note"] = "; ".join(notes)
    if not finished and "stopped" not in meta:
        # metadata.json is rewritten with "stopped" when the sweep ends: the run was killed during it.
        s = meta["settings"]
        pairs = len({(r.M, r.K, r.N, r.backend) for _, r in records})
        of = f" of {len(s['shape_list']) * len(s['backends'])}" if "shape_list" in s and "backends" in s else ""
        meta["interrupted"] = True
        meta["stopped"] = f"killed during the sweep ({pairs}{of} (shape, backend) measured; rebuilt from {ROWS})"
    meta["rebuilt_from"] = ROWS
    with signals.deferred() as late:
        code = benchmark.finish(folder, records, meta, plot_x, not args.no_plots)
        print(f"rebuilt: {folder}")
    return code or (128 + late[0] if late else 0)


def _lost(folder: Path, records: list[tuple[int, Row]]) -> tuple[str, str] | None:
    """(the first timed measurement the run's own outputs hold that the
    records lack, the file holding it), or None: a cut-off line's record
    reached results.json (or, when that could not be written, results.csv)
    whole when the run ended."""
    have: dict[tuple, int] = {}
    for _, r in records:
        k = (r.backend, r.M, r.K, r.N)
        have[k] = have.get(k, 0) + 1
    try:
        _, rows = load(folder / RESULTS)
        kept = [((r.backend, r.M, r.K, r.N), max(1, len(r.round_p50_us))) for r in rows if r.p50_us is not None]
        where = RESULTS
    except InputError:
        try:
            import pandas as pd

            csv = pd.read_csv(folder / "results.csv", usecols=["backend", "M", "K", "N", "p50_us"])
            kept = [((b, int(m), int(k), int(n)), 1) for b, m, k, n, t in csv.itertuples(index=False) if t == t]
            where = "results.csv"
        except (OSError, ValueError, TypeError):
            return None
    for (backend, m, k, n), rounds in kept:
        if have.get((backend, m, k, n), 0) < rounds:
            return f"{backend} at {m}x{k}x{n}", where
    return None


def _model(folder: Path, meta: dict, finished: bool, no_plots: bool) -> int:
    """A model benchmark run (--model): its rows.jsonl as ModelRows, the
    model bench's outputs (a run killed during its variants is marked so)."""
    lines, cut = read_lines(folder / ROWS)
    rows = [model_outputs.row_from_dict(d, f"{folder / ROWS}: line {i}") for i, d in lines]
    note = cut_note(folder / ROWS, cut, "row") if cut else ""
    if not rows:
        raise InputError(f"{folder}/{ROWS}: holds no complete row" + (f" ({note})" if note else ""))
    if note and finished:
        done = {(r.backend, r.quant, r.batch) for r in rows}
        try:
            _, kept = model_outputs.load(folder)
        except InputError:
            kept = []
        if lost := [r for r in kept if (r.backend, r.quant, r.batch) not in done and r.status != "skipped"]:
            raise InputError(f"{note}, and {RESULTS} holds it ({lost[0].variant} batch {lost[0].batch}): a "
                             f"rebuild from {ROWS} would lose it; {RESULTS} and the rest are left as they are")
    if note:
        print(f"note: {note}", file=sys.stderr)
        meta["rebuild_note"] = note
    if not finished:
        s = meta["settings"]
        of = f" of {len(s['variants']) * len(s['batches'])}" if "variants" in s and "batches" in s else ""
        meta["interrupted"] = True
        meta["stopped"] = f"killed during the run ({len(rows)}{of} rows measured; rebuilt from {ROWS})"
    meta["rebuilt_from"] = ROWS
    with signals.deferred() as late:
        try:
            model_outputs.write_outputs(folder, rows, meta, plots=not no_plots)
        except WriteError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(model_outputs.console(rows))
        print(f"rebuilt: {folder}")
    return 128 + late[0] if late else 0
