"""Sweeps under torchrun (CPU, gloo, world size 2): the sharding, the
gathering on rank 0, a rank that dies, and bad usage."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from qgemm_bench.harness import distributed
from qgemm_bench.operators import int4_gemm
from qgemm_bench.types import Shape

REPO = Path(__file__).resolve().parent.parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
QUICK = ["--device", "cpu", "--rep", "2", "--warmup", "0", "--no-plots"]


def run(cmd, timeout=300):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout)


def rows(folder: Path) -> list[dict]:
    return json.loads((folder / "results.json").read_text())["rows"]


def test_shard_covers_every_shape_once_balanced_by_cost():
    shapes = int4_gemm.PRESETS["llama"]
    costs = [distributed.cost(int4_gemm, s, torch.bfloat16, int4_gemm.Settings()) for s in shapes]
    for size in (1, 2, 3, 8):
        parts = distributed.shard(shapes, costs, size)
        assert sorted(i for p in parts for i in p) == list(range(len(shapes)))
        assert all(p == sorted(p) for p in parts)  # each rank keeps plan order
        loads = [sum(costs[i] for i in p) for p in parts]
        assert max(loads) - min(loads) <= max(costs)  # greedy longest-first bound
    # Heavier shapes count more: the largest llama weight (8192 x 57344 int4) outweighs a 4096 x 4096 one.
    assert distributed.cost(int4_gemm, Shape(1, 8192, 57344), torch.bfloat16, int4_gemm.Settings()) > \
        distributed.cost(int4_gemm, Shape(1, 4096, 4096), torch.bfloat16, int4_gemm.Settings())


def test_world_of_two_writes_the_rows_of_a_single_run(tmp_path):
    # Four shapes of unequal cost (the smoke preset's M and N, an eighth of its
    # K: the interpreted Triton kernel is what takes the time here, in both runs).
    shapes = ["16,128,16", "5,125,7", "64,256,33", "3,512,64"]
    args = ["--op", "split_k_gemm", "--backends", "torch,triton", *(a for s in shapes for a in ("--shape", s)), *QUICK]
    r = run([*TORCHRUN, "runner.py", *args, "--output-dir", str(tmp_path / "two")])
    assert r.returncode == 0, r.stderr[-2000:]
    one = run([sys.executable, "runner.py", *args, "--output-dir", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr[-2000:]
    key = lambda d: (d["backend"], d["M"], d["K"], d["N"], d["status"], json.dumps(d["settings"]))
    two_rows, one_rows = rows(tmp_path / "two"), rows(tmp_path / "one")
    assert sorted(map(key, two_rows)) == sorted(map(key, one_rows)) and len(two_rows) == 8
    assert [(d["M"], d["backend"]) for d in two_rows] == [(d["M"], d["backend"]) for d in one_rows]  # plan order
    assert {d["rank"] for d in two_rows} == {0, 1} and all(d["rank"] is None for d in one_rows)
    meta = json.loads((tmp_path / "two" / "results.json").read_text())["metadata"]
    assert meta["world_size"] == 2 and [rk["rank"] for rk in meta["ranks"]] == [0, 1]
    assert sum(rk["n_shapes"] for rk in meta["ranks"]) == 4 and meta["settings"]["n_shapes"] == 4
    assert "ranks (torchrun)" in (tmp_path / "two" / "report.md").read_text()
    assert r.stdout.count("results:") == 1  # rank 0 alone prints the table
    # Rank 1 streamed its records to its own file; a rebuild finds them.
    assert (tmp_path / "two" / "rows.rank1.jsonl").read_text().strip()
    rebuilt = run([sys.executable, "runner.py", "report", str(tmp_path / "two"), "--no-plots"])
    assert rebuilt.returncode == 0 and sorted(map(key, rows(tmp_path / "two"))) == sorted(map(key, two_rows))


def test_a_rank_that_dies_costs_its_rows_not_the_run(tmp_path):
    out = tmp_path / "run"
    r = run([*TORCHRUN, "tests/child_run.py", json.dumps({"die_on_rank": 1}), "--op", "int4_gemm",
             "--backends", "fake", *QUICK, "--output-dir", str(out)])
    assert r.returncode != 0  # torchrun reports the dead worker
    got = rows(out)  # rank 0 still wrote every output
    by_rank = {d["rank"] for d in got}
    assert by_rank <= {0, 1} and 1 in by_rank
    lost = [d for d in got if d["rank"] == 1 and d["status"] != "ok"]
    assert lost and all(d["status"] == "error" and "not reported: rank 1" in d["reason"] for d in lost)
    keys = [(d["backend"], d["M"], d["K"], d["N"]) for d in got]
    assert len(keys) == len(set(keys))
    meta = json.loads((out / "results.json").read_text())["metadata"]
    assert meta["interrupted"] and "rank 1: not reported" in meta["stopped"]


@pytest.mark.parametrize("where", ["plan.build", "benchmark.metadata", "distributed.gather", "shards.merge"])
def test_a_sigterm_on_rank_0_still_writes_every_rank_s_rows(where, tmp_path):
    # torchrun sends SIGTERM to the other ranks once one died: it may land while rank 0 plans or sets up (it
    # then measures nothing), waits at the gather or puts the rows together; the run's outputs are written.
    out = tmp_path / "run"
    r = run([*TORCHRUN, "tests/child_run.py", json.dumps({"term_rank0_in": where}), "--op", "int4_gemm",
             "--backends", "fake", *QUICK, "--output-dir", str(out)])
    assert r.returncode != 0, r.stderr[-2000:]
    got = rows(out)
    meta = json.loads((out / "results.json").read_text())["metadata"]
    ranks = {rk["rank"]: rk for rk in meta["ranks"]}
    assert sorted(ranks) == [0, 1] and ranks[1]["n_shapes"] >= 1
    # Rank 1's rows come from the gather or its stream; those it had not measured yet are marked, not dropped.
    mine = [d for d in got if d["rank"] == 1]
    assert len(mine) == 2 * ranks[1]["n_shapes"]  # torch and fake at each of its shapes
    assert all(d["status"] == "ok" or "not reported: rank 1" in d["reason"] for d in mine)
    assert all(d["status"] == "ok" for d in got if d["rank"] == 0)
    if where == "shards.merge":  # past the gather: the signal waits for the outputs
        assert not meta["interrupted"] and len(got) == 2 * len(int4_gemm.PRESETS[int4_gemm.CPU_PRESET])
    else:
        assert meta["interrupted"] and "rank 0: terminated (SIGTERM)" in meta["stopped"]


def test_bad_usage_under_torchrun_is_one_error_line(tmp_path):
    (tmp_path / "old.txt").write_text("x")
    r = run([*TORCHRUN, "runner.py", "--op", "split_k_gemm", *QUICK, "--output-dir", str(tmp_path)])
    ours = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert r.returncode != 0 and len(ours) == 1 and "already holds files" in ours[0], r.stderr[-2000:]
    assert not (tmp_path / "rows.jsonl").exists()


@pytest.mark.parametrize("size", [2])
def test_helion_configs_autotuned_on_every_rank_are_saved_by_rank_0(size, tmp_path, monkeypatch):
    from qgemm_bench.backends import helion_ops, registry
    from qgemm_bench.backends.helion_kernels import tuning
    from qgemm_bench.configs import store

    monkeypatch.setattr(store, "DEFAULT", store.Store(tmp_path))  # the package's store: rank 0 writes there
    saves = [[("int4_gemm", 16, 8192, 8192, "h100", {"split_k": 4}, {"tuned": "rank 0"})],
             [("int4_gemm", 1024, 8192, 8192, "h100", {"split_k": 1}, {"tuned": "rank 1"})]]
    states = []
    for pending in saves:  # what each rank holds back and hands over
        monkeypatch.setattr(tuning, "PENDING", pending)
        states.append(registry.rank_states())
    assert states[1][helion_ops.__name__] == saves[1]
    notes = registry.merge_rank_states(states)
    doc = json.loads((tmp_path / "h100" / "helion.json").read_text())["kernels"]["int4_gemm"]
    assert set(doc) == {"M16_K8192_N8192", "M1024_K8192_N8192"} and doc["M1024_K8192_N8192"]["tuned"] == "rank 1"
    assert notes and "2 autotune(s)" in notes[0]
