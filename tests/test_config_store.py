"""The config store (qgemm_bench/configs/): one loader, fallback to the
nearest entry of the same compute capability, atomic writes, and the
package's own entries."""

import json

import pytest

from qgemm_bench.configs import store as config_store
from qgemm_bench.configs.store import FAMILIES, PROVENANCE_KEYS, Store
from qgemm_bench.target import Target, slug
from tests.support import fake_target

PROV = {"commit": "abc1234", "date": "2026-11-28T00:00:00+00:00", "command": "qgemm-bench tune", "rounds": 2,
        "versions": {"triton": "3.6.0"}}
TABLE = {"kernels": {"int4_gemm": {"M1_K64_N64": {"config": {"BLOCK_M": 16}}}}}


def test_write_then_load_round_trip(tmp_path):
    store, gpu = Store(tmp_path), fake_target("gpu_a", copy_GBps=3000.0)
    path = store.write(gpu.name, "weight_only", TABLE, PROV, target=gpu)
    e = store.load(gpu, "weight_only")
    assert e.exact and e.gpu == "gpu_a" and e.note == "" and e.path == path
    assert e.table["kernels"] == TABLE["kernels"] and e.table["provenance"] == PROV and e.table["gpu"] == "gpu_a"
    assert store.entries() == {"gpu_a": gpu}  # target.json round trip
    assert not list(tmp_path.rglob("*.tmp"))  # the atomic write left nothing behind
    assert path.stat().st_mode & 0o777 == 0o644  # readable by everyone, as a checked-out file is
    with pytest.raises(ValueError, match="provenance lacks rounds"):
        store.write(gpu.name, "split_k", {}, {k: v for k, v in PROV.items() if k != "rounds"})
    with pytest.raises(ValueError, match="family 'tiles'"):
        store.write(gpu.name, "tiles", {}, PROV)


def test_a_tune_keeps_the_target_json_of_the_same_gpu(tmp_path):
    """Re-tuning a family rewrote target.json with that run's ceilings (the
    H200's copy bandwidth 4153 -> 4211 GB/s): within the ceilings' spread
    the file stays; other facts, a ceiling beyond it, or one the file lacks
    are written."""
    store = Store(tmp_path)
    first = fake_target("gpu_a", copy_GBps=4153.3)
    store.write(first.name, "split_k", {"entries": {}}, PROV, target=first)
    path = tmp_path / "gpu_a" / "target.json"
    kept = path.read_text()
    for same in (fake_target("gpu_a", copy_GBps=4211.1), fake_target("gpu_a")):  # 1.4% off; not measured
        store.write(same.name, "split_k", {"entries": {}}, PROV, target=same)
        assert path.read_text() == kept
    for other in (fake_target("gpu_a", copy_GBps=3000.0), fake_target("gpu_a", sms=66, copy_GBps=3000.0)):
        store.write(other.name, "split_k", {"entries": {}}, PROV, target=other)
        assert json.loads(path.read_text()) == other.to_json()
    bare = fake_target("gpu_b")
    store.write(bare.name, "split_k", {"entries": {}}, PROV, target=bare)
    measured = fake_target("gpu_b", copy_GBps=4000.0)
    store.write(measured.name, "split_k", {"entries": {}}, PROV, target=measured)
    assert json.loads((tmp_path / "gpu_b" / "target.json").read_text())["copy_GBps"] == 4000.0


def test_a_gpu_without_its_own_entry_takes_the_nearest_of_its_compute_capability(tmp_path):
    store = Store(tmp_path)
    near, far, other_cc = (fake_target("gpu_a", sms=132, l2_bytes=50 << 20), fake_target("gpu_b", sms=66),
                           fake_target("gpu_c", (8, 0)))
    for t in (near, far, other_cc):
        store.write(t.name, "split_k", {"entries": {}, "mark": t.name}, PROV, target=t)
    new = fake_target("gpu_n", sms=132, l2_bytes=60 << 20, copy_GBps=4000.0)
    e = store.load(new, "split_k")
    assert (e.gpu, e.exact, e.table["mark"]) == ("gpu_a", False, "gpu_a")
    assert e.note == "configs of gpu_a (same compute capability 9.0; no entry for gpu_n)"
    # No entry of the capability: no table, and the note says so.
    e = store.load(fake_target("gpu_x", (10, 0)), "split_k")
    assert (e.gpu, e.table, e.exact) == (None, {}, False) and "compute capability 10.0" in e.note
    # An entry lacking the family does not serve it; the CPU takes none.
    assert store.load(new, "helion").gpu is None
    assert store.load(Target.cpu(), "split_k").gpu is None
    # Ties break by name, so the choice never depends on the file system.
    store.write("gpu_0", "split_k", {"entries": {}}, PROV, target=fake_target("gpu_0", sms=132, l2_bytes=50 << 20))
    assert store.load(new, "split_k").gpu == "gpu_0"


