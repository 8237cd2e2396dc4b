"""Reading a file the user named (a run's results, rows, metadata, an eval
text): regular files only (a FIFO would block for ever, /dev/zero never
ends), at most MAX_BYTES, UTF-8, JSON no deeper than MAX_DEPTH; anything
else is one InputError naming the file and what is wrong with it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from qgemm_bench.errors import InputError

# The committed H100 results.json files are under 1 MB; a run of every preset
# with 3 rounds stays far below this. A larger file is not a run's.
MAX_BYTES = 256 * 2**20
# results.json nests 4 deep (rows -> row -> settings -> value, metadata ->
# ranks -> rank -> ceilings); json would recurse until RecursionError.
MAX_DEPTH = 32


def why(e: OSError) -> str:
    """What an OSError says went wrong, in a few words (its strerror, else its type)."""
    return e.strerror or type(e).__name__


def read_bytes(path: str | Path, what: str = "", limit: int = MAX_BYTES) -> bytes:
    """The file's bytes; InputError for a missing, special, unreadable or too large file."""
    p = Path(path)
    name = f"{what} {p}".strip()
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{name}: is a folder; expected a file") from None
    except OSError as e:
        raise InputError(f"{name}: cannot open it ({why(e)})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{name}: is a folder; expected a file")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{name}: not a regular file (a pipe, device or socket); expected a file")
        if st.st_size > limit:
            raise InputError(f"{name}: {st.st_size / 2**20:.0f} MiB, more than the {limit / 2**20:.0f} MiB "
                             "this reads; not a file of this kind")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
        if len(data) > limit:  # it grew while being read
            raise InputError(f"{name}: more than the {limit / 2**20:.0f} MiB this reads")
        return data
    except OSError as e:
        raise InputError(f"{name}: cannot read it ({why(e)})") from None
    finally:
        os.close(fd)


def read_text(path: str | Path, what: str = "", limit: int = MAX_BYTES) -> str:
    """The file as UTF-8 text (InputError naming the first bad byte otherwise)."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{f'{what} {path}'.strip()}: not UTF-8 text (byte {e.start})") from None


def depth(doc) -> int:
    """How deep lists and objects nest in a parsed JSON document (iterative: no recursion)."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if d <= MAX_DEPTH:
                stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def loads(text: str, where: str):
    """JSON text parsed, nesting bounded; InputError naming `where` otherwise
    (the parser recurses: a deep file raises RecursionError, caught here)."""
    try:
        doc = json.loads(text)
        deep = depth(doc) > MAX_DEPTH
    except json.JSONDecodeError as e:
        raise InputError(f"{where}: not JSON ({e})") from None
    except RecursionError:
        deep = True
    if deep:
        raise InputError(f"{where}: JSON nested more than {MAX_DEPTH} deep; not a file of this kind")
    return doc


def read_json(path: str | Path, what: str = "", limit: int = MAX_BYTES):
    """A JSON file, read and parsed within the bounds above."""
    return loads(read_text(path, what, limit), f"{what} {path}".strip())
