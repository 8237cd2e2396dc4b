"""The loop over variants (the unquantized model first, then backend x format):
build a fresh model, quantize it, measure memory, quality, prefill, then decode
at each batch size. A failure becomes rows with a status and reason; the loop
goes on. A step that outlives plan.stall_s (a variant's load, quantize,
quality or prefill, or its decode at one batch size) stops the process
(harness/watchdog.py): its rows an error, the rest `skipped`, then `conclude`
writes the outputs.
"""

from __future__ import annotations

import gc
import time
import traceback
from collections.abc import Callable
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field

import torch

from qgemm_bench.errors import one_line
from qgemm_bench.harness.outputs import WriteError
from qgemm_bench.harness.watchdog import Watchdog, stall_reason
from qgemm_bench.model import decode, fused_norm, quality, swiglu, tensor_parallel
from qgemm_bench.model.errors import BackendUnavailable
from qgemm_bench.model.llama import ModelSource
from qgemm_bench.model.outputs import (
    ERROR,
    INCORRECT,
    OK,
    OOM,
    PREFILL_DROPPED,
    PREFILL_FAILED,
    SKIPPED,
    UNAVAILABLE,
    GiB,
    ModelRow,
    RunFolder,
)
from qgemm_bench.model.quant_linear import UNQUANTIZED, QuantSpec, linear_nbytes, model_nbytes, quantize_model

# A graph replay and an eager step on the same cache state run the same kernels,
# but split-K atomics and cuBLAS's choices reorder sums, and a deep random-weight
# model amplifies that (Llama-3-8B on the H100: up to 0.033). Stale or uncaptured
# buffers give unrelated logits, rel err ~1.4.
GRAPH_CHECK_TOL = 0.25
# A compiled step runs other kernels than the eager one (Inductor fuses norms,
# rotary and residual adds, keeping fp32 intermediates the eager ops round to
# bf16): more rounding differences for 32 random layers to amplify, not
# measured on the H200 yet. Still well below the ~1.4 of unrelated logits.
COMPILED_CHECK_TOL = 0.5


@dataclass
class Plan:
    source: ModelSource
    device: torch.device
    dtype: torch.dtype
    variants: list  # [(backend, QuantSpec | None)], the unquantized model first
    batches: list[int]
    prompt_len: int
    decode_steps: int
    decode_mode: str  # graph | eager (CUDA); CPU runs are wall-clock
    prefill_reps: int
    quality_ids: torch.Tensor  # [B, T] on CPU
    eval_ids: torch.Tensor | None = None
    eval_window: int = 1024
    eval_stride: int | None = None
    lm_head: bool = False
    seed: int = 0
    shard: object = None  # tensor_parallel.Shard under torchrun
    stall_s: float = 0.0  # --stall-timeout (0: off): the longest one step (see Step) may take
    compile: str = "none"  # --compile: decode.COMPILE_MODES key
    copy_gbps: float | None = None  # the device's measured copy bandwidth (CUDA), for copy_pct
    split: bool = True  # profile one step per row, as timed (profile.step_split)
    attention: str = "sdpa"  # --attention: decode.ATTENTIONS key (flex: compiled steps only)
    pdl: bool = False  # --pdl: the compiled step's Inductor kernels launch with PDL (decode.inductor_pdl)
    inductor: dict = field(default_factory=dict)  # --inductor-config: Inductor settings of compiled steps
    fused_norms: bool = False  # --fused-norms: RMSNorms done by the GEMMs where a variant's have the parts
    fused_rope: bool = True  # --fused-rope (--attention triton): its kernel also rotates and writes the token
    swiglu_prologue: bool = False  # --swiglu-prologue: down_proj computes silu(gate) * up where it can
    swiglu_epilogue: bool = False  # --swiglu-epilogue: gate_up's GEMM returns silu(gate) * up where it can

    @property
    def timing(self) -> str:
        return self.decode_mode if self.device.type == "cuda" else "cpu-wall"


