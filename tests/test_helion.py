"""Our Helion kernels against fp64 references on ragged shapes with explicit
small configs (CPU: the Triton interpreter in fp16), the checked-in config
lookup, and the tritonbench entry points."""

import json

import numpy as np
import pytest
import torch

import runner
from qgemm_bench.backends import for_op
from qgemm_bench.backends.helion_kernels import configs, split_k_gemm, weight_only
from qgemm_bench.backends.tritonbench import (
    KERNEL_MAPPINGS,
    int4_gemm_tritonbench,
    matmul_split_k_tritonbench,
    nvfp4_gemm_tritonbench,
    triton_int4_gemm_tritonbench,
    triton_matmul_split_k_tritonbench,
    triton_nvfp4_gemm_tritonbench,
)
from qgemm_bench.operators import formats, int4_gemm, nvfp4_gemm
from qgemm_bench.operators import split_k_gemm as split_k_op
from qgemm_bench.operators.common import Case, Shape, rel_error

DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
DT = torch.bfloat16 if DEV.type == "cuda" else torch.float16
TOL = {torch.float16: 3e-3, torch.bfloat16: 1e-2}[DT]
pytestmark = pytest.mark.skipif(DEV.type == "cuda", reason="CPU interpreter configs; tests/test_gpu.py covers CUDA")


def helion(op):
    return next(b for b in for_op(op) if b.name == "helion")


def run_backend(op_module, shape, settings, seed=None):
    c = Case(op_module.NAME, Shape(*shape), DT, DEV, {**op_module.DEFAULT_SETTINGS, **settings})
    inputs = op_module.make_inputs(c, np.random.randint(1 << 30) if seed is None else seed)
    prepared = helion(op_module.NAME).prepare(c, inputs)
    out = prepared.fn()
    assert out.dtype == DT and out.shape == (shape[0], shape[2])
    return out, inputs, prepared


def fp64(x, w_deq):
    return x.double() @ w_deq.double()


# block_sizes: [K step in packed rows, M, N]
WO_CONFIGS = [{"block_sizes": [32, 16, 32], "split_k": 2, "num_warps": 4, "num_stages": 1},
              {"block_sizes": [16, 16, 64], "split_k": 1, "num_warps": 4, "num_stages": 1},
              {"block_sizes": [64, 32, 16], "split_k": 4, "num_warps": 4, "num_stages": 1}]


INT4_CASES = [(shape, group) for shape in [(1, 128, 40), (3, 384, 96), (17, 384, 37), (80, 256, 96)]  # 80: direct
              for group in [32, 64, 128, 96, "channel", None]  # 96: per-element scales
              if not (group == 96 and shape[1] % 96)]


@pytest.mark.parametrize("shape,group", INT4_CASES)
@pytest.mark.parametrize("cfg", range(len(WO_CONFIGS)))
def test_int4_kernel_vs_fp64(shape, group, cfg, monkeypatch):
    monkeypatch.setattr(weight_only, "INTERPRETER_CONFIG", WO_CONFIGS[cfg])
    out, inputs, _ = run_backend(int4_gemm, shape, {"group_size": group})
    assert rel_error(out, fp64(inputs["x"], int4_gemm.dequantize(inputs))) <= TOL


@pytest.mark.parametrize("shape", [(1, 64, 40), (3, 160, 96), (17, 384, 37), (80, 128, 48)])
@pytest.mark.parametrize("unscaled", [False, True])
@pytest.mark.parametrize("cfg", [0, 2])
def test_nvfp4_kernel_vs_fp64(shape, unscaled, cfg, monkeypatch):
    monkeypatch.setattr(weight_only, "INTERPRETER_CONFIG", WO_CONFIGS[cfg])
    out, inputs, _ = run_backend(nvfp4_gemm, shape, {"unscaled": unscaled})
    assert rel_error(out, fp64(inputs["x"], nvfp4_gemm.dequantize(inputs))) <= TOL


def test_nvfp4_kernel_decodes_every_code_exactly():
    k, n = 32, 16
    codes = torch.arange(16, dtype=torch.uint8).repeat(2)[:, None].expand(k, n).contiguous()
    bs = torch.tensor([0x01, 0x07, 0x08, 0x38, 0x7E] * 7, dtype=torch.uint8)[:2 * n].reshape(2, n)
    inputs = {"x": torch.eye(k, dtype=DT), "w": formats.pack_nibbles(codes),
              "block_scales": bs.view(torch.float8_e4m3fn), "tensor_scale": torch.tensor(0.5)}
    c = Case("nvfp4_gemm", Shape(k, k, n), DT, DEV, {"unscaled": False})
    out = helion("nvfp4_gemm").prepare(c, inputs).fn()
    assert torch.equal(out.float(), nvfp4_gemm.dequantize(inputs).to(DT).float())


