"""The quantized GEMM of a QuantLinear as a torch custom op, `qgemm::linear`,
so torch.compile traces a whole decode step without a graph break: Inductor
sees an opaque op with a known output shape (its fake implementation), fuses
the elementwise work around it, and calls our kernel as it is.

The op takes the activation and the handle of a prepared kernel (a
backend's Kernel.apply with its resident weights). Every backend (Triton,
Helion, tinygemm, fbgemm, the torch baseline) goes through the same op, so
the compiled variants differ only in the GEMM they call. The handle is a CPU
int64 scalar tensor (a module buffer), not a Python int: as a graph input
it leaves every backend's step the same graph, so Inductor's FX graph cache
serves the second backend at a batch size (tiny 4-layer Llama on CPU: 7-15 s
against 33-38 s with the handles as constants). Read on the host, it costs
no device sync, and a CUDA graph replays the kernels without reading it.
The op's CPU path is the same call: a kernel prepared on CPU runs there.

`qgemm::last_position` hands flex decode attention its position as a buffer
of its own (see its docstring); `qgemm::decode_attention` is `--attention
triton`'s kernel (backends/triton_kernels/decode_attention.py), and
`qgemm::decode_attention_rope` the same with the token's rotary and cache
write (model/rope_attention.py).
"""

from __future__ import annotations

import itertools
import weakref

import torch

_KERNELS: dict[int, tuple] = {}  # handle -> (apply, out_features, apply_parts or None, swiglu, swiglu_out)
_NEXT = itertools.count(1)


def register(owner, apply, out_features: int, apply_parts=None, swiglu: bool = False,
             swiglu_out: bool = False) -> torch.Tensor:
    """A handle (CPU int64 scalar) for `apply` ([M, K] -> [M, out_features];
    apply_parts: the same with an RMSNorm's parts, Prepared.apply_parts;
    swiglu / swiglu_out: apply_parts takes the SwiGLU prologue / epilogue,
    Prepared.swiglu / swiglu_out), released when `owner` (the QuantLinear)
    is garbage collected."""
    h = next(_NEXT)
    _KERNELS[h] = (apply, out_features, apply_parts, swiglu, swiglu_out)
    weakref.finalize(owner, _KERNELS.pop, h, None)
    return torch.tensor(h, dtype=torch.int64)


def registered(handle: torch.Tensor) -> bool:
    return int(handle) in _KERNELS


@torch.library.custom_op("qgemm::linear", mutates_args=())
def linear(x: torch.Tensor, handle: torch.Tensor, out_features: int) -> torch.Tensor:
    """y[M, out_features] = the registered kernel applied to x[M, K] (M >= 1)."""
    apply, n = _entry(handle, "qgemm::linear")[:2]
    y = apply(x)
    if y.shape != (x.shape[0], n):
        raise RuntimeError(f"qgemm::linear: kernel gave {tuple(y.shape)}, expected {(x.shape[0], n)}")
    # The op's contract: a fresh tensor (a backend may hand back a view of x's storage or a shared buffer).
    return y if y.is_contiguous() and y.data_ptr() != x.data_ptr() else y.contiguous().clone()


@linear.register_fake
def _(x: torch.Tensor, handle: torch.Tensor, out_features: int) -> torch.Tensor:
    return x.new_empty(x.shape[0], out_features)


def _entry(handle: torch.Tensor, op: str) -> tuple:
    """The registered (apply, out_features, apply_parts, swiglu, swiglu_out) of a handle."""
    if handle.device.type != "cpu":  # reading it would sync the device (illegal while capturing a graph)
        raise RuntimeError(f"{op}: the kernel handle must stay a CPU tensor")
    return _KERNELS[int(handle)]


def _parts(handle: torch.Tensor, op: str, swiglu: bool = False, swiglu_out: bool = False):
    _, _, parts, prologue, epilogue = _entry(handle, op)
    if parts is None:
        raise RuntimeError(f"{op}: the registered kernel has no RMSNorm parts (Prepared.apply_parts)")
    if swiglu and not prologue:
        raise RuntimeError(f"{op}: the registered kernel has no SwiGLU prologue (Prepared.swiglu)")
    if swiglu_out and not epilogue:
        raise RuntimeError(f"{op}: the registered kernel has no SwiGLU epilogue (Prepared.swiglu_out)")
    return parts


@torch.library.custom_op("qgemm::linear_rms", mutates_args=())
def linear_rms(x: torch.Tensor, handle: torch.Tensor, out_features: int, sumsq: torch.Tensor,
               eps: float, swiglu_out: bool = False) -> torch.Tensor:
    """qgemm::linear with each output row times 1 / RMS from the fp32 sums of
    squares [M, chunks] a linear_residual left (model/fused_norm.py);
    swiglu_out: then silu(gate) * up of the (gate, up) column pairs
    (qgemm::linear_swiglu_out)."""
    return _parts(handle, "qgemm::linear_rms", swiglu_out=swiglu_out)(
        x, rms=(sumsq, eps), **({"swiglu_out": True} if swiglu_out else {}))


