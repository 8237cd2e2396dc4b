"""Rows of a model run and its folder: rows.jsonl appended as rows are measured,
then results.csv, results.json (metadata + rows), report.md and tokens_per_s.png."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from qgemm_bench.errors import InputError
from qgemm_bench.harness import outputs as harness_outputs
from qgemm_bench.harness.outputs import write_atomic
from qgemm_bench.model.profile import SOURCES

OK, ERROR, OOM, UNAVAILABLE, INCORRECT = "ok", "error", "oom", "unavailable", "incorrect"
SKIPPED = "skipped"  # not run: an earlier step outlived --stall-timeout and stopped the run
GiB = 2**30
FALLBACK = " \u2020"  # marks a split profiled without the CUDA graph the row timed


@dataclass
class ModelRow:
    """One variant (backend x weight format) at one decode batch size. The
    variant's own measurements (memory, prefill, quality) repeat on its rows."""

    model: str
    backend: str  # "bf16" = the unquantized model
    quant: str  # "none", "int4-g128", "int4-channel", "nvfp4", ...
    batch: int
    dtype: str
    device: str
    timing: str  # graph | eager | cpu-wall
    status: str
    reason: str = ""
    step_ms_p50: float | None = None
    step_ms_p20: float | None = None
    step_ms_p80: float | None = None
    tokens_per_s: float | None = None  # batch / median step time
    speedup: float | None = None  # vs the unquantized model's tokens/s at the same batch
    graph_check_rel_err: float | None = None  # graph replay vs eager step, same cache state
    peak_gib: float | None = None  # torch.cuda.max_memory_allocated during this batch's decode (CUDA)
    prefill_len: int | None = None
    prefill_tokens_per_s: float | None = None
    prefill_timing: str | None = None  # graph (a CUDA graph's replay) | eager (why, if the capture failed) | cpu-wall
    linear_weight_gib: float | None = None
    weight_gib: float | None = None
    linear_weight_ratio: float | None = None  # vs the unquantized model
    weight_ratio: float | None = None
    logits_rel_err: float | None = None
    logits_kl: float | None = None
    top1_agree: float | None = None
    perplexity: float | None = None
    quantize_s: float | None = None
    allreduce_ms: float | None = None  # tensor parallel: one step's all-reduces alone, captured the same way
    allreduce_share: float | None = None  # allreduce_ms / step_ms_p50 (reports show allreduce_label's)
    compile: str = "none"  # --compile: the decode step traced by torch.compile (none: the model's forward)
    compile_s: float | None = None  # the compiled step's first call: trace, Inductor, Triton builds, autotuning
    pdl: bool = False  # --pdl: Inductor's kernels launched with PDL, ours chained (decode.inductor_pdl)
    # sdpa (GQA-packed, whole static cache) | flex (compiled steps) | triton (ours): the cache up to the token
    attention: str = "sdpa"
    fused_norms: bool = False  # --fused-norms took: the layers' RMSNorms done by this variant's GEMMs
    swiglu_prologue: bool = False  # --swiglu-prologue took: down_proj computed silu(gate) * up (model/swiglu.py)
    swiglu_epilogue: bool = False  # --swiglu-epilogue took: gate_up's GEMM returned silu(gate) * up (same)
    step_read_gib: float | None = None  # bytes one step reads (model/profile.py step_bytes), per GPU
    kv_read_gib: float | None = None  # the static K/V cache's share of it
    effective_gbps: float | None = None  # step_read bytes x steps/s
    copy_pct: float | None = None  # effective_gbps / the run's measured device copy GB/s
    # One step as timed under torch.profiler (profile.step_split), ms: kernel time on CUDA, operator time on CPU.
    split_quant_gemm_ms: float | None = None
    split_dense_gemm_ms: float | None = None
    split_attention_ms: float | None = None
    split_collective_ms: float | None = None  # tensor parallel's all-reduces in the step (0 on one GPU)
    allreduce_rank_shares: list | None = None  # each rank's split_collective_ms / its split_total_ms
    split_other_ms: float | None = None
    split_total_ms: float | None = None
    split_source: str | None = None  # profile.SOURCES: a graph replay, or the step without a graph
    split_kernels: int | None = None  # device activities (kernels, copies, sets) in the profiled step
    split_other_top: list[dict] | None = None  # the rest's largest kernels: [{"name", "calls", "us"}] a step
    split_attention_top: list[dict] | None = None  # the attention's largest kernels, the same way
    samples_ms: list = field(default_factory=list)

    @property
    def variant(self) -> str:
        return self.backend if self.quant == "none" else f"{self.backend} {self.quant}"

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


