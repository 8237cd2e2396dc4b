"""The code Helion generates for a kernel, kept on disk so that a later process
calls it without binding the kernel again.

A bind (type propagation over fake tensors, device IR, code generation) is
the costliest part of preparing a Helion kernel, and Helion keeps it in memory
only: every run, and each warm-up worker, bound every shape again
(results/h200/README.md has the seconds). What a bind and a config
produce is one plain module (the Triton kernel and its host launcher); its
source is kept here under Triton's cache directory (wiping that cache wipes
this too), named by the hash of everything that decides it, and a later
process imports it and calls its host function as the BoundKernel would.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

import torch

from qgemm_bench.fileio import files_digest, replace_atomically

SUBDIR = "qgemm-bench-helion"
FORMAT = 1  # bump when what is stored changes


def enabled(device: torch.device) -> bool:
    """GPU runs only: in the interpreter a bind is cheap next to the kernel."""
    return device.type == "cuda"


class CachedRun:
    """A stored module's host function, in the BoundKernel's place: called with
    the kernel's arguments; compile_config and to_triton_code answer for the
    one config it was generated with."""

    def __init__(self, fn, code: str, settings: dict):
        self.fn, self.code, self.settings = fn, code, settings

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def _check(self, config) -> None:
        if dict(config) != self.settings:
            raise ValueError(f"this kernel was generated for config {self.settings}, not {dict(config)}")

    def compile_config(self, config):
        self._check(config)
        return self.fn

    def to_triton_code(self, config) -> str:
        self._check(config)
        return self.code


def key(kernel, args: tuple, settings: dict, device: torch.device) -> str | None:
    """The name of the code for `kernel` bound to `args` with `settings`, or
    None for arguments it cannot describe (then nothing is cached)."""
    try:
        described = [_describe(a) for a in args]
        gpu = (torch.cuda.get_device_name(device), torch.cuda.get_device_capability(device)) \
            if device.type == "cuda" else device.type
    except (TypeError, RuntimeError, AssertionError):  # an argument we cannot describe; no CUDA (tests' fakes)
        return None
    what = {"format": FORMAT, "kernel": f"{kernel.fn.__module__}.{kernel.fn.__qualname__}", "args": described,
            "settings": settings, "gpu": gpu, "source": _our_source(), "versions": _versions(),
            "env": sorted((k, v) for k, v in os.environ.items() if k.startswith("HELION_"))}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:40]


def load(name: str, kernel, settings: dict) -> CachedRun | None:
    path = _dir() / f"{name}.py"
    try:
        code = path.read_text()
    except OSError:
        return None
    from torch._inductor.codecache import PyCodeCache

    try:
        module = PyCodeCache.load(code)
        return CachedRun(getattr(module, kernel.name), code, settings)
    except Exception:  # noqa: BLE001 - a stored module that no longer loads: bind as if it were absent
        return None


def save(name: str, bound, settings: dict) -> None:
    """Keep the module Helion wrote for `bound` compiled with `settings`
    (BoundKernel.set_config ran); a failure to write costs only the next bind."""
    import helion

    generated = bound.get_cached_path(helion.Config(**settings))
    if generated is None:
        return
    path = _dir() / f"{name}.py"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(path, Path(generated).read_bytes())  # whole or absent, for a process reading it
    except OSError:
        pass


def _describe(a):
    if isinstance(a, torch.Tensor):
        return ["tensor", str(a.dtype), list(a.shape), list(a.stride()), a.storage_offset(), a.device.type]
    if a is None or isinstance(a, (bool, int, float, str)):
        return [type(a).__name__, a]
    if isinstance(a, (tuple, list)):
        return [type(a).__name__, [_describe(x) for x in a]]
    raise TypeError(type(a).__name__)


def _dir() -> Path:
    from triton import knobs

    return Path(knobs.cache.dir) / SUBDIR


@functools.cache
def _our_source() -> str:
    """Our kernels' source (Helion's and the Triton helpers they call)."""
    return files_digest(Path(__file__).resolve().parents[1], ("helion_kernels/*.py", "triton_kernels/*.py"))


@functools.cache
def _versions() -> dict:
    import importlib.metadata

    import triton

    return {"torch": torch.__version__, "triton": triton.__version__, "helion": importlib.metadata.version("helion")}
