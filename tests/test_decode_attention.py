"""The split-KV decode attention kernel (backends/triton_kernels/
decode_attention.py) against fp64 softmax attention over the same cache
slots: GQA groups of 1, 4 and 8, ragged cache lengths and positions
(position 0, mid-block, the last slot), one split, many, and splits past the
position left empty; the counters left zeroed for the next launch."""

import math

import pytest
import torch

from tests.support import DEV, DT, TOL, seed


def reference(q, k, v, pos: int, scale: float) -> torch.Tensor:
    """fp64 attention of q [B, H, D] over k, v [B, H_kv, L, D] slots 0..pos."""
    b, h, d = q.shape
    g = h // k.shape[1]
    kk = k[:, :, :pos + 1].double().repeat_interleave(g, dim=1)
    vv = v[:, :, :pos + 1].double().repeat_interleave(g, dim=1)
    p = torch.softmax(torch.einsum("bhd,bhld->bhl", q.double(), kk) * scale, dim=-1)
    return torch.einsum("bhl,bhld->bhd", p, vv)


def run(b, h, hkv, slots, d, pos, splits=None, block_n=16, dtype=DT, s=None):
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    s = seed() if s is None else s
    g = torch.Generator().manual_seed(s)
    q, k, v = (torch.randn(*shape, generator=g).to(DEV, dtype)
               for shape in ((b, h, d), (b, hkv, slots, d), (b, hkv, slots, d)))
    k[:, :, pos + 1:] = 1e4  # slots past the position hold stale K/V that must not count
    scale = 1 / math.sqrt(d)
    out = kernel.decode_attention(q, k, v, torch.tensor([pos], device=DEV), scale, sms=8, block_n=block_n,
                                  splits=splits)
    ref = reference(q, k, v, pos, scale)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert out.shape == (b, h, d) and out.dtype == dtype
    assert err < TOL.get(dtype, 1e-5), f"seed {s}: rel err {err:.3g}"
    return out


# (B, H, H_kv, slots, D, pos, splits): GQA 4 (Llama-3-8B's), 8, MHA; position 0, mid-block, the last slot;
# splits None = splits_for (sms 8), one, more than the blocks (some past the position, empty).
@pytest.mark.parametrize("b,h,hkv,slots,d,pos,splits", [
    (1, 8, 2, 100, 32, 70, None), (2, 8, 2, 100, 32, 0, None), (2, 16, 2, 37, 64, 36, None),
    (1, 4, 4, 50, 16, 49, 1), (3, 8, 2, 64, 32, 20, 3), (1, 8, 1, 96, 32, 33, 6)])
def test_decode_attention_matches_fp64(b, h, hkv, slots, d, pos, splits):
    run(b, h, hkv, slots, d, pos, splits)


def test_a_pdl_step_s_launch_matches_fp64():
    """Inside a --pdl step (chained_pdl) the kernel launches with PDL on CUDA,
    waiting before its first load: still the fp64 answer."""
    from qgemm_bench.backends.triton_kernels import split_k_parts

    assert not split_k_parts.chained()
    with split_k_parts.chained_pdl():
        assert split_k_parts.chained()
        run(2, 8, 2, 100, 32, 70, splits=4)
    assert not split_k_parts.chained()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Llama's rotary embedding in fp64 (transformers' apply_rotary_pos_emb)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


# (B, H, H_kv, slots, D, pos, splits): the slot in the first, a middle and the last split, the first and last
# slots, one split; the cache's count starting elsewhere (it is set, not added to).
@pytest.mark.parametrize("b,h,hkv,slots,d,pos,splits", [
    (1, 8, 2, 100, 32, 70, None), (2, 8, 2, 100, 32, 0, 3), (2, 16, 2, 37, 64, 36, None),
    (1, 4, 4, 50, 16, 49, 1), (3, 8, 2, 64, 32, 21, 3), (1, 8, 1, 96, 32, 32, 6)])
def test_rotary_and_cache_write_in_the_kernel_match_fp64(b, h, hkv, slots, d, pos, splits, block_n=16):
    """rope=(...): q and the new key rotated in the kernel, the new K/V
    written at slot pos (the rest of the cache untouched), the cache's count
    set to pos + 1, and the attention over slots 0..pos, new one included:
    fp64's, the written key to its dtype's rounding."""
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    s = seed()
    g = torch.Generator().manual_seed(s)
    q, k, v = (torch.randn(*shape, generator=g).to(DEV, DT)
               for shape in ((b, h, d), (b, hkv, slots, d), (b, hkv, slots, d)))
    k_new, v_new = (torch.randn(b, hkv, d, generator=g).to(DEV, DT) for _ in range(2))
    k[:, :, pos:] = 1e4  # stale: the slot must be overwritten, those after it not read
    angle = pos / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    cos, sin = (f(torch.cat((angle, angle))).repeat(b, 1).to(DEV, DT) for f in (torch.cos, torch.sin))
    length = torch.tensor([123], device=DEV)
    k0, v0 = k.clone(), v.clone()
    scale = 1 / math.sqrt(d)
    out = kernel.decode_attention(q, k, v, torch.tensor([pos], device=DEV), scale, sms=8, block_n=block_n,
                                  splits=splits, rope=(k_new, v_new, cos, sin, length))
    c, sn = cos.double()[:, None], sin.double()[:, None]
    want_k = rotate(k_new.double(), c, sn)
    assert (k[:, :, pos].double() - want_k).abs().max() <= 2 * torch.finfo(DT).eps * want_k.abs().max()
    assert torch.equal(v[:, :, pos], v_new) and int(length) == pos + 1, f"seed {s}"
    others = [i for i in range(slots) if i != pos]
    assert torch.equal(k[:, :, others], k0[:, :, others]) and torch.equal(v[:, :, others], v0[:, :, others])
    kk, vv = k0.double(), v0.double()
    kk[:, :, pos], vv[:, :, pos] = want_k, v_new.double()
    ref = reference(rotate(q.double(), c, sn), kk, vv, pos, scale)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < TOL[DT], f"seed {s}: rel err {err:.3g}"


