"""What one decode step reads and where its time goes.

step_bytes: the bytes a step must read from memory, torchao's "model size"
made exact for a decode step: every weight the step runs (decoder linears
with their scales, norms, lm_head), only the `batch` rows of the embedding
table that it gathers (the whole table when lm_head is tied to it), and the
whole static K/V cache, which the masked attention reads every step.
Activations are ignored (a few MB at most). Effective bandwidth = these bytes
x steps/s.

step_split: one graph-free step under torch.profiler, its time in four
categories by the operator that ran it (the outermost one that names a
category): our quantized GEMMs (the custom op qgemm::linear, whatever kernel
it launches), dense GEMMs (aten mm/addmm/linear: cuBLAS on CUDA),
attention (scaled_dot_product / flash / flex / efficient attention), and the
rest (norms, rotary, cache writes, residual adds, Inductor's fused kernels,
sampling). On CUDA the time is kernel time (the sum of every kernel's
duration, so the categories sum to it); on CPU it is the operators' wall
time within the step.
"""

from __future__ import annotations

import torch

from qgemm_bench.model.quant_linear import QuantLinear, device_tensors, unique_nbytes

CATEGORIES = ("quant_gemm", "dense_gemm", "attention", "other")
_DENSE = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::_scaled_mm",
          "aten::_addmm_activation", "mkldnn::_linear_pointwise")  # the last: Inductor's CPU linear
_ATTENTION = ("scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention", "flex_attention")


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
    if name.startswith("qgemm::"):
        return "quant_gemm"
    if name in _DENSE:
        return "dense_gemm"
    if any(a in name for a in _ATTENTION):
        return "attention"
    return None


def _outermost(events) -> list:
    """(category, event) for each event naming a category none of whose ancestors does."""
    out = []
    for e in events:
        c = category(e.name)
        if c is None:
            continue
        p, nested = e.cpu_parent, False
        while p is not None:
            if category(p.name) is not None:
                nested = True
                break
            p = p.cpu_parent
        if not nested:
            out.append((c, e))
    return out


def split_events(events, cuda: bool) -> dict:
    """Milliseconds per category of profiler events (FunctionEvents of one or
    more steps; on CPU, the steps are the record_function "decode_step")."""
    from torch.autograd import DeviceType

    ms = dict.fromkeys(CATEGORIES, 0.0)
    cpu_ops = [e for e in events if e.device_type == DeviceType.CPU and not e.is_async]
    for c, e in _outermost(cpu_ops):
        ms[c] += (e.device_time_total if cuda else e.cpu_time_total) / 1e3
    if cuda:
        total = sum(e.device_time_total for e in events if e.device_type == DeviceType.CUDA) / 1e3
    else:
        total = sum(e.cpu_time_total for e in cpu_ops if e.name == "decode_step") / 1e3
    ms["other"] = max(total - sum(ms.values()), 0.0)
    ms["total"] = total
    return ms


def step_split(run, device: torch.device, reps: int = 2) -> dict:
    """Milliseconds per category (and "total") of one call of `run` (a decode
    step without a CUDA graph), the mean of `reps` profiled calls after one
    unprofiled."""
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = device.type == "cuda"
    run()
    if cuda:
        torch.cuda.synchronize(device)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        for _ in range(reps):
            with record_function("decode_step"):
                run()
        if cuda:
            torch.cuda.synchronize(device)
    ms = split_events(prof.events(), cuda)
    return {k: v / reps for k, v in ms.items()}
