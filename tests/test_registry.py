"""The operator and backend registries, and the tritonbench mapping table."""

import importlib

import pytest

from qgemm_bench import operators
from qgemm_bench.backends import registry
from qgemm_bench.errors import InputError
from qgemm_bench.integrations import tritonbench
from qgemm_bench.operators import int4_gemm
from qgemm_bench.types import Shape, m_bucket


def test_select_puts_baseline_first_and_refuses_unknown_or_repeated_names():
    names = [b.name for b in registry.select("int4_gemm", ["cublas", "torch"], "torch")]
    assert names == ["torch", "cublas"]
    assert [b.name for b in registry.select("int4_gemm", ["cublas"], "torch")] == ["torch", "cublas"]
    with pytest.raises(InputError, match="unknown backend 'cutlass'"):
        registry.select("int4_gemm", ["cutlass"], "torch")
    with pytest.raises(InputError, match="unknown backend 'nope'"):
        registry.select("int4_gemm", None, "nope")
    with pytest.raises(InputError, match="names torch more than once"):
        registry.select("int4_gemm", ["torch", "torch", "cublas"], "torch")


def test_every_backend_is_listed_for_its_operator():
    for op in operators.NAMES:
        names = [b.name for b in registry.for_op(op)]
        assert names[0] == "torch" and len(set(names)) == len(names)
        assert all(b.op == op for b in registry.for_op(op))
    assert {"torch", "cublas", "torch_compile", "tinygemm", "triton", "helion"} <= {
        b.name for b in registry.for_op("int4_gemm")}


def test_a_backend_registered_twice_is_refused(monkeypatch):
    monkeypatch.setattr(registry, "_registered", {})

    @registry.backend("int4_gemm", "mine", "one")
    def prepare(case, inputs):
        return None

    with pytest.raises(RuntimeError, match="registered twice"):
        registry.backend("int4_gemm", "mine", "two")(prepare)


def test_unknown_operator():
    with pytest.raises(InputError, match="unknown operator"):
        operators.get("int3_gemm")


def test_every_preset_shape_is_valid_with_default_settings():
    for op in operators.all_ops():
        for preset in op.PRESETS.values():
            for s in preset:
                op.validate(s, op.Settings())


def test_presets_hold_the_documented_shapes():
    llama = int4_gemm.PRESETS["llama"]
    assert len(llama) == 48 and Shape(4096, 8192, 8192) in llama and Shape(1, 4096, 6144) in llama
    assert [s.M for s in int4_gemm.PRESETS["m-sweep"]] == [2**i for i in range(13)]


def test_m_buckets():
    assert [m_bucket(m) for m in (1, 2, 3, 16, 17, 64, 65, 4096, 8192)] == [1, 2, 4, 16, 32, 64, 128, 4096, 4096]


def test_tritonbench_kernel_mappings_resolve():
    assert set(tritonbench.KERNEL_MAPPINGS) == {"int4_gemm", "nvfp4_gemm", "gemm"}
    for op, (tb_module, variants) in tritonbench.KERNEL_MAPPINGS.items():
        assert tb_module.startswith("tritonbench.operators.") and len(variants) == 2
        for module, fn in variants:
            assert callable(getattr(importlib.import_module(module), fn)), (op, fn)
