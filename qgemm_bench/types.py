"""The small types every layer shares: a shape, a case, dtypes, M buckets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from qgemm_bench.errors import InputError


class Shape(NamedTuple):
    M: int
    K: int
    N: int

    def __str__(self) -> str:
        return f"{self.M}x{self.K}x{self.N}"


@dataclass(frozen=True)
class Case:
    """One thing to measure: an operator at a shape, dtype and device, with the
    operator's settings (its own dataclass, e.g. int4_gemm.Settings)."""

    op: str
    shape: Shape
    dtype: torch.dtype
    device: torch.device
    settings: Any = None
    # The run's qgemm_bench.target.Target (the harness makes it once per run);
    # None: the backends take the device's (target.of).
    target: Any = None


DTYPES = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16, "half": torch.float16}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def parse_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name.lower()]
    except KeyError:
        raise InputError(f"unsupported dtype {name!r}; choose bfloat16 or float16") from None


M_BUCKET_CAP = 4096


def m_bucket(m: int) -> int:
    """M rounded up to a power of two, capped: the key that tuned configs
    (Triton autotuning, Helion config files) are chosen by."""
    return min(1 << max(0, m - 1).bit_length(), M_BUCKET_CAP)
