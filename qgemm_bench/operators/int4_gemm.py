"""int4_gemm: y[M, N] = x[M, K] @ dequant(w), int4 weights with group scales.

Inputs: x [M, K] (bf16/fp16); w int8 [K//2, N] (formats.py layout); scales
[K//group_size, N] in x's dtype, or None for the unscaled variant.
Settings: group_size = int (default 128) | "channel" (= K) | None (unscaled).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from qgemm_bench.errors import InputError
from qgemm_bench.operators import common, formats
from qgemm_bench.operators.common import (
    check_positive,
    decode_shapes,
    gemm_flops,
    gemm_tolerance,
    generator,
    llama_shapes,
    m_sweep_shapes,
)
from qgemm_bench.types import Case, Shape

NAME = "int4_gemm"
SUMMARY = "bf16/fp16 activations x int4 weights, symmetric group scales"
DEFAULT_BASELINE = "torch"
PLOT_X = "M"
WEIGHT_ONLY = True  # rows get the weight-read floor (harness/assemble.py)
PRESETS = {
    # tiny and ragged: N not a multiple of 8/16, M odd; K a multiple of 128.
    "smoke": [Shape(1, 128, 64), Shape(3, 256, 40), Shape(17, 384, 96), Shape(5, 256, 37)],
    "llama": llama_shapes(),
    "m-sweep": m_sweep_shapes(),
    "decode": decode_shapes(),
}
CPU_PRESET, GPU_PRESET = "smoke", "llama"
DEFAULT_GROUP = 128


def parse_group_size(text: str) -> int | str | None:
    t = text.strip().lower()
    if t == "none":
        return None
    if t == "channel":
        return "channel"
    try:
        g = int(t)
    except ValueError:
        raise InputError(f"--group-size {text!r}: expected an even integer, 'channel' or 'none'") from None
    if g <= 0 or g % 2:
        raise InputError(f"--group-size {g}: must be a positive even integer")
    return g


@dataclass(frozen=True)
class Settings:
    """group_size: K rows per scale group (an even int), "channel" (one group
    of K: per output channel), or None (raw int4 values, no scales)."""

    group_size: int | str | None = DEFAULT_GROUP

    def resolve(self, k: int) -> int | None:
        """The group size in K rows for a given K (None: unscaled)."""
        return k if self.group_size == "channel" else self.group_size

    def label(self) -> str:
        return "unscaled" if self.group_size is None else f"group={self.group_size}"

    def as_dict(self) -> dict:
        return {"group_size": self.group_size}

    @classmethod
    def from_label(cls, label: str) -> Settings:
        """Rows written before settings were structured carried the label only."""
        if label == "unscaled":
            return cls(None)
        g = label.removeprefix("group=")
        try:
            s = cls(parse_group_size(g))
        except InputError:
            s = None
        if s is None or s.label() != label:  # only what label() writes ("128", "group=none" are not)
            raise ValueError("expected 'unscaled', 'group=channel' or 'group=<an even number of K rows>'")
        return s


FLAGS = {"group_size": "--group-size"}


def add_arguments(p) -> None:
    p.add_argument("--group-size", metavar="G", help="int4_gemm: K rows per scale group: an even integer "
                   f"(default {DEFAULT_GROUP}), 'channel' (one group of K) or 'none' (raw int4 values, no scales)")


def settings_from_args(args) -> Settings:
    return Settings() if args.group_size is None else Settings(parse_group_size(args.group_size))


@dataclass
class Inputs(common.Inputs):
    x: torch.Tensor  # [M, K]
    w: torch.Tensor  # int8 [K//2, N]
    scales: torch.Tensor | None  # [K//group_size, N] in x's dtype
    group_size: int | None  # resolved: K rows per group (K for per-channel); None unscaled


def describe(settings: Settings) -> str:
    return settings.label()


def validate(shape: Shape, settings: Settings) -> None:
    check_positive(shape)
    if shape.K % 2:
        raise InputError(f"shape {shape}: K={shape.K} is odd; int4 packs two values per byte along K")
    g = settings.group_size
    if isinstance(g, int) and shape.K % g:
        raise InputError(f"shape {shape}: K={shape.K} is not divisible by group_size={g}")


def quantize(w: torch.Tensor, group_size: int | None, scale_dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
    """[K, N] float weight -> (packed, scales): one Triton kernel on CUDA (many
    torch passes otherwise, for weights up to 8192 x 57344), bit-identical to
    formats.quantize_int4, which runs elsewhere."""
    if group_size is not None and w.device.type == "cuda":
        from qgemm_bench.operators.int4_quantize_kernel import quantize_int4
    else:
        quantize_int4 = formats.quantize_int4
    return quantize_int4(w, group_size, scale_dtype=scale_dtype)


def make_inputs(case: Case, seed: int) -> Inputs:
    """x ~ N(0, 1); w quantized from a N(0, 1) weight (raw int4 when unscaled)."""
    m, k, n = case.shape
    gen = generator(case.device, seed)
    x = torch.randn(m, k, generator=gen, device=case.device).to(case.dtype)
    g = case.settings.resolve(k)
    if g is None:
        q = torch.randint(-8, 8, (k, n), generator=gen, device=case.device)
        return Inputs(x, formats.pack_int4(q), None, None)
    w = torch.randn(k, n, generator=gen, device=case.device)
    packed, scales = quantize(w, g, case.dtype)
    return Inputs(x, packed, scales, g)


def dequantize(inputs: Inputs, dtype=torch.float32) -> torch.Tensor:
    return formats.dequantize_int4(inputs.w, inputs.scales, inputs.group_size, dtype)


def reference(inputs: Inputs) -> torch.Tensor:
    """fp32 math on exactly the dequantized weights."""
    return inputs.x.float() @ dequantize(inputs)


def flops(shape: Shape, settings: Settings) -> int:
    return gemm_flops(shape)


def bytes(shape: Shape, dtype: torch.dtype, settings: Settings) -> int:
    # I/O: x read once (M*K*e), packed weights (K*N/2), scales (K/g*N*e),
    # y written once (M*N*e).
    m, k, n = shape
    e = dtype.itemsize
    g = settings.resolve(k)
    scales = 0 if g is None else (k // g) * n * e
    return m * k * e + k * n // 2 + scales + m * n * e


def tolerance(dtype: torch.dtype) -> float:
    return gemm_tolerance(dtype)
