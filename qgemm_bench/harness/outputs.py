"""The run folder on disk.

A run claims its folder atomically before measuring (an explicit --output-dir
must be new or empty; a default name gets a -2, -3 ... suffix when another run
took it in the same second), streams one record per measurement to
rows.jsonl, and writes every other file to a temporary name that is renamed
into place: a full disk or a kill leaves the old file or none, never half
of one. Everything else can be rebuilt from rows.jsonl and metadata.json
(`runner.py report DIR`).
"""

from __future__ import annotations

import io
import json
import os
import stat
from contextlib import suppress
from pathlib import Path

from qgemm_bench.errors import InputError, one_line
from qgemm_bench.fileio import replace_atomically
from qgemm_bench.harness.files import why as _why
from qgemm_bench.harness.results import Row, frame

ROWS = "rows.jsonl"  # one record per measurement: a row plus its "round"
METADATA = "metadata.json"  # the run's metadata as known before measuring
RESULTS = "results.json"
MAX_SUFFIX = 1000


class WriteError(Exception):
    """An output could not be written (full disk, folder gone); one line."""


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write to a temporary file in the same folder, then rename over `path`."""
    path = Path(path)
    try:  # a rename over /dev/null or a FIFO would replace it with a file
        special = path.exists() and not path.is_file()
    except OSError as e:
        raise WriteError(f"could not write {path}: {_why(e)}") from None
    if special:
        raise WriteError(f"could not write {path}: not a regular file")
    try:
        # backslashreplace: a lone surrogate (a name read from a file with bad bytes) is written escaped
        replace_atomically(path, data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data)
    except OSError as e:
        raise WriteError(f"could not write {path}: {e.strerror or e}") from None


# Kernel filesystems no folder can be made in (mkdir: ENOENT or EPERM, even
# for root, whom os.access lets write there).
VIRTUAL_FILESYSTEMS = frozenset({"proc", "sysfs", "cgroup", "cgroup2", "devpts", "debugfs", "tracefs", "securityfs",
                                 "pstore", "bpf", "configfs", "efivarfs", "fusectl", "mqueue"})


def virtual_filesystem(path: Path, mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The type of the filesystem `path` is on (the mount with the longest
    mount point above it, Linux's mountinfo) where it is one of
    VIRTUAL_FILESYSTEMS; None otherwise or where that cannot be read."""
    try:
        lines = Path(mountinfo).read_text().splitlines()
        real = os.path.realpath(path)
    except OSError:
        return None
    best, kind = "", None
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right:
            continue
        point = fields[4].encode().decode("unicode_escape")  # \040 for a space, as the kernel escapes it
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, right.split()[0]
    return kind if kind in VIRTUAL_FILESYSTEMS else None


