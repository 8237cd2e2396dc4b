"""The canonical formats, against hand-worked values and independent numpy code."""

import numpy as np
import pytest
import torch

from qgemm_bench.errors import FormatError
from qgemm_bench.operators import formats
from tests.support import E2M1, np_unpack

# ------------------------------------------------------------------ int4


def test_int4_pack_hand_worked_bytes():
    # k0 = 1 (low nibble), k1 = -2 (high nibble 0xE): 0xE1 = -31 as int8.
    # k2 = -8 (0x8), k3 = 7 (0x7): 0x78 = 120.
    q = torch.tensor([[1], [-2], [-8], [7]])
    packed = formats.pack_int4(q)
    assert packed.dtype == torch.int8
    assert packed.flatten().tolist() == [-31, 120]
    assert formats.unpack_int4(packed).flatten().tolist() == [1, -2, -8, 7]


def test_int4_unpack_matches_independent_unpack_all_bytes():
    packed = torch.arange(-128, 128, dtype=torch.int8).reshape(64, 4)
    codes = np_unpack(packed.numpy().view(np.uint8))
    expected = np.where(codes >= 8, codes - 16, codes)
    assert np.array_equal(formats.unpack_int4(packed).numpy(), expected)


def test_int4_quantize_hand_worked_group():
    # One group of 4 in one column: absmax 3.5 -> scale 0.5 (exact in bf16);
    # 3.5/0.5 = 7, -1.25/0.5 = -2.5 -> -2 (ties to even), 0.25/0.5 = 0.5 -> 0,
    # 0.75/0.5 = 1.5 -> 2.
    w = torch.tensor([[3.5], [-1.25], [0.25], [0.75]])
    packed, scales = formats.quantize_int4(w, 4)
    assert scales.dtype == torch.bfloat16 and scales.flatten().tolist() == [0.5]
    assert formats.unpack_int4(packed).flatten().tolist() == [7, -2, 0, 2]
    assert formats.dequantize_int4(packed, scales, 4).flatten().tolist() == [3.5, -1.0, 0.0, 1.0]


def test_int4_zero_group_has_zero_scale_and_values():
    w = torch.zeros(8, 3)
    w[4:, 1] = torch.tensor([1.0, -2.0, 0.5, 7.0])  # second group of column 1 only
    packed, scales = formats.quantize_int4(w, 4)
    assert scales[0].tolist() == [0.0, 0.0, 0.0] and scales[1, 0] == 0
    deq = formats.dequantize_int4(packed, scales, 4)
    assert torch.all(deq[:4] == 0) and torch.all(deq[:, 0] == 0)
    assert deq[4:, 1].tolist() == [1.0, -2.0, 0.0, 7.0]  # 0.5/1 rounds to 0 (tie to even)


def test_int4_unscaled_rounds_and_clamps():
    w = torch.tensor([[-9.2], [7.6], [2.5], [-0.5]])
    packed, scales = formats.quantize_int4(w, None)
    assert scales is None
    assert formats.unpack_int4(packed).flatten().tolist() == [-8, 7, 2, 0]


@pytest.mark.parametrize("group", [32, 64, 128, 256])
def test_int4_round_trip_error_bounded_by_half_scale(group):
    k, n = 512, 24
    w = torch.randn(k, n) * torch.rand(1, n) * 5
    packed, scales = formats.quantize_int4(w, group, scale_dtype=torch.float16)
    deq = formats.dequantize_int4(packed, scales, group)
    half = scales.float().repeat_interleave(group, dim=0) / 2
    # half a step, plus the slack of the fp16-rounded scale at |q| = 7
    assert torch.all((deq - w).abs() <= half * (1 + 2**-9) + 1e-6)


def test_int4_requantizing_dequantized_weights_is_identity():
    k, n, g = 256, 16, 64
    q = torch.randint(-7, 8, (k, n))
    q[::g] = 7  # every group reaches |q| = 7, so absmax / 7 gives back the scale
    scales = torch.rand(k // g, n).add(0.1).to(torch.bfloat16)
    w = formats.dequantize_int4(formats.pack_int4(q), scales, g)
    packed, scales2 = formats.quantize_int4(w, g)
    assert torch.equal(scales2, scales)
    assert torch.equal(formats.unpack_int4(packed), q.to(torch.int8))


def test_int4_per_channel_is_one_group_of_k():
    w = torch.randn(128, 5)
    packed, scales = formats.quantize_int4(w, 128)
    assert scales.shape == (1, 5)
    assert torch.allclose(scales.float(), (w.abs().amax(0) / 7).to(torch.bfloat16).float()[None])


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_quantizers_refuse_non_finite(bad):
    w = torch.randn(32, 4)
    w[3, 2] = bad
    with pytest.raises(FormatError, match="NaN or inf"):
        formats.quantize_int4(w, 16)
    with pytest.raises(FormatError, match="NaN or inf"):
        formats.quantize_nvfp4(w)


def test_int4_refuses_bad_shapes():
    with pytest.raises(FormatError, match="odd"):
        formats.quantize_int4(torch.randn(7, 4), None)
    with pytest.raises(FormatError, match="not divisible by group_size"):
        formats.quantize_int4(torch.randn(96, 4), 64)
    with pytest.raises(FormatError, match="must lie in"):
        formats.pack_int4(torch.tensor([[8], [0]]))


# ------------------------------------------------------------------ NVFP4


def test_e2m1_decode_all_codes():
    vals = formats.decode_e2m1(torch.arange(16, dtype=torch.uint8))
    assert vals.tolist() == E2M1 + [-v for v in E2M1]
    assert torch.signbit(vals[8])  # code 8 is negative zero


def test_e2m1_encode_rounds_to_nearest_even_and_saturates():
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.26, 2.9, 7.0, 1e9, -7.0, -1.6])
    expected = [0, 2, 2, 4, 4, 6, 6, 1, 5, 7, 7, 15, 11]
    assert formats.encode_e2m1(x).tolist() == expected


