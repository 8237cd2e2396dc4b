"""tritonbench / Helion benchmark-runner entry points.

Each `*_tritonbench(tb_op, ...)` takes the inputs as tritonbench hands them,
does all preparation here (packing, quantizing, Helion config lookup,
compilation) and returns the zero-argument callable that gets timed. They go
through the same backend `prepare` as the runner, so the kernels, configs and
checks are the ones the harness measures.

- int4_gemm: x [..., K] bf16/fp16; w [K, N] holding int4 values in [-8, 7]
  (any integer dtype). Packed two per byte along K, no scales (the raw-int4
  variant, as tritonbench's int4_gemm and the Helion example use it).
- nvfp4_gemm: x [..., K]; w [K, N] float weight, quantized here to NVFP4
  (E2M1, E4M3 scale per 16 along K, FP32 tensor scale).
- matmul_split_k: a [M, K], b [K, N], bias [N] or None.
Outputs are 2-D [rows of x, N].

ENTRY_POINTS is the one table: function name -> (adapter, backend). The
functions are made from it, and KERNEL_MAPPINGS (the shape of Helion's
benchmarks/run.py table: op -> (tritonbench module, [(module, function)]))
lists them per tritonbench operator.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from qgemm_bench.backends import checks, registry
from qgemm_bench.operators import formats, int4_gemm, nvfp4_gemm, split_k_gemm
from qgemm_bench.types import Case, Shape

MODULE = __name__


def _prepare(op, backend: str, inputs, shape: Shape, settings) -> Callable:
    x = inputs.activation
    case = Case(op.NAME, shape, x.dtype, x.device, settings)
    b = registry.get(op.NAME, backend)
    if reason := b.why_not(case):
        raise RuntimeError(f"{op.NAME} {backend} cannot run here: {reason}")
    return b.prepare(case, inputs).fn


def _activation(x: torch.Tensor) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dtype not in (torch.float16, torch.bfloat16) or x.dim() < 1:
        raise ValueError(f"x must be a float16 or bfloat16 tensor [..., K], not {getattr(x, 'dtype', type(x))}")
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    if x2.shape[0] == 0 or x2.shape[1] == 0:
        raise ValueError(f"x {tuple(x.shape)} is empty: need at least one row of K > 0 values")
    return x2


def _weight(w, x2: torch.Tensor, integer: bool) -> tuple[int, int]:
    kind = "an integer" if integer else "a floating-point"
    if not isinstance(w, torch.Tensor) or w.dim() != 2 or w.dtype == torch.bool \
            or w.dtype.is_floating_point == integer:
        raise ValueError(f"w must be {kind} [K, N] tensor, not {getattr(w, 'dtype', type(w))} "
                         f"{tuple(getattr(w, 'shape', ()))}")
    k, n = w.shape
    if k != x2.shape[1]:
        raise ValueError(f"x [..., {x2.shape[1]}] and w [{k}, {n}] do not match: need x [..., K], w [K, N]")
    return k, n


def _int4(backend: str, tb_op, x: torch.Tensor, w: torch.Tensor) -> Callable:
    x2 = _activation(x)
    k, n = _weight(w, x2, integer=True)
    formats.require_even_k(k)
    inputs = int4_gemm.Inputs(x2, formats.pack_int4(w.to(x2.device)), None, None)
    return _prepare(int4_gemm, backend, inputs, Shape(x2.shape[0], k, n), int4_gemm.Settings(None))


def _nvfp4(backend: str, tb_op, x: torch.Tensor, w: torch.Tensor) -> Callable:
    x2 = _activation(x)
    k, n = _weight(w, x2, integer=False)
    inputs = nvfp4_gemm.Inputs(x2, *formats.quantize_nvfp4(w.to(x2.device)))
    return _prepare(nvfp4_gemm, backend, inputs, Shape(x2.shape[0], k, n), nvfp4_gemm.Settings())


def _split_k(backend: str, tb_op, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> Callable:
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            raise ValueError(f"{name} must be a 2-D tensor, not {tuple(getattr(t, 'shape', ()))}")
    checks.check_split_k(a, b, bias)  # a ValueError, as the other entry points' inputs, before why_not's dtype
    inputs = split_k_gemm.Inputs(a, b, bias)
    return _prepare(split_k_gemm, backend, inputs, Shape(a.shape[0], a.shape[1], b.shape[1]),
                    split_k_gemm.Settings(bias is not None))


# function name -> (adapter, backend)
ENTRY_POINTS = {
    "int4_gemm_tritonbench": (_int4, "helion"),
    "triton_int4_gemm_tritonbench": (_int4, "triton"),
    "nvfp4_gemm_tritonbench": (_nvfp4, "helion"),
    "triton_nvfp4_gemm_tritonbench": (_nvfp4, "triton"),
    "matmul_split_k_tritonbench": (_split_k, "helion"),
    "triton_matmul_split_k_tritonbench": (_split_k, "triton"),
}
TRITONBENCH_MODULES = {
    _int4: ("int4_gemm", "tritonbench.operators.int4_gemm.int4_gemm"),
    # The nvfp4 tritonbench module path is our guess at its name.
    _nvfp4: ("nvfp4_gemm", "tritonbench.operators.nvfp4_gemm.operator"),
    _split_k: ("gemm", "tritonbench.operators.gemm.operator"),
}


def _entry(name: str, adapter, backend: str) -> Callable:
    def entry(tb_op, *args, **kwargs):
        return adapter(backend, tb_op, *args, **kwargs)
    entry.__name__ = entry.__qualname__ = name
    entry.__doc__ = f"tritonbench entry point: the {backend} backend ({adapter.__name__.lstrip('_')})."
    return entry


for _name, (_adapter, _backend) in ENTRY_POINTS.items():
    globals()[_name] = _entry(_name, _adapter, _backend)

KERNEL_MAPPINGS: dict[str, tuple] = {
    tb_name: (module, [(MODULE, name) for name, (a, _) in ENTRY_POINTS.items() if a is adapter])
    for adapter, (tb_name, module) in TRITONBENCH_MODULES.items()
}
