"""scripts/fused_ab.py: --cpu-smoke checks and times each config on the
Triton interpreter (fp16, NVFP4 3x256x136: the table's config and its
SCALE8 twins); bad --shape / --config end in one line and exit 2."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "fused_ab.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


# Triton 3.6's interpreter (a GPU host's) takes a loop bound from a one-element numpy array, which
# numpy >= 2.4 refuses to make an int; later Tritons squeeze it first.
OLD_INTERPRETER = "only 0-dimensional arrays can be converted to Python scalars"


def test_cpu_smoke_checks_and_times_every_config():
    r = run("--cpu-smoke")
    if r.returncode == 1 and OLD_INTERPRETER in r.stdout:
        pytest.skip(f"this Triton's interpreter cannot run the fused kernel with this numpy: {OLD_INTERPRETER}")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("nvfp4 3x256x136: the table's fused config ")
    timed = [line.split() for line in lines[1:]]  # median, spec:, the config's label..., (round / round)
    assert sorted(t[1] for t in timed) == ["table+SCALE8-PDL:", "table+SCALE8:", "table:"], r.stdout
    assert all(float(t[0]) > 0 and ("scale8" in t) == ("SCALE8" in t[1]) for t in timed), r.stdout


def test_the_smoke_parses_changes_in_order():
    sys.path.insert(0, str(ROOT / "scripts"))
    import fused_ab

    assert fused_ab.parse_config("table+SCALE8-PDL+num_stages=4") == (
        "table", [("+", "SCALE8", True), ("-", "PDL", True), ("+", "num_stages", 4)])
    assert fused_ab.resolve({"PDL": 2, "num_stages": 3}, fused_ab.parse_config("table+SCALE8-PDL+num_stages=4")[1]) \
        == {"num_stages": 4, "SCALE8": True}
    assert fused_ab.parse_config('{"BLOCK_M": 16}') == ({"BLOCK_M": 16}, [])


@pytest.mark.parametrize(("args", "says"), [
    (["--shape", "1,2"], "expected three positive integers"),
    (["--config", "tab", "--shape", "1,256,256"], "expected table[+KEY[=VALUE]]"),
    (["--config", "table+X=[", "--shape", "1,256,256"], "is not a JSON value"),
    (["--config", "{1: 2}", "--shape", "1,256,256"], "not a JSON dict"),
    ([], "--shape M,K,N: at least one"),
    (["--config", "table", "--config", "table", "--shape", "1,256,256"], "given twice: ['table']"),
])
def test_bad_input_ends_in_one_line(args, says):
    r = run(*args)
    assert r.returncode == 2 and r.stdout == "" and says in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_config_without_its_tiles_is_a_failed_line_not_a_traceback(monkeypatch, capsys):
    # --config '{"BLOCK_M": 16}' or table-BLOCK_N: the label (describe) needs the tiles; such a config
    # is reported FAILED and the other configs still run, as one that does not compile is.
    from qgemm_bench.harness.measure import Settings
    from qgemm_bench.tuning import weight_only as t
    from tests.support import DEV, DT

    sys.path.insert(0, str(ROOT / "scripts"))
    import fused_ab

    monkeypatch.setattr(t, "DEV", DEV)
    monkeypatch.setattr(t, "DTYPE", DT)
    monkeypatch.setattr(t, "SETTINGS", Settings(warmup_ms=1.0, rep_ms=1.0))
    specs = [(s, fused_ab.parse_config(s)) for s in ("table-BLOCK_N", '{"BLOCK_M": 16}')]
    assert fused_ab.run_shape(t, "nvfp4", (3, 256, 136), specs, 1, 1) == 2  # main exits 1 on it
    out = capsys.readouterr().out
    assert "FAILED table-BLOCK_N: KeyError" in out and 'FAILED {"BLOCK_M": 16}: KeyError' in out, out


def test_a_config_whose_timing_fails_is_a_failed_line_and_the_rest_are_timed(monkeypatch, capsys):
    from qgemm_bench.harness.measure import Settings
    from qgemm_bench.tuning import weight_only as t
    from tests.support import DEV, DT

    sys.path.insert(0, str(ROOT / "scripts"))
    import fused_ab

    monkeypatch.setattr(t, "DEV", DEV)
    monkeypatch.setattr(t, "DTYPE", DT)

    seen = []  # the configs' call lists in the order first timed: round 1 runs them as given

    def timing(fns):
        seen.append(id(fns)) if id(fns) not in seen else None
        if seen.index(id(fns)) == 1:  # table+PDL=2's
            raise RuntimeError("launch failed")
        return 5.0

    monkeypatch.setattr(t, "SETTINGS", Settings(warmup_ms=1.0, rep_ms=1.0))
    monkeypatch.setattr(t, "time_fns", timing)
    specs = [(s, fused_ab.parse_config(s)) for s in ("table", "table+PDL=2")]
    assert fused_ab.run_shape(t, "nvfp4", (3, 256, 136), specs, 1, 2) == 1
    out = capsys.readouterr().out
    assert "FAILED timing table+PDL=2" in out and "launch failed" in out, out
    assert any(line.split()[:2] == ["5.00", "table:"] for line in out.splitlines()), out


def test_a_lost_cuda_context_ends_in_one_line_naming_the_config(monkeypatch, capsys):
    # A sticky CUDA error while timing (call G of session 48: an illegal address in one config's graph)
    # ends the script in one line that says which config was being timed, not a traceback.
    from qgemm_bench.harness.measure import Settings
    from qgemm_bench.tuning import weight_only as t
    from tests.support import DEV, DT

    sys.path.insert(0, str(ROOT / "scripts"))
    import fused_ab

    monkeypatch.setattr(t, "DEV", DEV)
    monkeypatch.setattr(t, "DTYPE", DT)
    monkeypatch.setattr(t, "SETTINGS", Settings(warmup_ms=1.0, rep_ms=1.0))
    seen = []

    def timing(fns):
        seen.append(id(fns)) if id(fns) not in seen else None
        if seen.index(id(fns)) == 1:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return 5.0

    monkeypatch.setattr(t, "time_fns", timing)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # main's check; the kernels run on DEV
    assert fused_ab.main(["--op", "nvfp4_gemm", "--shape", "3,256,136", "--config", "table", "--config",
                          "table+PDL=2", "--calls", "1", "--rounds", "2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the CUDA context was lost while timing table+PDL=2: ")
    assert "in round 1" in err[0] and "illegal memory access" in err[0], err
