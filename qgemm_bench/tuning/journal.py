"""Writing the store while a tune runs, so an interrupted tune loses nothing.

Every tuned unit (one table entry: a weight-only or Helion bucket, a split-K
shape's two modes) is appended to its rank's journal,
<store>/<gpu>/.tune/journal.rank<r>.jsonl, the moment it is done (one JSON
line, flushed and fsynced). Rank 0 alone writes the family files
(configs.store.Store.write: atomic, with provenance): in one process after
every unit; under torchrun after each of its own and, at the end, with
every rank's (gathered, and read from the other ranks' journals on one
host, so a rank that died still counts). A journal that exists means this
GPU's tune has not finished: `tune --resume` skips its timed units (a
record with "timed": false, an entry written untimed, is tuned again); a
tune that finishes deletes it. Rank 0 also journals each run's command
line, so the provenance lists every piece of a tune made in pieces.

A tuner run alone (tuning/weight_only.py's modes, tuning/split_k.py)
records what it did in the file it writes through add_pass: one record of
fields per pass in the provenance's "passes" (a later tune that keeps some
of the file's entries keeps them, in "earlier", with the provenance they
belong to).
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import shlex
import shutil
import sys
import uuid
from pathlib import Path

JOURNAL_DIR = ".tune"

# Each family file as a fresh GPU starts it (the family modules' layouts).
SKELETONS = {"weight_only": lambda: {"kernels": {}},
             "split_k": lambda: {"entries": {"atomic": {}, "deterministic": {}}},
             "helion": lambda: {"kernels": {}}}


class Journal:
    """One GPU's journals under a store root; `rank` appends to its own."""

    def __init__(self, root: Path, gpu: str, rank: int = 0):
        self.dir = Path(root) / gpu / JOURNAL_DIR
        self.rank = rank

    def path(self, rank: int | None = None) -> Path:
        return self.dir / f"journal.rank{self.rank if rank is None else rank}.jsonl"

    def exists(self) -> bool:
        return any(self.dir.glob("journal.rank*.jsonl"))

    def records(self) -> list[dict]:
        """Every rank's records, in rank then line order (a line cut short by
        a kill is skipped)."""
        out = []
        for f in sorted(self.dir.glob("journal.rank*.jsonl")):
            for line in f.read_text(encoding="utf-8").splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and "unit" in rec:
                    out.append(rec)
        return out

    def done(self) -> set[str]:
        """The units written with a timed entry (what --resume skips)."""
        return timed_units(self.records())

    def commands(self) -> list[str]:
        """The command lines journalled (add_command), in order."""
        return [rec["command"] for rec in self._command_records()]

    def add_command(self, command: str, plan: dict | None = None) -> None:
        """One run's command line, and the options its plan came from (what a
        --resume of this tune must plan with again)."""
        self._write({"command": command, "date": now(), "nonce": uuid.uuid4().hex[:8],
                     **({"plan": plan} if plan is not None else {})})

    def first_plan(self) -> dict | None:
        """The plan options of the tune's first run (None: none journalled)."""
        return next((rec.get("plan") for rec in self._command_records()), None)

    def tune_id(self) -> str:
        """What names this tune in its provenance ("tune"): the date of its
        first journalled command and that command's nonce (two tunes can
        start within a second); "" before one."""
        return next(("/".join(filter(None, (str(rec.get("date", "")), rec.get("nonce"))))
                     for rec in self._command_records()), "")

    def _command_records(self):
        """Rank 0's journalled command records, in order (a torn line skipped)."""
        lines = self.path(0).read_text(encoding="utf-8").splitlines() if self.path(0).exists() else []
        for line in lines:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "command" in rec:
                yield rec

    def append(self, record: dict) -> None:
        self._write(record)

    def _write(self, record: dict) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.path(), "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def clear(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def timed_units(records) -> set[str]:
    """Units with a record whose entry was timed (records without "timed"
    are: the weight-only and Helion tuners write only timed entries)."""
    return {r["unit"] for r in records if r.get("timed", True)}


def cut_short_units(records) -> set[str]:
    """Units whose last record says it timed only some of its candidates."""
    last = {r["unit"]: r for r in records}
    return {u for u, r in last.items() if r.get("cut_short")}


def fold(tables: dict, record: dict) -> str:
    """Put a journal record's entries into `tables` ({family: file
    contents}); the family it touched."""
    family = record["family"]
    doc = tables.setdefault(family, SKELETONS[family]())
    if family == "split_k":
        for mode, entry in record["entries"].items():
            doc.setdefault("entries", {}).setdefault(mode, {})[record["key"]] = entry
        doc["sms"] = record.get("sms", doc.get("sms"))
    else:
        doc.setdefault("kernels", {}).setdefault(record["kernel"], {})[record["key"]] = record["entry"]
    return family


