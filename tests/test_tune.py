"""`qgemm-bench tune` (qgemm_bench/tuning/command.py) on the CPU: end to end
on the Triton interpreter with a tiny candidate set per family (the entries
it writes, their provenance, each chosen config one of the candidates and
right against the reference, read back through the store's loader), and
its command line (--help, bad usage, --dry-run, --resume)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from qgemm_bench import cli
from qgemm_bench.target import Target
from qgemm_bench.types import Shape
from tests.support import DEV, fp64, rel_np, target_for, triton_config

pytestmark = pytest.mark.skipif(DEV.type == "cuda", reason="the CPU test mode (the interpreter)")

LAYER = (256, 64)  # (K, N): the one "Llama layer" of the tiny plan
SPLIT_K_SHAPE = Shape(4, 256, 16)
WO = {"split": [triton_config(16, 32, 64, 2), triton_config(16, 64, 64, 4)],
      "fused": [triton_config(16, 32, 64, 1), triton_config(16, 64, 128, 2)]}
SK = [{"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 64, "SPLIT_K": s, "num_warps": 4, "num_stages": 1} for s in (2, 4)]
HELION_SK = [{"block_sizes": [16, 16], "block_k": 64, "split_k": s, "num_warps": 4, "num_stages": 1} for s in (2, 4)]


@pytest.fixture
def tiny(monkeypatch):
    """The tune's plan shrunk to interpreter size: one layer, one M per
    path, two or three candidates per family (the pools' contents are the
    kernels' own business; the tuner's is to pick right among them)."""
    from qgemm_bench.backends import helion_dispatch
    from qgemm_bench.operators import common, split_k_gemm
    from qgemm_bench.tuning import candidates as cands
    from qgemm_bench.tuning import split_k

    monkeypatch.setattr(common, "LLAMA3_8B_KN", [LAYER])
    monkeypatch.setattr(common, "LLAMA3_70B_KN", [])
    monkeypatch.setattr(cands, "TABLE_M", {"split": (4,), "fused": (8,)})
    monkeypatch.setattr(cands, "weight_only_pool", lambda fmt, path, m: [dict(c) for c in WO[path]])
    monkeypatch.setattr(split_k_gemm, "PRESETS", {**split_k_gemm.PRESETS, "skinny": [SPLIT_K_SHAPE]})
    for module, name in ((cands, "split_k"), (split_k, "candidates")):  # the plan's, the tuner's
        monkeypatch.setattr(module, name, lambda m, k, n, sms: [dict(c) for c in SK])
    monkeypatch.setattr(split_k, "variants", lambda c: [])
    # No PDL twins: the interpreter has no griddepcontrol (they would run as the configs they are of).
    monkeypatch.setattr(cands, "with_pdl", lambda pool, prior, m: pool)
    monkeypatch.setattr(split_k, "split_k_pdl", lambda configs: [])
    # Helion: its interpreter runs one fixed config whatever it is given (helion_ops), so one bucket of
    # the split-K kernel is enough to check the family's plumbing.
    monkeypatch.setattr(cands, "HELION_WEIGHT_ONLY_M", ())
    monkeypatch.setattr(cands, "HELION_SPLIT_K_SHAPES", [tuple(SPLIT_K_SHAPE)])
    monkeypatch.setattr(cands, "HELION_SPLIT_K", [dict(c) for c in HELION_SK])
    monkeypatch.setattr(helion_dispatch, "split_k_default", lambda *a, **k: (dict(HELION_SK[0]), "test"))
    return cands


def tune(argv) -> int:
    return cli.main(["tune", "--device", "cpu", *argv])


def read_back(store_dir, family: str) -> dict:
    """A family's table as the store's loader gives it to a GPU whose entry
    it is (the CPU's own Target takes no GPU's configs), its provenance
    checked."""
    from qgemm_bench.configs.store import PROVENANCE_KEYS, Store
    from qgemm_bench.target import Target

    gpu = Target.cpu().name
    like = Target(gpu, "test", (9, 0), 132, 227 * 1024, 50 * 2**20)
    entry = Store(store_dir).load(like, family)
    assert entry.exact and entry.gpu == gpu, family
    prov = entry.table["provenance"]
    assert set(PROVENANCE_KEYS) <= set(prov) and prov["complete"] is True and prov["rounds"] == 2
    assert prov["command"].startswith("qgemm-bench tune --device cpu") and prov["versions"]["torch"]
    assert not (Path(store_dir) / gpu / ".tune").exists()  # a finished tune leaves no journal
    assert json.loads((Path(store_dir) / gpu / "target.json").read_text())["name"] == gpu
    return entry.table


def fresh_seed() -> int:
    seed = int(torch.randint(0, 2**31, ()).item())
    print(f"seed {seed}")
    return seed


def test_tune_triton_writes_its_entries_end_to_end(tiny, tmp_path, capsys):
    """int4 weight-only (both paths) and split-K (both modes) tuned into a
    fresh store; each entry's config one of the candidates and right on
    new inputs at another M of its bucket."""
    from qgemm_bench.backends.triton_dispatch import make_split_k, make_weight_only
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc
    from qgemm_bench.backends.triton_kernels import weight_only_configs as woc
    from qgemm_bench.backends.triton_ops import weight_args
    from qgemm_bench.operators import int4_gemm, split_k_gemm
    from qgemm_bench.types import Case

    argv = ["--store", str(tmp_path), "--backends", "triton", "--formats", "int4", "--shape-budget-s", "60",
            "--budget-s", "600"]  # a busy machine's slow calls never make the tune unfinished
    assert tune(argv) == 0, capsys.readouterr().err
    assert "tuned 3 entries" in capsys.readouterr().out  # 2 int4 paths, 1 split-K shape
    seed = fresh_seed()
    table = woc.check_table(read_back(tmp_path, "weight_only"), "weight_only")
    k, n = LAYER
    for path, m in (("split", 4), ("fused", 8)):
        e = table["kernels"][woc.kernel(0, path)][f"M{m}_K{k}_N{n}"]
        assert e["config"] in WO[path] and e["us"] > 0
        inp = int4_gemm.make_inputs(Case(int4_gemm.NAME, Shape(m - 1, k, n), torch.float16, DEV,
                                         int4_gemm.Settings(128)), seed)
        got = make_weight_only(*weight_args(int4_gemm.NAME, inp), config=e["config"], path=path,
                               target=target_for(weight_args(int4_gemm.NAME, inp)[0]))(inp.x)
        assert rel_np(got, fp64(inp.x, int4_gemm.dequantize(inp))) < 1e-2
    table = skc.check_table(read_back(tmp_path, "split_k"))
    for mode_id, mode in enumerate(skc.MODES):
        e = table["entries"][mode][skc.key(*SPLIT_K_SHAPE)]
        # one of the candidates, or its plane sum in a second launch (split_k.tune_mode)
        assert {x: v for x, v in e["config"].items() if x != "REDUCE"} in SK and e["us"] > 0
        inp = split_k_gemm.make_inputs(Case(split_k_gemm.NAME, SPLIT_K_SHAPE, torch.float16, DEV,
                                            split_k_gemm.Settings(False)), seed)
        got = make_split_k(inp.a, inp.b, None, mode_id, e["config"], target=target_for(inp.a))()
        assert rel_np(got, inp.a.double() @ inp.b.double()) < 1e-2


def test_tune_helion_writes_its_entry_end_to_end(tiny, tmp_path, capsys):
    """The Helion family (its split-K kernel: on the interpreter every
    config runs as the one interpreter config, so one bucket checks the
    plumbing): the entry one of the candidates, read back."""
    assert tune(["--store", str(tmp_path), "--backends", "helion", "--op", "split_k_gemm", "--budget-s", "600"]) == 0, \
        capsys.readouterr().err
    assert "tuned 1 entries" in capsys.readouterr().out
    kernels = read_back(tmp_path, "helion")["kernels"]
    (entry,) = kernels["split_k_gemm"].values()
    assert entry["config"] in HELION_SK and entry["us"] > 0
    first = read_back(tmp_path, "helion")["provenance"]
    assert "earlier" not in first and first["tune"]
    # A later tune that rewrites every entry leaves no earlier tune's provenance behind.
    assert tune(["--store", str(tmp_path), "--backends", "helion", "--op", "split_k_gemm", "--budget-s", "500"]) == 0
    again = read_back(tmp_path, "helion")["provenance"]
    assert again["command"].endswith("--budget-s 500") and "earlier" not in again and again["tune"] != first["tune"]


def test_a_helion_re_tune_times_this_gpus_own_entry_first(tiny, tmp_path, monkeypatch, capsys):
    """A re-tune starts from the entry this GPU's store already has (not only
    the prior GPU's): session 31's H200 tune never timed the H200 entry's
    frag twin at 64x8192x8192 (30.0 against 34.0 us) for want of it."""
    from qgemm_bench.target import Target
    from qgemm_bench.tuning import helion as tuning_helion

    assert tune(["--store", str(tmp_path), "--backends", "helion", "--op", "split_k_gemm", "--budget-s", "600"]) == 0, \
        capsys.readouterr().err
    path = tmp_path / Target.cpu().name / "helion.json"
    doc = json.loads(path.read_text())
    (key,) = doc["kernels"]["split_k_gemm"]
    stored = {**HELION_SK[0], "split_k": 8}  # not among the candidates: only the store has it
    doc["kernels"]["split_k_gemm"][key]["config"] = stored
    path.write_text(json.dumps(doc))
    # Another GPU of the same compute capability: the prior, whose entry comes second.
    other = tmp_path / "other"
    other.mkdir()
    (other / "target.json").write_text(json.dumps({**Target.cpu().to_json(), "name": "other"}))
    prior = {**HELION_SK[0], "split_k": 16}
    (other / "helion.json").write_text(json.dumps({**doc, "gpu": "other", "kernels": {"split_k_gemm": {key: {
        "config": prior, "us": 1.0}}}}))
    seen = []
    monkeypatch.setattr(tuning_helion, "tune", lambda *a, **kw: seen.append(a[6]))
    tune(["--store", str(tmp_path), "--backends", "helion", "--op", "split_k_gemm", "--budget-s", "600"])
    assert seen and seen[0][:2] == [stored, prior] and all(c in seen[0] for c in HELION_SK), seen


def test_earlier_tunes_provenance_stays_while_their_entries_do(tmp_path):
    """A tune of part of a store (another operator, family or M) keeps the
    other entries and the provenance of the tunes that made them, newest
    first; a --resume piece (the same tune) adds none, even when its first
    piece ended before it wrote the file; a tune that rewrites every entry
    drops them."""
    from qgemm_bench.configs.store import Store
    from qgemm_bench.tuning.journal import Writer

    store = Store(tmp_path)

    def prov(tune_id):
        return {"commit": "c", "date": None, "command": f"tune {tune_id}", "rounds": 2, "versions": {}, "tune": tune_id}

    def rec(kernel):
        return {"family": "helion", "kernel": kernel, "key": "M1_K256_N64", "entry": {"config": {}, "us": 1.0}}

    def written():
        return store.read("cpu", "helion")["provenance"]

    a = Writer(store, "cpu", ["helion"], prov("A"))
    a.add(rec("k1"))
    a.add(rec("k2"))
    first = written()
    assert "earlier" not in first
    # B's first piece stopped before it wrote anything; its --resume then rewrites k1 alone: k2 is A's
    b = Writer(store, "cpu", ["helion"], prov("B"))
    b.add(rec("k1"))
    second = written()
    assert second["earlier"] == [first]
    b_resumed = Writer(store, "cpu", ["helion"], prov("B"))
    b_resumed.add(rec("k1"))
    assert written()["earlier"] == [first]  # not B's own provenance as well
    c = Writer(store, "cpu", ["helion"], prov("C"))
    c.add(rec("k1"))
    assert [p["tune"] for p in written()["earlier"]] == ["B", "A"]
    c.add(rec("k2"))
    assert "earlier" not in written()


def test_a_pass_run_alone_stays_with_the_tune_it_followed(tmp_path, monkeypatch):
    """journal.add_pass records a tuner run alone in the provenance's
    passes; a later tune that keeps some entries keeps the record, in
    "earlier" with the tune it followed; a --resume piece of that tune
    keeps it beside its own provenance; a tune rewriting every entry drops
    it. A file without provenance gets the pass's as its own."""
    from qgemm_bench.configs.store import PROVENANCE_KEYS, Store
    from qgemm_bench.harness import environment
    from qgemm_bench.tuning.journal import Writer, add_pass

    monkeypatch.setattr(environment, "git_commit", lambda: "abc1234")
    store = Store(tmp_path)

    def prov(tune_id):
        return {"commit": "c", "date": None, "command": f"tune {tune_id}", "rounds": 2, "versions": {}, "tune": tune_id}

    def rec(kernel):
        return {"family": "helion", "kernel": kernel, "key": "M1_K256_N64", "entry": {"config": {}, "us": 1.0}}

    def alone(name):  # a pass of a tuner run alone over k1's entry, written as those tuners write
        doc = store.read("cpu", "helion")
        record = add_pass(doc, name, [("k1", "M1_K256_N64")], command=f"python -m tuner {name}", group=None)
        store.path("cpu", "helion").write_text(json.dumps(doc))
        return record

    a = Writer(store, "cpu", ["helion"], prov("A"))
    a.add(rec("k1"))
    a.add(rec("k2"))
    ws = alone("ws")
    assert ws == {"pass": "ws", "command": "python -m tuner ws", "commit": "abc1234", "date": ws["date"],
                  "entries": {"k1": ["M1_K256_N64"]}}  # group None: not recorded
    assert store.read("cpu", "helion")["provenance"]["passes"] == [ws]
    a_resumed = Writer(store, "cpu", ["helion"], prov("A"))  # a --resume piece of A after the pass
    a_resumed.add(rec("k2"))
    assert store.read("cpu", "helion")["provenance"]["passes"] == [ws]
    b = Writer(store, "cpu", ["helion"], prov("B"))  # B rewrites k2: k1 is A's, timed by the pass
    b.add(rec("k2"))
    got = store.read("cpu", "helion")["provenance"]
    assert "passes" not in got and got["earlier"][0]["passes"] == [ws] and got["earlier"][0]["tune"] == "A"
    b.add(rec("k1"))
    assert "earlier" not in store.read("cpu", "helion")["provenance"]
    # A file without provenance: the pass's record is its provenance.
    doc = {"gpu": "cpu", "kernels": {}}
    first = add_pass(doc, "table", [], command="python -m tuner table", rounds=2, versions={"triton": "3.6.0"})
    assert list(doc) == ["gpu", "provenance", "kernels"] and doc["provenance"] is first
    assert set(PROVENANCE_KEYS) <= set(first) and (first["pass"], first["rounds"]) == ("table", 2)


