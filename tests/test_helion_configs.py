"""The Helion backends' checked-in configs: lookup, files, autotuning once."""

import json

import pytest
import torch

from qgemm_bench.backends.helion_kernels import configs, tuning
from qgemm_bench.operators import split_k_gemm
from tests.support import DT, case


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


def test_checked_in_configs_pass_the_file_check_and_fit_the_kernels():
    """Every checked-in config compiles for its kernel (the interpreter's
    compile: the config is validated and normalized; nothing runs)."""
    from qgemm_bench.backends.helion_kernels import kernels

    files = sorted(configs.CONFIG_DIR.glob("*.json"))
    assert files, "no checked-in Helion configs"
    x3 = torch.zeros(16, 512, 2, dtype=DT)
    w = torch.zeros(512, 256, dtype=torch.int8)
    a, b = torch.zeros(16, 4096, dtype=DT), torch.zeros(4096, 64, dtype=DT)
    for path in files:
        configs.check_file(path)
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


def test_autotune_runs_once_per_case_and_saves(monkeypatch, config_dir):
    """--autotune: the runner prepares several rotating input copies of one
    case; Helion's search must run once, and --save-configs writes it."""
    import helion

    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import kernels  # decorated with the real helion.kernel first

    calls = []

    class FakeTuner:
        def bind(self, args):
            return self

        def autotune(self, args, force=True):
            calls.append(1)
            return dict(helion_ops.SPLIT_K_INTERPRETER_CONFIG)

    monkeypatch.setattr(helion, "kernel", lambda fn, **settings: FakeTuner())
    monkeypatch.setattr(configs, "gpu_slug", lambda device: "fake")
    monkeypatch.setattr(tuning, "_tuned", {})
    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (5, 1000, 7)), 0)
    args = (inputs.a, inputs.b, inputs.b[0], False)
    with tuning.options(autotune="quick", save_configs=True):
        first = tuning.ready("split_k_gemm", kernels.split_k, args, torch.device("cuda"), (5, 1000, 7), {})
        again = tuning.ready("split_k_gemm", kernels.split_k, args, torch.device("cuda"), (5, 1000, 7), {})
    assert tuning.OPTIONS.autotune == "none"  # restored
    assert len(calls) == 1 and first.config == again.config and again.autotune_s == first.autotune_s
    assert "autotuned (quick)" in again.notes
    saved = json.loads((config_dir / "fake.json").read_text())["kernels"]["split_k_gemm"]["M8_K1000_N7"]
    assert saved["config"] == first.config and saved["tuned"] == "helion autotune, effort quick"