@pytest.mark.parametrize("shape", [(16, 1024, 16), (5, 1000, 7), (33, 2048, 40)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("split", [1, 4, 16])
def test_split_k_vs_fp64(shape, bias, split, monkeypatch):
    monkeypatch.setattr(split_k_gemm, "INTERPRETER_CONFIG",
                        {"block_sizes": [16, 32, 32], "split_k": split, "num_warps": 4, "num_stages": 1})
    out, inputs, prepared = run_backend(split_k_op, shape, {"bias": bias})
    ref = fp64(inputs["a"], inputs["b"]) + (inputs["bias"].double() if bias else 0)
    assert rel_error(out, ref) <= TOL
    assert rel_error(prepared.fn(), ref) <= TOL  # a second call starts from zero again
    assert prepared.compile_s is not None and prepared.compile_s >= 0


def test_bad_inputs_are_refused_in_one_line():
    c = Case("int4_gemm", Shape(16, 256, 32), DT, DEV, {"group_size": 64})
    inputs = int4_gemm.make_inputs(c, 0)
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        helion("int4_gemm").prepare(c, {**inputs, "x": inputs["x"].float()})
    with pytest.raises(ValueError, match="do not fit K"):
        helion("int4_gemm").prepare(c, {**inputs, "scales": inputs["scales"][:-1]})
    c = Case("split_k_gemm", Shape(4, 64, 8), DT, DEV, {"bias": True})
    a, b = torch.randn(4, 64).to(DT), torch.randn(64, 8).to(DT)
    with pytest.raises(ValueError, match="bias"):
        helion("split_k_gemm").prepare(c, {"a": a, "b": b, "bias": torch.zeros(7, dtype=DT)})


# ------------------------------------------------------------------ configs


@pytest.fixture
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(configs, "CONFIG_DIR", tmp_path)
    return tmp_path


def test_config_lookup_exact_nearest_and_missing(config_dir):
    with pytest.raises(configs.ConfigMissing, match=r"no checked-in Helion configs for GPU 'h100'.*--autotune"):
        configs.lookup("int4_gemm", 16, 8192, 8192, "h100")
    small = {"block_sizes": [64, 16, 64], "split_k": 4}
    large = {"block_sizes": [32, 128, 128], "split_k": 1}
    configs.save("int4_gemm", 16, 8192, 8192, "h100", small, {"us": 27.0})
    configs.save("int4_gemm", 4096, 8192, 8192, "h100", large, {"us": 900.0})
    assert configs.lookup("int4_gemm", 13, 8192, 8192, "h100") == (small, "")  # M 13 is in bucket 16
    cfg, note = configs.lookup("int4_gemm", 1, 4096, 14336, "h100")
    assert cfg == small and note == "helion config of nearest bucket M16_K8192_N8192"
    cfg, note = configs.lookup("int4_gemm", 2048, 8192, 8192, "h100")
    assert cfg == large and "M4096_K8192_N8192" in note
    with pytest.raises(configs.ConfigMissing, match="no configs for kernel 'nvfp4_gemm'"):
        configs.lookup("nvfp4_gemm", 16, 8192, 8192, "h100")
    doc = json.loads((config_dir / "h100.json").read_text())
    assert list(doc["kernels"]["int4_gemm"]) == ["M16_K8192_N8192", "M4096_K8192_N8192"]
    assert doc["kernels"]["int4_gemm"]["M16_K8192_N8192"]["us"] == 27.0


@pytest.mark.parametrize("name,slug", [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
                                       ("NVIDIA A100-SXM4-80GB", "a100"),
                                       ("NVIDIA GeForce RTX 4090", "nvidia_geforce_rtx_4090")])
def test_gpu_slug(name, slug, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: name)
    assert configs.gpu_slug(torch.device("cuda", 0)) == slug


def test_m_buckets():
    assert [configs.m_bucket(m) for m in (1, 2, 16, 17, 64, 65, 4096, 8192)] == [1, 2, 16, 32, 64, 128, 4096, 4096]


def test_checked_in_configs_fit_the_kernels():
    """Every checked-in config compiles for its kernel (the interpreter's
    compile: the config is validated and normalized; nothing runs)."""
    from qgemm_bench.backends.helion_kernels import kernels

    files = sorted(configs.CONFIG_DIR.glob("*.json"))
    assert files, "no checked-in Helion configs"
    x3 = torch.zeros(16, 512, 2, dtype=DT)
    w = torch.zeros(512, 256, dtype=torch.int8)
    a, b = torch.zeros(16, 4096, dtype=DT), torch.zeros(4096, 64, dtype=DT)
    for path in files:
        for name, entries in json.loads(path.read_text())["kernels"].items():
            for key, entry in entries.items():
                if name == "split_k_gemm":
                    bound = kernels.split_k.bind((a, b, b[0], False))
                else:
                    s = torch.ones(8, 256, dtype=DT if name == "int4_gemm" else torch.float8_e4m3fn)
                    fmt = 0 if name == "int4_gemm" else 1
                    bound = kernels.weight_only.bind((x3, w, s, torch.ones(1), fmt, 128, fmt == 0, 64, True))
                bound.set_config(entry["config"])  # raises on a config the kernel cannot take
                assert entry["us"] > 0, (path.name, name, key)


# ------------------------------------------------------------------ tritonbench


class TbOp:  # what tritonbench passes: the entry points must not need anything from it
    pass


@pytest.mark.parametrize("entry", [int4_gemm_tritonbench, triton_int4_gemm_tritonbench])
def test_int4_tritonbench_entry(entry):
    x = torch.randn(2, 3, 256).to(DT)  # [..., K]: rows are flattened
    w = torch.randint(-8, 8, (256, 40), dtype=torch.int32)
    fn = entry(TbOp(), x, w)
    out = fn()
    ref = x.reshape(-1, 256).double() @ w.double()
    assert out.shape == (6, 40) and rel_error(out, ref) <= TOL
    assert torch.equal(fn(), out)


@pytest.mark.parametrize("entry", [nvfp4_gemm_tritonbench, triton_nvfp4_gemm_tritonbench])
def test_nvfp4_tritonbench_entry(entry):
    x = torch.randn(5, 128).to(DT)
    w = torch.randn(128, 48)
    out = entry(TbOp(), x, w)()
    packed, bs, ts = formats.quantize_nvfp4(w)
    ref = x.double() @ formats.dequantize_nvfp4(packed, bs, ts, torch.float64)
    assert out.shape == (5, 48) and rel_error(out, ref) <= TOL


@pytest.mark.parametrize("entry", [matmul_split_k_tritonbench, triton_matmul_split_k_tritonbench])
@pytest.mark.parametrize("with_bias", [False, True])
def test_split_k_tritonbench_entry(entry, with_bias):
    a, b = torch.randn(16, 2048).to(DT), torch.randn(2048, 24).to(DT)
    bias = (16 * torch.randn(24)).to(DT) if with_bias else None
    out = entry(TbOp(), a, b, bias)()
    ref = a.double() @ b.double() + (bias.double() if with_bias else 0)
    assert rel_error(out, ref) <= TOL


def test_tritonbench_entries_refuse_bad_weights():
    x = torch.randn(2, 64).to(DT)
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        int4_gemm_tritonbench(TbOp(), x, torch.full((64, 8), 9))
    with pytest.raises(ValueError, match="integer"):
        int4_gemm_tritonbench(TbOp(), x, torch.randn(64, 8))
    with pytest.raises(ValueError, match="block size 16"):
        nvfp4_gemm_tritonbench(TbOp(), torch.randn(2, 40).to(DT), torch.randn(40, 8))


def test_kernel_mappings_resolve():
    import importlib

    for op, (tb_module, variants) in KERNEL_MAPPINGS.items():
        assert tb_module.startswith("tritonbench.operators.")
        for module, fn in variants:
            assert callable(getattr(importlib.import_module(module), fn)), (op, fn)


def test_autotune_flags_are_checked(capsys, tmp_path):
    for args, message in [(["--autotune", "quick"], "--autotune needs a CUDA device"),
                          (["--save-configs"], "--save-configs needs --autotune")]:
        code = runner.main(["--op", "int4_gemm", *args, "--output-dir", str(tmp_path / "run")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and message in err[0], err


def test_autotune_runs_once_per_case_and_saves(monkeypatch, config_dir):
    """--autotune: the runner prepares several rotating input copies of one
    case; Helion's search must run once, and --save-configs writes it."""
    import helion

    from qgemm_bench.backends import helion_kernels
    from qgemm_bench.backends.helion_kernels import kernels  # decorated with the real helion.kernel first

    calls = []

    class FakeTuner:
        def bind(self, args):
            return self

        def autotune(self, args, force=True):
            calls.append(1)
            return dict(split_k_gemm.INTERPRETER_CONFIG)

    monkeypatch.setattr(helion, "kernel", lambda fn, **settings: FakeTuner())
    monkeypatch.setattr(configs, "gpu_slug", lambda device: "fake")
    monkeypatch.setattr(helion_kernels, "_tuned", {})
    case = Case("split_k_gemm", Shape(5, 1000, 7), DT, torch.device("cuda"), {"bias": False},
                {"autotune": "quick", "save_configs": True})
    cpu_case = Case("split_k_gemm", Shape(5, 1000, 7), DT, DEV, {"bias": False})
    inputs = split_k_op.make_inputs(cpu_case, 0)
    args = (inputs["a"], inputs["b"], inputs["b"][0], False)
    first = helion_kernels.ready("split_k_gemm", kernels.split_k, args, case, (5, 1000, 7), {})
    again = helion_kernels.ready("split_k_gemm", kernels.split_k, args, case, (5, 1000, 7), {})
    assert len(calls) == 1 and first.config == again.config and again.autotune_s == first.autotune_s
    assert "autotuned (quick)" in again.notes
    saved = json.loads((config_dir / "fake.json").read_text())["kernels"]["split_k_gemm"]["M8_K1000_N7"]
    assert saved["config"] == first.config and saved["tuned"] == "helion autotune, effort quick"
