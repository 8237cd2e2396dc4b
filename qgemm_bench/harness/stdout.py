"""The console: a stdout that cannot take what is printed (a full disk, a
closed pipe, /dev/full, an ASCII-only encoding) costs that text, never the
run or its files. Characters the encoding lacks are escaped (\\xe9); a write
error is remembered, further printing is dropped, and the caller says so in
one line on stderr and exits 1 (an output could not be written); a
closed pipe (`| head`) is the reader's choice and changes nothing."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class Guarded:
    """Wraps a text stream: writes that fail are dropped, the first error kept."""

    def __init__(self, stream):
        self._stream = stream
        self.error: OSError | None = None

    def write(self, text: str) -> int:
        if self.error is None:
            try:
                return self._stream.write(text)
            except OSError as e:
                self.error = e
        return len(text)

    def flush(self) -> None:
        if self.error is None:
            try:
                self._stream.flush()
            except OSError as e:
                self.error = e

    def __getattr__(self, name):  # isatty, fileno, encoding ... as the stream has them
        return getattr(self._stream, name)


@contextmanager
def guarded() -> Iterator[Guarded]:
    """sys.stdout guarded for the block; yields the guard (its .error after)."""
    real = sys.stdout
    with suppress(AttributeError, ValueError, io.UnsupportedOperation):
        real.reconfigure(errors="backslashreplace")  # a non-ASCII path on an ASCII console
    guard = Guarded(real)
    sys.stdout = guard
    try:
        yield guard
    finally:
        guard.flush()
        sys.stdout = real
        if guard.error is not None:  # what is still buffered would fail again at exit: let it go nowhere
            with suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, real.fileno())
                os.close(null)


def lost(guard: Guarded, code: int) -> int:
    """The exit status once the block ended: a stdout error is one line on
    stderr and exit 1 (unless the run already failed otherwise)."""
    e = guard.error
    if e is None or isinstance(e, BrokenPipeError):  # the reader stopped on purpose (| head): as it wished
        return code
    with suppress(OSError, ValueError):
        print(f"error: could not write to stdout ({e.strerror or type(e).__name__}): what was printed there is "
              "lost (a run's files are written all the same)", file=sys.stderr)
    return code or 1
