#!/usr/bin/env python3
"""Print the README's result tables (markdown) from a GPU's committed baselines.

    python scripts/readme_tables.py results/h200 results/h200x2

Reads <dir>/{int4_gemm,int4_gemm_msweep,nvfp4_gemm_msweep,split_k_gemm,
int4_gemm_decode}/results.json where present; p50 us of `ok` rows only (an
incorrect or failed row is shown by its status, never as a time). Then each
<dir>/model_*/results.json (runner.py --model): tokens/s per variant and
batch, and where the batch-1 step's time goes; then those of each further
directory (the multi-GPU runs); the runs with perplexity (a trained
checkpoint with --eval-text) as a quality table per model.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

PEERS = ("cublas", "tinygemm", "fbgemm", "gemlite", "humming")
OURS = ("triton", "helion")


def rows(path: Path) -> dict:
    by: dict = {}
    for r in json.loads(path.read_text())["rows"]:
        by.setdefault((r["M"], r["K"], r["N"]), {})[r["backend"]] = r["p50_us"] if r["status"] == "ok" else r["status"]
    return by


def num(v) -> str:
    return f"{v:.1f}" if isinstance(v, float) else (v or "")


def geomean(xs) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs))


def versus_peers(by: dict, peers, title: str, shapes=None) -> str:
    cols = [p for p in peers if any(p in b for b in by.values())]
    out = [title, "", "| M x K x N | " + " | ".join(cols) + " | triton | helion | fastest peer | triton / fastest peer"
           " | helion / triton |", "|---" * (len(cols) + 6) + "|"]
    for s, b in sorted(by.items()):
        if shapes and s not in shapes:
            continue
        timed = {p: b[p] for p in cols if isinstance(b.get(p), float)}
        tr, he = b.get("triton"), b.get("helion")
        best = min(timed, key=timed.get) if timed else None
        cells = [num(b.get(p)) for p in cols]
        ratio = f"{tr / timed[best]:.2f}" if best and isinstance(tr, float) else ""
        hel = f"{he / tr:.2f}" if isinstance(he, float) and isinstance(tr, float) else ""
        out.append(f"| {s[0]}x{s[1]}x{s[2]} | " + " | ".join(cells) + f" | {num(tr)} | {num(he)} | {best or ''} | "
                   f"{ratio} | {hel} |")
    return "\n".join(out) + "\n"


def split_k(by: dict) -> str:
    n = fast = det = 0
    worst = []
    for s, b in sorted(by.items()):
        tb, tr, de = b.get("torch"), b.get("triton"), b.get("triton_deterministic")
        if not all(isinstance(v, float) for v in (tb, tr, de)):
            continue
        n += 1
        fast += tr <= 0.8 * tb
        det += de <= 1.15 * tr
        if de > 1.15 * tr:
            worst.append(f"{s[0]}x{s[1]}x{s[2]} {de:.1f} / {tr:.1f}")
    outside = f" (outside: {', '.join(worst)})" if worst else ""
    return (f"split-K, skinny preset: triton <= 0.8x cuBLAS at {fast} of {n} shapes; triton_deterministic within"
            f" 1.15x of triton at {det} of {n}{outside}\n")


def decode(path: Path) -> str:
    pct: dict = {}
    for r in json.loads(path.read_text())["rows"]:
        if r["status"] == "ok" and r.get("pct_of_floor"):
            pct.setdefault(r["backend"], []).append((r["M"], r["pct_of_floor"]))
    out = ["decode preset, % of the weight-read floor (geometric mean):", "",
           "| backend | all rows | M <= 16 |", "|---|---|---|"]
    for b, v in sorted(pct.items(), key=lambda kv: -geomean([p for _, p in kv[1]])):
        small = [p for m, p in v if m <= 16]
        out.append(f"| {b} | {geomean([p for _, p in v]):.1f} | {geomean(small):.1f} |")
    return "\n".join(out) + "\n"


def model(path: Path) -> str:
    """One --model run: tokens/s (x the unquantized variant) per batch, the
    batch-1 step's split (ms) and its effective bandwidth (% of copy)."""
    doc = json.loads(path.read_text())
    rs = doc["rows"]
    meta = doc["metadata"].get("model", {})
    if not rs:
        return f"{path.parent.name}/: no rows\n"
    batches = sorted({r["batch"] for r in rs})
    variants = list(dict.fromkeys(f"{r['backend']} {r['quant']}".replace(" none", "") for r in rs))
    first = rs[0]
    head = "lm_head quantized" if doc["metadata"].get("settings", {}).get("lm_head") else ""
    tp = doc["metadata"].get("tensor_parallel") or 1
    where = f"`{path.parent.parent.name}/{path.parent.name}/`" + (f", tensor parallel over {tp} GPUs" if tp > 1 else "")
    attention = first.get("attention")
    if attention == "flex" and any("scaled_dot_product" in k.get("name", "") for r in rs
                                   for k in r.get("split_other_top") or []):
        # an SDPA op in a flex run's kernels: its attention layers ran transformers' sdpa (the TP runs before
        # 3fc46dc, results/h200x2/README.md)
        attention = "flex asked, transformers' sdpa ran"
    title = (f"{meta.get('model', path.parent.name)} decode ({where}; attention {attention},"
             f" compile {first.get('compile')}{' with PDL' if first.get('pdl') else ''}{', ' + head if head else ''}; "
             f"{'trained' if meta.get('trained') else 'random'} weights), tokens/s (x bf16):")
    # The all-reduces' own part where a step ran any (as report.md's bandwidth table)
    comm = any(r.get("split_collective_ms") for r in rs if r["status"] == "ok")
    cats = ("quant_gemm", "dense_gemm", "attention", *(("collective",) if comm else ()), "other")
    names = {"quant_gemm": "quant GEMM", "dense_gemm": "dense GEMM", "attention": "attention",
             "collective": "all-reduce", "other": "rest"}
    out = [title, "", "| variant | " + " | ".join(f"batch {b}" for b in batches)
           + f" | batch 1 step ms: {' / '.join(names[c] for c in cats)} | batch 1 % of copy |",
           "|---" * (len(batches) + 3) + "|"]
    for v in variants:
        by = {r["batch"]: r for r in rs if f"{r['backend']} {r['quant']}".replace(" none", "") == v}
        cells = []
        for b in batches:
            r = by.get(b)
            if r is None or r["status"] != "ok":
                cells.append(r["status"] if r else "")
                continue
            cells.append(f"{r['tokens_per_s']:.1f}" + (f" ({r['speedup']:.2f}x)" if r.get("speedup") not in (None, 1.0)
                                                         else ""))
        one = by.get(1, {})
        parts = [one.get(f"split_{c}_ms") for c in cats]
        split = " / ".join(f"{p:.2f}" for p in parts) if None not in parts else ""
        pct = f"{one['copy_pct']:.1f}" if one.get("copy_pct") else ""
        out.append(f"| {v} | " + " | ".join(cells) + f" | {split} | {pct} |")
    return "\n".join(out) + "\n"


