"""The packed-PTX decodes evaluated on the CPU (the interpreter cannot run
inline PTX): a small evaluator of the few instructions they use, over every
pair of bytes in both 16-bit lanes. NVFP4_SPLIT_SHORT_BF16X2_PTX (fused_gemm's
SHORT_DECODE) must give NVFP4_SPLIT_BF16X2_PTX's bits before each fma and the
same scale operand, so its values are those the GPU runs checked."""

import numpy as np
import pytest

from qgemm_bench.backends.triton_kernels import decode

MASK = np.uint64(0xFFFFFFFF)


def lop3(a, b, c, lut: int):
    """PTX lop3.b32: bit i of the result is bit (a_i b_i c_i as a 3-bit index) of lut."""
    out = np.zeros_like(a)
    for idx in range(8):
        if lut >> idx & 1:
            term = MASK
            for bit, v in ((4, a), (2, b), (1, c)):
                term = term & (v if idx & bit else ~v & MASK)
            out |= term
    return out


def prmt(a, b, sel: int):
    """PTX prmt.b32 (default mode): byte i of the result is byte sel's nibble i of {b, a}."""
    out = np.zeros_like(a)
    for i in range(4):
        s = sel >> (4 * i) & 0xF
        src = a if s & 7 < 4 else b
        byte = src >> np.uint64(8 * (s & 3)) & np.uint64(0xFF)
        if s & 8:  # sign-replicate mode
            byte = np.where(byte & np.uint64(0x80), np.uint64(0xFF), np.uint64(0))
        out |= byte << np.uint64(8 * i)
    return out


def run(ptx: str, w):
    """The PTX body on uint32 words w ($4); the scale operands stay names:
    returns, for $0..$3, (the bits fma.rn.bf16x2 multiplies, its scale operand)."""
    env = {"$4": w}
    for line in ptx.replace("{", "").replace("}", "").split(";"):
        line = line.strip()
        if not line or line.startswith(".reg"):
            continue
        op, rest = line.split(None, 1)
        d, *args = [a.strip() for a in rest.split(",")]

        def val(x):
            return env[x] if x in env else np.uint64(int(x, 0)) & MASK

        if op == "mov.b32":
            env[d] = np.full_like(w, val(args[0]))
        elif op == "prmt.b32":
            env[d] = prmt(val(args[0]), val(args[1]), int(args[2], 0))
        elif op == "shr.u32":
            env[d] = val(args[0]) >> np.uint64(int(args[1]))
        elif op == "shl.b32":
            env[d] = val(args[0]) << np.uint64(int(args[1])) & MASK
        elif op == "shf.r.wrap.b32":  # funnel shift right of {b, a}: with a = b, a rotate
            n = np.uint64(int(args[2]) & 31)
            env[d] = (val(args[1]) << np.uint64(32) | val(args[0])) >> n & MASK
        elif op == "and.b32":
            env[d] = val(args[0]) & val(args[1])
        elif op == "lop3.b32":
            env[d] = lop3(val(args[0]), val(args[1]), val(args[2]), int(args[3], 0))
        elif op == "fma.rn.bf16x2":
            assert args[2] == "z" and d == args[0], line  # x * scale + (-0): the product's operands
            env[d] = (val(args[0]), args[1])
        else:
            raise AssertionError(f"no evaluator for {op}")
    return [env[f"${i}"] for i in range(4)]


def every_byte_pair():
    """Every pair of bytes in lanes (0, 1) and in lanes (2, 3), the other two random (seed 0)."""
    pairs = np.arange(1 << 16, dtype=np.uint64)
    other = np.random.default_rng(0).integers(0, 1 << 16, size=pairs.size).astype(np.uint64)
    return np.concatenate([pairs | other << np.uint64(16), other | pairs << np.uint64(16)])


def same(got, want) -> bool:
    return all(np.array_equal(g[0], r[0]) and g[1] == r[1] for g, r in zip(got, want, strict=True))


