"""Giving a Helion kernel bound to its arguments a config, and compiling it:
the store's config of this GPU and shape bucket (looked up by the caller's
`source`, helion_dispatch.HelionConfigs), one explicit config
(qgemm_bench.tuning.helion), or a fresh autotune (--autotune quick|full,
optionally saved through `source` with --save-configs)."""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from qgemm_bench.backends.helion_kernels import codecache


@dataclass(frozen=True)
class Options:
    autotune: str = "none"  # none | quick | full
    budget_s: float | None = None  # wall-clock budget per autotune
    save_configs: bool = False  # write autotuned winners into the store (configs/<gpu>/helion.json)
    config_file: Path | None = None  # use this file instead of the checked-in one
    explicit: dict | None = None  # one config for every kernel call (tuning scripts)
    defer_saves: bool = False  # keep saves in PENDING (torchrun: rank 0 writes every rank's)


OPTIONS = Options()  # set once per run by helion_ops.configure
_current: dict[int, str] = {}  # id(bound kernel) -> the config it was last compiled with
_loaded: dict[str, object] = {}  # codecache key -> the CachedRun loaded in this process
_tuned: dict[tuple, tuple[dict, float]] = {}  # (kernel, bucket, arguments' kinds) -> (config, autotune s)
PENDING: list[tuple] = []  # helion_dispatch.save's arguments held back by defer_saves


def set_options(options: Options) -> None:
    global OPTIONS
    OPTIONS = options


@contextlib.contextmanager
def options(**changes):
    """Temporarily change OPTIONS (tuning scripts, tests)."""
    before = OPTIONS
    set_options(replace(before, **changes))
    try:
        yield
    finally:
        set_options(before)


# Config keys that are kernel arguments (hl.constexpr), not Helion settings:
# the weight-only kernels' K step and PTX-decode switch (kernels.py says why
# the K step cannot be a Helion block size). They travel in the config dicts
# (files, --helion-configs, tuning scripts) and are removed before set_config.
ARGUMENT_KEYS = ("block_k", "decode_asm")


@dataclass
class Ready:
    """A bound kernel with its config compiled, and how it got there."""

    run: object  # BoundKernel: call with the kernel's arguments
    config: dict  # Helion's settings and the ARGUMENT_KEYS the arguments were built with
    notes: str
    compile_s: float
    autotune_s: float | None


def helion_settings(cfg: dict, arguments: tuple = ARGUMENT_KEYS) -> dict:
    """The config without its argument keys (ARGUMENT_KEYS, or a kernel's own
    `arguments`): what helion.Config takes."""
    return {key: v for key, v in cfg.items() if key not in arguments}


