"""What one decode step reads and where its time goes.

step_bytes: the bytes a step must read from memory, torchao's "model size"
made exact for a decode step: every weight the step runs (decoder linears
with their scales, norms, lm_head), only the `batch` rows of the embedding
table that it gathers (the whole table when lm_head is tied to it), and the
whole static K/V cache, which the masked attention reads every step.
Activations are ignored (a few MB at most). Effective bandwidth = these bytes
x steps/s.

step_split: one steady-state step of the variant that was timed, its device
time in five categories: our quantized GEMMs (the custom op qgemm::linear,
whatever kernel it launches), dense GEMMs (aten mm/addmm/linear: cuBLAS on
CUDA; Inductor's mm templates and its reductions that compute a small-M
mm), attention (scaled_dot_product / flash / flex /
efficient attention, and flex decoding's merge of its KV splits), collectives
(tensor parallel's all-reduces: NCCL's kernels, c10d's operators) and the
rest (norms, rotary, cache writes, residual adds, Inductor's other fused
pointwise and reduction kernels, sampling). On CUDA the time is kernel time: the
kernels, copies and sets the device ran (never the spans
the profiler draws on the device for record_function ranges, which also cover
the idle time between kernels), each counted from where the one before it on
its stream ended (exclusive): a kernel launched early with PDL starts while
its predecessor runs and waits for it, and that wait is the predecessor's
time, not its own. A step replayed from a CUDA graph runs no
operators, so its kernels take the categories of the same kernels in one
profiled call of the same (compiled) step without the graph, matched by name
and order of launch; when the profiler sees no kernels in the replay, the
split is that un-graphed call's, and says so. On CPU the time is the
operators' wall time within the step.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from qgemm_bench.model.quant_linear import QuantLinear, device_tensors, unique_nbytes

CATEGORIES = ("quant_gemm", "dense_gemm", "attention", "collective", "other")
_DENSE = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::_scaled_mm",
          "aten::_addmm_activation", "mkldnn::_linear_pointwise")  # the last: Inductor's CPU linear
_ATTENTION = ("scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention", "flex_attention")
# Tensor parallel's all-reduces: c10d's operators (eager; traced, the functional ones) and the backends'
# record functions (nccl:all_reduce, gloo:all_reduce). In the step, where their time includes the wait
# for the other ranks: a TP step's cost, which an all-reduce replayed alone does not show.
_COLLECTIVE = ("c10d::", "_c10d_functional::", "c10d_functional::", "nccl:", "gloo:")
# Inductor's fused pointwise / reduction / persistent-reduction kernels (and its CPU ones) are named after
# the aten ops they absorbed ("triton_poi_fused__scaled_dot_product_flash_attention_0" prepares SDPA's
# inputs): they are the rest, whatever their name contains, but for flex decoding's merge of its KV
# splits (_FLEX_MERGE).
_FUSED = ("triton_poi_", "triton_red_", "triton_per_", "cpp_fused_")
# Inductor lowers flex decoding as its template over SPLIT_KV splits, then a max and sums over the splits
# (torch/_inductor/kernel/flex/flex_decoding.py): reductions named after flex_attention; attention's work.
_FLEX_MERGE = ("triton_red_", "triton_per_")
# Kernel names, for a kernel no categorized operator launched (a graph replay's kernel the un-graphed
# step did not run): ours (Triton, Gluon, Helion), tinygemm, fbgemm's CUTLASS int4, gemlite; cuBLAS and
# CUTLASS GEMMs; fused attention (some CUTLASS-based). Checked in this order, lower case.
_QUANT_KERNELS = ("fused_kernel", "weight_only_kernel", "dequant_kernel", "split_k_kernel", "ws_kernel",
                  "reduce_planes", "_helion_", "tinygemm", "int4pack", "i4bf16", "a16fwn", "nvfp4")
_ATTENTION_KERNELS = ("flash", "fmha", "attention", "attn", "flex")
_COLLECTIVE_KERNELS = ("nccl",)
_DENSE_KERNELS = ("gemm", "gemv", "nvjet", "cublas", "xmma", "cutlass", "splitkreduce")
_DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")  # kineto's activity types of device work


def step_bytes(model, cache, batch: int, attended: int | None = None) -> dict:
    """{"weight_bytes", "kv_bytes", "step_bytes"} of one decode step at `batch`;
    `attended`: the cache slots the attention reads, when not all of them."""
    embed = model.get_input_embeddings().weight
    tensors = [t for t in device_tensors(model) if t.data_ptr() != embed.data_ptr()]
    tensors += [t for m in model.modules() if isinstance(m, QuantLinear) for t in m.kernel.resident]
    head = model.get_output_embeddings()
    tied = isinstance(getattr(head, "weight", None), torch.Tensor) and head.weight.data_ptr() == embed.data_ptr()
    rows = embed.nbytes if tied else batch * embed.shape[1] * embed.element_size()
    kv = 0
    for layer in cache.layers:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, torch.Tensor):  # [B, H_kv, slots, D]
                kv += t.nbytes if attended is None else t.nbytes * min(attended, t.shape[2]) // t.shape[2]
    weights = unique_nbytes(tensors) + rows
    return {"weight_bytes": weights, "kv_bytes": kv, "step_bytes": weights + kv}


def category(name: str) -> str | None:
    """The category an operator's name (or an Inductor kernel's, which it
    launches under a record function of the same name) states, if any."""
    if name.startswith("qgemm::linear"):  # not qgemm's other ops (flex decode's position copy)
        return "quant_gemm"
    if name.startswith("qgemm::decode_attention"):  # --attention triton's kernel
        return "attention"
    if name.startswith("qgemm::"):
        return "other"
    if name.startswith(_COLLECTIVE):
        return "collective"
    # A reduction naming mm: Inductor's small-M matmul as its own mul-and-sum (max-autotune's bf16 decode
    # step: each linear, with the norm or flex merge it absorbed), the weights' read; checked before the merge.
    if name.startswith(_FLEX_MERGE) and set(name.split("_")) & {"mm", "addmm"}:
        return "dense_gemm"
    if name.startswith(_FLEX_MERGE) and "flex_attention" in name:
        return "attention"
    if name.startswith(_FUSED):
        return None
    if name.startswith("triton_tem_"):  # Inductor's templates: mm (max-autotune) or flex attention
        # A flex kernel's name also lists what it absorbed ("..._bmm_cat_cos_..._flex_attention_...":
        # the rotary's inv_freq @ positions): flex first.
        if "flex_attention" in name or "flex_decoding" in name:
            return "attention"
        return "dense_gemm" if set(name.split("_")) & {"mm", "addmm", "bmm"} else "attention"
    if name in _DENSE:
        return "dense_gemm"
    if any(a in name for a in _ATTENTION):
        return "attention"
    return None


def kernel_category(name: str) -> str:
    """A device kernel's category from its name alone."""
    c = category(name)
    if c is not None or name.startswith(_FUSED):
        return c or "other"
    low = name.lower()
    for c, words in (("collective", _COLLECTIVE_KERNELS), ("quant_gemm", _QUANT_KERNELS),
                     ("attention", _ATTENTION_KERNELS), ("dense_gemm", _DENSE_KERNELS)):
        if any(w in low for w in words):
            return c
    return "other"


