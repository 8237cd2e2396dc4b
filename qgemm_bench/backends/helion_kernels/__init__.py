"""Our Helion kernels (kernels.py) and how a backend gets one ready to time:
a checked-in config for this GPU and shape bucket (configs.py), or an explicit
--autotune. Named helion_kernels so it cannot shadow the helion package;
helion is imported only when a Helion backend is prepared."""

from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import dataclass

from qgemm_bench.backends.triton_kernels import why_not as triton_why_not

_current: dict[int, str] = {}  # id(bound kernel) -> the config it was last compiled with
_tuned: dict[tuple, tuple[dict, float]] = {}  # (kernel, bucket, arguments' kinds) -> (config, autotune s)


def why_not(case) -> str | None:
    if importlib.util.find_spec("helion") is None:
        return "helion is not installed (pip install helion==1.4.0)"
    return triton_why_not(case)  # Helion emits Triton: CUDA, or the interpreter with fp16


@dataclass
class Ready:
    """A bound kernel with its config compiled, and how it got there."""

    run: object  # BoundKernel: call with the kernel's arguments
    config: dict
    notes: str
    compile_s: float
    autotune_s: float | None


def ready(name: str, kernel, args: tuple, case, bucket_mnk: tuple[int, int, int], interpreter: dict,
          fix=None) -> Ready:
    """Bind `kernel` to `args` and give it a config: `interpreter` on CPU, a
    fresh autotune when case.options asks for one (saved under `name` with
    --save-configs), else the checked-in config of `name` for the shape's
    bucket. `fix(config) -> config` adapts a config to what this call needs."""
    from qgemm_bench.backends.helion_kernels import configs

    opts = case.options or {}
    effort = opts.get("autotune", "none")
    notes, autotune_s = [], None
    if case.device.type == "cpu":
        cfg = dict(interpreter)
        notes.append("Triton interpreter (CPU)")
    elif opts.get("helion_config"):  # one explicit config (scripts/tune_helion.py)
        cfg = dict(opts["helion_config"])
    elif effort != "none" and (tuned := _tuned.get(_tune_key(name, bucket_mnk, args))):
        cfg, autotune_s = tuned  # the rotating input copies of one case share one autotune
        notes.append(f"autotuned ({effort}) in {autotune_s:.0f} s")
    elif effort != "none":
        import helion

        tuner = helion.kernel(kernel.fn, static_shapes=True, autotune_effort=effort,
                              autotune_budget_seconds=_seconds(opts.get("autotune_budget_s")))
        t0 = time.perf_counter()
        cfg = dict(tuner.bind(args).autotune(args, force=True))
        autotune_s = time.perf_counter() - t0
        _tuned[_tune_key(name, bucket_mnk, args)] = (cfg, autotune_s)
        notes.append(f"autotuned ({effort}) in {autotune_s:.0f} s")
        if opts.get("save_configs"):
            path = configs.save(name, *bucket_mnk, configs.gpu_slug(case.device), cfg,
                                {"tuned": f"helion autotune, effort {effort}", "autotune_s": round(autotune_s, 1)})
            notes.append(f"saved to {path.name}")
    else:
        cfg, note = configs.lookup(name, *bucket_mnk, configs.gpu_slug(case.device), opts.get("helion_configs"))
        notes.append(note)
    if fix is not None:
        cfg = fix(dict(cfg))
    bound = kernel.bind(args)  # Helion caches one bound kernel per specialization (shapes, dtypes)
    t0 = time.perf_counter()
    key = json.dumps(cfg, sort_keys=True)
    if _current.get(id(bound)) != key:  # the runner prepares many input copies with one config
        bound.set_config(cfg)  # compiles
        _current[id(bound)] = key
    compile_s = time.perf_counter() - t0
    return Ready(bound, cfg, "; ".join(n for n in notes if n), compile_s, autotune_s)


def _seconds(budget: float | None) -> int | None:
    return None if budget is None else max(1, round(budget))


def _tune_key(name: str, bucket_mnk, args) -> tuple:
    kinds = tuple((a.dtype, tuple(a.shape)) if hasattr(a, "dtype") else a for a in args)
    return name, tuple(bucket_mnk), kinds
