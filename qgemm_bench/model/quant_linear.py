"""QuantLinear: an nn.Linear whose weight is quantized once (int4 or NVFP4, the
formats of operators/formats.py) and whose forward is a backend's GEMM kernel.

nn.Linear.weight is [N, K] (out, in); the canonical formats are [K, N], so a
weight is transposed once at quantization time, never per call.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from qgemm_bench.harness.args import comma_list
from qgemm_bench.model import ops
from qgemm_bench.model.errors import BackendUnavailable, InputError
from qgemm_bench.model.fuse import FUSED_LINEARS
from qgemm_bench.operators import formats

# The decoder's linear layers, by attribute name (LlamaAttention / LlamaMLP).
DECODER_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
UNQUANTIZED = "bf16"  # the --backends name of the model as it is (nn.Linear in the model's dtype)


@dataclass(frozen=True)
class QuantSpec:
    """One weight format: name as given on the CLI, operator, int4 group size."""

    name: str  # "int4-g128", "int4-channel", "nvfp4"
    op: str  # "int4_gemm" | "nvfp4_gemm"
    group_size: int | str | None = None  # int4: an even int or "channel" (one group of K: row-wise)

    def resolved_group(self, k: int) -> int | None:
        return k if self.group_size == "channel" else self.group_size


def parse_quant(text: str) -> QuantSpec:
    t = text.strip().lower()
    if t == "nvfp4":
        return QuantSpec("nvfp4", "nvfp4_gemm")
    if t in ("int4-channel", "int4-rowwise", "int4-row"):
        return QuantSpec("int4-channel", "int4_gemm", "channel")
    m = re.fullmatch(r"int4-g(\d+)", t)
    if m and int(m.group(1)) > 0 and int(m.group(1)) % 2 == 0:
        return QuantSpec(t, "int4_gemm", int(m.group(1)))
    raise InputError(f"--quant {text!r}: expected int4-gN (N even, e.g. int4-g128), int4-channel or nvfp4")


def parse_quants(text: str) -> list[QuantSpec]:
    specs = [parse_quant(t) for t in comma_list(text, "--quant", "format", "int4-g128,nvfp4")] if text.strip() else []
    if not specs:
        raise InputError("--quant: give at least one format (e.g. int4-g128,int4-channel,nvfp4)")
    return list(dict.fromkeys(specs))


def quantize_weight(weight: torch.Tensor, spec: QuantSpec, scale_dtype: torch.dtype) -> dict:
    """[N, K] nn.Linear weight -> the operator's canonical tensors, on its device.
    int4 on CUDA uses the project's Triton quantize kernel (bit-identical to the
    torch one, and one launch instead of many passes over an 8B model)."""
    w_kn = weight.detach().t().contiguous()
    k = w_kn.shape[0]
    if spec.op == "nvfp4_gemm":
        packed, block_scales, tensor_scale = formats.quantize_nvfp4(w_kn)
        return {"w": packed, "block_scales": block_scales, "tensor_scale": tensor_scale}
    g = spec.resolved_group(k)
    if w_kn.is_cuda:
        from qgemm_bench.operators.int4_quantize_kernel import quantize_int4  # imports triton
    else:
        quantize_int4 = formats.quantize_int4
    packed, scales = quantize_int4(w_kn, g, scale_dtype=scale_dtype)
    return {"w": packed, "scales": scales, "group_size": g}


def dequantize_weight(weights: dict, spec: QuantSpec, dtype=torch.float32) -> torch.Tensor:
    """The [K, N] weight the kernel multiplies by (the reference)."""
    if spec.op == "nvfp4_gemm":
        return formats.dequantize_nvfp4(weights["w"], weights["block_scales"], weights["tensor_scale"], dtype)
    return formats.dequantize_int4(weights["w"], weights["scales"], weights["group_size"], dtype)


class Kernel(NamedTuple):
    apply: Callable[[torch.Tensor], torch.Tensor]  # [M, K] -> [M, N], any M
    resident: tuple  # the tensors it keeps (its weight footprint)
    apply_parts: Callable | None = None  # apply with an RMSNorm's parts (Prepared.apply_parts), where it has them
    swiglu: bool = False  # apply_parts also takes the SwiGLU prologue (Prepared.swiglu)
    swiglu_out: bool = False  # apply_parts also takes the SwiGLU epilogue (Prepared.swiglu_out)


# ------------------------------------------------------------------ the adapter
# The only code that talks to the backend registry.


def check_backend(name: str) -> None:
    """InputError for a backend name that no weight-only operator knows."""
    from qgemm_bench.backends import registry

    known = {b.name for op in ("int4_gemm", "nvfp4_gemm") for b in registry.for_op(op)}
    if name not in known:
        raise InputError(f"unknown backend {name!r}; choose from: {UNQUANTIZED}, {', '.join(sorted(known))}")


def prepare_kernel(backend: str, spec: QuantSpec, weights: dict, k: int, n: int,
                   dtype: torch.dtype, device: torch.device) -> Kernel:
    """Prepare `backend`'s GEMM for these quantized weights, once. Raises
    BackendUnavailable with the backend's reason when it cannot run here."""
    from qgemm_bench.backends import registry
    from qgemm_bench.operators import int4_gemm, nvfp4_gemm
    from qgemm_bench.types import Case, Shape

    try:
        b = registry.get(spec.op, backend)
    except InputError as e:  # e.g. tinygemm has no nvfp4_gemm
        raise BackendUnavailable(str(e)) from None
    x = torch.zeros(1, k, dtype=dtype, device=device)  # a decode-sized stand-in; apply takes any M
    if spec.op == "int4_gemm":
        settings = int4_gemm.Settings(group_size=spec.group_size)
        inputs = int4_gemm.Inputs(x, weights["w"], weights["scales"], weights["group_size"])
    else:
        settings = nvfp4_gemm.Settings(unscaled=False)
        inputs = nvfp4_gemm.Inputs(x, weights["w"], weights["block_scales"], weights["tensor_scale"])
    case = Case(spec.op, Shape(1, k, n), dtype, device, settings)
    if reason := b.why_not(case):
        raise BackendUnavailable(reason)
    p = b.prepare(case, inputs)
    if p.apply is None:
        raise BackendUnavailable(f"{backend}: its {spec.op} backend takes no new activations (no apply)")
    return Kernel(p.apply, tuple(p.resident), p.apply_parts, p.swiglu, p.swiglu_out)