def _outermost(op) -> str | None:
    """The category of the outermost operator from `op` up that names one."""
    found = None
    while op is not None:
        found = category(op.name) or found
        op = op.cpu_parent
    return found


def device_work(events) -> list:
    """The kernels, copies and sets among profiler events, in start order.
    Not the device-side spans of record_function ranges (gpu_user_annotation):
    they cover the idle time between a range's kernels as well."""
    from torch.autograd import DeviceType

    def work(e) -> bool:
        kind = getattr(e, "activity_type", None)
        return kind in _DEVICE_WORK if kind else not getattr(e, "is_user_annotation", False)

    return sorted((e for e in events if e.device_type != DeviceType.CPU and work(e)), key=lambda e: e.time_range.start)


def exclusive(work) -> list[float]:
    """Each of device_work()'s activities' microseconds from where the
    activities before it on its stream (device, stream) ended: what it added
    to that stream's busy time. A kernel launched early with PDL (or a
    copy) starts while its predecessor runs and waits for it: that span was
    counted in the predecessor. On other streams overlap is concurrency and
    stays."""
    end: dict[tuple, float] = {}
    out = []
    for e in work:
        key = (getattr(e, "device_index", 0), getattr(e, "device_resource_id", 0))
        start, us = e.time_range.start, e.device_time_total
        before = end.get(key, start)
        out.append(max(start + us - max(start, before), 0.0))
        end[key] = max(before, start + us)
    return out


