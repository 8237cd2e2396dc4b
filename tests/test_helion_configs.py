"""The Helion backends' checked-in configs: lookup, files, autotuning once."""

import json

import pytest
import torch

from qgemm_bench.backends.helion_dispatch import HelionConfigs, save
from qgemm_bench.backends.helion_kernels import configs, tuning
from qgemm_bench.configs.store import DEFAULT, Store
from qgemm_bench.operators import split_k_gemm
from tests.support import DT, case, fake_target

GPU = fake_target("gpu_a")


@pytest.fixture
def store(tmp_path):
    """An empty store of its own (the tests hand it in), GPU's entry made."""
    s = Store(tmp_path)
    s.write(GPU.name, "weight_only", {"kernels": {}}, dict.fromkeys(("commit", "date", "command", "rounds",
                                                                       "versions")), target=GPU)
    return s


def test_config_lookup_exact_nearest_and_missing(store):
    with pytest.raises(configs.ConfigMissing, match=r"no checked-in Helion configs for GPU 'gpu_a'.*--autotune"):
        HelionConfigs(GPU, store).lookup("int4_gemm", 16, 8192, 8192)
    small = {"block_sizes": [64, 16, 64], "split_k": 4}
    large = {"block_sizes": [32, 128, 128], "split_k": 1}
    save("int4_gemm", 16, 8192, 8192, GPU.name, small, {"us": 27.0}, store)
    save("int4_gemm", 4096, 8192, 8192, GPU.name, large, {"us": 900.0}, store)
    assert HelionConfigs(GPU, store).lookup("int4_gemm", 13, 8192, 8192) == (small, "")  # M 13 is in bucket 16
    cfg, note = HelionConfigs(GPU, store).lookup("int4_gemm", 1, 4096, 14336)
    assert cfg == small and note == "helion config of nearest bucket M16_K8192_N8192"
    cfg, note = HelionConfigs(GPU, store).lookup("int4_gemm", 2048, 8192, 8192)
    assert cfg == large and "M4096_K8192_N8192" in note
    with pytest.raises(configs.ConfigMissing, match="no configs for kernel 'nvfp4_gemm'"):
        HelionConfigs(GPU, store).lookup("nvfp4_gemm", 16, 8192, 8192)
    # The weight-only kernels take only their own bucket (else the Triton table's config).
    assert HelionConfigs(GPU, store).lookup("int4_gemm", 9, 8192, 8192, nearest_ok=False) == (small, "")
    with pytest.raises(configs.ConfigMissing, match="no helion int4_gemm config of bucket M1_K4096_N14336"):
        HelionConfigs(GPU, store).lookup("int4_gemm", 1, 4096, 14336, nearest_ok=False)
    doc = json.loads(store.path(GPU.name, "helion").read_text())
    assert list(doc["kernels"]["int4_gemm"]) == ["M16_K8192_N8192", "M4096_K8192_N8192"]
    assert doc["kernels"]["int4_gemm"]["M16_K8192_N8192"]["us"] == 27.0
    # Another GPU of the same compute capability takes GPU's entry, and says so.
    cfg, note = HelionConfigs(fake_target("gpu_b"), store).lookup("int4_gemm", 16, 8192, 8192)
    assert cfg == small and note == "configs of gpu_a (same compute capability 9.0; no entry for gpu_b)"
    with pytest.raises(configs.ConfigMissing, match="compute capability 8.0"):
        HelionConfigs(fake_target("gpu_c", (8, 0)), store).lookup("int4_gemm", 16, 8192, 8192)


@pytest.mark.parametrize("name,slug", [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
                                       ("NVIDIA A100-SXM4-80GB", "a100"),
                                       ("NVIDIA GeForce RTX 4090", "nvidia_geforce_rtx_4090")])
def test_gpu_slug(name, slug, monkeypatch):
    from qgemm_bench.target import gpu_slug

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: name)
    assert gpu_slug(torch.device("cuda", 0)) == slug