def test_e2m1_encode_every_value_exactly():
    vals = torch.tensor(E2M1 + [-v for v in E2M1])
    codes = formats.encode_e2m1(vals)
    assert codes.tolist() == list(range(16))


def test_nvfp4_negative_zero():
    x = torch.tensor([-0.0, -0.1, 0.0])
    codes = formats.encode_e2m1(x)
    assert codes.tolist() == [8, 8, 0]
    vals = formats.decode_e2m1(codes)
    assert vals.tolist() == [0.0, 0.0, 0.0] and torch.signbit(vals[:2]).all()


def test_nvfp4_block_with_max_6x448_is_exact():
    # The tensor's absmax is 6 * 448, so the tensor scale is exactly 1 and this
    # block's scale is 448 (E4M3's largest finite value); all values are
    # 448 * an E2M1 value, so they encode exactly.
    col = torch.tensor([6, -3, 1.5, 0, 0.5, -6, 4, 2, 1, -0.5, 3, -1, -1.5, -2, -4, 0]) * 448
    w = col[:, None].repeat(1, 2)
    w[:, 1] /= 64  # a second column with block scale 7 (448 / 64), also exact
    packed, bs, ts = formats.quantize_nvfp4(w)
    assert ts.item() == 1.0
    assert bs.float()[0].tolist() == [448.0, 7.0]
    codes = formats.unpack_nibbles(packed)[:, 0].tolist()
    assert codes == [7, 13, 3, 0, 1, 15, 6, 4, 2, 9, 5, 10, 11, 12, 14, 0]
    assert torch.equal(formats.dequantize_nvfp4(packed, bs, ts), w)


def test_nvfp4_zero_block():
    w = torch.randn(48, 3)
    w[16:32, 1] = 0.0
    packed, bs, ts = formats.quantize_nvfp4(w)
    assert bs.float()[1, 1] == 0
    assert torch.all(formats.unpack_nibbles(packed)[16:32, 1] == 0)
    assert torch.all(formats.dequantize_nvfp4(packed, bs, ts)[16:32, 1] == 0)


def test_nvfp4_all_zero_weight():
    packed, bs, ts = formats.quantize_nvfp4(torch.zeros(32, 4))
    assert ts.item() == 1.0 and torch.all(bs.float() == 0)
    assert torch.all(formats.dequantize_nvfp4(packed, bs, ts) == 0)


def test_nvfp4_dequantize_matches_independent_numpy():
    w = torch.randn(64, 9) * 3
    packed, bs, ts = formats.quantize_nvfp4(w)
    codes = np_unpack(packed.numpy())
    mag = np.array(E2M1, dtype=np.float64)[codes & 7]
    vals = np.where(codes >= 8, -mag, mag)
    scale = np.repeat(bs.float().numpy().astype(np.float64), 16, axis=0) * float(ts)
    expected = vals * scale
    got = formats.dequantize_nvfp4(packed, bs, ts).double().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=0)
    # quantization error: within half the largest E2M1 gap (1.0) of each block's scale
    assert np.all(np.abs(got - w.double().numpy()) <= scale + 1e-9)


def test_nvfp4_round_trip_of_representable_weights():
    """Weights built from codes and E4M3 block scales, every block reaching
    code 7 (6.0) and one scale at 448 (so the tensor scale is 1), quantize back
    to exactly those codes and scales (negative zeros included)."""
    k, n = 128, 12
    codes = torch.randint(0, 16, (k, n), dtype=torch.uint8)
    codes[::16] = 7
    bs = torch.rand(k // 16, n).mul(448).to(torch.float8_e4m3fn)
    bs[0, 0] = 448.0
    ts = torch.tensor(1.0)
    w = formats.dequantize_nvfp4(formats.pack_nibbles(codes), bs, ts)
    packed, bs2, ts2 = formats.quantize_nvfp4(w)
    assert ts2.item() == 1.0
    assert torch.equal(bs2.view(torch.uint8), bs.view(torch.uint8))
    nonzero_scale = (bs.float() > 0).repeat_interleave(16, dim=0)
    assert torch.equal(formats.unpack_nibbles(packed)[nonzero_scale], codes[nonzero_scale])


def test_nvfp4_refuses_k_not_multiple_of_16():
    with pytest.raises(FormatError, match="block size 16"):
        formats.quantize_nvfp4(torch.randn(40, 4))


def test_nibble_round_trip_random():
    codes = torch.randint(0, 16, (64, 33), dtype=torch.uint8)
    assert torch.equal(formats.unpack_nibbles(formats.pack_nibbles(codes)), codes)
