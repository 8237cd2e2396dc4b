"""The one import of the project's user-input error for this package (it moves
to qgemm_bench.errors; repoint it here only)."""

from qgemm_bench.operators.common import InputError


class BackendUnavailable(Exception):
    """A backend that cannot run this format here (missing package, no CUDA,
    unsupported group size); becomes an `unavailable` row, never a crash."""


__all__ = ["InputError", "BackendUnavailable"]
