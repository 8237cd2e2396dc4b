"""`runner.py report DIR`: rebuild results.csv, results.json, report.md and
the plots from DIR/rows.jsonl (and a torchrun run's rows.rank<r>.jsonl) and
DIR/metadata.json, e.g. after a run was killed (kill -9 loses at most the measurement in flight) or its final
writing failed on a full disk. A model benchmark run (--model) rebuilds into
its own outputs (model/outputs.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from qgemm_bench import operators
from qgemm_bench.errors import InputError
from qgemm_bench.harness import benchmark, signals
from qgemm_bench.harness.outputs import METADATA, RESULTS, ROWS, WriteError
from qgemm_bench.harness.results import Row, row_from_dict
from qgemm_bench.model import outputs as model_outputs


def read_records(path: Path) -> tuple[list[tuple[int, Row]], bool]:
    """(round, row) records and whether the last line was cut off (a kill
    mid-write: dropped). A bad line elsewhere is an InputError."""
    lines, truncated = read_lines(path)
    records = []
    for i, d in lines:
        if not isinstance(d.get("round", 0), int):
            raise InputError(f"{path}: line {i}: expected a row object with an integer \"round\"")
        r = d.pop("round", 0)
        records.append((r, row_from_dict(d, f"{path}: line {i}")))
    return records, truncated


def read_lines(path: Path) -> tuple[list[tuple[int, dict]], bool]:
    """A rows file's (line number, object) records and whether its last line
    was cut off (dropped). A line that is not a JSON object is an InputError."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except OSError as e:
        raise InputError(f"{path}: cannot read it ({e.strerror or type(e).__name__})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a rows.jsonl file (not UTF-8 text)") from None
    # A finished line ends in "\n": the piece after the last one is either
    # empty or a line the writer was killed in the middle of.
    truncated = lines[-1].strip() != ""
    records = []
    for i, line in enumerate(lines[:-1], 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: line {i} is not JSON ({e})") from None
        if not isinstance(d, dict):
            raise InputError(f"{path}: line {i}: expected a row object")
        records.append((i, d))
    return records, truncated


def _finished_metadata(folder: Path) -> dict | None:
    """The metadata of a finished run (its results.json), if that is whole."""
    try:
        doc = json.loads((folder / RESULTS).read_text(encoding="utf-8"))
        return doc["metadata"] if isinstance(doc.get("metadata"), dict) else None
    except (OSError, ValueError, AttributeError, KeyError):
        return None


def load_metadata(folder: Path) -> tuple[dict, bool]:
    """(metadata, whether the run finished)."""
    if (meta := _finished_metadata(folder)) is not None:
        return meta, True
    try:
        meta = json.loads((folder / METADATA).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{folder}: no {METADATA} (written when a run starts) and no readable {RESULTS}") from None
    except (OSError, ValueError) as e:
        raise InputError(f"{folder}/{METADATA}: cannot read it ({e})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("settings"), dict) or \
            "baseline" not in meta["settings"] and not model_outputs.is_model_run(meta):
        raise InputError(f"{folder}/{METADATA}: not a qgemm-bench run's metadata")
    return meta, False


def main(args) -> int:
    folder = Path(args.dir)
    if not folder.is_dir():
        raise InputError(f"{folder}: no such run folder")
    if not (folder / ROWS).is_file():
        raise InputError(f"{folder}: no {ROWS} to rebuild from")
    meta, finished = load_metadata(folder)
    if model_outputs.is_model_run(meta):
        return _model(folder, meta, finished, args.no_plots)
    records, truncated = read_records(folder / ROWS)
    # Under torchrun the other ranks streamed to rows.rank<r>.jsonl (a run
    # that finished holds them in results.json too; a rebuild takes the files).
    for extra in sorted(folder.glob("rows.rank*.jsonl")):
        more, cut = read_records(extra)
        records += more
        truncated = truncated or cut
    if not records:
        raise InputError(f"{folder}/{ROWS}: holds no complete row")
    if truncated:
        print(f"note: {ROWS}: dropped a cut-off last line (the measurement in flight when the run was killed)",
              file=sys.stderr)
    if not finished and "stopped" not in meta:
        # metadata.json is rewritten with "stopped" when the sweep ends: the run was killed during it.
        s = meta["settings"]
        pairs = len({(r.M, r.K, r.N, r.backend) for _, r in records})
        of = f" of {len(s['shape_list']) * len(s['backends'])}" if "shape_list" in s and "backends" in s else ""
        meta["interrupted"] = True
        meta["stopped"] = f"killed during the sweep ({pairs}{of} (shape, backend) measured; rebuilt from {ROWS})"
    meta["rebuilt_from"] = ROWS
    with signals.deferred() as late:
        x = operators.get(meta["settings"].get("op") or records[0][1].op).PLOT_X
        code = benchmark.finish(folder, records, meta, x, not args.no_plots)
        print(f"rebuilt: {folder}")
    return code or (128 + late[0] if late else 0)


def _model(folder: Path, meta: dict, finished: bool, no_plots: bool) -> int:
    """A model benchmark run (--model): its rows.jsonl as ModelRows, the
    model bench's outputs (a run killed during its variants is marked so)."""
    lines, truncated = read_lines(folder / ROWS)
    rows = [model_outputs.row_from_dict(d, f"{folder / ROWS}: line {i}") for i, d in lines]
    if not rows:
        raise InputError(f"{folder}/{ROWS}: holds no complete row")
    if truncated:
        print(f"note: {ROWS}: dropped a cut-off last line (the row being written when the run was killed)",
              file=sys.stderr)
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