@dataclass
class Step:
    """What the watchdog times: one step of one variant, and the rows a stall there becomes."""

    base: dict  # the variant's ModelRow fields (model, backend, quant, ...)
    name: str  # load, quantize, quality, prefill, decode at batch B
    batches: list[int]  # the rows it stands for: all of the variant's, or the one batch decoded
    common: dict = field(default_factory=dict)  # the variant's measurements so far (a decode step's)

    @property
    def what(self) -> str:
        quant = self.base["quant"]
        return f"{self.base['backend']}{'' if quant == 'none' else ' ' + quant} {self.name}"


def variants(backends: list[str], specs: list[QuantSpec]) -> list:
    """The unquantized model always runs first: it is the speed, memory and
    quality reference of every other row."""
    return [(UNQUANTIZED, None)] + [(b, s) for s in specs for b in backends if b != UNQUANTIZED]


def _status(e: BaseException) -> str:
    if isinstance(e, BackendUnavailable):
        return UNAVAILABLE
    if isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower():
        return OOM
    return ERROR


def _reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    if isinstance(e, BackendUnavailable) and text:
        return text[0]
    return one_line(e)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def prepare_variant(plan: Plan, model, backend: str, spec: QuantSpec | None,
                    step: Callable = lambda name: nullcontext()) -> dict:
    """The variant's model as its rows run it, in place: quantized (spec),
    then its all-reduces (tensor parallel) or RMSNorms in its GEMMs
    (plan.fused_norms, where they fit), and silu(gate) * up in down_proj
    (plan.swiglu_prologue, where it fits) or in gate_up's GEMM
    (plan.swiglu_epilogue, where it fits). Returns quantize_s, fused_norms,
    swiglu_prologue and swiglu_epilogue."""
    out = {}
    if spec is not None:
        with step("quantize"):  # the backend's prepare, compiling its kernels
            t0 = time.perf_counter()
            quantize_model(model, backend, spec, lm_head=plan.lm_head)
            _sync(plan.device)
            out["quantize_s"] = time.perf_counter() - t0
    if plan.shard is not None:  # on the layers quantize_model left there
        tensor_parallel.add_all_reduce(model, plan.shard)
    elif plan.fused_norms and spec is not None and not fused_norm.why_not(model):
        fused_norm.install(model)
        out["fused_norms"] = True
    if plan.shard is None and plan.swiglu_prologue and spec is not None and not swiglu.why_not(model):
        swiglu.install(model)
        out["swiglu_prologue"] = True
    if plan.shard is None and plan.swiglu_epilogue and spec is not None and not swiglu.why_not_epilogue(model):
        swiglu.install_epilogue(model)
        out["swiglu_epilogue"] = True
    return out


def variant_measurements(plan: Plan, model, backend: str, spec: QuantSpec | None, ref: dict,
                         step: Callable) -> dict:
    """Quantize (in place), then the per-variant fields: memory, quality, prefill.
    step(name): the context each GPU-bound step runs in (the watchdog's)."""
    out = prepare_variant(plan, model, backend, spec, step)
    lin, tot = linear_nbytes(model, plan.lm_head), model_nbytes(model)
    if spec is None:
        ref["linear"], ref["model"] = lin, tot
    out.update(linear_weight_gib=lin / GiB, weight_gib=tot / GiB)
    if ref.get("linear"):
        out.update(linear_weight_ratio=lin / ref["linear"], weight_ratio=tot / ref["model"])
    with step("quality"):
        logits = quality.full_logits(model, plan.quality_ids.to(plan.device))
        if spec is None:
            ref["logits"] = logits
        if ref.get("logits") is not None:
            out.update(quality.logit_metrics(ref["logits"], logits))
        if plan.eval_ids is not None:
            out["perplexity"] = quality.perplexity(model, plan.eval_ids, plan.eval_window,
                                                   plan.eval_stride)["perplexity"]
    with step("prefill"):
        pre = decode.time_prefill(model, plan.prompt_len, plan.device, reps=plan.prefill_reps, seed=plan.seed + 1,
                                  mode=plan.decode_mode)
    out.update(prefill_len=plan.prompt_len, prefill_tokens_per_s=plan.prompt_len * 1e3 / pre.p50,
               prefill_timing=pre.mode)
    if "prefill_graph_error" in pre.extra:
        out["prefill_timing"] = f"{PREFILL_FAILED}{pre.extra['prefill_graph_error']})"
    replay = pre.extra.get("replay_rel_err")
    if replay is not None and not replay <= GRAPH_CHECK_TOL:  # a replay of something else: no number
        out.update(prefill_tokens_per_s=None, prefill_timing=f"{PREFILL_DROPPED} (rel err {replay:.3g})")
    return out