def ready(name: str, kernel, args, device: torch.device, bucket_mnk: tuple[int, int, int],
          interpreter: dict, fix=None, default: tuple[dict, str] | None = None, nearest_ok: bool = True,
          arguments: tuple = ARGUMENT_KEYS, *, source) -> Ready:
    """Bind `kernel` to `args` and give it a config: `interpreter` on CPU, the
    explicit one of OPTIONS, a fresh autotune when OPTIONS asks for one (saved
    under `name` with save_configs), else the checked-in config of `name` for
    the shape's bucket, else `default` ((config, note): a kernel with a
    fallback when this GPU or kernel has no checked-in config; without one,
    ConfigMissing; nearest_ok False: `default` rather than a checked-in
    config of another bucket, unless --helion-configs named the file).
    `fix(config) -> config` adapts a config to what this call needs. `args`:
    the kernel's arguments, or a function config -> arguments for kernels
    whose hl.constexpr arguments come from the config (the keys in
    `arguments`, kept in the Ready's config and never given to Helion;
    Helion's autotuner then tunes the rest, at `default`'s). source: where
    checked-in configs are looked up and autotuned ones saved, for the
    run's GPU (helion_dispatch.HelionConfigs: lookup, save_args, save)."""
    from qgemm_bench.backends.helion_kernels.configs import ConfigMissing

    opts = OPTIONS
    effort = opts.autotune
    notes, autotune_s = [], None
    base, tune_args = {}, args
    if autotunes(device):
        base = dict(default[0]) if default else {}  # the argument keys an autotune keeps
        if fix is not None:
            base = fix(base)
        tune_args = args(base) if callable(args) else args
    if device.type == "cpu":
        cfg = dict(interpreter)
        notes.append("Triton interpreter (CPU)")
        if opts.config_file is not None:  # read and checked, but the interpreter runs its own small tiles
            notes.append("--helion-configs not used on CPU (the interpreter's config)")
    elif opts.explicit:
        cfg = dict(opts.explicit)
    elif effort != "none" and (tuned := _tuned.get(_tune_key(name, bucket_mnk, tune_args))):
        cfg, autotune_s = tuned  # the rotating input copies of one case share one autotune
        notes.append(f"autotuned ({effort}) in {autotune_s:.0f} s")
    elif effort != "none":
        import helion

        tuner = helion.kernel(kernel.fn, static_shapes=True, autotune_effort=effort,
                              autotune_budget_seconds=_seconds(opts.budget_s))
        t0 = time.perf_counter()
        cfg = dict(tuner.bind(tune_args).autotune(tune_args, force=True))
        cfg.update({key: base[key] for key in arguments if key in base})
        autotune_s = time.perf_counter() - t0
        _tuned[_tune_key(name, bucket_mnk, tune_args)] = (cfg, autotune_s)
        notes.append(f"autotuned ({effort}) in {autotune_s:.0f} s")
        if opts.save_configs:
            save = source.save_args(name, *bucket_mnk, cfg, {"tuned": f"helion autotune, effort {effort}",
                                                             "autotune_s": round(autotune_s, 1)})
            if opts.defer_saves:
                PENDING.append(save)
                notes.append("to be saved by rank 0")
            else:
                saved = source.save(save)
                notes.append(f"saved to {saved.parent.name}/{saved.name}")
    else:
        try:
            cfg, note = source.lookup(name, *bucket_mnk, opts.config_file,
                                      nearest_ok=nearest_ok or default is None or opts.config_file is not None)
        except ConfigMissing as e:
            if default is None:
                raise
            cfg, note = dict(default[0]), f"{e}; used {default[1]}"
        notes.append(note)
    if fix is not None:
        cfg = fix(dict(cfg))
    call_args = args(cfg) if callable(args) else args
    settings = helion_settings(cfg, arguments)
    notes = "; ".join(n for n in notes if n)
    t0 = time.perf_counter()
    # Generated before (an earlier run, or the warm-up's workers): no bind.
    stored = codecache.key(kernel, call_args, settings, device) if codecache.enabled(device) else None
    if stored is not None and (run := _loaded.get(stored) or codecache.load(stored, kernel, settings)):
        _loaded[stored] = run
        return Ready(run, cfg, notes, time.perf_counter() - t0, autotune_s)
    bound = kernel.bind(call_args)  # Helion caches one bound kernel per specialization (shapes, dtypes)
    t0 = time.perf_counter()
    key = json.dumps(settings, sort_keys=True)
    if _current.get(id(bound)) != key:  # the runner prepares many input copies with one config
        bound.set_config(settings)  # compiles
        _current[id(bound)] = key
        if stored is not None:
            codecache.save(stored, bound, settings)
    compile_s = time.perf_counter() - t0
    return Ready(bound, cfg, notes, compile_s, autotune_s)


def autotunes(device: torch.device) -> bool:
    """Whether ready() runs Helion's search on this device: --autotune asked
    for one, on a GPU, and no explicit config."""
    o = OPTIONS
    return o.autotune != "none" and device.type != "cpu" and not o.explicit


def _seconds(budget: float | None) -> int | None:
    return None if budget is None else max(1, round(budget))


def _tune_key(name: str, bucket_mnk, args) -> tuple:
    kinds = tuple((a.dtype, tuple(a.shape)) if hasattr(a, "dtype") else a for a in args)
    return name, tuple(bucket_mnk), kinds