def attributed(events) -> list[tuple[str, str, float]]:
    """(name, category, us) of each device activity of un-graphed steps, in
    start order, us exclusive(): the category of the outermost operator
    around the one that launched it that names one, else its name's
    (kernel_category). An
    operator's kernels are its FunctionEvent.kernels (name, duration), matched
    to the device's activities by both, in order (torch 2.11's events carry no
    other link between the two)."""
    from torch.autograd import DeviceType

    launched: dict[tuple[str, float], list[str | None]] = {}
    ops = sorted((e for e in events if e.device_type == DeviceType.CPU and not e.is_async),
                 key=lambda e: e.time_range.start)
    for op in ops:
        c = _outermost(op)
        for k in op.kernels:
            launched.setdefault((k.name, k.duration), []).append(c)
    out = []
    work = device_work(events)
    for k, us in zip(work, exclusive(work), strict=True):
        cats = launched.get((k.name, k.device_time_total))
        c = cats.pop(0) if cats else None
        out.append((k.name, c or kernel_category(k.name), us))
    return out


def matched(replay: list, reference: list[tuple[str, str, float]]) -> list[tuple[str, str, float]]:
    """(name, category, us) of a CUDA graph replay's device activities (in
    start order, us exclusive()), the categories taken from `reference`
    (attributed() of the same step without the graph): the i-th launch of a
    name takes that name's i-th category there (a cuBLAS kernel can run both
    the lm_head and a dequantize-then-mm backend's GEMM); a name the
    reference lacks goes by kernel_category."""
    by_name: dict[str, list[str]] = {}
    for name, c, _ in reference:
        by_name.setdefault(name, []).append(c)
    seen: dict[str, int] = {}
    out = []
    for k, us in zip(replay, exclusive(replay), strict=True):
        cats, i = by_name.get(k.name), seen.get(k.name, 0)
        seen[k.name] = i + 1
        out.append((k.name, cats[i % len(cats)] if cats else kernel_category(k.name), us))
    return out


def replay_kernels(replay: list, reference: list[tuple[str, str, float]]) -> tuple[list, str]:
    """(kernels, source) of a profiled graph replay: matched() when the
    profiler saw the graph's kernels (at least half as many as the un-graphed
    step ran: a replay seen as one event, or not at all, is not), else the
    un-graphed step's own."""
    if len(replay) * 2 >= len(reference) > 0:
        return matched(replay, reference), SOURCES["graph"]
    return reference, SOURCES["fallback"]


def kernel_split(kernels: list[tuple[str, str, float]]) -> dict:
    """Milliseconds per category and "total" (all of them) of (name, category, us)."""
    ms = dict.fromkeys(CATEGORIES, 0.0)
    for _, c, us in kernels:
        ms[c] += us / 1e3
    ms["total"] = sum(ms.values())
    return ms


