"""The humming peer backend: what we hand humming decodes, by humming's own
semantics (re-implemented here in plain torch from humming 0.1.19's source),
to exactly our weights; and why it cannot run where it cannot. The kernels
themselves run on the GPU only (-m gpu here, and scripts/check_humming.py)."""

import pytest
import torch

from qgemm_bench.backends import humming, registry
from qgemm_bench.operators import formats, int4_gemm, nvfp4_gemm
from tests.support import CPU, CUDA, case, check, needs_gpu, seed

# ------------------------------------------------------------------ humming's decode, in torch


def unpack_words(words: torch.Tensor) -> torch.Tensor:
    """Its [N, W] int32 words -> [N, 8W] 4-bit codes: code i at bits 4*(i%8)
    of word i//8 (pack_weight.cuh, common_unpack_weight)."""
    w = words.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(0, 32, 4, dtype=torch.int64)
    return ((w.unsqueeze(-1) >> shifts) & 0xF).reshape(words.shape[0], -1)


def decode_uint4(words, scale) -> torch.Tensor:
    """dequantize_weight for an unsigned integer type without zero point:
    (u - 2^(bits-1)) * scale, the scale repeated over its group; -> [K, N] fp32."""
    u = unpack_words(words).float()
    g = u.shape[1] // scale.shape[1]
    return ((u - 8) * scale.float().repeat_interleave(g, dim=1)).t()


def decode_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """DequantKernel's float decode (dequant_weight.cuh): the sign to bit 31,
    exponent and mantissa under fp32's, times 2^(127 - 2^(e-1))."""
    c = codes.to(torch.int32)
    bits = ((c & 8) << 28) | ((c & 7) << 22)
    return bits.view(torch.float32) * 2.0**126


# ------------------------------------------------------------------ int4


