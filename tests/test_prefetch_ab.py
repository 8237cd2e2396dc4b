"""scripts/prefetch_ab.py: --cpu-smoke builds the tiny model's triton variant
as the runner does, compiles its step once, checks it against the eager step
at each amount and times it (the interpreter ignores the tables); a step that
differs is reported WRONG and not timed; bad input ends in one line, exit 2."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "prefetch_ab.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


def test_cpu_smoke_checks_and_times_each_amount():
    r = run("--cpu-smoke")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = r.stdout.splitlines()
    assert out[0].startswith("tiny triton int4-g32 on cpu, compile none") and "fused norms True" in out[0]
    assert out[1].startswith("batch 1: tables of 0.4 MiB in all (2 layers)")
    checks = [line for line in out if "check rel err" in line]
    assert len(checks) == 3 and not any("WRONG" in line for line in checks)  # 0 MiB once, 1 MiB per policy
    timed = [line.split("(")[0].split() for line in out if line.strip().endswith(")") and " MiB" in line
             and "check" not in line]
    assert sorted(" ".join(t[1:]) for t in timed) == ["0 MiB", "1 MiB", "1 MiB last"], out
    assert all(float(t[0]) > 0 for t in timed)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU smoke's variant runs on the interpreter (a subprocess "
                    "hides the GPUs for the smoke; in this process they are seen)")
def test_a_step_that_differs_is_wrong_and_not_timed(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    import prefetch_ab

    from qgemm_bench.model import decode

    monkeypatch.setattr(decode, "check_step", lambda *a: 1.4)  # unrelated logits' error
    plan, (backend, spec) = prefetch_ab.model_plan(prefetch_ab.SMOKE)
    from qgemm_bench.model import bench

    model = plan.source.fresh(plan.device)
    bench.prepare_variant(plan, model, backend, spec)
    bad = prefetch_ab.run_batch(plan, model, 1, [0.0], 1)
    out = capsys.readouterr().out
    assert bad == 1 and "WRONG" in out and "MiB  (" not in out
    assert not any(hasattr(x.self_attn, decode.PREFETCH_BUFFER) for x in model.model.layers)  # taken away


@pytest.mark.parametrize("args, match", [
    (["--mib", "x"], "expected numbers"), (["--mib", "4,4"], "each once"), (["--mib", "-1"], ">= 0"),
    (["--mib", "nan"], "finite"), (["--mib", "8,inf"], "finite"), (["--policy", "first"], "normal and/or last"),
    (["--policy", "last,last"], "each once"),
    ([], "the model options after `--`"), (["--", "--model", "tiny", "--attention", "sdpa"], "runs triton's"),
    (["--", "--model", "tiny", "--backends", "bf16", "--dtype", "float16"], "no quantized variant"),
])
def test_bad_input_is_one_line_and_exit_2(args, match):
    r = run(*args)
    assert r.returncode == 2 and match in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
