"""The README a newcomer reads: at most 300 lines (issue 56), and its result
tables exactly what scripts/readme_tables.py prints from the committed H200
baselines, one GPU and two (a baseline replaced without the README, or the
README edited by hand, fails here)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- results-tables: begin", "<!-- results-tables: end -->"


def test_the_readme_fits_300_lines():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


def test_the_readme_tables_are_the_committed_baselines():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("\n", text.index(BEGIN)) + 1
    block = text[start:text.index(END)]
    made = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_tables.py"), str(ROOT / "results" / "h200"),
                           str(ROOT / "results" / "h200x2")], capture_output=True, text=True, check=True).stdout
    assert block.rstrip("\n") == made.rstrip("\n")


def test_trained_model_runs_make_one_perplexity_table(tmp_path):
    # Two --checkpoint runs of one model: one table, a row per format in a fixed order, ours and the
    # peers' span; a failed backend shows its status, never a number; no tokens/s table for them.
    import json

    def run(name, rows):
        d = tmp_path / "h200" / name
        d.mkdir(parents=True)
        meta = {"model": {"model": "/tmp/x/Tiny.Q4_1.gguf", "trained": True}, "settings": {"eval_tokens": 4096}}
        (d / "results.json").write_text(json.dumps({"metadata": meta, "rows": [
            {"backend": b, "quant": q, "batch": 1, "status": st, "perplexity": p, "logits_kl": 0.5,
             "top1_agree": 0.75, "tokens_per_s": 1.0} for b, q, st, p in rows]}))

    run("model_tiny_b", [("bf16", "none", "ok", 10.0), ("torch", "nvfp4", "ok", 12.5),
                         ("triton", "nvfp4", "ok", 12.51), ("helion", "nvfp4", "error", None)])
    run("model_tiny_a", [("bf16", "none", "ok", 10.0), ("torch", "int4-g32", "ok", 11.0),
                         ("triton", "int4-g32", "ok", 11.01), ("helion", "int4-g32", "ok", 11.02),
                         ("humming", "int4-g32", "ok", 11.2), ("tinygemm", "int4-g32", "ok", 11.1)])
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_tables.py"), str(tmp_path / "h200")],
                         capture_output=True, text=True, check=True).stdout
    assert "tokens/s" not in out and out.count("| format |") == 1
    assert "Tiny.Q4_1.gguf (trained weights;" in out and "perplexity over 4096 tokens" in out and "(bf16 10.00)" in out
    rows = [line for line in out.splitlines() if line.startswith(("| int4", "| nvfp4"))]
    assert rows == ["| int4-g32 | 11.00 | 11.01 | 11.02 | 11.10-11.20 (2) | 0.500 / 0.750 |",
                    "| nvfp4 | 12.50 | 12.51 | error |  | 0.500 / 0.750 |"]


def test_runs_of_two_trained_models_make_a_table_each(tmp_path):
    # Each model's perplexities under its own name and its own bf16 figure: one table of both would put
    # one model's rows (the same format in each) under the other's name.
    import json

    for name, model, ppl in (("model_a_nvfp4", "/m/Alpha.gguf", 20.0), ("model_b_nvfp4", "/m/Beta.gguf", 40.0)):
        d = tmp_path / "h200" / name
        d.mkdir(parents=True)
        meta = {"model": {"model": model, "trained": True}, "settings": {"eval_tokens": 4096}}
        (d / "results.json").write_text(json.dumps({"metadata": meta, "rows": [
            {"backend": b, "quant": q, "batch": 1, "status": "ok", "perplexity": p, "logits_kl": 0.5,
             "top1_agree": 0.75} for b, q, p in (("bf16", "none", ppl), ("torch", "nvfp4", ppl + 1),
                                                 ("triton", "nvfp4", ppl + 2))]}))
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_tables.py"), str(tmp_path / "h200")],
                         capture_output=True, text=True, check=True).stdout
    tables = out.split("(trained weights;")[1:]
    assert out.count("| format |") == 2 and len(tables) == 2, out
    assert "Alpha.gguf" in out.split("(trained weights;")[0] and "(bf16 20.00)" in tables[0], out
    assert "| nvfp4 | 21.00 | 22.00 |" in tables[0] and "| nvfp4 | 41.00 | 42.00 |" in tables[1], out


def test_a_run_whose_bf16_model_failed_still_makes_its_table(tmp_path):
    # Without the bf16 logits the quantized rows have perplexity but no KL / top-1: the table says
    # nothing there (as it leaves out the bf16 figure), never a traceback.
    import json

    d = tmp_path / "h200" / "model_a_nvfp4"
    d.mkdir(parents=True)
    meta = {"model": {"model": "/m/Alpha.gguf", "trained": True}, "settings": {"eval_tokens": 4096}}
    (d / "results.json").write_text(json.dumps({"metadata": meta, "rows": [
        {"backend": b, "quant": q, "batch": 1, "status": st, "perplexity": p, "logits_kl": None, "top1_agree": None}
        for b, q, st, p in (("bf16", "none", "oom", None), ("torch", "nvfp4", "ok", 21.0),
                            ("triton", "nvfp4", "ok", 22.0))]}))
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_tables.py"), str(tmp_path / "h200")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-1000:]
    assert "(bf16" not in r.stdout and "| nvfp4 | 21.00 | 22.00 |  |  |  |" in r.stdout, r.stdout


def test_a_backend_with_a_bad_batch_shows_its_status_not_its_perplexity(tmp_path):
    # Batches 1 and 16 of one run: triton incorrect at 1 shows "incorrect" although its batch-16 row has a
    # perplexity; helion out of memory at 1 shows "oom"; torch ok at both shows its number.
    import json

    d = tmp_path / "h200" / "model_tiny"
    d.mkdir(parents=True)
    meta = {"model": {"model": "Tiny.gguf", "trained": True}, "settings": {"eval_tokens": 512}}
    rows = [("bf16", "none", 1, "ok", 10.0), ("bf16", "none", 16, "ok", 10.0),
            ("torch", "nvfp4", 1, "ok", 12.5), ("torch", "nvfp4", 16, "ok", 12.5),
            ("triton", "nvfp4", 1, "incorrect", 12.5), ("triton", "nvfp4", 16, "ok", 12.5),
            ("helion", "nvfp4", 1, "oom", None), ("helion", "nvfp4", 16, "ok", 12.5)]
    (d / "results.json").write_text(json.dumps({"metadata": meta, "rows": [
        {"backend": b, "quant": q, "batch": n, "status": st, "perplexity": p, "logits_kl": 0.5, "top1_agree": 0.75}
        for b, q, n, st, p in rows]}))
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_tables.py"), str(tmp_path / "h200")],
                         capture_output=True, text=True, check=True).stdout
    assert "| nvfp4 | 12.50 | incorrect | oom |  |  |" in out, out


def test_a_tensor_parallel_run_s_split_shows_its_all_reduces(tmp_path):
    # From the collective category on (session 53) a TP step's all-reduces are their own part of the split;
    # a run without them (one GPU, or older TP runs) keeps the four parts.
    import json

    def run(name, tp, collective):
        d = tmp_path / "h200" / name
        d.mkdir(parents=True)
        meta = {"model": {"model": "llama-3-70b", "trained": False}, "tensor_parallel": tp, "settings": {}}
        split = {"split_quant_gemm_ms": 7.7, "split_dense_gemm_ms": 0.0, "split_attention_ms": 0.7,
                 "split_other_ms": 1.4, **({} if collective is None else {"split_collective_ms": collective})}
        (d / "results.json").write_text(json.dumps({"metadata": meta, "rows": [
            {"backend": "triton", "quant": "int4-g128", "batch": 1, "status": "ok", "tokens_per_s": 83.2,
             "speedup": 1.9, "copy_pct": 36.2, "attention": "flex", "compile": "default", **split}]}))

    run("model_llama-3-70b", 2, 2.0)
    run("model_llama-3-70b_old", 2, None)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_tables.py"), str(tmp_path / "h200")],
                         capture_output=True, text=True, check=True).stdout
    new, old = out.split("decode (")[1:]
    assert "quant GEMM / dense GEMM / attention / all-reduce / rest" in new
    assert "| 7.70 / 0.00 / 0.70 / 2.00 / 1.40 |" in new
    assert "quant GEMM / dense GEMM / attention / rest" in old and "| 7.70 / 0.00 / 0.70 / 1.40 |" in old
