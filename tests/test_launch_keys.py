"""Every keyword a launcher hands a Triton kernel is a parameter of that
kernel or a launch option. The interpreter drops keywords a kernel does not
take, so a missing constexpr passes every CPU test and fails at once on the
GPU ("Keyword argument ... was specified but unrecognised"): REDUCE spread's
SPREAD did, and PF_LINES and HALVES in a config the split kernel ran would
have. Checked two ways: the config keys each launcher may pass, and the
keywords of real launches (captured, not run) with configs that name them."""

import pytest
import torch

from qgemm_bench.operators import int4_gemm, nvfp4_gemm
from qgemm_bench.operators.formats import INT4, NVFP4
from tests.support import case, seed, target_for, triton_config

# What a launch takes besides the kernel's parameters (Triton's launcher).
LAUNCH = {"num_warps", "num_stages", "num_ctas", "maxnreg", "launch_pdl"}


def unknown(kernel, keys) -> set:
    return set(keys) - LAUNCH - set(kernel.arg_names)


def test_every_config_key_is_a_parameter_of_the_kernels_that_take_it():
    from qgemm_bench.backends.triton_kernels import fused_gemm, split_k, split_k_configs, weight_only

    assert not unknown(fused_gemm.fused_kernel, set(fused_gemm.CONFIG_KEYS) - {"WS"})  # WS: ws_gemm's tiles
    # The split kernel gets a fused config without its fused-only keys.
    assert not unknown(weight_only.weight_only_kernel, set(fused_gemm.CONFIG_KEYS) - set(weight_only.FUSED_ONLY))
    for reduce in split_k_configs.REDUCES:
        c = {**triton_config(split=4), "REDUCE": reduce, "PDL": 2}
        assert not unknown(split_k.split_k_kernel, split_k.kernel_meta(c)), reduce


class Capture:
    """A kernel stand-in: kernel[grid](*args, **kwargs) records the keywords
    and launches nothing."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append(kwargs)


@pytest.fixture
def capture(monkeypatch):
    def patch(module, name):
        c = Capture(getattr(module, name))
        monkeypatch.setattr(module, name, c)
        return c

    return patch


def weights(fmt, shape=(5, 1024, 72)):
    op = int4_gemm if fmt == INT4 else nvfp4_gemm
    inputs = op.make_inputs(case(op, shape, **({"group_size": 128} if fmt == INT4 else {})), seed())
    if fmt == INT4:
        return inputs.x, (inputs.w, inputs.scales, None, INT4, 128)
    return inputs.x, (inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16)


@pytest.mark.parametrize("fmt, extra", [
    (INT4, {"ACC_SCALE": True, "SCALE_AHEAD": True, "FOLD": True, "PF_LINES": 16, "PDL": 2, "maxnreg": 128}),
    (INT4, {"ACC_SCALE": True, "HALVES": True}),
    (NVFP4, {"SCALE8": True, "SHORT_DECODE": True, "PDL": 3}),
    (NVFP4, {"ROT_DECODE": True})])
def test_fused_and_split_launches_pass_only_kernel_parameters(capture, fmt, extra):
    from qgemm_bench.backends.triton_dispatch import make_weight_only
    from qgemm_bench.backends.triton_kernels import fused_gemm, weight_only

    x, wargs = weights(fmt)
    c = {**triton_config(16, 64, 128, 2), **extra}
    fused = capture(fused_gemm, "fused_kernel")
    make_weight_only(*wargs, config=c, path="fused", target=target_for(x))(x)
    split = capture(weight_only, "weight_only_kernel")
    make_weight_only(*wargs, config=c, path="split", target=target_for(x))(x)
    assert len(fused.launches) == len(split.launches) == 1
    assert not unknown(fused.kernel, fused.launches[0])
    assert not unknown(split.kernel, split.launches[0])


@pytest.mark.parametrize("reduce", ["last", "kernel"])
def test_split_k_launches_pass_only_kernel_parameters(capture, reduce):
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels import split_k, split_k_parts
    from qgemm_bench.operators import split_k_gemm

    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (33, 1000, 40), bias=True), seed())
    main, second = capture(split_k, "split_k_kernel"), capture(split_k_parts, "reduce_planes")
    make_split_k(inputs.a, inputs.b, inputs.bias, split_k.DETERMINISTIC,
                 triton_config(bn=32, bk=64, split=8, PDL=2, REDUCE=reduce), target=target_for(inputs.a))()
    assert len(main.launches) == 1 and len(second.launches) == (reduce == "kernel")
    assert not unknown(main.kernel, main.launches[0])
    assert not any(unknown(second.kernel, k) for k in second.launches)