def test_resume_skips_what_the_unfinished_tune_wrote(tiny, tmp_path, capsys):
    from qgemm_bench.target import Target
    from qgemm_bench.tuning.journal import Journal

    args = ["--store", str(tmp_path), "--op", "nvfp4_gemm", "--backends", "triton", "--budget-s", "600"]
    # An unfinished tune: its journal holds the split entry (a made-up one, so a re-tune would show).
    journal = Journal(tmp_path, Target.cpu().name)
    done = {"unit": f"weight_only/nvfp4_gemm/split/4x{LAYER[0]}x{LAYER[1]}", "family": "weight_only",
            "kernel": "nvfp4_gemm", "key": f"M4_K{LAYER[0]}_N{LAYER[1]}",
            "entry": {"config": WO["split"][1], "us": 1.0, "tuned": "by the unfinished tune"}}
    journal.append(done)
    assert tune([*args, "--dry-run", "--resume"]) == 0
    assert "--resume: 1 of 2 units already written" in capsys.readouterr().out
    assert tune([*args, "--resume"]) == 0
    assert "tuned 1 entries" in capsys.readouterr().out
    assert not journal.exists()
    # the store holds the fused entry tuned now; the split entry stays the journal's (written by the
    # unfinished tune's writes, here only in its journal: --resume does not time it again)
    doc = json.loads((tmp_path / "cpu" / "weight_only.json").read_text())
    assert f"M8_K{LAYER[0]}_N{LAYER[1]}" in doc["kernels"]["nvfp4_gemm_fused"]
    assert doc["kernels"]["nvfp4_gemm"][done["key"]]["tuned"] == "by the unfinished tune"
    # without --resume a new tune starts over: the old journal goes, every unit is tuned
    journal.append(done)
    assert tune(args) == 0 and "tuned 2 entries" in capsys.readouterr().out