@pytest.mark.parametrize("shape,group", [((1, 256, 40), 16), ((1, 512, 136), 64), ((1, 384, 96), 128),
                                         ((1, 264, 8), "channel"), ((1, 136, 24), None)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_int4_operands_decode_to_our_weights(shape, group, dtype):
    s = seed()
    c = case(int4_gemm, shape, dtype, CPU, group_size=group)
    inputs = int4_gemm.make_inputs(c, s)
    k, n = shape[1], shape[2]
    schema, t = humming.int4_operands(inputs.w, inputs.scales, dtype)
    g = inputs.group_size
    # The shapes and dtypes humming's schema asks for (get_tensors_attrs).
    assert t["weight"].dtype == torch.int32 and t["weight"].shape == (n, k * 4 // 32)
    per_channel = g in (None, k)
    assert schema == {"dtype": "uint4", "group_size": 0 if per_channel else g}
    assert t["weight_scale"].dtype == dtype and t["weight_scale"].shape == (n, 1 if per_channel else k // g)
    assert t["weight_scale"].is_contiguous() and t["weight"].is_contiguous()
    ours = int4_gemm.dequantize(inputs)  # fp32
    assert torch.equal(decode_uint4(t["weight"], t["weight_scale"]), ours), f"seed {s}"
    if g is None:  # random codes: -8 is there (humming keeps offset binary for it)
        assert int(unpack_words(t["weight"]).min()) == 0
    assert not torch.equal(inputs.w, formats.pack_int4(torch.zeros(k, n))), "the weights are not all zero"


def test_int4_decode_catches_a_wrong_conversion():
    inputs = int4_gemm.make_inputs(case(int4_gemm, (1, 256, 64), torch.bfloat16, CPU, group_size=64), seed())
    _, t = humming.int4_operands(inputs.w, inputs.scales, torch.bfloat16)
    ours = int4_gemm.dequantize(inputs)
    unshifted = inputs.w.view(torch.uint8).t().contiguous().view(torch.int32)  # signed nibbles, no + 8
    assert not torch.equal(decode_uint4(unshifted, t["weight_scale"]), ours)
    swapped = t["weight"].view(torch.uint8)
    swapped = ((swapped >> 4) | (swapped << 4)).view(torch.int32)  # odd k in the low nibble
    assert not torch.equal(decode_uint4(swapped, t["weight_scale"]), ours)


# ------------------------------------------------------------------ NVFP4


@pytest.mark.parametrize("shape,unscaled", [((1, 256, 40), False), ((1, 4112, 24), False), ((1, 128, 64), True)])
def test_nvfp4_operands_decode_to_our_weights(shape, unscaled):
    s = seed()
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, shape, torch.bfloat16, CPU, unscaled=unscaled), s)
    k, n = shape[1], shape[2]
    schema, t = humming.nvfp4_operands(inputs.w, inputs.block_scales, inputs.tensor_scale)
    assert schema == {"dtype": "float4e2m1", "scale_dtype": "float8e4m3", "group_size": 16, "scale_2_type": "tensor"}
    assert t["weight"].dtype == torch.int32 and t["weight"].shape == (n, k // 8)
    assert t["weight_scale"].dtype == torch.float8_e4m3fn and t["weight_scale"].shape == (n, k // 16)
    assert t["weight_scale_2"].dtype == torch.float32 and t["weight_scale_2"].shape == (1,)
    # The tensor scale goes through untouched (applied to the output), never folded into the E4M3 scales.
    assert torch.equal(t["weight_scale_2"].view(torch.int32), inputs.tensor_scale.reshape(1).view(torch.int32))
    codes = decode_e2m1(unpack_words(t["weight"]))  # [N, K]
    assert torch.equal(codes.t(), formats.decode_e2m1(formats.unpack_nibbles(inputs.w)))
    v_bs = (codes * t["weight_scale"].float().repeat_interleave(16, dim=1)).t()
    # code x block scale, what it dequantizes before the tensor scale: exactly ours with a tensor scale of 1.
    ones = torch.ones((), dtype=torch.float32)
    assert torch.equal(v_bs, formats.dequantize_nvfp4(inputs.w, inputs.block_scales, ones)), f"seed {s}"
    # Its dequantize_weight then multiplies by the tensor scale: (v * bs) * ts, ours v * (bs * ts):
    # one fp32 rounding apart.
    theirs = v_bs * t["weight_scale_2"]
    torch.testing.assert_close(theirs, nvfp4_gemm.dequantize(inputs), rtol=2.0**-23, atol=0)


# ------------------------------------------------------------------ why not


def test_humming_says_why_not(monkeypatch):
    assert humming.int4_why_not(case(int4_gemm, (1, 256, 64), torch.bfloat16, CPU)) == "needs a CUDA device"
    assert humming.nvfp4_why_not(case(nvfp4_gemm, (1, 256, 64), torch.bfloat16, CPU)) == "needs a CUDA device"
    cuda = torch.device("cuda", 0)  # why_not reads the case only, it never touches the device
    mk = lambda shape, g=128, dtype=torch.bfloat16: case(int4_gemm, shape, dtype, cuda, group_size=g)
    reason = humming.int4_why_not(mk((1, 4096, 4096)))
    if reason is not None:  # not installed here: it says so, with the install command
        assert "humming is not installed" in reason and "[peers]" in reason and "humming-kernels==0.1.19" in reason
    monkeypatch.setattr(humming, "missing", lambda package, install: None)  # as if installed
    for shape, g in (((1, 4096, 4096), 128), ((7, 5248, 1000), 64), ((1, 4096, 4096), 16), ((1, 4096, 4096), None),
                     ((1, 4096, 4096), "channel"), ((3, 4128, 8), "channel")):
        assert humming.int4_why_not(mk(shape, g)) is None, (shape, g)
    assert humming.int4_why_not(mk((1, 4096, 4096), 128, torch.float16)) is None
    assert "group size of K or a power of two >= 16, not 96" in humming.int4_why_not(mk((1, 4608, 4096), 96))
    assert "not 8" in humming.int4_why_not(mk((1, 4096, 4096), 8))
    assert "K % 8 == 0 and N % 8 == 0 (K=4096, N=37)" in humming.int4_why_not(mk((5, 4096, 37)))
    assert "K=4100" in humming.int4_why_not(mk((5, 4100, 64), "channel"))
    assert "K % 32 == 0 (K=4112)" in humming.int4_why_not(mk((3, 4112, 1000), "channel"))
    fp4 = lambda shape: case(nvfp4_gemm, shape, torch.bfloat16, cuda)
    assert humming.nvfp4_why_not(fp4((1, 4096, 4096))) is None
    assert "N=37" in humming.nvfp4_why_not(fp4((1, 4096, 37)))


def test_humming_is_a_registered_peer_of_both_weight_only_ops():
    from qgemm_bench.harness import ranking

    for op in ("int4_gemm", "nvfp4_gemm"):
        names = [b.name for b in registry.for_op(op)]
        assert "humming" in names
    assert "humming" in ranking.PEERS


# ------------------------------------------------------------------ on the GPU


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("shape", [(1, 8192, 8192), (16, 8192, 8192), (7, 5248, 1000)])
@pytest.mark.parametrize("group", [32, 128, "channel", None])
def test_humming_int4_on_gpu(shape, group):
    c = case(int4_gemm, shape, torch.bfloat16, CUDA, group_size=group)
    if reason := humming.int4_why_not(c):
        pytest.skip(reason)
    inputs = int4_gemm.make_inputs(c, seed())
    p = humming.prepare_int4(c, inputs)
    check(p.fn(), int4_gemm.reference(inputs), torch.bfloat16)
    x2 = torch.randn(3, shape[1], device=CUDA, dtype=torch.bfloat16)
    check(p.apply(x2), x2.float() @ int4_gemm.dequantize(inputs), torch.bfloat16)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("shape", [(1, 8192, 8192), (64, 8192, 8192), (3, 4112, 1000)])
def test_humming_nvfp4_on_gpu(shape):
    c = case(nvfp4_gemm, shape, torch.bfloat16, CUDA)
    if reason := humming.nvfp4_why_not(c):
        pytest.skip(reason)
    inputs = nvfp4_gemm.make_inputs(c, seed())
    check(humming.prepare_nvfp4(c, inputs).fn(), nvfp4_gemm.reference(inputs), torch.bfloat16)


def test_check_script_fails_in_one_line(capsys):
    from tests.support import load_script

    script = load_script("check_humming")
    assert script.main(["--groups", "128,96x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'96x'" in err
    assert script.main(["--backends", "humming,nope"]) == 2
    assert "unknown backend 'nope'" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert script.main(["--op", "nvfp4_gemm"]) == 1
        assert capsys.readouterr().err == "check_humming: needs a CUDA GPU\n"