def decode_row(plan: Plan, model, base: dict, batch: int, common: dict, ref: dict) -> ModelRow:
    cuda = plan.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(plan.device)
    t = decode.time_decode(model, batch, plan.prompt_len, plan.decode_steps, plan.device, plan.decode_mode,
                           seed=plan.seed, compile=plan.compile, split=plan.split,
                           attention=plan.attention, pdl=plan.pdl, inductor=plan.inductor,
                           fused_rope=plan.fused_rope)
    p50 = t.p50
    tol = GRAPH_CHECK_TOL if plan.compile == "none" else COMPILED_CHECK_TOL
    bad = t.check_rel_err is not None and not t.check_rel_err <= tol
    what = ("graph replay" if t.mode == "graph" else "the compiled step" if plan.compile != "none"
            else "the step with triton attention")
    row = ModelRow(**base, batch=batch, status=INCORRECT if bad else OK,
                   reason=f"{what} differs from the model's eager step: rel err {t.check_rel_err:.3g}" if bad else "",
                   step_ms_p50=p50, step_ms_p20=t.quantile(0.2), step_ms_p80=t.quantile(0.8),
                   tokens_per_s=batch * 1e3 / p50, graph_check_rel_err=t.check_rel_err,
                   peak_gib=torch.cuda.max_memory_allocated(plan.device) / GiB if cuda else None,
                   samples_ms=t.samples_ms, **common, **step_fields(t, plan.copy_gbps))
    if plan.shard is not None:
        n = model.config.hidden_size * batch
        row.allreduce_ms = tensor_parallel.time_all_reduces(tensor_parallel.all_reduces_per_step(model), n,
                                                            plan.dtype, plan.device, plan.shard)
        row.allreduce_share = row.allreduce_ms / p50
        # Each rank's all-reduce kernels within its own profiled step: a rank that reaches an all-reduce
        # first waits there for the others, so rank 0's share alone may be either side's.
        c, total = row.split_collective_ms, row.split_total_ms
        shares = tensor_parallel.per_rank(c / total if c is not None and total else None, plan.shard)
        row.allreduce_rank_shares = shares if None not in shares else None
    if base["backend"] == UNQUANTIZED and row.status == OK:
        ref.setdefault("tok_s", {})[batch] = row.tokens_per_s
    if row.status == OK and batch in ref.get("tok_s", {}):
        row.speedup = row.tokens_per_s / ref["tok_s"][batch]
    return row


def step_fields(t: decode.Timing, copy_gbps: float | None) -> dict:
    """The row's compile, effective-bandwidth and step-split fields from a decode Timing."""
    x = t.extra
    out = {"compile_s": x.get("compile_s") if x.get("compile", "none") != "none" else None}
    if "step_bytes" in x:
        gbps = x["step_bytes"] / (t.p50 / 1e3) / 1e9
        out.update(step_read_gib=x["step_bytes"] / GiB, kv_read_gib=x["kv_bytes"] / GiB, effective_gbps=gbps,
                   copy_pct=100 * gbps / copy_gbps if copy_gbps else None)
    for k, v in x.get("split", {}).items():
        out[f"split_{k}_ms"] = v
    if "split_source" in x:
        out.update(split_source=x["split_source"], split_kernels=x.get("split_kernels"),
                   split_other_top=x.get("split_other_top"), split_attention_top=x.get("split_attention_top"))
    return out


def _base(plan: Plan, backend: str, spec: QuantSpec | None) -> dict:
    return dict(model=plan.source.name, backend=backend, quant=spec.name if spec else "none",
                dtype=str(plan.dtype).removeprefix("torch."), device=str(plan.device), timing=plan.timing,
                compile=plan.compile, pdl=plan.pdl, attention=plan.attention)


