"""Our Triton kernels against fp64 references, on ragged shapes, with explicit
configs (CPU: the Triton interpreter in fp16; tests/conftest.py sets it)."""

import numpy as np
import pytest
import torch

from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, DETERMINISTIC, SplitKGemm
from qgemm_bench.backends.triton_kernels.weight_only import INT4, NVFP4, WeightOnlyGemm, weight_only_gemm
from qgemm_bench.operators import formats, int4_gemm, nvfp4_gemm, split_k_gemm
from qgemm_bench.operators.common import Case, Shape, rel_error

DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
DT = torch.bfloat16 if DEV.type == "cuda" else torch.float16


def cfg(bm=16, bn=32, bk=64, split=1, **flags):
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split, "num_warps": 4, "num_stages": 1, **flags}


def fp64_ref(x, w_deq):
    return x.double() @ w_deq.double()


def check(out, ref, dtype=DT):
    assert out.dtype == dtype and out.shape == ref.shape
    assert torch.isfinite(out).all()
    err = rel_error(out, ref)
    assert err <= {torch.float16: 3e-3, torch.bfloat16: 1e-2}[dtype], err


# The packed-PTX decodes (DECODE_ASM) exist on the GPU only, for bf16.
ASM = [True] if DEV.type == "cuda" else []
SHAPES = [(1, 128, 40), (3, 384, 96), (17, 384, 37), (80, 128, 96)]  # M=80 takes the tiled path


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("group", [32, 64, 128, "channel", None])
@pytest.mark.parametrize("config", [cfg(bk=64, split=1), cfg(bn=64, bk=128, split=2), cfg(bk=32, split=3)] +
                         [cfg(bk=32, split=3, DECODE_ASM=a) for a in ASM])
def test_int4_kernel_vs_fp64(shape, group, config):
    c = Case("int4_gemm", Shape(*shape), DT, DEV, {"group_size": group})
    inputs = int4_gemm.make_inputs(c, seed=np.random.randint(1 << 30))
    g = inputs["group_size"]
    out = weight_only_gemm(inputs["x"], inputs["w"], inputs["scales"], None, INT4, g or 2, config)
    check(out, fp64_ref(inputs["x"], int4_gemm.dequantize(inputs)))


@pytest.mark.parametrize("group,bk", [(96, 64), (96, 128), (2, 32), (32, 128), (384, 256)])
def test_int4_kernel_any_group_vs_block(group, bk):
    # Groups that split a K block, span blocks, or neither (96 vs 64: scales per element).
    c = Case("int4_gemm", Shape(5, 384, 40), DT, DEV, {"group_size": group})
    inputs = int4_gemm.make_inputs(c, seed=np.random.randint(1 << 30))
    out = weight_only_gemm(inputs["x"], inputs["w"], inputs["scales"], None, INT4, group, cfg(bk=bk, split=2))
    check(out, fp64_ref(inputs["x"], int4_gemm.dequantize(inputs)))


@pytest.mark.parametrize("shape", [(1, 64, 40), (3, 160, 96), (17, 384, 37), (80, 128, 48)])
@pytest.mark.parametrize("unscaled", [False, True])
@pytest.mark.parametrize("config", [cfg(bk=32, split=1), cfg(bn=64, bk=128, split=2)] +
                         [cfg(bk=32, split=2, DECODE_ASM=a) for a in ASM])
def test_nvfp4_kernel_vs_fp64(shape, unscaled, config):
    c = Case("nvfp4_gemm", Shape(*shape), DT, DEV, {"unscaled": unscaled})
    inputs = nvfp4_gemm.make_inputs(c, seed=np.random.randint(1 << 30))
    out = weight_only_gemm(inputs["x"], inputs["w"], inputs["block_scales"].view(torch.uint8),
                           inputs["tensor_scale"], NVFP4, 16, config)
    check(out, fp64_ref(inputs["x"], nvfp4_gemm.dequantize(inputs)))


