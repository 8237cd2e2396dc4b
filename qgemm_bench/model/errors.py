"""The model benchmark's errors: the project's user-input error, and a backend
that cannot run a format here."""

from qgemm_bench.errors import InputError


class BackendUnavailable(Exception):
    """A backend that cannot run this format here (missing package, no CUDA,
    unsupported group size); becomes an `unavailable` row, never a crash."""


__all__ = ["InputError", "BackendUnavailable"]
