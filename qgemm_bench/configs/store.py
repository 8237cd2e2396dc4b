"""The config store: every tuned choice for a GPU in configs/<gpu>/, one file
per kernel family, and the one loader the dispatch reads them through.

    configs/<gpu>/target.json       the GPU (Target.to_json(): name, device_name,
                                    capability, sms, smem_per_block, l2_bytes,
                                    measured copy_GBps and bf16_TFLOPs)
    configs/<gpu>/weight_only.json  the Triton weight-only GEMM's split and fused
                                    configs (triton_kernels/weight_only_configs.py)
    configs/<gpu>/split_k.json      the Triton split-K GEMM's (split_k_configs.py)
    configs/<gpu>/helion.json       the Helion kernels' (helion_kernels/configs.py)

Each family file names its GPU ("gpu") and says how it was made in a
"provenance" object of fields, never prose: commit, date, command, rounds,
versions (PROVENANCE_KEYS) of the run that wrote it, with `qgemm-bench tune`'s
own (tune, commands, budget_s, world_size, priors, complete, ...); "passes":
a record per later run of a tuner alone on the file ({"pass", "command",
"commit", "date", "entries": {group: [keys]}, options}: tuning/journal.py
add_pass); "earlier": the provenance of the tunes whose entries the file
still holds (a tune of part of the store keeps the rest), newest first.

load(target, family) gives the Entry the dispatch uses: the GPU's own file;
else, for a GPU without one, the nearest entry of the same compute
capability (nearest by SMs, L2 and measured copy bandwidth, in log2; ties by
name) with a note saying so, which the rows carry; else no table (each
family's documented fallback: heuristics, curated lists) and a note. The
CPU (the interpreter) takes no GPU's configs. write() replaces one family
file atomically (`qgemm-bench tune`); fingerprint(target) names the files a
run reads (its metadata's "store"). Tests hand a Store(tmp_dir) in.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from qgemm_bench.errors import InputError
from qgemm_bench.fileio import replace_atomically
from qgemm_bench.target import Target

ROOT = Path(__file__).resolve().parent
FAMILIES = ("weight_only", "split_k", "helion")
TARGET_FILE = "target.json"
PROVENANCE_KEYS = ("commit", "date", "command", "rounds", "versions")
# Each family file's group of entries (its "M<m>_K<k>_N<n>" lines sit under doc[key][GROUP]).
ENTRY_KEYS = {"weight_only": "kernels", "split_k": "entries", "helion": "kernels"}


@dataclass(frozen=True)
class Entry:
    """A family's table as the dispatch uses it for one Target."""

    family: str
    table: dict  # the family file's JSON; {} where no entry applies
    gpu: str | None  # the store entry used; None: none
    exact: bool  # the Target's own entry
    note: str  # for rows: "" for the Target's own entry, else which was used and why
    path: Path | None = None


class Store:
    """The store under `root` (default: the package's configs/)."""

    def __init__(self, root: Path | str = ROOT):
        self.root = Path(root)
        self._loaded: dict[tuple, Entry] = {}

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    def path(self, gpu: str, family: str) -> Path:
        if family not in FAMILIES:
            raise ValueError(f"family {family!r}: the store holds {', '.join(FAMILIES)}")
        return self.root / gpu / f"{family}.json"

    def entries(self) -> dict[str, Target]:
        """Every GPU with a target.json, by name; InputError naming a file
        that does not describe a GPU."""
        out = {}
        for f in sorted(self.root.glob(f"*/{TARGET_FILE}")):
            doc = read_json(f)
            try:
                out[f.parent.name] = Target.from_json(doc)
            except (AttributeError, KeyError, TypeError, ValueError) as e:
                raise InputError(f"{f}: not a GPU's target.json ({type(e).__name__}: {e})") from None
        return out

    def families(self, gpu: str) -> list[str]:
        return [f for f in FAMILIES if self.path(gpu, f).exists()]

    def read(self, gpu: str, family: str) -> dict:
        """One GPU's family file as stored ({} where it has none)."""
        path = self.path(gpu, family)
        return read_json(path) if path.exists() else {}

    def load(self, target: Target, family: str, check: Callable[[dict, str], dict] | None = None) -> Entry:
        """The Entry of `family` for `target` (the module doc says which);
        check(table, where) validates a table before it is used (the family
        module's check_table; ValueError in one line). Read once per Store."""
        key = (target, family, check)
        if key not in self._loaded:
            self._loaded[key] = self._load(target, family, check)
        return self._loaded[key]

    def fingerprint(self, target: Target) -> dict:
        """Which store files a run on `target` would read, for its metadata
        (every family, whichever its backends use): per family the entry
        ({"gpu", "sha256": the file's first 16 hex digits, and its
        provenance's commit, date and tune}) or {"note"} where none applies
        or the store cannot be read (the run goes on; a kernel that needs the
        file says so itself). The hash ties a committed baseline to the exact
        store it ran on, also one tuned on the machine and committed after."""
        out = {}
        for family in FAMILIES:
            try:
                entry = self.load(target, family)
                digest = None if entry.path is None else hashlib.sha256(entry.path.read_bytes()).hexdigest()[:16]
            except (InputError, OSError) as e:
                out[family] = {"note": f"unreadable: {e}"}
                continue
            if digest is None:
                out[family] = {"note": entry.note}
                continue
            prov = entry.table.get("provenance") if isinstance(entry.table, dict) else None
            prov = prov if isinstance(prov, dict) else {}
            out[family] = {"gpu": entry.gpu, "sha256": digest,
                           **{k: prov[k] for k in ("commit", "date", "tune") if k in prov}}
        return out

    def _load(self, target, family, check) -> Entry:
        if target.capability is None:
            return Entry(family, {}, None, False, "the interpreter: no GPU's configs")
        own = self.path(target.name, family)
        if own.exists():
            return Entry(family, _checked(own, check), target.name, True, "", own)
        same = {gpu: t for gpu, t in self.entries().items()
                if t.capability == target.capability and self.path(gpu, family).exists()}
        if not same:
            return Entry(family, {}, None, False,
                         f"no {family} configs of compute capability {target.cc} in the store (none for "
                         f"{target.name})")
        gpu = min(same, key=lambda g: (distance(target, same[g]), g))
        path = self.path(gpu, family)
        return Entry(family, _checked(path, check), gpu, False,
                     f"configs of {gpu} (same compute capability {target.cc}; no entry for {target.name})", path)

    def write(self, gpu: str, family: str, table: dict, provenance: dict, target: Target | None = None) -> Path:
        """Write (replace) GPU `gpu`'s file of `family` atomically: `table` with
        its "gpu" and "provenance" (PROVENANCE_KEYS) set; target: also its
        target.json (a new entry needs one for fallback to find it)."""
        path = self.path(gpu, family)  # refuses an unknown family
        missing = [k for k in PROVENANCE_KEYS if k not in provenance]
        if missing:
            raise ValueError(f"provenance lacks {', '.join(missing)} (needs {', '.join(PROVENANCE_KEYS)})")
        doc = {"gpu": gpu, "provenance": dict(provenance), **{k: v for k, v in table.items()
                                                               if k not in ("gpu", "provenance")}}
        key = ENTRY_KEYS[family]
        _write_atomic(path, dumps(doc, key, sort=family != "split_k") if isinstance(doc.get(key), dict)
                      else json.dumps(doc, indent=1) + "\n")
        if target is not None and not _same_gpu(self.root / gpu / TARGET_FILE, target):
            _write_atomic(self.root / gpu / TARGET_FILE, json.dumps(target.to_json(), indent=1) + "\n")
        self._loaded.clear()
        return path