def test_the_short_nvfp4_decode_is_the_split_one_bit_for_bit():
    w = every_byte_pair()
    want = run(decode.NVFP4_SPLIT_BF16X2_PTX, w)
    assert same(run(decode.NVFP4_SPLIT_SHORT_BF16X2_PTX, w), want)
    assert decode.NVFP4_SPLIT_SHORT_BF16X2_PTX.count("fma.rn.bf16x2") == 4
    # 18 instructions per 4 bytes against 22 (the mov of a constant aside)
    count = [p.count(";") - 1 - p.count("mov.b32") for p in (decode.NVFP4_SPLIT_SHORT_BF16X2_PTX,
                                                             decode.NVFP4_SPLIT_BF16X2_PTX)]
    assert count == [18, 22]


@pytest.mark.parametrize(("old", "new"), [("0x81C081C0", "0x83C081C0"), ("0x1404", "0x1400"), ("b, t0, 4", "b, t0, 3")])
def test_the_evaluator_catches_a_changed_short_decode(old, new):
    w = every_byte_pair()
    assert not same(run(decode.NVFP4_SPLIT_SHORT_BF16X2_PTX.replace(old, new, 1), w),
                    run(decode.NVFP4_SPLIT_BF16X2_PTX, w))


def test_the_split_decode_matches_the_e2m1_values():
    # The split PTX's bits read as bf16 are each code's value x 2^-126 (bits 6-8 the magnitude, 15 the sign):
    # the evaluator's own reference, so a test of the SHORT one against it means the values, not only a match.
    from qgemm_bench.operators.formats import E2M1_VALUES

    w = every_byte_pair()[: 1 << 16]
    lo_t0 = run(decode.NVFP4_SPLIT_BF16X2_PTX, w)[0][0]  # bytes 0 and 1, low nibbles
    for lane, byte in ((0, w & np.uint64(0xFF)), (16, w >> np.uint64(8) & np.uint64(0xFF))):
        bits = (lo_t0 >> np.uint64(lane) & np.uint64(0xFFFF)).astype(np.uint32) << 16
        got = bits.view(np.float32) * np.float32(2.0**126)
        code = (byte & np.uint64(0xF)).astype(int)
        want = np.where(code & 8, -1.0, 1.0).astype(np.float32) * np.asarray(E2M1_VALUES, dtype=np.float32)[code & 7]
        assert np.array_equal(got, want)


def test_the_rotate_decode_of_permuted_words_is_the_split_one_bit_for_bit():
    # fused_gemm's ROT_DECODE: the host permutes each word's bits once (decode.nvfp4_rot_words), the PTX then
    # needs 13 instructions per 8 codes, not 22, for the same bits before each fma and the same scale operands.
    import torch

    w = every_byte_pair()
    b = torch.from_numpy(w.astype(np.uint32).view(np.uint8).copy())  # little-endian words as 4 bytes each
    r = decode.nvfp4_rot_words(b).numpy().view(np.uint32).astype(np.uint64)
    assert same(run(decode.NVFP4_ROT_BF16X2_PTX, r), run(decode.NVFP4_SPLIT_BF16X2_PTX, w))
    assert decode.NVFP4_ROT_BF16X2_PTX.count(";") - 1 - decode.NVFP4_ROT_BF16X2_PTX.count("mov.b32") == 13
    # a bit permutation: every word bit taken once
    assert sorted(decode.rot_bit(j, h, bit) for j in range(4) for h in range(2) for bit in range(4)) == list(range(32))
    t = torch.randint(0, 256, (3, 8), dtype=torch.uint8, generator=torch.Generator().manual_seed(41))
    assert decode.nvfp4_rot_words(t).shape == (3, 8)


@pytest.mark.parametrize(("old", "new"), [("$4, $4, 10", "$4, $4, 11"), ("0x81808180", "0x81C08180"),
                                          ("$2, $2, $7", "$2, $2, $5")])
def test_the_evaluator_catches_a_changed_rotate_decode(old, new):
    import torch

    w = every_byte_pair()
    r = decode.nvfp4_rot_words(torch.from_numpy(w.astype(np.uint32).view(np.uint8).copy()))
    r = r.numpy().view(np.uint32).astype(np.uint64)
    assert not same(run(decode.NVFP4_ROT_BF16X2_PTX.replace(old, new, 1), r), run(decode.NVFP4_SPLIT_BF16X2_PTX, w))


def test_rotate_words_refuses_what_is_not_whole_words():
    import torch

    with pytest.raises(ValueError, match="whole 4-byte words"):
        decode.nvfp4_rot_words(torch.zeros(2, 6, dtype=torch.uint8))