class RunFolder:
    """A claimed run folder: rows.jsonl is open for appending."""

    def __init__(self, path: Path, rows_fd: int):
        self.path = path
        self._rows = os.fdopen(rows_fd, "a", encoding="utf-8")

    @staticmethod
    def check(path: str | Path) -> None:
        """What claim() would refuse that can be seen without creating
        anything: checked up front, before the plan's notes and any work."""
        if str(path) == "":
            raise InputError("--output-dir '': expected a folder")
        path = Path(path)
        try:
            if path.is_dir() and any(path.iterdir()):
                raise InputError(f"--output-dir {path} already holds files; choose a new folder")
            if path.exists() and not path.is_dir():
                raise InputError(f"--output-dir {path}: is a file, not a folder")
            above = path  # the nearest existing folder, which the run would create it in
            while not os.path.lexists(above) and above != above.parent:
                above = above.parent
            if not stat.S_ISDIR(os.stat(above).st_mode):
                raise InputError(f"--output-dir {path}: cannot create it (Not a directory)")
            longest = max(len(os.fsencode(part)) for part in path.parts)
            if longest > os.pathconf(above, "PC_NAME_MAX"):
                raise InputError(f"--output-dir {path}: cannot create it (File name too long: {longest} bytes)")
            if above != path and not os.access(above, os.W_OK | os.X_OK):
                raise InputError(f"--output-dir {path}: cannot create it (no write permission in {above})")
            if above != path and (kind := virtual_filesystem(above)):  # root may "write" /proc; mkdir fails
                raise InputError(f"--output-dir {path}: cannot create it ({above} is on a virtual filesystem, "
                                 f"{kind}, where folders cannot be created)")
        except OSError as e:
            raise InputError(f"--output-dir {path}: cannot create it ({_why(e)})") from None

    @classmethod
    def claim(cls, path: str | Path) -> RunFolder:
        """An explicit folder: created if needed; it must be empty. Creating
        rows.jsonl exclusively is the claim, so of two runs started on the
        same folder exactly one gets it."""
        if str(path) == "":
            raise InputError("--output-dir '': expected a folder")
        path = Path(path)
        try:  # stat itself fails on a name too long or a symlink loop
            if path.exists() and not path.is_dir():
                raise InputError(f"--output-dir {path}: is a file, not a folder")
            created = not path.exists()
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"--output-dir {path}: cannot create it ({_why(e)})") from None
        try:
            if any(path.iterdir()):
                raise InputError(f"--output-dir {path} already holds files; choose a new folder")
            fd = os.open(path / ROWS, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        except FileExistsError:
            raise InputError(f"--output-dir {path} already holds files (another run claimed it); "
                             "choose a new folder") from None
        except OSError as e:
            if created:
                with suppress(OSError):
                    path.rmdir()
            raise InputError(f"--output-dir {path}: cannot write in it ({_why(e)})") from None
        return cls(path, fd)

    @classmethod
    def claim_new(cls, base: Path) -> RunFolder:
        """A default folder: `base`, or base-2, base-3 ... whichever this run
        creates first (mkdir is atomic: two runs never share one)."""
        try:
            base.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"cannot create {base.parent} ({_why(e)}); pass --output-dir") from None
        for i in range(1, MAX_SUFFIX + 1):
            path = base if i == 1 else base.with_name(f"{base.name}-{i}")
            try:
                path.mkdir()
            except FileExistsError:
                continue
            except OSError as e:
                raise InputError(f"cannot create {path} ({_why(e)}); pass --output-dir") from None
            try:
                fd = os.open(path / ROWS, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
            except OSError as e:
                raise InputError(f"cannot write in {path} ({_why(e)}); pass --output-dir") from None
            return cls(path, fd)
        raise InputError(f"{MAX_SUFFIX} run folders named {base.name}* exist; pass --output-dir")

    @classmethod
    def attach(cls, path: Path, rows_name: str) -> RunFolder:
        """Another process's claimed folder (a torchrun rank > 0): this process
        streams to its own rows file there; where the folder is not visible
        (another host) the records only travel to rank 0 at the end."""
        try:
            fd = os.open(Path(path) / rows_name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError:
            fd = os.open(os.devnull, os.O_WRONLY)
        return cls(Path(path), fd)

    def append(self, row, round_: int | None = None) -> None:
        """One measurement (a Row, or any record with to_dict()), flushed at
        once: a kill loses at most the one in flight."""
        record = row.to_dict() if round_ is None else {"round": round_, **row.to_dict()}
        try:
            self._rows.write(json.dumps(record) + "\n")
            self._rows.flush()
        except OSError as e:
            raise WriteError(f"could not append to {self.path / ROWS}: {_why(e)}") from None

    def log_error(self, text: str) -> None:
        # The row carries the reason; the traceback log is a convenience that
        # a full disk may cost.
        with suppress(OSError), open(self.path / "errors.log", "a", encoding="utf-8") as f:
            f.write(text.rstrip() + "\n\n")

    def write_metadata(self, meta: dict) -> None:
        write_atomic(self.path / METADATA, json.dumps(meta, indent=1) + "\n")

    def close(self) -> None:
        with suppress(OSError):
            self._rows.close()


def claim_run_folder(output_dir, default_path, world=None, cls=None):
    """The run's folder: --output-dir (claimed; must be new or empty) or a new
    default one (default_path() -> Path). Under torchrun rank 0 claims it and
    the other ranks attach to it (their rows.rank<r>.jsonl), or raise rank 0's
    one-line error (which rank 0 alone prints)."""
    cls = cls or RunFolder

    def claim():
        return cls.claim(output_dir) if output_dir is not None else cls.claim_new(default_path())

    if world is None:
        return claim()
    from qgemm_bench.harness import distributed

    claimed, error = None, None
    if world.main:
        try:
            claimed = claim()
        except InputError as e:
            error = str(e)
    path, error = distributed.broadcast((str(claimed.path) if claimed else None, error), world)
    if error:
        raise InputError(error)
    return claimed or cls.attach(Path(path), f"rows.rank{world.rank}.jsonl")


SAMPLE_DECIMALS = 4  # results.json's samples, in us: 0.1 ns, below what a CUDA event resolves


def results_json(rows: list[Row], meta: dict) -> str:
    """The run's metadata and rows, each row's samples rounded to
    SAMPLE_DECIMALS (float noise digits doubled a 3-round default preset's
    file, 2.8 MB for 432 rows; rows.jsonl keeps them whole)."""
    out = []
    for r in rows:
        d = r.to_dict()
        d["samples_us"] = [round(x, SAMPLE_DECIMALS) for x in d["samples_us"]]
        out.append(d)
    return json.dumps({"metadata": meta, "rows": out}, indent=1) + "\n"


def write_all(folder: Path, rows: list[Row], meta: dict, x: str, plots: bool) -> tuple[list[str], list[str]]:
    """results.json, results.csv, the plots, then report.md (which lists the
    plots). Each is written whole or not at all; a failure does not stop the
    others. Returns (plot names written, one line per failure)."""
    from qgemm_bench.harness import plots as plotting
    from qgemm_bench.harness import report

    failures: list[str] = []

    def attempt(fn, *a):
        try:
            return fn(*a)
        except WriteError as e:
            failures.append(str(e))
        except Exception as e:  # a plotting library failure must not cost the tables
            failures.append(one_line(e))
        return None

    attempt(write_atomic, folder / RESULTS, results_json(rows, meta))
    buf = io.StringIO()
    frame(rows).to_csv(buf, index=False)
    attempt(write_atomic, folder / "results.csv", buf.getvalue())
    written = (attempt(plotting.write, frame(rows), meta, x, folder) or []) if plots else []
    attempt(write_atomic, folder / "report.md", report.markdown(rows, meta, written))
    return written, failures
