"""The quantized GEMM of a QuantLinear as a torch custom op, `qgemm::linear`,
so torch.compile traces a whole decode step without a graph break: Inductor
sees an opaque op with a known output shape (its fake implementation), fuses
the elementwise work around it, and calls our kernel as it is.

The op takes the activation and an integer handle of a prepared kernel (a
backend's Kernel.apply with its resident weights). Every backend (Triton,
Helion, tinygemm, fbgemm, the torch baseline) goes through the same op, so
the compiled variants differ only in the GEMM they call. The handle is a
Python int attribute of the module: dynamo specializes on it (dynamic=False),
which is what a static decode step wants. The op's CPU path is the same call:
a kernel prepared on CPU runs there.
"""

from __future__ import annotations

import itertools
import weakref

import torch

_KERNELS: dict[int, tuple] = {}  # handle -> (apply, out_features)
_NEXT = itertools.count(1)


def register(owner, apply, out_features: int) -> int:
    """A handle for `apply` ([M, K] -> [M, out_features]), released when
    `owner` (the QuantLinear) is garbage collected."""
    h = next(_NEXT)
    _KERNELS[h] = (apply, out_features)
    weakref.finalize(owner, _KERNELS.pop, h, None)
    return h


def registered(handle: int) -> bool:
    return handle in _KERNELS


@torch.library.custom_op("qgemm::linear", mutates_args=())
def linear(x: torch.Tensor, handle: int, out_features: int) -> torch.Tensor:
    """y[M, out_features] = the registered kernel applied to x[M, K] (M >= 1)."""
    apply, n = _KERNELS[handle]
    y = apply(x)
    if y.shape != (x.shape[0], n):
        raise RuntimeError(f"qgemm::linear: kernel gave {tuple(y.shape)}, expected {(x.shape[0], n)}")
    # The op's contract: a fresh tensor (a backend may hand back a view of x's storage or a shared buffer).
    return y if y.is_contiguous() and y.data_ptr() != x.data_ptr() else y.contiguous().clone()


@linear.register_fake
def _(x: torch.Tensor, handle: int, out_features: int) -> torch.Tensor:
    return x.new_empty(x.shape[0], out_features)
