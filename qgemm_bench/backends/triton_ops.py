"""Our Triton backends: the weight-only GEMM (int4, NVFP4) and split-K (atomic,
deterministic). Kernels in triton_kernels/, imported when a backend is
prepared (so listing backends never imports triton)."""

from __future__ import annotations

import torch

from qgemm_bench.backends.checks import case_target, interpreter_note, on_cpu, triton_why_not
from qgemm_bench.backends.registry import Prepared, backend
from qgemm_bench.operators.formats import INT4, NVFP4, NVFP4_BLOCK

# Explicit configs for the interpreter, where autotuning cannot time anything:
# few, large programs keep the CPU time down.
WEIGHT_ONLY_INTERPRETER_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "SPLIT_K": 2,
                                  "num_warps": 4, "num_stages": 1}
SPLIT_K_INTERPRETER_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64, "SPLIT_K": 4,
                              "num_warps": 4, "num_stages": 1}


def weight_args(op: str, inputs) -> tuple:
    """WeightOnlyGemm's weight arguments (w, scales, tensor scale, format,
    group) from an int4_gemm or nvfp4_gemm operator's inputs."""
    if op == "nvfp4_gemm":
        bs = inputs.block_scales.contiguous().view(torch.uint8)  # E4M3 bits, decoded in the kernel
        return inputs.w.contiguous(), bs, inputs.tensor_scale.float(), NVFP4, NVFP4_BLOCK
    # Unscaled int4: the group is never read; any even constant.
    group = inputs.group_size if inputs.group_size is not None else 2
    return inputs.w.contiguous(), inputs.scales, None, INT4, group


def _weight_only(case, inputs) -> Prepared:
    from qgemm_bench.backends.triton_dispatch import make_weight_only

    gemm = make_weight_only(*weight_args(case.op, inputs), on_cpu(case, WEIGHT_ONLY_INTERPRETER_CONFIG),
                            target=case_target(case))

    def apply(x):
        return gemm(x.contiguous())

    def apply_parts(x, **parts):
        return gemm(x.contiguous(), **parts)

    x = inputs.x.contiguous()
    m = x.shape[0]
    notes = "; ".join(filter(None, (interpreter_note(case), gemm.note(m, x))))
    if gemm.path(m) == "fused":
        gemm.fused()  # its K-major weights are made here, in prepare
    return Prepared(lambda: gemm(x), resident=gemm.resident(m), notes=notes, apply=apply, apply_parts=apply_parts,
                    swiglu=True, swiglu_out=True)


_PATHS = ("one-launch split-K streaming for M <= 64; a fused swapped-operand kernel on K-major weights up to "
          "M = 1024 (and at M <= 64 with split-K where the table timed it faster)")


@backend("int4_gemm", "triton", f"Triton weight-only GEMM: {_PATHS}, and above where its config takes TMA loads "
         "(groups of whole 128-k blocks, Hopper) unless the table timed dequantize + cuBLAS faster; otherwise a "
         "Triton dequantize, then cuBLAS; on the H100 a warp-specialized Gluon kernel where the table timed it "
         "faster (ws_gemm.py); configs per GPU and shape from the store (configs/<gpu>/weight_only.json)",
         triton_why_not, compiles=True)
def int4(case, inputs):
    return _weight_only(case, inputs)


@backend("nvfp4_gemm", "triton", "Triton weight-only GEMM with in-register E2M1 decode and E4M3 block "
         f"scales: {_PATHS}, and above where its config takes TMA loads (Hopper) unless the table timed "
         "dequantize + cuBLAS faster; otherwise a Triton dequantize, then cuBLAS; on the H100 a warp-specialized "
         "Gluon kernel where the table timed it faster (ws_gemm.py); checked-in configs per GPU and shape "
         "(configs/<gpu>/weight_only.json)", triton_why_not, compiles=True)
def nvfp4(case, inputs):
    return _weight_only(case, inputs)


def _split_k(case, inputs, deterministic: bool) -> Prepared:
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, DETERMINISTIC

    a, b, bias = inputs.a.contiguous(), inputs.b.contiguous(), inputs.bias
    gemm = make_split_k(a, b, bias, DETERMINISTIC if deterministic else ATOMIC,
                        on_cpu(case, SPLIT_K_INTERPRETER_CONFIG), target=case_target(case))
    notes = "; ".join(filter(None, (interpreter_note(case), gemm.note())))  # the config and where it came from
    return Prepared(gemm, resident=(b,) if bias is None else (b, bias), notes=notes)


@backend("split_k_gemm", "triton", "Triton split-K, fp32 atomics finished by the tile's last program (one "
         "launch), or where the table timed it faster the deterministic per-split planes summed in a second "
         "launch; configs per GPU and shape from the config store (configs/<gpu>/split_k.json)", triton_why_not,
         compiles=True)
def split_k_atomic(case, inputs):
    return _split_k(case, inputs, deterministic=False)


@backend("split_k_gemm", "triton_deterministic", "Triton split-K, per-split partials summed in a fixed "
         "order by the tile's last program or a second launch (the table's choice): bit-identical run to run",
         triton_why_not, compiles=True)
def split_k_deterministic(case, inputs):
    return _split_k(case, inputs, deterministic=True)
