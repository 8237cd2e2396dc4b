"""The errors the user sees as one line."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input from the user (shape, dtype, setting, path): reported in one
    line, exit status 2."""


class FormatError(InputError):
    """A weight or shape the format cannot represent (odd K, NaN/inf, ...)."""