def test_resume_with_other_plan_options_is_refused(tiny, tmp_path, capsys):
    """--resume plans as the unfinished tune's first run did (its options are
    journalled): other --ms or --formats end in one line naming them, exit 2,
    nothing tuned; the budget's options may differ."""
    from qgemm_bench.target import Target
    from qgemm_bench.tuning.journal import Journal

    args = ["--store", str(tmp_path), "--op", "int4_gemm", "--backends", "triton", "--budget-s", "600"]
    assert tune([*args, "--stop-after-s", "0.1"]) == 0
    journal = Journal(tmp_path, Target.cpu().name)
    assert journal.first_plan()["ms"] is None and len(journal.records()) == 1
    capsys.readouterr()
    assert tune([*args, "--resume", "--ms", "8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--ms (not given) there, 8 here" in err and "without --resume" in err
    assert tune([*args, "--resume", "--formats", "int4", "--dry-run"]) == 2
    assert "--formats int4,nvfp4 there, int4 here" in capsys.readouterr().err
    assert len(journal.records()) == 1  # nothing tuned by the refused runs
    assert tune([*args, "--resume", "--stop-after-s", "500", "--dry-run"]) == 0


def test_stop_after_ends_the_run_and_resume_finishes_it(tiny, tmp_path, capsys):
    # A machine that limits a command's time: the run ends after its first unit (each unit takes
    # seconds on the interpreter), its entry written and journalled with the seconds it took; --resume
    # tunes the other with the rest of the budget.
    from qgemm_bench.target import Target
    from qgemm_bench.tuning.journal import Journal

    args = ["--store", str(tmp_path), "--op", "int4_gemm", "--backends", "triton", "--budget-s", "600"]
    assert tune([*args, "--stop-after-s", "0.1"]) == 0
    captured = capsys.readouterr()
    assert "this run ended before 1 units" in captured.err and "tune --resume" in captured.err
    (record,) = Journal(tmp_path, Target.cpu().name).records()
    assert record["s"] > 0 and record["unit"].startswith("weight_only/int4_gemm/split/")
    assert tune([*args, "--resume"]) == 0
    assert "tuned 1 entries" in capsys.readouterr().out
    doc = json.loads((tmp_path / "cpu" / "weight_only.json").read_text())
    assert set(doc["kernels"]) == {"int4_gemm", "int4_gemm_fused"} and doc["provenance"]["complete"] is True
    assert "earlier" not in doc["provenance"]  # the two pieces are one tune: both in its "commands"
    assert len(doc["provenance"]["commands"]) == 2


def test_dry_run_lists_the_plan_and_its_time(tiny, tmp_path, capsys):
    assert tune(["--store", str(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "weight_only" in out and "split_k" in out and "helion" in out and "on 2 GPUs: expected" in out
    assert not (tmp_path / "cpu").exists()  # a dry run writes nothing
    # No GPU to start from, no --full given: said so, and how to plan as on a GPU from a CPU machine
    assert "every candidate of the pools (no tuned GPU of its kind to start from)" in out and "(--full)" not in out
    assert "`--like h200` plans as on that GPU" in out


def test_dry_run_like_a_stored_gpu_prunes_to_its_winners(capsys):
    # The package's store: a GPU of the H100's compute capability (the H200) times what won there.
    assert cli.main(["tune", "--dry-run", "--like", "h200"]) == 0
    out = capsys.readouterr().out
    assert "those that won at each M on h100" in out and "on 1 GPU : expected" in out and "--like h200`" not in out
    # Issue 52: a bring-up in 25 minutes on one H200 and 15 on two, start-up included: the plan fits the
    # default budgets (24.2 and 14 minutes of tuning), which then shorten no unit's candidate list.
    for size, budget in ((1, 24.2), (2, 14.0)):
        line = next(v for v in out.splitlines() if v.startswith(f"on {size} GPU"))
        expected = float(line.split("expected")[1].split("min")[0])
        assert expected <= budget and f"budget {budget:5.1f} min" in line and "shortens" not in line, line


def test_layers_tune_the_named_layers_end_to_end(tiny, tmp_path, capsys):
    """--layers: the weight-only units of these (K, N), not the presets'
    (the tiny plan's LAYER), tuned on the interpreter and written under
    their own buckets, which the dispatch then finds by shape."""
    from qgemm_bench.backends.triton_kernels import weight_only_configs as woc

    args = ["--store", str(tmp_path), "--op", "int4_gemm", "--backends", "triton", "--budget-s", "600"]
    assert tune([*args, "--layers", "128x32,384x64"]) == 0
    assert "tuned 4 entries" in capsys.readouterr().out
    doc = read_back(tmp_path, "weight_only")
    assert set(doc["kernels"]["int4_gemm"]) == {"M4_K128_N32", "M4_K384_N64"}
    assert set(doc["kernels"]["int4_gemm_fused"]) == {"M8_K128_N32", "M8_K384_N64"}
    for k, n in ((128, 32), (384, 64)):  # each shape its own bucket, not the other's
        assert woc.bucket_of(woc.INT4, "fused", 7, k, n, doc["gpu"], doc) == f"M8_K{k}_N{n}"
    assert "--layers 128x32,384x64" in doc["provenance"]["command"]


def test_layers_name_helions_buckets_too(capsys):
    # Helion's weight-only buckets: the named layers' instead of K = N = 8192 (2 units at M 1, 16 either way).
    argv = ["tune", "--dry-run", "--like", "h200", "--backends", "helion", "--op", "int4_gemm", "--formats", "int4",
            "--ms", "1,16"]
    for extra, units in (([], 2), (["--layers", "8192x5120,4096x8192"], 4)):
        assert cli.main([*argv, *extra]) == 0
        assert re.search(rf"^helion +{units} ", capsys.readouterr().out, re.M), extra


def test_helion_layers_adds_a_bucket_per_default_run_layer():
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.operators.common import LLAMA3_8B_KN, LLAMA3_70B_KN
    from qgemm_bench.tuning import plan

    h200 = DEFAULT.entries()["h200"]
    base = plan.helion_units(["int4_gemm"], ["int4"], {1, 16}, None, h200)
    assert {u.shape[1:] for u in base} == {(8192, 8192)}
    layers = plan.helion_units(["int4_gemm"], ["int4"], {1, 16}, None, h200, plan.helion_kns(True))
    assert {u.shape[1:] for u in layers} == set(LLAMA3_8B_KN + LLAMA3_70B_KN)  # 8192 x 8192 among them, once
    assert len(layers) == 2 * len(set(LLAMA3_8B_KN + LLAMA3_70B_KN)) and all(u.family == "helion" for u in layers)


def test_helion_ms_reach_1024_and_variants_add_candidates(capsys):
    """--ms names Helion's M too, 1024 included (the fused path's last M,
    outside the default HELION_WEIGHT_ONLY_M); an M where Helion dequantizes
    has no unit. --helion-variants adds the fused units' TMA / persistent
    variants to the plan's count, and needs --backends helion."""
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.tuning import candidates as cands
    from qgemm_bench.tuning import plan

    h200 = DEFAULT.entries()["h200"]
    units = plan.helion_units(["int4_gemm"], ["int4"], {1024, 2048}, None, h200)
    assert [u.shape for u in units] == [(1024, 8192, 8192)] and 1024 not in cands.HELION_WEIGHT_ONLY_M
    more = plan.helion_units(["int4_gemm"], ["int4"], {1024}, None, h200, variants=True)
    assert more[0].candidates > units[0].candidates
    assert cli.main(["tune", "--dry-run", "--like", "h200", "--backends", "triton", "--helion-variants"]) == 2
    assert "--helion-variants: Helion's buckets" in capsys.readouterr().err
    # Only M where Helion dequantizes: nothing to tune, and the line says why.
    assert cli.main(["tune", "--dry-run", "--like", "h200", "--backends", "helion", "--op", "int4_gemm",
                     "--ms", "2048"]) == 2
    assert capsys.readouterr().err.strip().endswith("above M = 1024 Helion's weight-only kernels dequantize and "
                                                    "call cuBLAS")
    # Nothing for another reason (the op's format left out): no such reason given.
    assert cli.main(["tune", "--dry-run", "--like", "h200", "--backends", "helion", "--op", "int4_gemm",
                     "--formats", "nvfp4", "--ms", "2048"]) == 2
    assert capsys.readouterr().err.strip().endswith("(--op, --backends, --formats, --ms)")


def test_the_second_round_retimes_only_the_fastest_of_the_first():
    """timing.time_rounds with keep (the weight-only passes' TABLE_KEEP): the
    reverse round times the `keep` fastest of the first, the others keep
    their first time; a candidate that failed is no contender."""
    from qgemm_bench.tuning.timing import time_rounds

    first = {"a": 5.0, "b": 1.0, "c": 3.0, "d": 2.0, "e": 9.0, "f": 0.5}
    seen = []

    def time_one(name):
        seen.append(name)
        if name == "f":
            raise RuntimeError("a config the GPU refuses")
        return first[name] + (seen.count(name) - 1)  # the second round 1 us slower

    got = time_rounds(list("abcdef"), time_one, rounds=2, keep=3)
    assert seen == list("abcdef") + ["d", "c", "b"]  # b, c and d, reversed
    assert got[:5] == [5.0, 1.5, 3.5, 2.5, 9.0] and isinstance(got[5], RuntimeError)
    seen.clear()
    assert time_rounds(list("abcde"), time_one, rounds=2) == [5.5, 1.5, 3.5, 2.5, 9.5] and len(seen) == 10


def test_split_k_shares_keep_every_shapes_floor():
    """split_k.first_share over the skinny preset: every shape at least
    SHAPE_FLOOR_S where the batch has that much, heavier shapes (more
    candidates) never less than lighter ones, the whole batch spent; with
    less than the floors, equal shares."""
    from qgemm_bench.operators import split_k_gemm
    from qgemm_bench.tuning import split_k as t

    w = [len(t.candidates(*s, 132)) + t.TOP * len(t.VARIANTS) for s in split_k_gemm.PRESETS["skinny"]]
    for total in (37 * 12.5, 555.0):
        left, shares = total, []
        for i in range(len(w)):
            shares.append(t.first_share(left, w[i:]))
            left -= shares[-1]
        assert min(shares) >= t.SHAPE_FLOOR_S - 1e-6 and sum(shares) == pytest.approx(total)
        assert all(a >= b - 1e-6 for wa, a in zip(w, shares, strict=True) for wb, b in zip(w, shares, strict=True)
                   if wa > wb)
        assert max(shares) > 1.3 * t.SHAPE_FLOOR_S  # the heavy shapes get more than the floor
    assert t.first_share(30.0, [1, 50, 9]) == pytest.approx(10.0)


def test_a_split_path_the_fused_path_outran_times_the_prior_winner_alone():
    """candidates.unit_pool: where the prior's fused path was faster at every
    bucket of M it timed both at, the split unit times the bucket's prior
    winner (as stored, then its PDL twin) alone; where the split path won
    one bucket, or without the fused entries, the pruned pool."""
    from qgemm_bench.tuning import candidates as cands

    a, b = cands.weight_only_pool(0, "split", 16)[:2]
    split = {"M16_K4096_N4096": {"config": {**a, "PDL": 2}, "us": 10.0}, "M16_K8192_N8192": {"config": b, "us": 20.0},
             "M1_K4096_N4096": {"config": b, "us": 5.0}}
    fused = {"M16_K4096_N4096": {"config": a, "us": 9.0}, "M16_K8192_N8192": {"config": a, "us": 19.0},
             "M1_K4096_N4096": {"config": a, "us": 6.0}}
    first = split["M16_K4096_N4096"]["config"]
    assert cands.split_outrun(split, fused, 16) and not cands.split_outrun(split, fused, 1)
    assert not cands.split_outrun(split, fused, 32)  # nothing timed at M = 32
    assert cands.unit_pool(0, "split", 16, split, first, fused) == [first, a]
    whole = cands.unit_pool(0, "split", 16, split, first)
    assert whole[0] == first and a in whole and b in whole
    assert cands.unit_pool(0, "split", 16, split, first, {**fused, "M16_K8192_N8192": {"us": 21.0}}) == whole


@pytest.mark.parametrize("argv,message", [
    (["--op", "fp8_gemm"], "--op 'fp8_gemm': expected int4_gemm, nvfp4_gemm, split_k_gemm or all"),
    (["--backends", "triton,cuda"], "--backends 'triton,cuda': expected a comma-separated subset of triton, helion"),
    (["--formats", "int4,int4"], "--formats 'int4,int4'"),
    (["--ms", "1,x"], "expected comma-separated integers"),
    (["--ms", "3"], "[3] not among the tables' M"),
    (["--groups", "48"], "--groups '48'"),
    (["--op", "nvfp4_gemm", "--groups", "32"], "--groups: int4 group sizes"),
    (["--budget-s", "0"], "argument --budget-s"),
    (["--budget-s", "1e300"], "expected a number in (0, 604800] s"),  # printed as 300 digits, before
    (["--like", "h100"], "--like plans a --dry-run"),
    (["--dry-run", "--like", "z900"], "--like z900: no store entry"),
    (["--dry-run", "--store", ""], "--store '': expected a folder"),  # was the package's store
    # The split-K tune ignored them without a word.
    (["--dry-run", "--op", "split_k_gemm", "--ms", "1"], "--ms: the weight-only GEMMs' (int4_gemm, nvfp4_gemm)"),
    (["--dry-run", "--op", "split_k_gemm", "--formats", "nvfp4", "--helion-layers"],
     "--formats, --helion-layers: the weight-only GEMMs' (int4_gemm, nvfp4_gemm), not split_k_gemm's"),
    (["--backends", "triton", "--helion-layers"], "--helion-layers: Helion's buckets"),
    (["--dry-run", "--layers", "8192"], "--layers '8192': expected KxN pairs of positive integers"),
    (["--dry-run", "--layers", "8192x5120,x4"], "expected comma-separated KxN"),
    (["--dry-run", "--layers", "8000x5120"], "K must be a multiple of 128"),
    (["--dry-run", "--layers", "8192x5120", "--op", "split_k_gemm"], "--layers: the weight-only GEMMs'"),
    (["--dry-run", "--layers", "8192x5120", "--helion-layers"], "--layers and --helion-layers"),
    ([], "tune needs a CUDA GPU"),
    # A --dry-run without a GPU planned for the CPU whatever the name said.
    (["--dry-run", "--device", "tpu"], "--device 'tpu': expected auto, cpu, cuda or cuda:N"),
    (["--dry-run", "--device", "mps"], "--device mps: only cpu and cuda devices are supported"),
    (["--dry-run", "--device", "cuda"], "--device cuda: no CUDA device is available here; --dry-run --like NAME"),
])
def test_bad_usage_is_one_line_and_exit_2(argv, message, capsys):
    assert cli.main(["tune", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


@pytest.mark.parametrize("name,text,message", [
    ("target.json", "{oops", "z100/target.json: not a readable JSON file (Expecting property name"),
    ("target.json", "[]", "z100/target.json: not a GPU's target.json (AttributeError: "),
    ("target.json", '{"name": "z100"}', "z100/target.json: not a GPU's target.json (KeyError: 'sms')"),
    ("weight_only.json", "{oops", "z100/weight_only.json: not a readable JSON file (Expecting property name"),
    # Read as the prior without its table's check: AttributeError in the planner.
    ("weight_only.json", "[]", 'z100/weight_only.json: expected {"gpu": NAME, "kernels": '),
    ("split_k.json", '{"entries": 5}', 'z100/split_k.json: expected {"entries": '),
])
def test_a_store_file_that_does_not_parse_is_one_line(tmp_path, capsys, name, text, message):
    # A traceback (ValueError, KeyError, ...) from the store's reader, before.
    entry = tmp_path / "store" / "z100"
    entry.mkdir(parents=True)
    (entry / "target.json").write_text((Path(cli.__file__).parent / "configs/h100/target.json").read_text())
    (entry / name).write_text(text)
    assert cli.main(["tune", "--dry-run", "--store", str(tmp_path / "store"), "--like", "z100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {entry}/") and message in err[0], err


def test_a_store_it_cannot_write_is_one_line_before_any_timing(tiny, tmp_path, monkeypatch, capsys):
    # A file where the store's folder would go: nothing can be created under it.
    (tmp_path / "blocked").write_text("")
    assert tune(["--op", "split_k_gemm", "--store", str(tmp_path / "blocked" / "store")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --store {tmp_path / 'blocked' / 'store'}: cannot write there (")
    assert "give --store a folder you can write" in err[0]
    # Without --store: the package's own store (read-only in a system install), named as such.
    from qgemm_bench.configs import store

    monkeypatch.setattr(store, "ROOT", tmp_path / "blocked" / "configs")
    assert tune(["--op", "split_k_gemm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: the package's config store {tmp_path / 'blocked' / 'configs'}: "
                                               "cannot write there (")


def test_under_torchrun_every_rank_stops_at_a_store_it_cannot_write(tiny, tmp_path, monkeypatch, capsys):
    # Rank 1 of 2 (its collectives faked as rank 0's answers): rank 0 stops at its journal write, and
    # rank 1 went on to time its share, then raised a traceback at its own journal's first line.
    from qgemm_bench.harness import distributed
    from qgemm_bench.tuning import command

    monkeypatch.setattr(distributed, "from_env", lambda: distributed.World(1, 2, 1))
    monkeypatch.setattr(distributed, "start", lambda world, device: device)
    monkeypatch.setattr(distributed, "stop", lambda: None)
    priors = {"weight_only": None, "helion": None, "split_k": None, "from": None, "gpus": {}}
    monkeypatch.setattr(distributed, "broadcast", lambda obj, world: priors if obj is None else obj)
    timed = []
    monkeypatch.setattr(command.Tune, "tune_units", lambda self, *a: timed.append(a) or ([], [], ""))
    (tmp_path / "blocked").write_text("")
    assert tune(["--op", "split_k_gemm", "--store", str(tmp_path / "blocked" / "store")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write there (" in err[0] and not timed, err


def test_cpu_mode_needs_the_interpreter(monkeypatch, capsys):
    # In a process that imported triton without it, too late to turn it on.
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert tune(["--dry-run"]) == 2
    assert "set TRITON_INTERPRET=1" in capsys.readouterr().err


def test_cpu_mode_turns_the_interpreter_on_as_the_sweep_does(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, str(Path(__file__).resolve().parent.parent / "runner.py"), "tune", "--device",
                        "cpu", "--dry-run", "--op", "split_k_gemm"], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=300)
    assert r.returncode == 0 and "expected" in r.stdout, r.stderr[-2000:]


def test_help_documents_a_bring_up(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["tune", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for text in ("bring up a GPU from nothing", "torchrun --nproc-per-node 2 runner.py tune", "--resume",
                 "qgemm_bench/configs/<gpu>/", "weight_only.json", "provenance", "10.3 minutes", "20.9 minutes"):
        assert text in out, text


TINY_CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from _pytest.monkeypatch import MonkeyPatch
import tests.test_tune as t
t.tiny.__wrapped__(MonkeyPatch())
from qgemm_bench import cli
sys.exit(cli.main(["tune", "--device", "cpu", *sys.argv[1:]]))
"""


def test_under_torchrun_ranks_share_the_units_and_rank_0_writes(tmp_path):
    """Two ranks (gloo, CPU): each tunes its share of the units; rank 0
    alone writes the store, which holds every rank's entries."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    script = tmp_path / "child.py"
    script.write_text(TINY_CHILD.format(repo=str(repo)))
    store = tmp_path / "store"
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        str(script), "--store", str(store), "--op", "int4_gemm", "--backends", "triton",
                        "--budget-s", "600"], capture_output=True, text=True, cwd=repo, timeout=300,
                       env={**__import__("os").environ, "TRITON_INTERPRET": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("tuned 2 entries") == 1  # rank 0 alone reports (and writes)
    doc = json.loads((store / "cpu" / "weight_only.json").read_text())
    assert set(doc["kernels"]) == {"int4_gemm", "int4_gemm_fused"}  # one unit on each rank
    assert doc["provenance"]["world_size"] == 2 and doc["provenance"]["complete"] is True
    assert not (store / "cpu" / ".tune").exists()


def test_default_candidates_are_what_won_at_each_m_on_the_prior_gpu():
    """candidates.pruned / with_pdl / ws_pruned / pdl_won_at against a made-up
    prior table: the bucket's own winner first, then the others that won at
    that M; PDL twins only of configs that won with PDL there; WS tiles the
    bucket's own and the most frequent at M; everything without a prior."""
    from qgemm_bench.tuning import candidates as cands

    a, b, c, d = (triton_config(16, bn, 64, s) for bn, s in ((32, 2), (64, 2), (64, 4), (128, 8)))
    w1, w2, w3, w4 = ({"BLOCK_M": 64, "BLOCK_N": bn, "BLOCK_K": 64, "num_stages": st} for bn, st in
                      ((64, 3), (128, 3), (64, 4), (128, 4)))
    prior = {"M16_K4096_N4096": {"config": {**a, "PDL": 2}}, "M16_K8192_N8192": {"config": b},
             "M16_K4096_N14336": {"config": b, "pointer_config": c},
             "M64_K4096_N4096": {"config": {**d, "WS": w1}},
             "M64_K8192_N8192": {"config": {**d, "WS": {**w2, "PDL": 1}}},
             "M64_K4096_N14336": {"config": {**d, "WS": w2}}, "M64_K1024_N1024": {"config": {**d, "WS": w3}}}
    pool = [a, b, c, d]
    assert cands.pruned(pool, prior, 16, first=a) == [a, b, c]  # d never won at 16
    assert cands.pruned(pool, prior, 16) == [b, a, c]  # most frequent first
    assert cands.pruned(pool, None, 16) == pool and cands.pruned(pool, {}, 16) == pool
    assert cands.with_pdl([a, b], prior, 16) == [a, b, {**a, "PDL": 2}]  # b won without PDL
    assert cands.with_pdl([a, b], None, 16) == [a, b, {**a, "PDL": 2}, {**b, "PDL": 2}]
    tiles = [w1, w2, w3, w4]
    assert cands.ws_pruned(tiles, prior, 64, "M64_K4096_N4096") == [w1, w2, w3]  # own, then the 2 most frequent
    assert cands.ws_pruned(tiles, prior, 16, "M16_K4096_N4096") == []  # WS never won at 16: no pass
    assert cands.ws_pruned(tiles, None, 64) == tiles
    assert cands.pdl_won_at(prior, 64, "M64_K8192_N8192") and not cands.pdl_won_at(prior, 64, "M64_K4096_N4096")
    assert cands.pdl_won_at(prior, 16, "M16_K2_N2") and cands.pdl_won_at(None, 128)


# ------------------------------------------------------------------ the prior GPU's configs first

PRIOR = "prior"  # a made-up tuned GPU of the CPU's "compute capability" (none), in the test's store
PRIOR_SK = {"atomic": {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32, "SPLIT_K": 2, "num_warps": 2, "num_stages": 1},
            "deterministic": {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 64, "SPLIT_K": 2, "num_warps": 2,
                              "num_stages": 1, "REDUCE": "kernel"}}  # neither among SK: only the prior times it


def prior_store(root: Path) -> None:
    """A store holding the prior GPU's split-K entry for SPLIT_K_SHAPE."""
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc
    from qgemm_bench.target import Target

    cpu = Target.cpu()
    like = Target(PRIOR, "the prior", None, cpu.sms, cpu.smem_per_block, cpu.l2_bytes)
    (root / PRIOR).mkdir(parents=True)
    (root / PRIOR / "target.json").write_text(json.dumps(like.to_json()))
    entries = {mode: {skc.key(*SPLIT_K_SHAPE): {"config": c, "us": 1.0, "tuned": "made up"}}
               for mode, c in PRIOR_SK.items()}
    (root / PRIOR / "split_k.json").write_text(json.dumps({"gpu": PRIOR, "entries": entries}))


@pytest.fixture
def measured(monkeypatch):
    """Every split-K config the tuner checks and times, in order: (mode, config)."""
    from qgemm_bench.tuning import split_k

    calls, measure = [], split_k.ShapeTuner.measure

    def spy(self, mode, c):
        calls.append((mode, dict(c)))
        return measure(self, mode, c)

    monkeypatch.setattr(split_k.ShapeTuner, "measure", spy)
    return calls


SK_ARGS = ["--op", "split_k_gemm", "--backends", "triton"]


def test_split_k_times_the_prior_gpus_config_first(tiny, tmp_path, measured, capsys):
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc

    prior_store(tmp_path)
    # 60 s a shape: under CI's load an 8 s share was cut short (cut_short 1); an unloaded run takes ~3 s
    assert tune(["--store", str(tmp_path), *SK_ARGS, "--budget-s", "600", "--shape-budget-s", "60"]) == 0, \
        capsys.readouterr().err
    for mode_id, mode in enumerate(skc.MODES):
        first = next(c for m, c in measured if m == mode_id)
        assert first == PRIOR_SK[mode], (mode, measured)
    doc = read_back(tmp_path, "split_k")
    assert doc["provenance"]["priors"]["split_k"] == PRIOR and doc["provenance"]["cut_short"] == 0
    tiles = lambda c: tuple(c[x] for x in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K"))  # noqa: E731
    for mode in skc.MODES:  # timed here: the prior's or a candidate's tiles (the second pass varies warps,
        e = doc["entries"][mode][skc.key(*SPLIT_K_SHAPE)]  # stages, PDL and the plane sum: CPU timing picks any)
        assert e["us"] > 0 and tiles(e["config"]) in {tiles(c) for c in (*SK, PRIOR_SK[mode])}, e


def test_a_shape_cut_short_still_times_the_prior_config():
    """ShapeTuner.tune_mode with its share already spent (until in the
    past) times the lead (the prior's config) and nothing else."""
    from qgemm_bench.backends.triton_kernels import split_k as sk
    from qgemm_bench.tuning import split_k

    tuner = split_k.ShapeTuner(SPLIT_K_SHAPE, DEV, Target.cpu(), 0.0, 1.0, [], torch.float16)
    import time

    now = time.monotonic()
    r = tuner.tune_mode(sk.ATOMIC, split_k.Compiler(0), now - 1, now + 120, lead=[PRIOR_SK["atomic"]])
    assert r["config"] == PRIOR_SK["atomic"] and r["timed"] == 1 and r["candidates"] > 1


def test_a_split_k_unit_not_timed_keeps_the_prior_config_and_resume_tunes_it(tiny, tmp_path, measured, capsys):
    """A budget of ~0: the shape is not reached (or times nothing); its entries are
    the prior's configs marked untimed, the tune is not complete; --resume tunes it,
    and the provenance lists both commands."""
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc
    from qgemm_bench.target import Target
    from qgemm_bench.tuning.journal import Journal

    prior_store(tmp_path)
    first = ["--store", str(tmp_path), *SK_ARGS, "--budget-s", "600", "--shape-budget-s", "0.001"]
    assert tune(first) == 0, capsys.readouterr().err
    assert "the tune is unfinished" in capsys.readouterr().err
    doc = json.loads((tmp_path / "cpu" / "split_k.json").read_text())
    prov = doc["provenance"]
    assert prov["complete"] is False and prov["not_timed"] == 1 and prov["units_planned"] == 1
    for mode in skc.MODES:
        e = doc["entries"][mode][skc.key(*SPLIT_K_SHAPE)]
        assert e["config"] == PRIOR_SK[mode] and "us" not in e
        assert e["tuned"] == f"the {PRIOR} entry's config, not timed on cpu"
    assert Journal(tmp_path, Target.cpu().name).exists()
    again = ["--store", str(tmp_path), *SK_ARGS, "--budget-s", "600", "--shape-budget-s", "60", "--resume"]
    assert tune(again) == 0, capsys.readouterr().err
    doc = read_back(tmp_path, "split_k")
    assert doc["provenance"]["not_timed"] == 0
    assert doc["provenance"]["commands"] == [" ".join(["qgemm-bench tune --device cpu", *a]) for a in (first, again)]
    assert all(doc["entries"][mode][skc.key(*SPLIT_K_SHAPE)]["us"] > 0 for mode in skc.MODES)


def test_units_cut_short_are_counted(tiny, tmp_path, capsys):
    # A unit budget of ~0: each weight-only unit checks its two candidates (two at least) and times one
    # round of them, not two: both units timed (complete), both cut short.
    args = ["--store", str(tmp_path), "--op", "int4_gemm", "--backends", "triton", "--budget-s", "600"]
    assert tune([*args, "--shape-budget-s", "0.001"]) == 0, capsys.readouterr().err
    prov = read_back(tmp_path, "weight_only")["provenance"]
    assert prov["cut_short"] == 2 and prov["not_timed"] == 0 and prov["commands"] == [prov["command"]]


def test_weight_only_times_the_prior_buckets_winner_first(monkeypatch):
    """tune_unit's pool starts with the bucket's winner on the prior GPU as
    stored, its PDL twin rather than the config without PDL."""
    from qgemm_bench.backends.config_buckets import bucket
    from qgemm_bench.tuning import candidates as cands
    from qgemm_bench.tuning import weight_only

    m, (k, n) = 16, LAYER
    pool = cands.weight_only_pool(0, "split", m)
    winner = {**pool[-1], "PDL": 2}
    seen = []
    monkeypatch.setattr(weight_only, "tune_entry", lambda *a, **kw: seen.append(a[5]))
    weight_only.tune_unit("int4", "split", m, k, n, {bucket(m, k, n): {"config": winner}}, stop=0.0)
    assert seen[0][0] == winner and pool[-1] in seen[0]


def test_weight_only_unit_times_rot_decode_where_it_won_on_the_prior_gpu(monkeypatch):
    """tune_unit's last pass, rot (no pool holds ROT_DECODE): NVFP4 fused
    units up to M = 64 where ROT_DECODE won on the prior GPU at the bucket
    (else at any bucket of M) or with no prior (--full); not int4, the
    split path, M > 64, where the prior's pass kept the config or where it
    never ran (the H100's table: the bring-up's budget). The plan counts it
    as it runs (plan.weight_only_units)."""
    from qgemm_bench.backends.config_buckets import bucket
    from qgemm_bench.tuning import candidates as cands
    from qgemm_bench.tuning import plan, weight_only

    rot = {**triton_config(16, 128, 128, 8), "ROT_DECODE": True}
    plain = triton_config(16, 128, 128, 8)
    prior = {"M1_K8192_N8192": {"config": rot, "rot_of": plain, "rot_us": {"0": 2.0, "1": 1.0}},
             "M1_K4096_N4096": {"config": plain, "rot_us": {"0": 1.0, "1": 2.0}},
             "M16_K8192_N8192": {"config": plain, "rot_us": {"0": 1.0, "1": 2.0}},
             "M32_K8192_N8192": {"config": plain}}  # M 32: the pass never ran there
    ran = []
    monkeypatch.setattr(weight_only, "tune_entry", lambda *a, **kw: {"config": plain, "us": 1.0, "tuned": ""})
    monkeypatch.setattr(weight_only, "ws_entry", lambda *a, **kw: None)
    monkeypatch.setattr(weight_only, "pdl_entry", lambda *a, **kw: None)
    monkeypatch.setattr(weight_only, "rot_entry", lambda fmt, path, key, entry, stop=None: ran.append(key))
    cases = (("nvfp4", "fused", 1, (8192, 8192), prior),  # won at the bucket
             ("nvfp4", "fused", 1, (4096, 4096), prior),  # kept the config there
             ("nvfp4", "fused", 1, (14336, 4096), prior),  # no bucket: won at M 1
             ("nvfp4", "fused", 16, (8192, 8192), prior),  # not at M 16
             ("nvfp4", "fused", 32, (4096, 4096), prior),  # never ran at M 32: no ROT there
             ("nvfp4", "fused", 64, (8192, 8192), None),  # --full
             ("nvfp4", "fused", 128, (8192, 8192), None),  # past the split tiles
             ("nvfp4", "split", 1, (8192, 8192), None), ("int4", "fused", 1, (8192, 8192), None))
    for fmt, path, m, (k, n), p in cases:
        weight_only.tune_unit(fmt, path, m, k, n, p, stop=0.0)
    assert ran == [bucket(*s) for s in ((1, 8192, 8192), (1, 14336, 4096), (64, 8192, 8192))]
    units = {u.id: u for u in plan.weight_only_units(("nvfp4",), {1, 128}, None)}
    pool = len(cands.unit_pool(1, "fused", 1, None))
    assert units["weight_only/nvfp4_gemm/fused/1x8192x8192"].candidates == pool + cands.ROT_VARIANTS
    assert units["weight_only/nvfp4_gemm/split/1x8192x8192"].candidates == len(cands.unit_pool(1, "split", 1, None))


def test_a_prior_with_rot_decode_winners_prunes_by_the_configs_they_replaced():
    """A ROT_DECODE winner is in no pool: the prior's pruning reads the
    config its rot pass replaced (rot_of), which tune_unit times first as
    the bucket's winner (prior_first), its PDL twin too; without rot_of the
    pools would fall back whole and the winner go untimed."""
    from qgemm_bench.tuning import candidates as cands

    pool = cands.weight_only_pool(1, "fused", 1)
    a, b = pool[0], pool[1]
    a_pdl = {**a, "PDL": 2}
    prior = {"M1_K8192_N8192": {"config": {**a, "SPLIT_K": 2, "ROT_DECODE": True}, "rot_of": a_pdl},
             "M1_K4096_N4096": {"config": b}}
    first = cands.prior_first(prior, "M1_K8192_N8192")
    assert first == a_pdl and cands.prior_first(prior, "M1_K4096_N4096") == b
    got = cands.unit_pool(1, "fused", 1, prior, first)
    assert got[0] == a_pdl and a in got and b in got and len(got) < len(pool), got


def test_versions_of_a_cuda_device_without_an_index_name_the_driver(monkeypatch):
    """environment.versions (the store's and every tuner pass's): the
    weight-only tuner's device is torch.device("cuda"), no index; its
    records said no driver (nvidia-smi --id=None fails). The GPU faked:
    nvidia-smi answers only an index it has."""
    from types import SimpleNamespace

    from qgemm_bench.harness import environment

    props = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132,
                            L2_cache_size=60 << 20, total_memory=140 << 30)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    asked = []

    def run(cmd, cwd=None):
        if cmd[0] != "nvidia-smi":
            return None  # git: no commit here
        asked.append(cmd[1])
        return "570.86.15" if cmd[1] in ("--id=0", "--id=1") else None

    monkeypatch.setattr(environment, "_run", run)
    for device, want in ((torch.device("cuda"), "--id=1"), (torch.device("cuda", 0), "--id=0")):
        asked.clear()
        got = environment.versions(device)
        assert got["gpu"] == "NVIDIA H200" and got["driver"] == "570.86.15" and asked == [want], (device, got)


@pytest.mark.parametrize("op,family,text", [("split_k_gemm", "split_k", "[]"),
                                            ("split_k_gemm", "split_k", '{"entries": 5}'),
                                            ("int4_gemm", "weight_only", '{"kernels": []}')])
def test_this_gpus_own_family_file_of_another_layout_is_one_line(tiny, tmp_path, capsys, op, family, text):
    # The tune keeps this GPU's entries it does not reach, so it reads its own files first.
    from qgemm_bench.target import Target

    own = tmp_path / Target.cpu().name
    own.mkdir()
    (own / f"{family}.json").write_text(text)
    assert tune(["--store", str(tmp_path), "--op", op, "--backends", "triton", "--budget-s", "600"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and f"{family}.json" in err[0], err
    assert (own / f"{family}.json").read_text() == text  # left as it was


def test_the_pf_pass_times_each_pdl_entry_against_its_prefetch_twins(tmp_path, measured, capsys):
    """split_k's --pf-pass on the interpreter: the entry that launches with
    PDL 3 and its PF_ROWS 64 and 256 twins are each checked and timed in
    PF_ROUNDS rounds (the second reversed); the entry without PDL is not
    timed; the table written records the pass with the entry it timed."""
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc
    from qgemm_bench.tuning import split_k

    key = skc.key(*SPLIT_K_SHAPE)
    doc = {"entries": {"atomic": {key: {"config": {**SK[0], "PDL": 3}, "us": 1.0, "tuned": "made up"}},
                       "deterministic": {key: {"config": SK[1], "us": 1.0, "tuned": "made up"}}}}
    out = tmp_path / "split_k.json"
    args = pf_args(doc, out)
    assert split_k.pf_pass(args, [], DEV, Target.cpu(), torch.float16) == 0, capsys.readouterr().err
    rows = [c.get("PF_ROWS", 16) for _, c in measured]
    assert all(m == 0 for m, _ in measured) and rows == [16, 64, 256, 256, 64, 16, 16, 64, 256], measured
    written = json.loads(out.read_text())
    assert written["entries"]["deterministic"][key]["config"] == SK[1]
    assert written["provenance"]["pass"] == "split_k pf"


def pf_args(base, out):
    """split_k.pf_pass's arguments, as its command line would give them."""
    from types import SimpleNamespace

    return SimpleNamespace(base=base, out=out, limit_s=600.0, warmup_ms=0.0, rep_ms=1.0)


def pf_table(*configs):
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc

    return {"gpu": "cpu", "provenance": {"pass": "made up"},
            "entries": {"atomic": {skc.key(*SPLIT_K_SHAPE): {"config": c, "us": 1.0, "err": 9e-9, "tuned": "made up"}
                                   for c in configs}, "deterministic": {}}}


@pytest.mark.parametrize("times, taken", [({16: 10.0, 64: 9.5, 256: 8.0}, 256),  # the fastest twin, by 20%
                                          ({16: 10.0, 64: 9.95, 256: 10.2}, 16),  # 0.5% faster: the entry stays
                                          ({16: 10.0, 64: None, 256: 9.0}, 256)])  # a twin that failed its check
def test_the_pf_pass_keeps_the_fastest_where_it_is_over_1pct_faster(tmp_path, monkeypatch, capsys, times, taken):
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc
    from qgemm_bench.tuning import split_k

    def measure(self, mode, c):
        us = times[c.get("PF_ROWS", 16)]
        return (us, 1e-3 * c.get("PF_ROWS", 16), "ok") if us is not None else (None, 0.5, "inaccurate: 5e-01")

    monkeypatch.setattr(split_k.ShapeTuner, "measure", measure)
    out = tmp_path / "t.json"
    args = pf_args(pf_table({**SK[0], "PDL": 2}), out)
    assert split_k.pf_pass(args, [SPLIT_K_SHAPE], DEV, Target.cpu(), torch.float16) == 0
    e = json.loads(out.read_text())["entries"]["atomic"][skc.key(*SPLIT_K_SHAPE)]
    assert e["config"].get("PF_ROWS", 16) == taken
    if taken != 16:
        assert e["us"] == times[taken] and e["err"] == pytest.approx(1e-3 * taken) and "pf pass" in e["tuned"]
    else:
        assert e == {"config": {**SK[0], "PDL": 2}, "us": 1.0, "err": 9e-9, "tuned": "made up"}
    printed = capsys.readouterr().out
    assert ("inaccurate: 5e-01" in printed) == (None in times.values()), printed


def test_the_pf_pass_refuses_shapes_not_in_its_table_and_writes_nothing_with_nothing_to_time(tmp_path, capsys):
    from qgemm_bench.tuning import split_k

    out = tmp_path / "t.json"
    args = pf_args(pf_table({**SK[0], "PDL": 3}), out)
    assert split_k.pf_pass(args, [Shape(8, 512, 16)], DEV, Target.cpu(), torch.float16) == 2
    assert "--shapes 8x512x16: not in the table" in capsys.readouterr().err and not out.exists()
    args.base = pf_table(SK[0])  # no PDL: nothing to time
    assert split_k.pf_pass(args, [], DEV, Target.cpu(), torch.float16) == 0
    assert "nothing to time" in capsys.readouterr().out and not out.exists()
    args.base = {**pf_table({**SK[0], "PDL": 3}), "gpu": "h100"}
    assert split_k.pf_pass(args, [], DEV, Target.cpu(), torch.float16) == 2
    assert "h100's, not this GPU's (cpu)" in capsys.readouterr().err


def test_tune_mode_times_the_best_configs_prefetch_twins(monkeypatch):
    """ShapeTuner.tune_mode: once the PDL twins are timed, the best config so
    far (here PDL 3) is timed with PF_ROWS 64 and 256 too, and may win."""
    import time

    from qgemm_bench.backends.triton_kernels import split_k as sk
    from qgemm_bench.tuning import split_k

    monkeypatch.setattr(split_k, "candidates", lambda m, k, n, sms: [dict(SK[0])])
    monkeypatch.setattr(split_k, "variants", lambda c: [])
    seen = []

    def measure(self, mode, c):
        seen.append(dict(c))
        return (1.0 if c.get("PDL") == 3 else 2.0) - 0.1 * (c.get("PF_ROWS") == 256), 1e-3, "ok"

    monkeypatch.setattr(split_k.ShapeTuner, "measure", measure)
    tuner = split_k.ShapeTuner(SPLIT_K_SHAPE, DEV, Target.cpu(), 0.0, 1.0, [], torch.float16)
    now = time.monotonic()
    r = tuner.tune_mode(sk.ATOMIC, split_k.Compiler(0), now + 60, now + 120)
    assert r["config"] == {**SK[0], "PDL": 3, "PF_ROWS": 256}, seen
    assert [c.get("PF_ROWS") for c in seen if "PF_ROWS" in c][:2] == [64, 256]
    assert not any("PF_ROWS" in c and c.get("PDL") != 3 for c in seen)  # only the best's twins


def test_the_pf_pass_stops_with_exit_1_when_cuda_is_unusable(tmp_path, monkeypatch, capsys):
    """A Fatal from a check (the CUDA context lost) stops the pass, exit 1,
    the table written as it stood; it is not taken for one twin's failure."""
    from qgemm_bench.tuning import split_k

    def measure(self, mode, c):
        raise split_k.Fatal("CUDA unusable after a config: made up")

    monkeypatch.setattr(split_k.ShapeTuner, "measure", measure)
    out = tmp_path / "t.json"
    args = pf_args(pf_table({**SK[0], "PDL": 2}), out)
    assert split_k.pf_pass(args, [], DEV, Target.cpu(), torch.float16) == 1
    assert "stopped: CUDA unusable after a config: made up" in capsys.readouterr().out
    assert json.loads(out.read_text())["entries"]["atomic"]  # written, the entry as it was