def test_nvfp4_kernel_decodes_every_code_and_subnormal_scales():
    # Every E2M1 code in every row, block scales down to E4M3 subnormals.
    k, n = 32, 16
    codes = torch.arange(16, dtype=torch.uint8).repeat(2)[:, None].expand(k, n).contiguous()
    bs = torch.tensor([0x01, 0x07, 0x08, 0x38, 0x7E] * 7, dtype=torch.uint8)[:2 * n].reshape(2, n)
    inputs = {"x": torch.eye(k, dtype=DT, device=DEV),  # y = the dequantized weight itself
              "w": formats.pack_nibbles(codes).to(DEV), "block_scales": bs.view(torch.float8_e4m3fn).to(DEV),
              "tensor_scale": torch.tensor(0.5, device=DEV)}
    for flags in [{}] + [{"DECODE_ASM": a} for a in ASM]:
        out = weight_only_gemm(inputs["x"], inputs["w"], bs.to(DEV), inputs["tensor_scale"], NVFP4, 16,
                               cfg(bk=32, **flags))
        assert torch.equal(out.float(), nvfp4_gemm.dequantize(inputs).to(DT).float()), flags


def _operands(op, shape, settings, seed):
    """(WeightOnlyGemm's operands, the fp64 reference, the dequantized weights)."""
    mod = int4_gemm if op == "int4_gemm" else nvfp4_gemm
    inputs = mod.make_inputs(Case(op, Shape(*shape), DT, DEV, settings), seed)
    w_deq = mod.dequantize(inputs)
    if op == "int4_gemm":
        args = (inputs["x"], inputs["w"], inputs["scales"], None, INT4, inputs["group_size"] or 2)
    else:
        args = (inputs["x"], inputs["w"], inputs["block_scales"].view(torch.uint8), inputs["tensor_scale"], NVFP4, 16)
    return args, fp64_ref(inputs["x"], w_deq), w_deq


@pytest.mark.parametrize("path", ["split", "tiled", "dequant"])
@pytest.mark.parametrize("op,settings", [("int4_gemm", {"group_size": 64}), ("int4_gemm", {"group_size": None}),
                                         ("nvfp4_gemm", {"unscaled": False})])
@pytest.mark.parametrize("shape", [(3, 384, 40), (19, 192, 37)])
def test_every_path_vs_fp64_and_repeatable(path, op, settings, shape):
    args, ref, _ = _operands(op, shape, settings, np.random.randint(1 << 30))
    gemm = WeightOnlyGemm(*args, config=cfg(bn=32, bk=32, split=3), path=path)
    check(gemm(), ref)
    check(gemm(), ref)  # the split path left its workspace and counters ready for the next call
    if path == "split":
        assert float(gemm.ws.abs().sum()) == 0.0 and int(gemm.count.abs().sum()) == 0


@pytest.mark.parametrize("op,m,path", [("int4_gemm", 64, "split"), ("int4_gemm", 65, "tiled"),
                                       ("int4_gemm", 256, "dequant"), ("nvfp4_gemm", 64, "split"),
                                       ("nvfp4_gemm", 65, "dequant")])
def test_auto_path_by_m_and_format(op, m, path):
    # The measured crossovers (weight_only.DEQUANT_MIN_M): NVFP4's tiled path never won.
    args, ref, _ = _operands(op, (m, 64, 32), {"group_size": 32} if op == "int4_gemm" else {}, 0)
    gemm = WeightOnlyGemm(*args, config=cfg(bm=64, bn=32, bk=32, split=2))
    assert gemm.path == path
    check(gemm(), ref)


@pytest.mark.parametrize("op,settings", [("nvfp4_gemm", {"unscaled": False}), ("int4_gemm", {"group_size": 32})])
def test_dequantize_matches_the_formats_module(op, settings):
    args, _, w_deq = _operands(op, (2, 96, 24), settings, 1)
    assert torch.equal(WeightOnlyGemm(*args, path="dequant").dequantize(), w_deq.to(DT))


@pytest.mark.parametrize("kw,message", [({"path": "fast"}, "path 'fast'"),
                                        ({"config": cfg(bn=16)}, "at least 16 x 32")])