CSV_COLUMNS = [f.name for f in fields(ModelRow)
               if f.name not in ("samples_ms", "split_other_top", "split_attention_top", "allreduce_rank_shares")]


class RunFolder(harness_outputs.RunFolder):
    """The harness's run folder (claimed atomically, rows streamed to
    rows.jsonl, metadata.json written when the run starts: what `runner.py
    report DIR` rebuilds a killed run from); its outputs are the model
    benchmark's tables and plot."""

    def write(self, rows: list[ModelRow], metadata: dict, plots: bool = True) -> list[str]:
        self.close()
        return write_outputs(self.path, rows, metadata, plots)


def write_outputs(path: Path, rows: list[ModelRow], metadata: dict, plots: bool = True) -> list[str]:
    """results.csv, results.json, report.md and the plot (each written whole or not at all)."""
    write_atomic(path / "results.csv", frame(rows).to_csv(index=False))
    doc = {"metadata": metadata, "rows": [r.to_dict() for r in rows]}
    write_atomic(path / "results.json", json.dumps(doc, indent=1) + "\n")
    written = [plot_tokens_per_s(rows, metadata, path / "tokens_per_s.png")] if plots else []
    written = [w for w in written if w]
    write_atomic(path / "report.md", markdown(rows, metadata, written))
    return written


def is_model_run(metadata: dict) -> bool:
    """Whether a run's metadata is the model benchmark's (it describes a model)."""
    return isinstance(metadata.get("model"), dict) and isinstance(metadata.get("settings"), dict)


def _type_problem(annotation: str, v) -> str:
    """Whether v fits a ModelRow field's annotation ("str", "int", "float | None", "list")."""
    ok = {"str": lambda: isinstance(v, str), "list": lambda: isinstance(v, list) and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)}
    kinds = [k.strip() for k in annotation.split("|")]
    if not set(kinds) <= {"str", "int", "float", "list", "None", "bool"}:
        return ""  # a kind this does not check (a dict, say): taken as it is
    if kinds == ["bool"] or "bool" in kinds and isinstance(v, bool):
        return "" if isinstance(v, bool) or v is None and "None" in kinds else "expected true or false"
    if v is None:
        return "" if "None" in kinds else "expected a value, not null"
    for k in kinds:
        if k in ok and ok[k]():
            return ""
        if k in ("int", "float") and isinstance(v, (int, float)) and not isinstance(v, bool) and \
                (k == "float" or isinstance(v, int)) and math.isfinite(v):
            return ""
    return f"expected {annotation}"


def row_from_dict(d, where: str) -> ModelRow:
    """A rows.jsonl / results.json record as a ModelRow, checked field by
    field; InputError naming `where` and the field if it is not one."""
    if not isinstance(d, dict):
        raise InputError(f"{where}: expected a row object, not {type(d).__name__}")
    types = {f.name: str(f.type) for f in fields(ModelRow)}
    for k, v in d.items():
        if k not in types:
            raise InputError(f"{where}: not a model benchmark row (unknown field {k!r})")
        if why := _type_problem(types[k], v):
            raise InputError(f"{where}: {k}={json.dumps(v)[:40]}: {why}")
    try:
        return ModelRow(**d)
    except TypeError as e:
        raise InputError(f"{where}: not a model benchmark row ({e})") from None