@pytest.mark.parametrize("b,hkv,pos", [(1, 2, 200), (3, 8, 130)])
def test_rotary_and_cache_write_at_the_launch_s_own_block(b, hkv, pos):
    """The same at block_for's 128-slot (1 x 2 pairs) and 64-slot (3 x 8)
    steps, the token's slot inside a split's second block: on CUDA the
    slot is written, then read back past the barrier by the same program."""
    test_rotary_and_cache_write_in_the_kernel_match_fp64(b, 4 * hkv, hkv, 300, 32, pos, None, block_n=None)


def test_bad_rope_inputs_are_refused():
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    q, k = torch.zeros(2, 8, 32, device=DEV, dtype=DT), torch.zeros(2, 2, 40, 32, device=DEV, dtype=DT)
    kn, cs, n = torch.zeros(2, 2, 32, device=DEV, dtype=DT), torch.zeros(2, 32, device=DEV, dtype=DT), \
        torch.zeros(1, device=DEV, dtype=torch.int64)
    for bad, says in (((kn[:1], kn, cs, cs, n), "k_new"), ((kn, kn, cs[:, :16], cs, n), "cos and sin"),
                      ((kn, kn, cs, cs, n.float()), "length")):
        with pytest.raises(ValueError, match=says):
            kernel.decode_attention(q, k, k, torch.tensor([3], device=DEV), 0.1, sms=8, rope=bad)


def test_few_pairs_take_128_slot_steps_and_the_default_matches_fp64():
    """block_for: 128-slot steps up to FEW_PAIRS (b, h_kv) pairs of rows up
    to 256 bytes, 64 beyond; the launch's default takes it (here 1 x 2
    pairs: 128, over 3 splits)."""
    from qgemm_bench.backends.triton_kernels.decode_attention import FEW_PAIRS, block_for

    assert block_for(1, 8, 256) == 128 and block_for(2, 8, 256) == 128 and block_for(16, 8, 256) == 64
    assert block_for(1, FEW_PAIRS, 256) == 128 and block_for(1, FEW_PAIRS + 1, 256) == 64
    assert block_for(1, 8, 512) == 64  # float32 (or head dim 256): 128-slot stages would not fit
    run(1, 8, 2, 300, 32, 290, splits=3, block_n=None)


def test_more_pairs_than_a_launch_takes_are_refused():
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    q, k = torch.zeros(70_000, 1, 16, device=DEV, dtype=DT), torch.zeros(70_000, 1, 1, 16, device=DEV, dtype=DT)
    with pytest.raises(ValueError, match="more pairs than a launch takes"):
        kernel.decode_attention(q, k, k, torch.tensor([0], device=DEV), 0.1, sms=8)


def test_float32_operands_keep_float32():
    """A float32 model's attention: the dots in IEEE float32, not TF32."""
    run(2, 8, 2, 90, 32, 77, splits=3, dtype=torch.float32)


def test_counters_are_left_zeroed_and_a_second_launch_agrees():
    """The merge's counters live across launches (a CUDA graph replays them):
    each launch's last programs zero them, so the next launch merges right."""
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    s = seed()
    a = run(2, 8, 2, 80, 32, 61, splits=4, s=s)
    assert all(int(c.abs().sum()) == 0 for _, _, c in kernel._WORKSPACES.values())
    assert torch.equal(run(2, 8, 2, 80, 32, 61, splits=4, s=s), a)


@pytest.mark.parametrize("bad, says", [
    (dict(k=(1, 3, 40, 32)), "query heads over 3 KV heads"), (dict(d=24), "power of two"),
    (dict(v=(1, 2, 41, 32)), "must be [B, H_kv, L, 32]"), (dict(pos=[1, 2]), "1-element")])
def test_bad_operands_are_refused(bad, says):
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    d = bad.get("d", 32)
    q = torch.zeros(1, 8, d, device=DEV, dtype=DT)
    k = torch.zeros(*bad.get("k", (1, 2, 40, d)), device=DEV, dtype=DT)
    v = torch.zeros(*bad.get("v", k.shape), device=DEV, dtype=DT)
    with pytest.raises(ValueError, match=says.replace("[", r"\[").replace("]", r"\]")):
        kernel.decode_attention(q, k, v, torch.tensor(bad.get("pos", [3]), device=DEV), 0.1, sms=8)


@pytest.mark.skipif(DEV.type == "cuda", reason="the interpreter's limit")
def test_bfloat16_on_the_interpreter_is_refused():
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    q, k = torch.zeros(1, 8, 32, dtype=torch.bfloat16), torch.zeros(1, 2, 40, 32, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="no bfloat16"):
        kernel.decode_attention(q, k, k, torch.tensor([3]), 0.1, sms=8)


def test_splits_fill_the_sms_with_a_block_each_at_least():
    from qgemm_bench.backends.triton_kernels.decode_attention import splits_for

    assert splits_for(1, 8, 640, 132, 64) == 10  # 17 wanted, 10 blocks of slots
    assert splits_for(1, 8, 4096, 132, 64) == 17
    assert splits_for(16, 8, 4096, 132, 64) == 2 and splits_for(64, 8, 4096, 132, 64) == 1