def test_weight_only_refuses_bad_options(kw, message):
    args, _, _ = _operands("int4_gemm", (2, 64, 32), {"group_size": 32}, 0)
    with pytest.raises(ValueError, match=message):
        WeightOnlyGemm(*args, **kw)


@pytest.mark.parametrize("mode", [ATOMIC, DETERMINISTIC])
@pytest.mark.parametrize("shape", [(16, 1024, 16), (5, 1000, 7), (33, 2048, 40)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("split", [1, 3, 8])
def test_split_k_vs_fp64(mode, shape, bias, split):
    c = Case("split_k_gemm", Shape(*shape), DT, DEV, {"bias": bias})
    inputs = split_k_gemm.make_inputs(c, seed=np.random.randint(1 << 30))
    gemm = SplitKGemm(inputs["a"], inputs["b"], inputs["bias"], mode, cfg(bn=32, bk=64, split=split))
    ref = fp64_ref(inputs["a"], inputs["b"])
    if bias:
        ref = ref + inputs["bias"].double()
    check(gemm(), ref)
    check(gemm(), ref)  # the workspace and counters were left ready for the next call
    assert int(gemm.count.abs().sum()) == 0
    if mode == ATOMIC:
        assert float(gemm.ws.abs().sum()) == 0.0


def test_split_k_deterministic_is_bit_identical_over_runs():
    c = Case("split_k_gemm", Shape(17, 4096, 40), DT, DEV, {"bias": True})
    inputs = split_k_gemm.make_inputs(c, 3)
    gemm = SplitKGemm(inputs["a"], inputs["b"], inputs["bias"], DETERMINISTIC, cfg(bn=32, bk=64, split=16))
    first = gemm()
    for _ in range(4):
        assert torch.equal(gemm(), first)


@pytest.mark.parametrize("k,n,group,wdt", [(256, 40, 128, torch.float16), (384, 37, 32, torch.float16),
                                           (96, 5, 96, torch.float32), (64, 3, 2, torch.float16)])
def test_int4_quantize_kernel_is_bit_identical_to_formats(k, n, group, wdt):
    from qgemm_bench.operators.int4_quantize_kernel import quantize_int4

    sdt = torch.float16  # the interpreter has no bf16; tests/test_gpu.py covers bf16
    w = (torch.randn(k, n) * torch.rand(1, n) * 3)
    w[:group, 0] = 0.0  # a zero group
    w[0, 1], w[1, 1] = 3.5, -3.5 / 7 * 2.5  # an exact tie after scaling: q = -2.5 -> -2
    w = w.to(wdt).to(DEV)
    p, s = quantize_int4(w, group, sdt)
    p_ref, s_ref = formats.quantize_int4(w, group, sdt)
    assert torch.equal(p, p_ref) and torch.equal(s, s_ref)


@pytest.mark.parametrize("bad,message", [
    (lambda x, w, s: (x.float(), w, s), "float16 or bfloat16"),
    (lambda x, w, s: (x[:, :-2], w, s), "do not match"),
    (lambda x, w, s: (x, w, s[:-1]), "do not fit K"),
    (lambda x, w, s: (x.t().contiguous().t(), w, s), "contiguous"),
])
def test_weight_only_refuses_bad_inputs(bad, message):
    c = Case("int4_gemm", Shape(16, 256, 32), DT, DEV, {"group_size": 64})
    inputs = int4_gemm.make_inputs(c, 0)
    x, w, s = bad(inputs["x"], inputs["w"], inputs["scales"])
    with pytest.raises(ValueError, match=message):
        weight_only_gemm(x, w, s, None, INT4, 64, cfg())


def test_split_k_refuses_bad_inputs():
    a = torch.randn(4, 64, device=DEV).to(DT)
    with pytest.raises(ValueError, match="do not match"):
        SplitKGemm(a, torch.randn(32, 8, device=DEV).to(DT), None, ATOMIC, cfg())
    with pytest.raises(ValueError, match="bias"):
        SplitKGemm(a, torch.randn(64, 8, device=DEV).to(DT), torch.zeros(7, device=DEV, dtype=DT), ATOMIC, cfg())
