"""Checks the backend families share: can a backend run here (why_not
helpers), and do a kernel's operands fit it (ValueError in one line)."""

from __future__ import annotations

import importlib.util
import os

import torch

from qgemm_bench.operators.formats import INT4, NVFP4, NVFP4_BLOCK
from qgemm_bench.types import Case


def cuda_only(case: Case) -> str | None:
    return None if case.device.type == "cuda" else "needs a CUDA device"


def missing(package: str, install: str) -> str | None:
    """Why a backend whose package is absent cannot run, with the install command."""
    return None if importlib.util.find_spec(package) is not None else f"{package} is not installed ({install})"


def use_interpreter_on_cpu() -> None:
    """On CPU, Triton (and Helion's Triton) kernels run in the interpreter,
    which must be chosen before triton is first imported."""
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


def triton_why_not(case: Case) -> str | None:
    """Triton runs float16 or bfloat16 activations on CUDA, or on CPU tensors
    in the interpreter (fp16 only: the interpreter has no bfloat16)."""
    if case.dtype not in (torch.float16, torch.bfloat16):  # the model's float32 CPU default
        return f"takes float16 or bfloat16 activations, not {str(case.dtype).removeprefix('torch.')}"
    if case.device.type == "cuda":
        return None
    if os.environ.get("TRITON_INTERPRET") != "1":
        return "on CPU needs the Triton interpreter (TRITON_INTERPRET=1 before triton is imported)"
    if case.dtype == torch.bfloat16:
        return "the Triton interpreter has no bfloat16; use --dtype float16 on CPU"
    return None


INTERPRETER = "Triton interpreter (CPU)"  # the note of rows the interpreter ran (report.py gathers them)


def interpreter_note(case: Case) -> str:
    return INTERPRETER if case.device.type == "cpu" else ""


def case_target(case: Case):
    """The run's Target (case.target), else the case's device's (target.of:
    a Python caller without one): what the ops hand the kernels, which never
    look a GPU up themselves."""
    from qgemm_bench.target import of

    return case.target if case.target is not None else of(case.device)


def on_cpu(case: Case, config: dict) -> dict | None:
    """An explicit config for the interpreter (where autotuning times
    nothing), None on a GPU (the tuned configs decide)."""
    return dict(config) if case.device.type == "cpu" else None


def check_weight_only(x, w, scales, fmt: int, group: int) -> None:
    """Operands of a weight-only GEMM: x [M, K] fp16/bf16, packed w [K//2, N],
    int4 scales [K//group, N] (or None) or NVFP4 block scales [K//16, N]."""
    if x.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"x must be float16 or bfloat16, not {x.dtype}")
    if x.dim() != 2 or w.dim() != 2 or x.shape[1] != 2 * w.shape[0]:
        raise ValueError(f"x {tuple(x.shape)} and packed w {tuple(w.shape)} do not match: need x [M, K], w [K//2, N]")
    if x.stride(1) != 1 or w.stride(1) != 1:
        raise ValueError("x and w must be contiguous in their last dimension")
    if w.dtype not in (torch.int8, torch.uint8):
        raise ValueError(f"packed weights must be int8/uint8, not {w.dtype}")
    k = x.shape[1]
    if fmt == INT4 and scales is not None and (k % group or scales.shape != (k // group, w.shape[1])):
        raise ValueError(f"int4 scales {tuple(scales.shape)} do not fit K={k} in groups of {group}")
    if fmt == NVFP4 and (k % NVFP4_BLOCK or scales.shape != (k // NVFP4_BLOCK, w.shape[1])):
        raise ValueError(f"NVFP4 block scales {tuple(scales.shape)} do not fit K={k} in blocks of {NVFP4_BLOCK}")


def check_split_k(a, b, bias) -> None:
    """Operands of a split-K GEMM: a [M, K] @ b [K, N] in one of fp16/bf16, bias [N]."""
    if a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype:
        raise ValueError(f"a and b must share float16 or bfloat16, not {a.dtype} and {b.dtype}")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"a {tuple(a.shape)} and b {tuple(b.shape)} do not match: need [M, K] @ [K, N]")
    if a.stride(1) != 1 or b.stride(1) != 1:
        raise ValueError("a and b must be contiguous in their last dimension")
    if bias is not None and bias.shape != (b.shape[1],):
        raise ValueError(f"bias {tuple(bias.shape)} must be [N] = [{b.shape[1]}]")