def measure_variant(plan: Plan, backend: str, spec: QuantSpec | None, ref: dict, folder: RunFolder,
                    log: Callable[[str], None], rows: list[ModelRow], watch: Watchdog) -> None:
    """Appends this variant's rows to `rows` (and the run folder) as they are measured.
    Rows are appended only between watched steps, so a stall's rows never race them."""
    base = _base(plan, backend, spec)
    model = None

    def step(name: str, batches: list[int] = plan.batches, common: dict | None = None):
        return watch.step(Step(base, name, batches, common or {}))

    def fail(e: Exception, batch: int, common: dict) -> ModelRow:
        if not isinstance(e, BackendUnavailable):
            folder.log_error(f"{base['backend']} {base['quant']} batch {batch}:\n{traceback.format_exc()}")
        log(f"  {_status(e)}: {_reason(e)}")
        return ModelRow(**base, batch=batch, status=_status(e), reason=_reason(e), **common)

    try:
        with step("load"):  # a fresh copy on the device (a checkpoint's, or random weights built there)
            model = plan.source.fresh(plan.device)
        common = variant_measurements(plan, model, backend, spec, ref, step)
    except Exception as e:  # any failure of a variant becomes its rows
        model = None
        _free(plan.device)
        for b in plan.batches:
            rows.append(fail(e, b, {}))
            folder.append(rows[-1])
        return
    for b in plan.batches:
        try:
            with step(f"decode at batch {b}", [b], common):  # graph capture, its check, the timed steps
                row = decode_row(plan, model, base, b, common, ref)
            log(f"  batch {b}: {row.tokens_per_s:.1f} tok/s ({row.step_ms_p50:.3f} ms/step) {row.status}")
        except Exception as e:  # one batch failing (OOM at 64, say) spares the others
            _free(plan.device)
            row = fail(e, b, common)
        folder.append(row)
        rows.append(row)
    del model
    _free(plan.device)


def run(plan: Plan, folder: RunFolder, log: Callable[[str], None] = print,
        conclude: Callable[[list[ModelRow], str, int], int] | None = None) \
        -> tuple[list[ModelRow], KeyboardInterrupt | None]:
    """All variants; returns (rows, the Ctrl-C or SIGTERM that stopped them,
    harness/signals.py, or None). An interrupt keeps what was measured.
    A step past plan.stall_s: conclude(rows, why, rows not run) writes the
    outputs from the watchdog's thread, and the process exits with its return
    value (a hung GPU kernel blocks this thread in a call no signal interrupts)."""
    rows: list[ModelRow] = []
    ref: dict = {}

    def stalled(step: Step) -> int:
        why = stall_reason(step.what, plan.stall_s)
        for b in step.batches:
            _keep(folder, rows, ModelRow(**step.base, batch=b, status=ERROR, reason=why, **step.common))
        skipped = _skip_the_rest(plan, folder, rows, f"not run: {step.what} stalled")
        return conclude(rows, why, skipped) if conclude else 1

    watch = Watchdog(plan.stall_s, stalled)
    try:
        for backend, spec in plan.variants:
            log(f"{backend} {spec.name if spec else '(unquantized)'}")
            measure_variant(plan, backend, spec, ref, folder, log, rows, watch)
    except KeyboardInterrupt as e:
        return rows, e
    return rows, None


def _skip_the_rest(plan: Plan, folder: RunFolder, rows: list[ModelRow], reason: str) -> int:
    """A `skipped` row for every (variant, batch) without one; how many."""
    done = {(r.backend, r.quant, r.batch) for r in rows}
    n = 0
    for backend, spec in plan.variants:
        base = _base(plan, backend, spec)
        for b in plan.batches:
            if (backend, base["quant"], b) not in done:
                _keep(folder, rows, ModelRow(**base, batch=b, status=SKIPPED, reason=reason))
                n += 1
    return n


def _keep(folder: RunFolder, rows: list[ModelRow], row: ModelRow) -> None:
    rows.append(row)
    with suppress(WriteError):  # the row is kept for results.json, if that can be written
        folder.append(row)
