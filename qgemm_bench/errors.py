"""The errors the user sees as one line."""

from __future__ import annotations

import re


class InputError(ValueError):
    """Bad input from the user (shape, dtype, setting, path): reported in one
    line, exit status 2."""


class FormatError(InputError):
    """A weight or shape the format cannot represent (odd K, NaN/inf, ...)."""


_CAUSE = re.compile(r"^\s*[\w.]*(Error|Exception|Interrupt)\b\s*[:(]")


def one_line(e: BaseException, limit: int = 300) -> str:
    """`Type: message` on one line, for a row's reason or a log. Where the
    message's first line only announces more (it ends in ':', as Inductor's
    "An exception occurred in a subprocess:"), the first error line under it
    that says something is appended: the cause, not the wrapper."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    text = f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__
    if lines and lines[0].endswith(":"):
        cause = next((ln for ln in lines[1:] if _CAUSE.match(ln) and not ln.endswith(":")), None)
        if cause is None:
            cause = next((ln for ln in lines[1:] if not ln.endswith(":")), "")
        text = f"{text} {cause}".rstrip()
    return text if len(text) <= limit else text[: limit - 3] + "..."