def frame(rows: list[ModelRow]) -> pd.DataFrame:
    return pd.DataFrame([r.to_dict() for r in rows], columns=CSV_COLUMNS)


def load(path: str | Path) -> tuple[dict, list[ModelRow]]:
    """A model run's results.json (or its folder) read back; InputError naming what is wrong."""
    from qgemm_bench.harness import files

    p = Path(path)
    p = p / "results.json" if p.is_dir() else p
    doc = files.read_json(p)
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not (isinstance(meta, dict) and is_model_run(meta) and isinstance(doc.get("rows"), list)):
        raise InputError(f"{p}: not a model benchmark's results.json")
    return doc["metadata"], [row_from_dict(r, f"{p}: row {i + 1}") for i, r in enumerate(doc["rows"])]


def _f(v, fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def _variants(rows: list[ModelRow]) -> dict[str, list[ModelRow]]:
    out: dict[str, list[ModelRow]] = {}
    for r in rows:
        out.setdefault(r.variant, []).append(r)
    return out


def decode_table(rows: list[ModelRow]) -> str:
    batches = sorted({r.batch for r in rows})
    body = []
    for name, rs in _variants(rows).items():
        by_b = {r.batch: r for r in rs}
        cells = []
        for b in batches:
            r = by_b.get(b)
            if r is None or r.status != OK:
                cells.append("" if r is None else r.status)
            else:
                sp = f" ({r.speedup:.2f}x)" if r.speedup is not None and r.backend != "bf16" else ""
                ar = allreduce_label(r)
                cells.append(f"{r.tokens_per_s:.1f}{sp}{ar}")
        body.append([name, *cells])
    return tabulate(body, ["variant", *[f"batch {b} tok/s" for b in batches]], tablefmt="github")


def allreduce_label(r: ModelRow) -> str:
    """Tensor parallel: ", all-reduce N%", the all-reduces' share of the step
    as profiled in it (their kernels, waits for the other ranks included),
    over the ranks where each rank's is known ("15-24%": a rank that gets
    there first waits); a row without that split (runs before the
    collective category) the same all-reduces timed alone against the step.
    "" on one GPU."""
    if r.allreduce_share is None:
        return ""
    shares = r.allreduce_rank_shares if isinstance(r.allreduce_rank_shares, list) and r.allreduce_rank_shares \
        and all(isinstance(v, (int, float)) for v in r.allreduce_rank_shares) else None
    if shares is None and r.split_collective_ms is not None and r.split_total_ms:
        shares = [r.split_collective_ms / r.split_total_ms]
    lo, hi = (min(shares), max(shares)) if shares else (r.allreduce_share, r.allreduce_share)
    span = f"{100 * lo:.0f}%" if round(100 * lo) == round(100 * hi) else f"{100 * lo:.0f}-{100 * hi:.0f}%"
    return f", all-reduce {span}"


def _share(v: float | None, total: float | None) -> str:
    return "" if v is None or not total else f"{v:.3f} ({100 * v / total:.0f}%)"


def bandwidth_table(rows: list[ModelRow]) -> str:
    """Per decode row: what a step reads, the effective bandwidth it reaches, and
    one step's time as timed split by category (profile.step_split); FALLBACK
    marks a split of the step without its graph (no kernels seen in the replay)."""
    body = []
    # The all-reduce column only where a row's step ran any (tensor parallel)
    comm = any(r.split_collective_ms for r in rows if r.status == OK)
    for r in rows:
        if r.status != OK or r.effective_gbps is None:
            continue
        t = r.split_total_ms
        parts = (r.split_quant_gemm_ms, r.split_dense_gemm_ms, r.split_attention_ms,
                 *((r.split_collective_ms,) if comm else ()), r.split_other_ms)
        body.append([r.variant, r.batch, _f(r.step_ms_p50, ".3f"), _f(r.step_read_gib, ".3f"),
                     _f(r.kv_read_gib, ".3f"), _f(r.effective_gbps, ".0f"), _f(r.copy_pct, ".1f"),
                     *(_share(v, t) for v in parts),
                     _f(t, ".3f") + (FALLBACK if r.split_source == SOURCES["fallback"] else ""),
                     _f(r.compile_s, ".1f")])
    headers = ["variant", "batch", "step ms", "read GiB/step", "of it K/V GiB", "effective GB/s", "% of copy",
               "quant GEMM ms", "dense GEMM ms", "attention ms", *(["all-reduce ms"] if comm else []), "rest ms",
               "profiled step ms", "compile s"]
    return tabulate(body, headers, tablefmt="github") if body else ""


def rest_table(rows: list[ModelRow], n: int = 5, field_: str = "split_other_top", what: str = "the rest") -> str:
    """Per profiled CUDA row, the n largest kernels a step of one category
    (profile.top_kernels): by default the rest's, what the step spends
    outside GEMMs and attention; field_ and what name another's
    (attention_table)."""
    def num(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0

    body = []
    for r in rows:
        top = getattr(r, field_) if r.status == OK and isinstance(getattr(r, field_), list) else []
        good = [k for k in top if isinstance(k, dict) and isinstance(k.get("name"), str) and num(k.get("calls"))
                and num(k.get("us"))]
        for k in sorted(good, key=lambda k: -k["us"])[:n]:  # largest first, whatever the file's order
            name = " ".join(k["name"].split()).replace("|", "/").replace("`", "'")[:90]
            body.append([r.variant, r.batch, f"`{name}`", _f(k["calls"], "g"), _f(k["us"], ".1f")])
    return tabulate(body, ["variant", "batch", f"kernel ({what})", "calls/step", "us/step"],
                    tablefmt="github") if body else ""


def attention_table(rows: list[ModelRow], n: int = 4) -> str:
    """Per profiled CUDA row, the kernels its attention bucket holds (flex's
    and its merge, ours, SDPA's, and what the compiled graph fused with them)."""
    return rest_table(rows, n, "split_attention_top", "attention")


def split_note(rows: list[ModelRow], timing: str | None) -> str:
    """The report's sentence on what the split columns profiled."""
    sources = {r.split_source for r in rows if r.status == OK and r.split_source} & set(SOURCES.values())
    if timing == "cpu-wall":
        what = "one step as timed under torch.profiler, CPU operator time, "
    elif sources <= {SOURCES["plain"]}:
        what = "one step as timed (no CUDA graph) under torch.profiler, kernel time, "
    else:
        what = ("one replay of the timed step's CUDA graph under torch.profiler, kernel time (the gaps between "
                "kernels are not in it; a kernel launched early with PDL counts from where the one before it "
                "ended), each kernel in the category of the operator that launched it when the same step ran "
                "without the graph; ")
        if SOURCES["fallback"] in sources:
            what += (f"{FALLBACK.strip()}: the profiler saw no kernels in the replay, so the split is of the same "
                     "step run without its graph, launch gaps excluded; ")
    failed = any(r.split_source and r.split_source not in SOURCES.values() for r in rows)
    return ("Split: " + what + "by category: quantized GEMM (the qgemm::linear op, whatever kernel it launches), "
            "dense GEMM (aten mm/addmm: cuBLAS; Inductor mm templates), attention (SDPA, flex with its KV splits' "
            "merge, our qgemm::decode_attention), all-reduce (tensor parallel: NCCL's kernels, waits for the other "
            "ranks included; a column "
            "where a step ran any), rest (norms, rotary, cache writes, residual adds, Inductor's other fused "
            "kernels)."
            + (" Rows without a split: the profiler failed (results.csv's split_source says why)." if failed else ""))


def summary_table(rows: list[ModelRow]) -> str:
    body = []
    for name, rs in _variants(rows).items():
        r = next((x for x in rs if x.status == OK), rs[0])
        peak = max((x.peak_gib for x in rs if x.peak_gib is not None), default=None)
        body.append([name, r.status if all(x.status == r.status for x in rs) else "partial",
                     _f(r.linear_weight_gib, ".3f"), _f(r.weight_gib, ".3f"), _f(r.linear_weight_ratio, ".3f"),
                     _f(r.weight_ratio, ".3f"), _f(peak, ".2f"), _f(r.prefill_tokens_per_s, ".0f"),
                     _f(r.logits_rel_err, ".2e"), _f(r.logits_kl, ".2e"), _f(r.top1_agree, ".3f"),
                     _f(r.perplexity, ".3f"), _f(r.quantize_s, ".2f")])
    headers = ["variant", "status", "linear GiB", "model GiB", "linear ratio", "model ratio", "peak GiB",
               "prefill tok/s", "logits rel err", "KL", "top-1 agree", "ppl", "quantize s"]
    return tabulate(body, headers, tablefmt="github")


def format_quality_table(rows: list[ModelRow]) -> str:
    """Quality per weight format (row-wise vs group sizes vs NVFP4 side by
    side), from the first backend that ran it: the format sets the error."""
    seen: dict[str, ModelRow] = {}
    for r in rows:
        if r.status == OK and r.logits_rel_err is not None and r.quant not in seen:
            seen[r.quant] = r
    body = [[q, r.backend, _f(r.logits_rel_err, ".3e"), _f(r.logits_kl, ".3e"), _f(r.top1_agree, ".3f"),
             _f(r.perplexity, ".3f"), _f(r.linear_weight_ratio, ".3f")] for q, r in seen.items()]
    return tabulate(body, ["format", "measured with", "logits rel err", "KL", "top-1 agree", "ppl",
                           "linear ratio"], tablefmt="github")


def problems(rows: list[ModelRow]) -> list[str]:
    out = []
    for name, rs in _variants(rows).items():
        reasons = dict.fromkeys(f"{r.status}: {r.reason}" for r in rs if r.status != OK)
        out += [f"{name}: {x}" for x in reasons]
    return out


def kv_read(rows) -> str:
    """What of the K/V cache a step of these rows reads (their attention's)."""
    ways = {r.attention for r in rows if r.step_read_gib is not None}
    whole = "the whole static K/V cache, which the masked attention reads each step"
    upto = ("the K/V cache up to each token (flex in whole 128-slot blocks), on average over the timed steps, "
            "which flex and triton attention read")
    return whole if ways <= {"sdpa"} else upto if "sdpa" not in ways else f"{upto}; with sdpa {whole}"


# ModelRow.prefill_timing where the CUDA graph was not timed: the capture failed (eager instead), or
# its replay differed from an eager prefill (no number). bench.py writes them, prefill_how reads them.
PREFILL_FAILED = "eager (capture failed: "
PREFILL_DROPPED = "graph, not reported: its replay differs from an eager prefill"


def prefill_how(rows) -> str:
    """How the rows' prefills were timed, for the report's Decode line (rows
    from before prefill_timing was kept: eager on CUDA, the wall clock on
    CPU; "eager (capture failed: ...)" counts as eager)."""
    def mode(r) -> str:
        t = r.prefill_timing or ("cpu-wall" if r.timing == "cpu-wall" else "eager")
        return "dropped" if t.startswith(PREFILL_DROPPED) else t.split(" ")[0]

    modes = {mode(r) for r in rows if r.prefill_len is not None}
    if modes == {"graph"}:
        return "replayed from a CUDA graph"
    if modes == {"cpu-wall"}:
        return "on the wall clock"
    failed = any((r.prefill_timing or "").startswith(PREFILL_FAILED) for r in rows)
    if modes == {"eager"}:
        return "launched op by op" + (" (the CUDA graph capture failed: prefill_timing per row)" if failed else "")
    if modes == {"dropped"}:
        return "captured in a CUDA graph whose replay differed from an eager prefill: no prefill numbers"
    return "replayed from a CUDA graph where captured and checked (prefill_timing per row)"


def markdown(rows: list[ModelRow], meta: dict, plots: list[str]) -> str:
    s, m = meta.get("settings", {}), meta.get("model", {})
    lines = [f"# Decode benchmark: {m.get('model', '?')}", "",
             f"{m.get('layers')} layers, hidden {m.get('hidden')}, intermediate {m.get('intermediate')}, "
             f"{m.get('heads')}/{m.get('kv_heads')} heads, vocab {m.get('vocab')}; "
             f"{'trained checkpoint' if m.get('trained') else 'random weights'}.", "",
             f"Device: {meta.get('gpu') or meta.get('cpu')} ({meta.get('device')}); torch {meta.get('torch')}, "
             f"triton {meta.get('triton')}, transformers {meta.get('transformers')}; commit {meta.get('git_commit')}; "
             f"{meta.get('date')}.", "",
             f"Decode: {s.get('timing')} timing, median of {s.get('decode_steps')} greedy steps after a "
             f"{s.get('prompt_len')}-token prompt (static KV cache); tokens/s = batch / step time; the step "
             + (f"traced whole by torch.compile ({s['compile']}"
                + ("; Inductor's reductions by multi_kernel" if s.get("multi_kernel") else "")
                + ("; independent kernels launched as one by combo_kernels" if s.get("combo_kernels") else "")
                + ("; compiled afresh (Inductor's FX graph cache off)" if s.get("fx_graph_cache") is False else "")
                + ("; Inductor's kernels launched with PDL, ours in chained modes" if s.get("pdl") else "")
                + ("; Inductor config " + ", ".join(f"{k}={v!r}" for k, v in s["inductor_config"].items())
                   if s.get("inductor_config") else "")
                + "), compile time per row. " if s.get("compile", "none") != "none"
                else "is the model's forward, not compiled. ") + "Prefill: "
             f"{s.get('prompt_len')} tokens, batch 1, the model's forward {prefill_how(rows)}. "
             + (f"--fused-norms: each layer's RMSNorms done by the GEMMs around them in "
                f"{', '.join(sorted({r.variant for r in rows if r.fused_norms})) or 'no variant'} "
                "(model/fused_norm.py). " if s.get("fused_norms") else "")
             + ("--fused-rope: the token's rotary and K/V cache write done by the attention kernel "
                "(model/rope_attention.py). " if s.get("fused_rope") else "")
             + (f"--swiglu-prologue: down_proj computes silu(gate) * up as it loads gate_up's output in "
                f"{', '.join(sorted({r.variant for r in rows if r.swiglu_prologue})) or 'no variant'} "
                "(model/swiglu.py). " if s.get("swiglu_prologue") else "")
             + (f"--swiglu-epilogue: gate_up's columns in (gate, up) pairs in every variant; its GEMM returns "
                f"silu(gate) * up in "
                f"{', '.join(sorted({r.variant for r in rows if r.swiglu_epilogue})) or 'no variant'} "
                "(model/swiglu.py). " if s.get("swiglu_epilogue") else "")
             + f"Quality: logits on {s.get('quality_tokens')} tokens "
             f"against the unquantized model; lm_head quantized: {s.get('lm_head')}. `bf16` is the "
             f"unquantized model in the run's dtype ({s.get('dtype')}).", ""]
    if meta.get("env"):
        lines += ["Environment: " + " ".join(f"`{k}={v}`" for k, v in meta["env"].items()) + ".", ""]
    if s.get("timing") == "cpu-wall":
        lines += ["**CPU wall-clock timings: not comparable with GPU numbers.**", ""]
    if meta.get("stopped"):
        lines += [f"**Stopped early: {meta['stopped']}.** Rows not run are `skipped`.", ""]
    if meta.get("rebuild_note"):  # `runner.py report DIR` left a cut-off line of rows.jsonl out
        lines += [f"**Rebuilt from rows.jsonl: {meta['rebuild_note']}.**", ""]
    if not m.get("trained"):
        lines += ["Random weights: the quality columns measure numerical fidelity to the unquantized model, "
                  "not language-model quality.", ""]
    if tp := meta.get("tensor_parallel"):
        lines += [f"Tensor parallel over {tp} GPUs (torchrun): column-parallel q/k/v/gate/up, row-parallel "
                  "o/down with one all-reduce each, captured in the step's graph; weights and memory are per "
                  "GPU; " + ("'all-reduce N%' = the all-reduces' share of the profiled step (their kernels, waits "
                             "for the other ranks included; a range over the ranks; results' allreduce_ms: the "
                             "same all-reduces replayed alone in a graph)."
                             if any(r.split_collective_ms is not None for r in rows) else
                             "'all-reduce N%' = one step's all-reduces timed alone / the step."), ""]
    lines += ["## Decode tokens/s (speedup vs unquantized)", "", decode_table(rows), ""]
    if bw := bandwidth_table(rows):
        copy = (meta.get("ceilings") or {}).get("copy_GBps")
        lines += ["## Effective bandwidth and where a step's time goes", "",
                  "read/step: every weight the step runs (decoder linears with their scales, norms, lm_head; "
                  "of the embedding only the gathered rows) plus " + kv_read(rows) + "; effective GB/s = "
                  "read/step x steps/s"
                  + (f"; % of the device's measured copy bandwidth ({copy:.0f} GB/s)" if copy else "") + ". "
                  + split_note(rows, s.get("timing")), "", bw, ""]
        if rest := rest_table(rows):
            lines += ["The rest's largest kernels in the profiled step (Inductor names a fused kernel after "
                      "the ops it absorbed):", "", rest, ""]
        if att := attention_table(rows):
            lines += ["The attention's largest kernels in the profiled step:", "", att, ""]
    fidelity = "" if m.get("trained") else " (random weights: numerical fidelity only)"
    lines += ["## Memory, prefill and quality per variant", "", summary_table(rows), "",
              f"## Quality by weight format{fidelity}", "", format_quality_table(rows), ""]
    lines += [f"![{Path(p).stem}]({Path(p).name})" for p in plots]
    if probs := problems(rows):
        lines += ["", "## Not measured", "", *[f"- {p}" for p in probs]]
    return "\n".join(lines) + "\n"


def console(rows: list[ModelRow]) -> str:
    return decode_table(rows) + "\n\n" + summary_table(rows)


def plot_tokens_per_s(rows: list[ModelRow], meta: dict, path: Path) -> str | None:
    """Decode tokens/s vs batch per variant (log-log), and beside it the
    speedup over the unquantized model (lines overlap on the first)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ok = [r for r in rows if r.status == OK and r.tokens_per_s]
    if not ok:
        return None
    batches = sorted({r.batch for r in ok})
    fig = Figure(figsize=(11, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax, sp = fig.subplots(1, 2)
    for name, rs in _variants(ok).items():
        rs = sorted(rs, key=lambda r: r.batch)
        style = {"marker": "o", "ls": "--" if name == "bf16" else "-", "label": name}
        ax.plot([r.batch for r in rs], [r.tokens_per_s for r in rs], **style)
        with_sp = [r for r in rs if r.speedup is not None]
        sp.plot([r.batch for r in with_sp], [r.speedup for r in with_sp], **style)
    for a in (ax, sp):
        a.set_xscale("log", base=2)
        a.set_xticks(batches, [str(b) for b in batches])
        a.set_xlabel("batch (sequences decoded together)")
        a.grid(True, which="both", alpha=0.3)
    ax.set_yscale("log")
    ax.set_ylabel("decode tokens/s")
    sp.set_ylabel("speedup vs unquantized (same batch)")
    sp.axhline(1.0, color="grey", lw=0.8)
    s = meta.get("settings", {})
    where = meta.get("gpu") or "CPU"
    ax.set_title(f"{meta.get('model', {}).get('model', '')} on {where} ({s.get('timing', '')})", fontsize=10)
    sp.set_title("speedup", fontsize=10)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    return str(path)
