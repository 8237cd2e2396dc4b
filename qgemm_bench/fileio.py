"""Writing a file so that a reader sees the old one or the new one, never
half of one: a temporary file in the same folder, flushed to disk, renamed
over the target. The run folder (harness/outputs.py) and the config store
(configs/store.py) both write this way, and so does Helion's stored code
(backends/helion_kernels/codecache.py); it sits below all three. Also the
digest of a tree of files, which names what those caches hold."""

from __future__ import annotations

import hashlib
import os
import tempfile
from contextlib import suppress
from pathlib import Path


def replace_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` by rename; OSError (the temporary file removed)
    if any step fails. mode: the file's permissions (mkstemp's 0600 would hide
    a shared install's files from other users)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # a full disk may only say so here
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            Path(tmp).unlink()
        raise


def files_digest(root: Path, patterns: tuple[str, ...]) -> str:
    """sha256 over the files under `root` matching the glob `patterns`: each
    one's path relative to root and its bytes, in sorted order."""
    h = hashlib.sha256()
    for f in sorted({f for pattern in patterns for f in root.glob(pattern)}):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()
