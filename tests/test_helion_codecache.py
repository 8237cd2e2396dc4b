"""Helion's generated code kept on disk (helion_kernels/codecache.py): a later
prepare loads it instead of binding the kernel again, and computes what the
bound kernel did."""

import pytest
import torch

from qgemm_bench.backends import registry
from qgemm_bench.backends.helion_kernels import codecache, kernels, tuning
from qgemm_bench.operators import int4_gemm
from qgemm_bench.operators.common import rel_error
from tests.support import DEV, DT, case, seed

pytest.importorskip("helion")


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """A cache of this test alone, on this device too (GPU runs only otherwise)."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setattr(codecache, "enabled", lambda device: True)
    monkeypatch.setattr(tuning, "_loaded", {})
    return tmp_path / "triton" / codecache.SUBDIR


@pytest.mark.parametrize("shape", [(5, 256, 96), (1, 384, 64)])
def test_a_later_prepare_loads_the_code_and_binds_nothing(cache, monkeypatch, shape):
    s = seed()
    helion = registry.get("int4_gemm", "helion")
    c = case(int4_gemm, shape, DT, DEV)
    inputs = int4_gemm.make_inputs(c, s)
    ref = int4_gemm.reference(inputs)
    first = helion.prepare(c, inputs).fn()
    assert list(cache.glob("*.py")), "nothing stored"

    def refuse(*a, **k):
        raise AssertionError("bound again")

    monkeypatch.setattr(tuning, "_loaded", {})  # as in another process
    for k in (kernels.weight_only, kernels.fused, kernels.split_k):
        monkeypatch.setattr(k, "bind", refuse)
    second = helion.prepare(c, inputs.clone()).fn()
    assert torch.equal(first, second), f"seed {s}"
    assert rel_error(second, ref) <= int4_gemm.tolerance(DT), f"seed {s}"


def test_the_key_covers_shapes_strides_scalars_and_the_config():
    x = torch.zeros(4, 8)
    settings = {"block_sizes": [16, 16], "num_warps": 4}
    k = codecache.key(kernels.fused, (x, 3, True), settings, torch.device("cpu"))
    same = codecache.key(kernels.fused, (torch.ones(4, 8), 3, True), dict(settings), torch.device("cpu"))
    assert k is not None and k == same  # values of tensors do not matter
    others = [
        codecache.key(kernels.fused, (torch.zeros(5, 8), 3, True), settings, torch.device("cpu")),
        codecache.key(kernels.fused, (torch.zeros(8, 4).t(), 3, True), settings, torch.device("cpu")),
        codecache.key(kernels.fused, (x, 4, True), settings, torch.device("cpu")),
        codecache.key(kernels.fused, (x, 3, True), {**settings, "num_warps": 8}, torch.device("cpu")),
        codecache.key(kernels.weight_only, (x, 3, True), settings, torch.device("cpu")),
        codecache.key(kernels.fused, (x.half(), 3, True), settings, torch.device("cpu")),
    ]
    assert len({k, *others}) == 7
    assert codecache.key(kernels.fused, (x, object()), settings, torch.device("cpu")) is None


def test_a_cached_run_refuses_another_config():
    run = codecache.CachedRun(lambda *a: sum(a), "code", {"num_warps": 4})
    assert run(1, 2) == 3 and run.to_triton_code({"num_warps": 4}) == "code"
    with pytest.raises(ValueError, match="generated for config"):
        run.compile_config({"num_warps": 8})


def test_a_stored_module_that_does_not_load_is_bound_again(cache):
    s = seed()
    helion = registry.get("int4_gemm", "helion")
    c = case(int4_gemm, (3, 256, 64), DT, DEV)
    inputs = int4_gemm.make_inputs(c, s)
    first = helion.prepare(c, inputs).fn()
    for f in cache.glob("*.py"):
        f.write_text("raise ImportError('a broken module')\n")
    tuning._loaded.clear()
    second = helion.prepare(c, inputs).fn()
    assert torch.equal(first, second), f"seed {s}"