# Run-to-run spread of the measured ceilings on one GPU (the H200's copy
# bandwidth 4119-4211 GB/s between machines): within it a tune keeps the
# target.json it finds, so re-tuning one family does not rewrite it.
CEILING_SPREAD = 0.05


def _same_gpu(path: Path, target: Target) -> bool:
    """Whether target.json at `path` describes `target`: the same facts, and
    each ceiling within CEILING_SPREAD of the file's, or not measured now
    (a file without one takes the new measurement)."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    new = target.to_json()
    ceilings = ("copy_GBps", "bf16_TFLOPs")
    if any(old.get(k) != v for k, v in new.items() if k not in ceilings):
        return False
    return all(not v or old.get(k) and abs(v / old[k] - 1) <= CEILING_SPREAD for k, v in new.items() if k in ceilings)


def distance(a: Target, b: Target) -> float:
    """How far two GPUs of one compute capability are apart: log2 ratios of
    SMs, L2 and (where both are measured) copy bandwidth, summed."""
    d = abs(math.log2(a.sms / b.sms)) + abs(math.log2(a.l2_bytes / b.l2_bytes))
    if a.copy_GBps and b.copy_GBps:
        d += abs(math.log2(a.copy_GBps / b.copy_GBps))
    return d


def _checked(path: Path, check) -> dict:
    doc = read_json(path)
    return check(doc, str(path)) if check is not None else doc


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, text.encode("utf-8"))


def read_json(path) -> object:
    """A store file's JSON, or InputError (a ValueError) in one line: the
    command line's error, not a traceback (`tune --store DIR`)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not a readable JSON file ({e})") from None


def _bucket_order(name: str):
    try:
        return tuple(int(p[1:]) for p in name.split("_"))
    except ValueError:
        return (name,)


def dumps(doc: dict, key: str, sort: bool = False) -> str:
    """A family file's text with one entry per line under doc[key][GROUP], so
    a re-tune's diff stays readable (sort: each group's entries by bucket)."""
    head = {k: v for k, v in doc.items() if k != key}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + [f" {json.dumps(key)}: {{"]
    groups = list(doc[key].items())
    for i, (group, entries) in enumerate(groups):
        items = sorted(entries.items(), key=lambda kv: _bucket_order(kv[0])) if sort else list(entries.items())
        lines.append(f"  {json.dumps(group)}: {{")
        lines += [f"   {json.dumps(name)}: {json.dumps(entry)}" + ("," if j < len(items) - 1 else "")
                  for j, (name, entry) in enumerate(items)]
        lines.append("  }" + ("," if i < len(groups) - 1 else ""))
    return "\n".join(lines + [" }", "}", ""])


DEFAULT = Store()


def load(target: Target, family: str, store: Store | None = None,
         check: Callable[[dict, str], dict] | None = None) -> Entry:
    """(store or the package's store).load(target, family, check)."""
    return (store or DEFAULT).load(target, family, check)


def write(gpu: str, family: str, table: dict, provenance: dict, store: Store | None = None,
          target: Target | None = None) -> Path:
    """(store or the package's store).write(...)."""
    return (store or DEFAULT).write(gpu, family, table, provenance, target)


def entries(store: Store | None = None) -> dict[str, Target]:
    """(store or the package's store).entries()."""
    return (store or DEFAULT).entries()