def bound_for(name: str, cfg: dict, dtype=DT):
    """kernel `name` of the config files bound to small arguments built from
    `cfg` (its K step and decode switch: tuning.ARGUMENT_KEYS), and the
    Helion settings to compile it with."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import kernels

    if name.startswith("split_k_gemm"):  # either mode's kernel
        a, b = torch.zeros(16, 4096, dtype=dtype), torch.zeros(4096, 64, dtype=dtype)
        gemm = helion_ops.SplitK(a, b, None, name.endswith("_deterministic"))
        return kernels.split_k.bind(gemm.args(cfg)), cfg
    fmt = 1 if name.startswith("nvfp4") else 0
    k, n = 1024, 256
    s = torch.ones(k // 16, n, dtype=torch.float8_e4m3fn) if fmt else torch.ones(k // 128, n, dtype=dtype)
    group = 16 if fmt else 128
    asm = bool(cfg.get("decode_asm", True)) and dtype == torch.bfloat16
    if name.endswith("_fused"):
        mode = "sub" if fmt else "block"
        # arguments of the kernel, not Helion settings (helion_ops.FUSED_ARGUMENTS), in its order
        split, tma = cfg.get("split_k", 1), bool(cfg.get("tma", False))
        acc, pdl, frag = bool(cfg.get("acc_scale", False)), cfg.get("pdl", 0), bool(cfg.get("frag", False))
        bf16 = bool(cfg.get("bf16_scales", False)) and fmt == 1
        rot = bool(cfg.get("rot", False)) and fmt == 1 and asm
        tiled = helion_ops.tiled_ok(cfg)
        tail = ("split_k", "tma", "acc_scale", "pdl", "frag", "bf16_scales", "rot", "tiled")
        cfg = {key: v for key, v in cfg.items() if key not in tail}
        if bf16:  # decode.bf16_x2_118's block scales
            s = s.float().to(torch.bfloat16)
        args = (torch.zeros(k, 128, dtype=dtype), torch.zeros(n, k // 2, dtype=torch.uint8), s.t(), torch.ones(1),
                n, fmt, mode, group, cfg["block_k"], asm)
        trailing = [tma, acc, pdl, frag, bf16, rot, tiled]  # those at their defaults (off) left out from the end
        while trailing and not trailing[-1]:
            trailing.pop()
        if split > 1:
            args += (split, torch.zeros(128, n), torch.zeros(8, n // 16, dtype=torch.int32))
        elif trailing:
            args += (1, None, None)
        args += tuple(trailing)
        return kernels.fused.bind(args), cfg
    cfg = helion_ops.split_config(cfg)
    mode = helion_ops.split_scale_mode(fmt, group, cfg["block_k"])
    args = (torch.zeros(16, k, dtype=dtype), torch.zeros(k // 2, n, dtype=torch.uint8), s, torch.ones(1),
            torch.zeros(16, n), torch.zeros(1, 16, dtype=torch.int32), fmt, mode, group, cfg["block_k"], asm, 0)
    return kernels.weight_only.bind(args), cfg


def _checked_in_kernels() -> list[tuple[str, str]]:
    """(GPU, kernel) of every checked-in Helion file: one test each, so xdist spreads the compiles."""
    return [(gpu, name) for gpu in DEFAULT.entries() if "helion" in DEFAULT.families(gpu)
            for name in DEFAULT.read(gpu, "helion")["kernels"]]


def test_checked_in_helion_files_pass_the_file_check():
    files = [DEFAULT.path(gpu, "helion") for gpu in DEFAULT.entries() if "helion" in DEFAULT.families(gpu)]
    assert files and _checked_in_kernels(), "no checked-in Helion configs"
    for path in files:
        configs.check_file(path)


@pytest.mark.parametrize("gpu,name", _checked_in_kernels())
def test_checked_in_configs_fit_the_kernels(gpu, name):
    """Every checked-in config compiles for its kernel (the interpreter's
    compile: the config is validated and normalized, the code generated, bf16
    with the PTX decodes where the config asks; nothing runs). Entries
    without a timing say they are untimed."""
    from qgemm_bench.backends import helion_ops

    compiled = set()  # configs: a third of the entries repeat one (the compile ignores the shape)
    for key, entry in DEFAULT.read(gpu, "helion")["kernels"][name].items():
        assert entry.get("us", 0) > 0 or entry["tuned"].startswith("untimed"), (gpu, name, key)
        if json.dumps(entry["config"], sort_keys=True) in compiled:
            continue
        compiled.add(json.dumps(entry["config"], sort_keys=True))
        bound, cfg = bound_for(name, entry["config"], torch.bfloat16)
        arguments = helion_ops.SPLIT_K_ARGUMENTS if name.startswith("split_k_gemm") else tuning.ARGUMENT_KEYS
        bound.set_config(tuning.helion_settings(cfg, arguments))  # raises on a config the kernel cannot take


def test_helion_fused_buckets_are_checked_in_and_untimed_ones_say_so(store):
    """The fused kernels' entries (new kernel names) sit beside the split
    path's; an untimed entry is used and said so in the row."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.triton_kernels.fused_gemm import POINTER_CONFIGS
    from qgemm_bench.operators.formats import INT4, NVFP4

    reals = [DEFAULT.read(gpu, "helion")["kernels"] for gpu in DEFAULT.entries() if "helion" in DEFAULT.families(gpu)]
    assert reals, "no checked-in Helion configs"
    for real, (op, fmt) in ((r, f) for r in reals for f in (("int4_gemm", INT4), ("nvfp4_gemm", NVFP4))):
        # Up to M = 64 a bucket is filed under the path the GPU's Triton table picks there (split or fused).
        small = {"M1_K8192_N8192", "M16_K8192_N8192", "M64_K8192_N8192"}
        assert small <= set(real.get(op, {})) | set(real.get(f"{op}_fused", {}))
        fused = real[f"{op}_fused"]
        for m in (128, 256, 512):
            entry = fused[f"M{m}_K8192_N8192"]
            triton = POINTER_CONFIGS[fmt][m]  # the same tiles (Helion has no TMA loads); split_k only where it splits K
            mirrored = configs.from_triton(triton, split=triton["SPLIT_K"] > 1)
            if "us" not in entry:  # until tuned: the Triton winner
                assert entry["config"] == mirrored
            assert helion_ops.default_config(fmt, "fused", m)[0] == mirrored
    untimed = {"tuned": "untimed: mirrored"}
    save("int4_gemm_fused", 256, 8192, 8192, GPU.name, {"block_sizes": [64, 128], "block_k": 128}, untimed,
                 store)
    cfg, note = HelionConfigs(GPU, store).lookup("int4_gemm_fused", 200, 8192, 8192)
    assert cfg["block_k"] == 128 and note == "untimed helion config (untimed: mirrored)"
    cfg, note = HelionConfigs(GPU, store).lookup("int4_gemm_fused", 100, 8192, 8192)
    assert note == "helion config of nearest bucket M256_K8192_N8192; untimed helion config (untimed: mirrored)"