# --------------------------------------------------------------------- modules


def unique_nbytes(tensors) -> int:
    seen, total = set(), 0
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.numel() and t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total


class QuantLinear(nn.Module):
    """y = x @ dequant(W)^T + b through a backend's kernel. The weight lives only
    in the kernel's resident tensors (not parameters: a backend may repack it)."""

    def __init__(self, in_features: int, out_features: int, kernel: Kernel, bias: torch.Tensor | None,
                 backend: str, spec: QuantSpec):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.kernel, self.backend, self.spec = kernel, backend, spec
        # The GEMM is the custom op qgemm::linear (model/ops.py): torch.compile traces through it.
        self.register_buffer("handle", ops.register(self, kernel.apply, out_features, kernel.apply_parts,
                                                    kernel.swiglu, kernel.swiglu_out), persistent=False)
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)
        # model/fused_norm.py sets these for one call: (sums, eps) / (residual, norm weight); the
        # residual call's (h * weight, sums) land in `norm_out`. FusedMLP sets swiglu (model/swiglu.py):
        # x is then h = [gate | up] and the GEMM's input silu(gate) * up.
        self.rms, self.residual, self.norm_out, self.swiglu = None, None, None, False
        # model/swiglu.py's epilogue sets it for good: the weight's columns are (gate, up) pairs
        # (model/fuse.py) and every call returns silu(gate) * up, out_features / 2 wide.
        self.pairs_out = False

    @property
    def has_parts(self) -> bool:
        return self.kernel.apply_parts is not None and self.bias is None

    @property
    def has_swiglu(self) -> bool:
        """Whether its GEMM can take h = [gate | up] for silu(gate) * up (the SwiGLU prologue)."""
        return self.has_parts and self.kernel.swiglu

    @property
    def has_swiglu_out(self) -> bool:
        """Whether its GEMM can return silu(gate) * up of (gate, up) column pairs (the SwiGLU epilogue)."""
        return self.has_parts and self.kernel.swiglu_out and self.out_features % 2 == 0

    @classmethod
    def from_linear(cls, linear: nn.Linear, backend: str, spec: QuantSpec | str) -> QuantLinear:
        spec = parse_quant(spec) if isinstance(spec, str) else spec
        w = linear.weight
        n, k = w.shape
        weights = quantize_weight(w, spec, scale_dtype=w.dtype)
        kernel = prepare_kernel(backend, spec, weights, k, n, w.dtype, w.device)
        return cls(k, n, kernel, linear.bias, backend, spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        rms, residual, swiglu = self.rms, self.residual, self.swiglu
        self.rms = self.residual = None
        self.swiglu = False
        x2 = x.reshape(-1, 2 * self.in_features if swiglu else self.in_features).contiguous()
        if rms is not None and (residual is not None or swiglu):  # fused_norm and FusedMLP never ask these
            raise RuntimeError("QuantLinear: rms set with residual or swiglu for one call")
        if self.pairs_out:
            if residual is not None or swiglu or self.bias is not None:
                raise RuntimeError("QuantLinear: a SwiGLU epilogue's GEMM takes no residual, prologue or bias")
            n = self.out_features // 2
            if x2.shape[0] == 0:
                y = x2.new_empty(0, n)
            elif rms is not None:
                y = ops.linear_rms(x2, self.handle, self.out_features, rms[0], rms[1], True)
            else:
                y = ops.linear_swiglu_out(x2, self.handle, self.out_features)
            return y.reshape(*lead, n)
        if x2.shape[0] == 0:
            y = x2.new_empty(0, self.out_features)
        elif rms is not None:
            y = ops.linear_rms(x2, self.handle, self.out_features, rms[0], rms[1])
        elif residual is not None:
            r, w = residual
            y, xw, sums = ops.linear_residual(x2, self.handle, self.out_features,
                                              r.reshape(-1, self.out_features).contiguous(), w, swiglu)
            self.norm_out = (xw.reshape(*lead, self.out_features), sums)
        elif swiglu:
            y = ops.linear_swiglu(x2, self.handle, self.out_features)
        else:
            y = ops.linear(x2, self.handle, self.out_features)
        y = y.reshape(*lead, self.out_features)
        return y if self.bias is None else y + self.bias

    def _apply(self, fn, recurse=True):
        """.to(device) moves the bias; the kernel handle stays on the host (ops.py)."""
        handle = self.handle
        super()._apply(fn, recurse)
        self.handle = handle
        return self

    def weight_nbytes(self) -> int:
        return unique_nbytes([*self.kernel.resident, self.bias])

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, backend={self.backend}, format={self.spec.name}")


def target_names(model: nn.Module, lm_head: bool = False) -> list[str]:
    """Qualified names of the linear layers quantize_model swaps: the decoder
    layers' q/k/v/o and gate/up/down projections (qkv and gate_up where they
    are fused: model/fuse.py), and lm_head when asked."""
    names = []
    for name, mod in model.named_modules():
        if not isinstance(mod, nn.Linear):
            continue
        leaf = name.rsplit(".", 1)[-1]
        if (leaf in DECODER_LINEARS + FUSED_LINEARS and ".layers." in f".{name}") or (lm_head and name == "lm_head"):
            names.append(name)
    return names


def quantize_model(model: nn.Module, backend: str, fmt: QuantSpec | str, lm_head: bool = False) -> list[str]:
    """Swap the decoder's linear layers (and lm_head if asked) for QuantLinear,
    in place, one layer at a time so the original weight is freed as it goes
    (peak extra memory: one layer). Returns the swapped names."""
    spec = parse_quant(fmt) if isinstance(fmt, str) else fmt
    names = target_names(model, lm_head)
    for name in names:
        parent_name, _, leaf = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, leaf, QuantLinear.from_linear(getattr(parent, leaf), backend, spec))
    return names


def linear_nbytes(model: nn.Module, lm_head: bool = False) -> int:
    """Weight bytes of the layers quantize_model targets (quantized or not), so
    the bf16 model and a quantized one are measured over the same set."""
    tensors = []
    for name in target_names(model, lm_head) + [n for n, m in model.named_modules() if isinstance(m, QuantLinear)]:
        mod = model.get_submodule(name)
        tensors += [*mod.kernel.resident, mod.bias] if isinstance(mod, QuantLinear) else [mod.weight, mod.bias]
    return unique_nbytes(tensors)


def device_tensors(model: nn.Module) -> list[torch.Tensor]:
    """Parameters and buffers, less the QuantLinear kernel handles (host scalars)."""
    handles = {id(m.handle) for m in model.modules() if isinstance(m, QuantLinear)}
    return [t for t in (*model.parameters(), *model.buffers()) if id(t) not in handles]


def model_nbytes(model: nn.Module) -> int:
    """Every parameter and buffer, plus QuantLinear kernels' resident tensors;
    shared storage (tied embeddings) counted once."""
    tensors = device_tensors(model)
    tensors += [t for m in model.modules() if isinstance(m, QuantLinear) for t in m.kernel.resident]
    return unique_nbytes(tensors)
