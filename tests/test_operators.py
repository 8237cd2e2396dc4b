"""Operators: references against independent fp64 math, validation, metrics."""

import numpy as np
import pytest
import torch

from qgemm_bench import operators
from qgemm_bench.operators import int4_gemm, nvfp4_gemm, split_k_gemm
from qgemm_bench.operators.common import Case, InputError, Shape
from tests.test_formats import E2M1, np_unpack

CPU = torch.device("cpu")


def case(op, shape, dtype=torch.float16, **settings):
    return Case(op.NAME, Shape(*shape), dtype, CPU, {**op.DEFAULT_SETTINGS, **settings})


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("shape", [(1, 128, 64), (3, 384, 40), (17, 256, 37)])
@pytest.mark.parametrize("group", [32, 128, "channel", None])
def test_int4_reference_vs_fp64(shape, group):
    c = case(int4_gemm, shape, group_size=group)
    inputs = int4_gemm.make_inputs(c, seed=np.random.randint(1 << 30))
    codes = np_unpack(inputs["w"].numpy().view(np.uint8))
    q = np.where(codes >= 8, codes - 16, codes).astype(np.float64)
    if inputs["scales"] is not None:
        g = inputs["group_size"]
        q = q * np.repeat(inputs["scales"].double().numpy(), g, axis=0)
    expected = inputs["x"].double().numpy() @ q
    got = int4_gemm.reference(inputs)
    assert got.dtype == torch.float32 and got.shape == (shape[0], shape[2])
    assert rel(got.double().numpy(), expected) < 1e-6


@pytest.mark.parametrize("shape", [(1, 64, 48), (3, 160, 40), (17, 256, 37)])
@pytest.mark.parametrize("unscaled", [False, True])
def test_nvfp4_reference_vs_fp64(shape, unscaled):
    c = case(nvfp4_gemm, shape, unscaled=unscaled)
    inputs = nvfp4_gemm.make_inputs(c, seed=np.random.randint(1 << 30))
    codes = np_unpack(inputs["w"].numpy())
    mag = np.array(E2M1)[codes & 7]
    w = np.where(codes >= 8, -mag, mag) * np.repeat(inputs["block_scales"].float().double().numpy(), 16, axis=0)
    w = w * float(inputs["tensor_scale"])
    expected = inputs["x"].double().numpy() @ w
    assert rel(nvfp4_gemm.reference(inputs).double().numpy(), expected) < 1e-6


@pytest.mark.parametrize("bias", [False, True])
def test_split_k_reference_vs_fp64(bias):
    c = case(split_k_gemm, (5, 1000, 7), bias=bias)
    inputs = split_k_gemm.make_inputs(c, seed=np.random.randint(1 << 30))
    expected = inputs["a"].double().numpy() @ inputs["b"].double().numpy()
    if bias:
        assert inputs["bias"].shape == (7,)
        expected = expected + inputs["bias"].double().numpy()
    else:
        assert inputs["bias"] is None
    assert rel(split_k_gemm.reference(inputs).double().numpy(), expected) < 1e-6


def test_make_inputs_is_seeded():
    c = case(int4_gemm, (3, 256, 40))
    a, b, d = (int4_gemm.make_inputs(c, s) for s in (1, 1, 2))
    assert torch.equal(a["x"], b["x"]) and torch.equal(a["w"], b["w"]) and torch.equal(a["scales"], b["scales"])
    assert not torch.equal(a["w"], d["w"])


def test_int4_scales_take_the_activation_dtype():
    assert int4_gemm.make_inputs(case(int4_gemm, (1, 128, 8), torch.bfloat16), 0)["scales"].dtype == torch.bfloat16
    assert int4_gemm.make_inputs(case(int4_gemm, (1, 128, 8)), 0)["scales"].dtype == torch.float16


@pytest.mark.parametrize("op,shape,settings,message", [
    (int4_gemm, (1, 129, 8), {}, "odd"),
    (int4_gemm, (1, 192, 8), {"group_size": 128}, "not divisible by group_size=128"),
    (int4_gemm, (0, 128, 8), {}, "must be positive"),
    (nvfp4_gemm, (1, 40, 8), {}, "block size 16"),
    (split_k_gemm, (1, 64, -3), {}, "must be positive"),
])
def test_validate_refuses_bad_shapes(op, shape, settings, message):
    with pytest.raises(InputError, match=message):
        op.validate(Shape(*shape), {**op.DEFAULT_SETTINGS, **settings})


def test_every_preset_shape_is_valid_with_default_settings():
    for name in operators.NAMES:
        op = operators.get(name)
        for preset in op.PRESETS.values():
            for s in preset:
                op.validate(s, op.DEFAULT_SETTINGS)


def test_presets_hold_the_documented_shapes():
    llama = int4_gemm.PRESETS["llama"]
    assert len(llama) == 48 and Shape(4096, 8192, 8192) in llama and Shape(1, 4096, 6144) in llama
    assert Shape(64, 32768, 64) in split_k_gemm.PRESETS["skinny"]
    assert [s.M for s in int4_gemm.PRESETS["m-sweep"]] == [2**i for i in range(13)]


def test_flops_and_minimum_bytes():
    s = Shape(16, 8192, 8192)
    assert int4_gemm.flops(s, {}) == 2 * 16 * 8192 * 8192
    # x + int4 weights + bf16 scales per 128 + y
    assert int4_gemm.bytes(s, torch.bfloat16, {"group_size": 128}) == (
        16 * 8192 * 2 + 8192 * 8192 // 2 + 64 * 8192 * 2 + 16 * 8192 * 2)
    assert int4_gemm.bytes(s, torch.bfloat16, {"group_size": None}) == 16 * 8192 * 4 + 8192 * 8192 // 2
    assert nvfp4_gemm.bytes(s, torch.bfloat16, {}) == 16 * 8192 * 4 + 8192 * 8192 // 2 + 512 * 8192 + 4
    assert split_k_gemm.bytes(Shape(64, 32768, 64), torch.float16, {"bias": True}) == (
        (64 * 32768 * 2 + 64 * 64 + 64) * 2)


def test_unknown_operator():
    with pytest.raises(InputError, match="unknown operator"):
        operators.get("int3_gemm")