def test_a_gpu_without_configs_falls_back_to_the_triton_config_and_says_so(store):
    """No store entry of the GPU's compute capability with Helion configs
    (or no entry for the kernel): the kernel's default
    (helion_ops.default_config: the Triton backend's config) runs and the
    row says so; a kernel without a default still refuses."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import kernels
    from qgemm_bench.operators.formats import INT4

    other = fake_target("gpu_c", (8, 0))
    cfg = helion_ops.default_config(INT4, "fused", 256)
    calls = []

    def args(c):  # the fused kernel's arguments, its K step from the config
        calls.append(c)
        k, n = 1024, 256
        s = torch.ones(k // 128, n, dtype=DT)
        return (torch.zeros(k, 128, dtype=DT), torch.zeros(n, k // 2, dtype=torch.uint8), s.t(), torch.ones(1), n, 0,
                "block", 128, c["block_k"], False)

    r = tuning.ready("int4_gemm_fused", kernels.fused, args, torch.device("cuda"), (256, 1024, 256), {},
                     default=cfg, source=HelionConfigs(other, store))
    assert r.config == cfg[0] and calls[-1]["block_k"] == cfg[0]["block_k"]
    assert "no checked-in Helion configs for GPU 'gpu_c'" in r.notes and "used Triton's fused config" in r.notes
    with pytest.raises(configs.ConfigMissing):
        tuning.ready("int4_gemm_fused", kernels.fused, args, torch.device("cuda"), (256, 1024, 256), {},
                     source=HelionConfigs(other, store))


def test_ready_takes_another_bucket_only_where_allowed(store):
    """nearest_ok False (a weight-only kernel whose shape the Triton table
    has): the default runs rather than Helion's config of another bucket,
    and the row says so; True, or a --helion-configs file: the nearest."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import kernels
    from qgemm_bench.operators.formats import INT4

    own = {"block_sizes": [64, 256], "block_k": 64, "num_warps": 8, "num_stages": 3}
    path = save("int4_gemm_fused", 256, 8192, 8192, GPU.name, own, {"us": 70.0}, store)
    default = helion_ops.default_config(INT4, "fused", 256)

    def args(c):
        k, n = 1024, 256
        s = torch.ones(k // 128, n, dtype=DT)
        return (torch.zeros(k, 128, dtype=DT), torch.zeros(n, k // 2, dtype=torch.uint8), s.t(), torch.ones(1), n, 0,
                "block", 128, c["block_k"], False)

    def ready(nearest_ok):
        return tuning.ready("int4_gemm_fused", kernels.fused, args, torch.device("cuda"), (256, 1024, 256), {},
                            default=default, nearest_ok=nearest_ok, source=HelionConfigs(GPU, store))

    r = ready(False)
    assert r.config == default[0] and "no helion int4_gemm_fused config of bucket M256_K1024_N256" in r.notes
    r = ready(True)
    assert r.config == own and "nearest bucket M256_K8192_N8192" in r.notes
    with tuning.options(config_file=path):
        r = ready(False)
    assert r.config == own and "nearest bucket M256_K8192_N8192" in r.notes


def test_earlier_split_entries_translate_to_the_same_tiles():
    from qgemm_bench.backends import helion_ops

    old = {"block_sizes": [32, 16, 128], "split_k": 8, "num_warps": 4, "num_stages": 4}
    new = helion_ops.split_config(old)
    assert new == {"block_sizes": [128, 16], "block_k": 64, "split_k": 8, "num_warps": 4, "num_stages": 4}
    assert helion_ops.split_config(new) == new


def test_tune_script_candidates_fit_their_kernels():
    """What qgemm_bench.tuning.helion will time on the GPU compiles here (bf16,
    the PTX decodes' code generated), under the kernel name it saves to."""
    from qgemm_bench.tuning import helion as script
    assert [script.kernel_name("int4_gemm", m) for m in (1, 64, 65, 512)] == \
        ["int4_gemm", "int4_gemm", "int4_gemm_fused", "int4_gemm_fused"]
    assert script.candidates("int4_gemm", 2048) == []  # dequantize + cuBLAS: nothing to tune
    fused = script.candidates("int4_gemm", 256)  # the pool's TMA and pointer-load twins: one Helion config each
    assert len(fused) == len({json.dumps(c, sort_keys=True) for c in fused}) > 1
    seen = set()
    for op in ("int4_gemm", "nvfp4_gemm"):
        for m in (1, 64, 256):
            for cfg in script.candidates(op, m):
                name = script.kernel_name(op, m)
                if (name, json.dumps(cfg, sort_keys=True)) in seen:
                    continue
                seen.add((name, json.dumps(cfg, sort_keys=True)))
                bound, cfg = bound_for(name, cfg, torch.bfloat16)
                bound.set_config(tuning.helion_settings(cfg))


def test_tune_script_takes_split_k_shapes_as_m_k_n():
    """--mkn: the split-K shapes to tune (the preset's shapes without a Helion
    entry run the Triton table's config, untimed in Helion); bad text is an
    argparse error, not a traceback."""
    import argparse

    from qgemm_bench.tuning import helion as script

    assert script.mkn_triple("1,4096,16") == (1, 4096, 16)
    for bad in ("1,4096", "1,4096,16,2", "a,b,c", "0,4096,16", "1,-4096,16"):
        with pytest.raises(argparse.ArgumentTypeError, match="M,K,N|positive"):
            script.mkn_triple(bad)


def test_tune_script_takes_ms_as_the_tune_command_spells_it(monkeypatch, capsys):
    """--ms is --m (torchrun's own parser refuses --m as an ambiguous prefix
    of its options); --rot-pass refuses the flags it would ignore, in one
    line, before asking for a GPU."""
    import sys

    from qgemm_bench.tuning import helion as script

    for flag in ("--m", "--ms"):
        assert script.parser().parse_args(["--rot-pass", flag, "64,128"]).m == [64, 128]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for extra in (["--mkn", "1,4096,16"], ["--variants"], ["--op", "int4_gemm"]):
        monkeypatch.setattr(sys, "argv", ["helion", "--rot-pass", *extra])
        assert script.main() == 2
        assert "--rot-pass times NVFP4 fused entries only" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["helion", "--rot-pass", "--ms", "64", "--op", "nvfp4_gemm"])
    assert script.main() == 2
    assert "tuning needs a CUDA device" in capsys.readouterr().err
    for argv, says in ((["--check", "--table-pass"], "separate runs"),
                       (["--tiled-pass", "--rot-pass"], "separate runs"),
                       (["--tiled-pass", "--split-pass"], "separate runs"),
                       (["--split-pass", "--mkn", "1,4096,16"], "--split-pass takes int4 and NVFP4"),
                       (["--tiled-pass", "--variants"], "--tiled-pass takes int4 and NVFP4"),
                       (["--check", "--op", "split_k_gemm_deterministic"], "--check takes int4 and NVFP4"),
                       (["--table-pass", "--mkn", "1,4096,16"], "--table-pass takes int4 and NVFP4")):
        monkeypatch.setattr(sys, "argv", ["helion", *argv])
        assert script.main() == 2
        assert says in capsys.readouterr().err


def test_autotune_runs_once_per_case_and_saves(monkeypatch, store):
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
    monkeypatch.setattr(tuning, "_tuned", {})
    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (5, 1000, 7)), 0)
    args = helion_ops.SplitK(inputs.a, inputs.b, None, False, any_split=True).args  # config -> arguments
    default = (helion_ops.SPLIT_K_INTERPRETER_CONFIG, "its K step")  # the argument keys an autotune keeps
    with tuning.options(autotune="quick", save_configs=True):
        first = tuning.ready("split_k_gemm", kernels.split_k, args, torch.device("cuda"), (5, 1000, 7), {},
                             default=default, source=HelionConfigs(GPU, store))
        again = tuning.ready("split_k_gemm", kernels.split_k, args, torch.device("cuda"), (5, 1000, 7), {},
                             default=default, source=HelionConfigs(GPU, store))
    assert tuning.OPTIONS.autotune == "none"  # restored
    assert len(calls) == 1 and first.config == again.config and again.autotune_s == first.autotune_s
    assert "autotuned (quick)" in again.notes
    saved = json.loads(store.path(GPU.name, "helion").read_text())["kernels"]["split_k_gemm"]["M8_K1000_N7"]
    assert saved["config"] == first.config and saved["tuned"] == "helion autotune, effort quick"