def test_an_h200_takes_the_h100_entry_and_says_so():
    """The package's store: a GPU of compute capability 9.0 without its own
    entry (an H200 before it is tuned) gets the nearest 9.0 entry in each
    family, and its note names it."""
    stored = config_store.entries()
    same = {g for g, t in stored.items() if t.capability == (9, 0)}
    h200 = Target("h200_untuned", "NVIDIA H200 (no entry)", (9, 0), 132, 227 * 1024, 60 * 2**20, 4180.0)
    for family in FAMILIES:
        e = config_store.load(h200, family)
        assert e.gpu in same and not e.exact and e.table
        assert e.note == f"configs of {e.gpu} (same compute capability 9.0; no entry for h200_untuned)"


def test_the_package_entries_are_complete_and_say_how_they_were_made():
    stored = config_store.entries()
    assert stored
    for gpu, target in stored.items():
        assert target.name == gpu and target.capability and target.sms > 0 and target.smem_per_block > 0
        for family in config_store.DEFAULT.families(gpu):
            doc = config_store.DEFAULT.read(gpu, family)
            assert doc["gpu"] == gpu and set(PROVENANCE_KEYS) <= set(doc["provenance"]), (gpu, family)


HISTORY = {"h100"}  # GPUs whose files keep the tuners' older prose ("source") as history


def test_the_package_entries_record_their_passes_as_fields_not_prose():
    """Every family file of a GPU tuned since (the H200) says how it was
    made in provenance fields alone: no top-level "source" (nor split-K's
    own "versions"), and each pass of a tuner run alone a record with its
    name, command, commit, date and the entries it timed (keys the file
    holds)."""
    from qgemm_bench.configs.store import ENTRY_KEYS

    checked = 0
    for gpu in config_store.entries():
        for family in config_store.DEFAULT.families(gpu):
            doc = config_store.DEFAULT.read(gpu, family)
            if gpu not in HISTORY:
                assert "source" not in doc and "versions" not in doc, (gpu, family)
            for prov in [doc["provenance"], *doc["provenance"].get("earlier", [])]:
                for rec in prov.get("passes", []):
                    where = (gpu, family, rec.get("pass"))
                    assert {"pass", "command", "commit", "date", "entries"} <= set(rec), where
                    assert all(isinstance(rec[k], str) and rec[k] for k in ("pass", "command", "commit", "date")), where
                    assert rec["entries"] and all(keys == sorted(keys, key=config_store._bucket_order)
                                                  for keys in rec["entries"].values()), where
                    if prov is doc["provenance"]:  # the entries it timed are the file's
                        held = doc[ENTRY_KEYS[family]]
                        assert all(set(keys) <= set(held[g]) for g, keys in rec["entries"].items()), where
                    checked += 1
    assert checked >= 3  # the H200's weight-only ws and scale8 passes, its split-K run


def test_slug_names_gpus_as_the_store_does():
    assert [slug(n) for n in ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-80GB")] == \
        ["h100", "h200", "a100"]
    t = fake_target("gpu_a", copy_GBps=1.5)
    assert Target.from_json(json.loads(json.dumps(t.to_json()))) == t


def test_a_row_names_the_store_entry_it_used(tmp_path):
    """The Triton split-K backend on a Target without its own entry: the
    row's note names the entry of the same capability that served it."""
    import torch

    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC

    store = Store(tmp_path)
    gpu = fake_target("gpu_a")
    cfg = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64, "SPLIT_K": 4, "num_warps": 4, "num_stages": 1}
    store.write(gpu.name, "split_k", {"entries": {"atomic": {"M5_K1000_N7": {"config": cfg}}}}, PROV, target=gpu)
    a, b = torch.randn(5, 1000, dtype=torch.float16), torch.randn(1000, 7, dtype=torch.float16)
    gemm = make_split_k(a, b, None, ATOMIC, target=fake_target("gpu_b"), store=store)
    assert gemm.config == cfg
    assert gemm.note().startswith("configs of gpu_a (same compute capability 9.0; no entry for gpu_b); "
                                  "table (gpu_a): 5x1000x7")


FORBIDDEN = ("qgemm_bench.configs.store", "qgemm_bench.harness", "qgemm_bench.backends.triton_dispatch",
             "qgemm_bench.backends.helion_dispatch")