class Writer:
    """Rank 0's family files: the store's own files of this GPU (a partial
    re-tune keeps the entries it does not reach), the journal's records
    folded in, each family written whole after every change."""

    def __init__(self, store, gpu: str, families: list[str], provenance: dict, target=None, check=None):
        self.store, self.gpu, self.provenance, self.target = store, gpu, provenance, target
        self.check = check or {}  # family -> check_table(doc, where), run before a write
        self.tables = {f: store.read(gpu, f) or SKELETONS[f]() for f in families}
        self.earlier = {f: _earlier(self.tables[f].get("provenance"), provenance.get("tune")) for f in families}
        self.kept = {f: _entries(self.tables[f]) for f in families}  # entries no unit of this tune has rewritten
        # A --resume piece's file: the passes run on it since its first piece stay with this tune.
        self.passes = {f: _same_tune(self.tables[f].get("provenance"), provenance.get("tune")).get("passes", [])
                       for f in families}
        self.touched: set[str] = set()

    def add(self, record: dict, write: bool = True) -> None:
        family = fold(self.tables, record)
        self.kept[family] = self.kept.get(family, set()) - _entries(_record_doc(record))
        self.touched.add(family)
        if write:
            self.write(family)

    def write(self, family: str) -> Path:
        doc = self.tables[family]
        for prose in ("source", "versions"):  # a file of the tuners' older layout: the provenance says it
            doc.pop(prose, None)
        doc["gpu"] = self.gpu
        if family in self.check:
            self.check[family](doc, f"the tuned {family} table")
        prov = {**self.provenance, "date": now()}
        if self.passes.get(family):
            prov["passes"] = self.passes[family]
        if self.earlier.get(family) and self.kept.get(family):  # some entry is an earlier tune's
            prov["earlier"] = self.earlier[family]
        path = self.store.write(self.gpu, family, doc, prov, target=self.target)
        self.target = None  # target.json once
        return path

    def write_all(self, complete: bool) -> list[Path]:
        self.provenance["complete"] = complete
        return [self.write(f) for f in sorted(self.touched)]


def _earlier(old: dict | None, tune: str | None) -> list[dict]:
    """The provenance of the tunes before this one whose entries a family
    file may keep (a tune of some operators, kernel families or M writes
    over its own entries only), newest first. The file's own provenance is
    this tune's when it names the same tune (a --resume piece)."""
    if not old:
        return []
    if _same_tune(old, tune):
        return list(old.get("earlier", []))
    return [{k: v for k, v in old.items() if k != "earlier"}, *old.get("earlier", [])]


def _same_tune(old: dict | None, tune: str | None) -> dict:
    """The file's provenance where it names this tune (a --resume piece), else {}."""
    return old if old and tune and old.get("tune") == tune else {}


def _entries(doc: dict) -> set[tuple]:
    """A family file's entries as (kernel or split-K mode, bucket) pairs."""
    groups = doc.get("entries") or doc.get("kernels") or {}
    return {(g, key) for g, entries in groups.items() if isinstance(entries, dict) for key in entries}


def _record_doc(record: dict) -> dict:
    """A journal record's entries laid out as its family file lays them."""
    if record["family"] == "split_k":
        return {"entries": {mode: {record["key"]: e} for mode, e in record["entries"].items()}}
    return {"kernels": {record["kernel"]: {record["key"]: record["entry"]}}}


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def command_line(argv: list[str] | None = None) -> str:
    """The command line this process runs (sys.orig_argv: the interpreter
    as typed, by its name, then e.g. -m MODULE and the arguments)."""
    argv = list(sys.orig_argv if argv is None else argv)
    if argv:
        argv[0] = Path(argv[0]).name
    return shlex.join(argv)


def add_pass(doc: dict, name: str, entries=(), command: str | None = None, **fields) -> dict:
    """Record a pass of a tuner run alone in the family file `doc` (its
    provenance, as fields): appended to provenance["passes"] as {"pass":
    name, "command" (default: this process's, command_line), "commit"
    (git_commit, else "unknown"), "date", "entries": {group (kernel or
    split-K mode): its keys (re)timed, sorted}, then `fields` (those not
    None: e.g. formats, group, layers, keep_faster, rounds, versions; a
    given commit or date overrides)}. A file without a provenance object
    (written whole by this pass) gets one instead: the store's
    PROVENANCE_KEYS (rounds and versions from `fields`), "pass" and the
    other fields, without entries (all are this pass's). `entries`:
    (group, key) pairs. Returns the record written."""
    from qgemm_bench.configs.store import PROVENANCE_KEYS, _bucket_order

    fields = {k: v for k, v in fields.items() if v is not None}
    stamp = {"commit": fields.pop("commit", None) or _commit(), "date": fields.pop("date", None) or now(),
             "command": command or command_line()}
    prov = doc.get("provenance")
    if not prov:
        record = {**stamp, **{k: fields.pop(k, None) for k in PROVENANCE_KEYS if k not in stamp},
                  "pass": name, **fields}
        head = {"gpu": doc["gpu"]} if "gpu" in doc else {}
        rest = {k: v for k, v in doc.items() if k not in ("gpu", "provenance")}
        doc.clear()
        doc.update(head, provenance=record, **rest)  # as the store writes it: gpu, provenance, the rest
        return record
    groups: dict[str, set] = {}
    for group, key in entries:
        groups.setdefault(group, set()).add(key)
    record = {"pass": name, "command": stamp["command"], "commit": stamp["commit"], "date": stamp["date"],
              "entries": {g: sorted(keys, key=_bucket_order) for g, keys in sorted(groups.items())}, **fields}
    prov.setdefault("passes", []).append(record)
    return record


class Pass:
    """A pass that writes its file as it goes: stamp(doc, entries) before
    each write records it (add_pass) on the provenance the file had before
    the pass, so each write holds one record of it, with the entries so far
    (none before it timed one)."""

    def __init__(self, doc: dict, name: str, command: str | None = None, **fields):
        self.before = copy.deepcopy(doc.get("provenance"))
        self.name, self.command = name, command or command_line()
        self.fields = {"commit": _commit(), **fields}

    def stamp(self, doc: dict, entries=()) -> dict | None:
        doc["provenance"] = copy.deepcopy(self.before)
        if self.before and not entries:  # nothing timed (yet): the file's provenance as it was
            return None
        return add_pass(doc, self.name, entries, self.command, **self.fields)


def _commit() -> str:
    from qgemm_bench.harness.environment import git_commit

    return git_commit() or "unknown"