@linear_rms.register_fake
def _(x, handle, out_features, sumsq, eps, swiglu_out=False):
    return x.new_empty(x.shape[0], out_features // 2 if swiglu_out else out_features)


@torch.library.custom_op("qgemm::linear_residual", mutates_args=())
def linear_residual(x: torch.Tensor, handle: torch.Tensor, out_features: int, residual: torch.Tensor,
                    norm_weight: torch.Tensor, swiglu: bool = False) -> tuple[torch.Tensor, torch.Tensor,
                                                                              torch.Tensor]:
    """(h = residual + qgemm::linear(x), h * norm_weight, h's rows' fp32 sums
    of squares per 32 columns) (model/fused_norm.py); swiglu: x is [gate |
    up] and the GEMM's input silu(gate) * up (qgemm::linear_swiglu)."""
    return _parts(handle, "qgemm::linear_residual", swiglu)(x, residual=residual, norm_weight=norm_weight,
                                                              **({"swiglu": True} if swiglu else {}))


@linear_residual.register_fake
def _(x, handle, out_features, residual, norm_weight, swiglu=False):
    from qgemm_bench.backends.norm_parts import sumsq_chunks

    m = x.shape[0]
    return (x.new_empty(m, out_features), x.new_empty(m, out_features),
            x.new_empty(m, sumsq_chunks(out_features), dtype=torch.float32))


@torch.library.custom_op("qgemm::linear_swiglu", mutates_args=())
def linear_swiglu(h: torch.Tensor, handle: torch.Tensor, out_features: int) -> torch.Tensor:
    """qgemm::linear of silu(gate) * up for h = [gate | up] [M, 2K]: the GEMM
    computes the product as it loads its input (model/swiglu.py), in fp32,
    rounded once to h's dtype."""
    return _parts(handle, "qgemm::linear_swiglu", swiglu=True)(h, swiglu=True)


@linear_swiglu.register_fake
def _(h, handle, out_features):
    return h.new_empty(h.shape[0], out_features)


@torch.library.custom_op("qgemm::linear_swiglu_out", mutates_args=())
def linear_swiglu_out(x: torch.Tensor, handle: torch.Tensor, out_features: int) -> torch.Tensor:
    """silu(gate) * up [M, out_features / 2] of qgemm::linear's output, whose
    columns are (gate, up) pairs: the GEMM's epilogue computes it (model/swiglu.py)."""
    return _parts(handle, "qgemm::linear_swiglu_out", swiglu_out=True)(x, swiglu_out=True)


@linear_swiglu_out.register_fake
def _(x, handle, out_features):
    return x.new_empty(x.shape[0], out_features // 2)


@torch.library.custom_op("qgemm::last_position", mutates_args=())
def last_position(position_ids: torch.Tensor) -> torch.Tensor:
    """position_ids' last entry as a fresh 1-element tensor. Captured by a
    flex mask_mod, a position computed in the graph is inlined into the
    attention template, which cannot lower it (CPU: "All the buffers in the
    score and mask subgraph should be in ... input_buffers"; CUDA, torch 2.11:
    "XBLOCK is not defined"); an opaque op's output is a buffer it loads."""
    return position_ids.reshape(-1)[-1:].clone()


@last_position.register_fake
def _(position_ids: torch.Tensor) -> torch.Tensor:
    return position_ids.new_empty(1)


@torch.library.custom_op("qgemm::decode_attention", mutates_args=())
def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, position: torch.Tensor,
                     scale: float) -> torch.Tensor:
    """Attention of q [B, H, D] (one token per sequence) over the static
    cache's k, v [B, H_kv, L, D] at slots 0..position[0]: [B, H, D]."""
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    return kernel.decode_attention(q, k, v, position, scale, sms=_sms(q))


@decode_attention.register_fake
def _(q, k, v, position, scale):
    return q.new_empty(q.shape)


def _sms(q: torch.Tensor) -> int:
    from qgemm_bench import target

    return target.of(q.device).sms if q.is_cuda else 16  # the interpreter: some splits, as a GPU has


@torch.library.custom_op("qgemm::decode_attention_rope", mutates_args=("k_cache", "v_cache", "length"))
def decode_attention_rope(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                          k_cache: torch.Tensor, v_cache: torch.Tensor, length: torch.Tensor | None,
                          position: torch.Tensor, scale: float) -> torch.Tensor:
    """qgemm::decode_attention with the token's rotary and cache write: q [B,
    H, D] and k [B, H_kv, D] before their rotary (cos, sin [B, D]), k rotated
    and v written into the static cache's k_cache, v_cache [B, H_kv, L, D] at
    slot position[0], the cache's count `length` (if given) set to
    position[0] + 1, then the attention over slots 0..position[0]: [B, H, D]."""
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    return kernel.decode_attention(q, k_cache, v_cache, position, scale, sms=_sms(q),
                                   rope=(k, v, cos, sin, length))


@decode_attention_rope.register_fake
def _(q, k, v, cos, sin, k_cache, v_cache, length, position, scale):
    return q.new_empty(q.shape)


NAMES = ("linear", "linear_rms", "linear_residual", "linear_swiglu", "linear_swiglu_out", "last_position",
         "decode_attention", "decode_attention_rope")  # the ops above, for inductor_fallbacks


def inductor_fallbacks() -> None:
    """Give each op above the fallback lowering Inductor would make at its
    first call in a graph (the op run as it is, with the layout constraint
    Inductor picks for a custom op), before a compile. torch 2.11 makes it
    there after formatting the call's arguments for a log line, logged or
    not (graph.py's implicit fallback, exc.OperatorIssue.operator_str; lazy
    from torch 2.13): an op first called on a tensor at the end of our ops'
    chain through every layer prints that whole chain, ~30x longer a layer
    (the SwiGLU prologue's last down_proj: the 8B step never finished
    compiling; docs/model.md). Idempotent."""
    from torch._inductor.lowering import lowerings, make_fallback, tag_to_layout_constraint
    from torch._library.utils import get_layout_constraint_tag

    for name in NAMES:
        op = getattr(torch.ops.qgemm, name).default
        if op not in lowerings:
            tag = get_layout_constraint_tag(op, with_default=True)
            make_fallback(op, layout_constraint=tag_to_layout_constraint(tag), warn=False)