def kernel_package_violations(path, text: str) -> list[str]:
    """What a module of a kernel package (backends/*_kernels/) must not do:
    import the config store, the harness or a dispatch module (the policy of
    which path and config run), or look its GPU up (target.of); the dispatch
    and ops modules hand it tables, configs and a Target."""
    import ast

    package = "qgemm_bench.backends." + path.parent.name
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: from the module's own package
                module = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [module])
            names = [f"{module}.{a.name}" for a in node.names] + [module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Attribute) and node.attr == "of" and isinstance(node.value, ast.Name) \
                and node.value.id == "target":
            out.append(f"{path.name}:{node.lineno}: target.of")
            continue
        else:
            continue
        for name in names:
            if name.startswith(FORBIDDEN) or name == "qgemm_bench.target.of":
                out.append(f"{path.name}:{node.lineno}: imports {name}")
    return out


def test_kernel_packages_read_no_store_harness_or_gpu():
    """Issue 52: kernels and launchers take a config and a Target; the store
    is read in the dispatch modules (triton_dispatch, helion_dispatch), the
    Target made by the harness (or the ops layer for a caller without one)."""
    from pathlib import Path

    import qgemm_bench.backends as backends

    files = sorted(Path(backends.__file__).parent.glob("*_kernels/*.py"))
    assert len(files) >= 10  # triton_kernels/ and helion_kernels/
    found = [v for f in files for v in kernel_package_violations(f, f.read_text(encoding="utf-8"))]
    assert found == []
    # The scan finds each kind of violation (it can fail).
    here = Path(backends.__file__).parent / "triton_kernels" / "x.py"
    bad = ("from qgemm_bench.configs import store\nfrom ...harness import environment\n"
           "from qgemm_bench.target import of as target_of\nimport qgemm_bench.configs.store\n"
           "from qgemm_bench import target\nt = target.of(d)\n"
           "from qgemm_bench.backends.triton_dispatch import choose_split_k\n")
    assert [v.split(": ", 1)[1] for v in kernel_package_violations(here, bad)] == [
        "imports qgemm_bench.configs.store", "imports qgemm_bench.harness.environment",
        "imports qgemm_bench.harness", "imports qgemm_bench.target.of", "imports qgemm_bench.configs.store",
        "imports qgemm_bench.backends.triton_dispatch.choose_split_k", "imports qgemm_bench.backends.triton_dispatch",
        "target.of"]


def test_fingerprint_names_the_files_a_run_reads_by_hash_and_provenance(tmp_path):
    # A run's metadata ties its rows to the exact store they ran on: the entry
    # each family used (the nearest GPU's where the Target has none), a hash of
    # the file that changes with any entry, and the file's provenance.
    import hashlib

    store, a = Store(tmp_path), fake_target("gpu_a", copy_GBps=3000.0)
    path = store.write(a.name, "weight_only", TABLE, {**PROV, "tune": "t1"}, target=a)
    fp = store.fingerprint(a)
    assert fp["weight_only"] == {"gpu": "gpu_a", "sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:16],
                                 "commit": "abc1234", "date": PROV["date"], "tune": "t1"}
    assert set(fp) == set(FAMILIES) and "no split_k configs" in fp["split_k"]["note"]
    b = fake_target("gpu_b", sms=114)  # same capability, no entry of its own: gpu_a's, named
    assert store.fingerprint(b)["weight_only"] == fp["weight_only"]
    other = {"kernels": {"int4_gemm": {"M1_K64_N64": {"config": {"BLOCK_M": 32}}}}}
    store.write(a.name, "weight_only", other, {**PROV, "tune": "t1"})
    assert Store(tmp_path).fingerprint(a)["weight_only"]["sha256"] != fp["weight_only"]["sha256"]
    cpu = Target.from_device(__import__("torch").device("cpu"))
    assert store.fingerprint(cpu)["helion"] == {"note": "the interpreter: no GPU's configs"}
    # A file that does not parse, or a provenance of another type, costs its field, not the run.
    (tmp_path / "gpu_a" / "helion.json").write_text("{not json")
    (tmp_path / "gpu_a" / "weight_only.json").write_text(json.dumps({"gpu": "gpu_a", "provenance": "by hand"}))
    fp = Store(tmp_path).fingerprint(a)
    assert fp["helion"]["note"].startswith("unreadable: ") and "not a readable JSON file" in fp["helion"]["note"]
    assert set(fp["weight_only"]) == {"gpu", "sha256"}