def cpu_split(events) -> dict:
    """Milliseconds per category of CPU profiler events of steps run under the
    record_function "decode_step": each operator's wall time counted once, in
    the category of its outermost ancestor that names one; the rest of the
    steps' time is "other"."""
    from torch.autograd import DeviceType

    ms = dict.fromkeys(CATEGORIES, 0.0)
    ops = [e for e in events if e.device_type == DeviceType.CPU and not e.is_async]
    for e in ops:
        c = category(e.name)
        if c is not None and _outermost(e.cpu_parent) is None:
            ms[c] += e.cpu_time_total / 1e3
    total = sum(e.cpu_time_total for e in ops if e.name == "decode_step") / 1e3
    ms["other"] = max(total - sum(ms.values()), 0.0)
    ms["total"] = total
    return ms


@dataclass
class Split:
    ms: dict  # milliseconds per category and "total", of one step
    source: str  # SOURCES: what was profiled
    kernels: int | None = None  # device activities per step (CUDA)
    other_top: list | None = None  # the rest's largest kernels (top_kernels), CUDA
    attention_top: list | None = None  # the attention's kernels (top_kernels), CUDA: what its bucket holds


TOP_KERNELS = 8  # the rest's kernels a split names: what to fuse next
TOP_ATTENTION = 4  # the attention's: its kernels and what the graph fused into its bucket


def top_kernels(kernels: list[tuple[str, str, float]], reps: int, category_: str = "other",
                n: int = TOP_KERNELS) -> list[dict]:
    """The n kernels of `category_` with the most time per step among
    (name, category, us) of `reps` steps: [{"name", "calls", "us"}] per step,
    largest first (names cut at 160 characters: Inductor's name every op it fused)."""
    by: dict[str, list[float]] = {}
    for name, c, us in kernels:
        if c == category_:
            slot = by.setdefault(name, [0, 0.0])
            slot[0] += 1
            slot[1] += us
    top = sorted(by.items(), key=lambda kv: -kv[1][1])[:n]
    return [{"name": name[:160], "calls": round(calls / reps, 2), "us": round(us / reps, 2)}
            for name, (calls, us) in top]


SOURCES = {"graph": "graph replay", "plain": "un-graphed step",
           "fallback": "un-graphed step (no kernels seen in the graph replay)"}


def graph_profiling_ready() -> None:
    """Start and stop the profiler once: a CUDA graph captured before the
    process's first profiler session may show none of its kernels in later
    profiles (what torch.profiler._utils._init_for_cuda_graphs does)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        pass


def step_split(step, device: torch.device, reps: int = 2, reset=None) -> Split:
    """One steady-state call of `step` (a decode.DecodeStep) split by category,
    the mean of `reps` profiled calls after one unprofiled: its CUDA graph's
    replay when it has one (the kernels categorized by the same step run
    without the graph, `matched`), else the step as it runs. reset(): called
    before each profiled series (rewinds the cache)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = device.type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])

    def events(run):
        if reset is not None:
            reset()
        run()
        if cuda:
            torch.cuda.synchronize(device)
        with profile(activities=acts) as prof:
            for _ in range(reps):
                # CPU: the step's wall time. Not on CUDA, where the range is drawn on the device too.
                with record_function("decode_step") if not cuda else contextlib.nullcontext():
                    run()
            if cuda:
                torch.cuda.synchronize(device)
        return prof.events()

    plain = events(step.eager)  # the compiled code when compiling, without a graph
    if not cuda:
        return Split({k: v / reps for k, v in cpu_split(plain).items()}, SOURCES["plain"])
    kernels, source = attributed(plain), SOURCES["plain"]
    if step.graph is not None:
        kernels, source = replay_kernels(device_work(events(step)), kernels)
    ms = kernel_split(kernels)
    return Split({k: v / reps for k, v in ms.items()}, source, round(len(kernels) / reps), top_kernels(kernels, reps),
                 top_kernels(kernels, reps, "attention", TOP_ATTENTION))