def quality(runs: dict[Path, dict]) -> str:
    """The --checkpoint --eval-text runs of one trained model ({results.json
    path: its document}), one table: perplexity per format (rows) for the
    dequantized reference (torch), ours and the peers' range, with ours' KL
    and top-1 agreement against bf16. (Their tokens/s, an uncompiled step of
    a small model, stay in the runs.)"""
    paths, docs = list(runs), list(runs.values())
    rs = [r for d in docs for r in d["rows"]]
    meta, settings = docs[0]["metadata"].get("model", {}), docs[0]["metadata"].get("settings", {})
    base = next((r for r in rs if r["backend"] == "bf16" and r["status"] == "ok"), None)
    name = Path(str(meta.get("model", paths[0].parent.name))).name
    where = ", ".join(f"`{p.parent.parent.name}/{p.parent.name}/`" for p in paths)
    out = [f"{name} (trained weights; {where}), perplexity over {settings.get('eval_tokens')} tokens of "
           f"`--eval-text`" + (f" (bf16 {base['perplexity']:.2f})" if base else "") + ":", "",
           "| format | torch (dequantized) | triton | helion | peers | triton KL / top-1 vs bf16 |",
           "|---|---|---|---|---|---|"]
    quants = sorted({r["quant"] for r in rs if r["quant"] != "none"}, key=lambda q: ("nvfp4" in q, "channel" in q, q))
    for q in quants:
        by: dict = {}  # backend -> its rows of this format (one a batch size)
        for r in rs:
            if r["quant"] == q:
                by.setdefault(r["backend"], []).append(r)
        # A backend's perplexity only where every row of it is ok: one incorrect or failed batch shows instead.
        bad = {b: next((r["status"] for r in v if r["status"] != "ok"), None) for b, v in by.items()}
        ok = {b: next(r for r in v if r.get("perplexity") is not None) for b, v in by.items()
              if not bad[b] and any(r.get("perplexity") is not None for r in v)}
        cells = [f"{ok[b]['perplexity']:.2f}" if b in ok else (bad.get(b) or "") for b in ("torch", "triton", "helion")]
        peers = sorted(r["perplexity"] for b, r in ok.items() if b in PEERS)
        span = f"{peers[0]:.2f}-{peers[-1]:.2f} ({len(peers)})" if peers else ""
        t = ok.get("triton")
        kl = f"{t['logits_kl']:.3f} / {t['top1_agree']:.3f}" if t and t.get("logits_kl") is not None else ""
        out.append(f"| {q} | " + " | ".join(cells) + f" | {span} | {kl} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if not argv or not all(Path(a).is_dir() for a in argv):
        print("usage: readme_tables.py results/<gpu> [results/<gpu>xN ...]  (the others: their --model runs)",
              file=sys.stderr)
        return 2
    d = Path(argv[0])
    parts = []
    for fmt, title in (("int4", "int4 group 128"), ("nvfp4", "NVFP4")):
        if (f := d / f"{fmt}_gemm_msweep/results.json").is_file():
            n = json.loads(f.read_text())["metadata"]["settings"].get("repeats", 1)
            head = f"{title} at K = N = 8192 (the m-sweep, {n} round{'s' * (n != 1)}):"
            parts.append(versus_peers(rows(f), PEERS, head))
    if (f := d / "int4_gemm/results.json").is_file():
        by = rows(f)
        layers = {(m, k, n) for (m, k, n) in by if (k, n) in {(4096, 28672), (14336, 4096)}}
        parts.append(versus_peers(by, PEERS, "int4 group 128, the default `llama` preset (two of its layers):", layers))
    if (f := d / "split_k_gemm/results.json").is_file():
        parts.append(split_k(rows(f)))
    if (f := d / "int4_gemm_decode/results.json").is_file():
        parts.append(decode(f))
    runs = {f: json.loads(f.read_text()) for other in map(Path, argv)
            for f in sorted(other.glob("model_*/results.json"))}
    by_model: dict = {}  # one table per trained model: the same format of two models must not meet in a row
    for f, doc in runs.items():
        if any(r.get("perplexity") is not None for r in doc["rows"]):
            by_model.setdefault(doc["metadata"].get("model", {}).get("model"), {})[f] = doc
        else:
            parts.append(model(f))
    parts += [quality(graded) for graded in by_model.values()]
    print("\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
