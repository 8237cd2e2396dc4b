"""Decode and prefill timing with a static KV cache.

One decode step is `model(tok, past_key_values=cache, use_cache=True)` (the
keyword is `cache` from transformers 5.24: cache_kwargs): in
transformers >= 5.17 the StaticCache keeps its fill position in an on-device
tensor that the step itself advances, and positions and the attention mask are
derived from it, so the step needs no host-side position and replays correctly
as a CUDA graph. (Those versions take no cache_position argument.) Each CUDA
graph replay is what a serving stack pays per token; eager steps are
launch-bound (Llama-3-8B on an H100, transformers' eager generate: 46 ms a
step, where reading its 15 GiB of weights takes about 5 ms).

--compile default|max-autotune traces the whole step with torch.compile
(fullgraph=True, dynamic=False: no graph break, one static graph; the
quantized GEMMs are the custom op qgemm::linear, model/ops.py) and the
compiled step is captured in our own CUDA graph, as the eager one is.
mode="reduce-overhead" is not used: its CUDA graph trees overwrite outputs
that transformers' cache still holds ("accessing tensor output of CUDAGraphs
that has been overwritten by a subsequent run"); "max-autotune" here means
Inductor's max-autotune without its own CUDA graphs.

Decode attention (DECODE_ATTENTION): transformers' sdpa path copies the
whole K/V cache num_heads/num_kv_heads times (repeat_kv) whenever it is
traced by torch.compile; ours folds a KV head's query heads into the query
rows (one query token per step), so every step reads each cache entry once.
The static cache is sized to the prompt plus the tokens decoded, so the
masked tail it also reads is at most the decoded tokens. --attention flex
(compiled steps only) runs flex_attention instead, which Inductor lowers to a
split-KV flash-decoding kernel, with a block mask that stops at the current
position: it reads only the filled part of the cache. The position reaches
the mask through qgemm::last_position (model/ops.py), which Inductor can lower.
--attention triton runs our split-KV kernel (qgemm::decode_attention, one
launch, the splits merged by the last program), compiled or not; the step
it is checked against keeps SDPA (reference_attention).
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import threading
import time
from dataclasses import dataclass, field

import torch

from qgemm_bench.model import ops, rope_attention

WARMUP_STEPS = 3
# --compile: the torch.compile mode of each choice (None: the eager step).
COMPILE_MODES = {"none": None, "default": "default", "max-autotune": "max-autotune-no-cudagraphs"}
DECODE_ATTENTION = "qgemm_decode_sdpa"  # the transformers attention implementation we register
# --attention: the implementation each choice registers. flex only changes compiled steps.
ATTENTIONS = {"sdpa": DECODE_ATTENTION, "flex": "qgemm_decode_flex", "triton": "qgemm_decode_triton"}
FLEX_BLOCK = 128  # KV block of the flex block mask; a flex cache is a multiple of it
# A dict each step hands its layers through transformers' kwargs, what they share within the step: the
# flex block mask the first layer builds (before, each layer built its own from the same position: in
# the compiled 8B step 32 position kernels and 32 copies of qgemm::last_position where one does). Made
# inside the step, it is the trace's own: nothing outlives the step for Dynamo to replay or guard on.
STEP_STATE = "qgemm_step"
MULTI_KERNEL = 1  # Inductor's triton.multi_kernel in compiled steps (inductor_options)
COMBO_KERNELS = True  # Inductor's combo_kernels in compiled steps (inductor_options)


@dataclass
class Timing:
    samples_ms: list[float]
    mode: str  # "graph" (CUDA graph replay, CUDA events) | "eager" (CUDA events) | "cpu-wall"
    check_rel_err: float | None = None  # graph replay vs an eager step on the same cache state
    extra: dict = field(default_factory=dict)

    def quantile(self, q: float) -> float:
        s = sorted(self.samples_ms)
        return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]

    @property
    def p50(self) -> float:
        return statistics.median(self.samples_ms)


def static_cache(model, max_len: int):
    from transformers import StaticCache

    return StaticCache(config=model.config, max_cache_len=max_len)


def decode_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """Attention of one query token per sequence against the static cache, the
    G = num_heads / num_kv_heads query heads of a KV head stacked as G query
    rows: one SDPA over [B, H_kv, G, D] x [B, H_kv, L, D] with the [B, 1, 1, L]
    mask broadcast, no K/V copy. Anything else (prefill) is transformers' sdpa."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    b, h, q_len, d = query.shape
    if q_len != 1 or groups == 1 or dropout:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    mask = attention_mask
    if mask is not None and mask.shape[1] != 1:
        raise RuntimeError(f"decode attention: a per-head mask {tuple(mask.shape)} is not supported")
    q = query.reshape(b, h // groups, groups, d)
    out = torch.nn.functional.scaled_dot_product_attention(q, key, value, attn_mask=mask, scale=scaling)
    return out.reshape(b, h, 1, d).transpose(1, 2).contiguous(), None


def flex_decode_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                          **kwargs):
    """Inside a compiled step, one query token per sequence: flex_attention
    over the cache blocks up to this token's position (position_ids, the same
    for every sequence of a decode batch), GQA in the kernel. Elsewhere (the
    uncompiled reference step, prefill) decode_attention."""
    position_ids = kwargs.get("position_ids")
    if not torch.compiler.is_compiling() or query.shape[2] != 1 or dropout or position_ids is None:
        return decode_attention(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                **kwargs)
    # One block mask a step (STEP_STATE): each layer built its own from the same position before.
    state = kwargs.get(STEP_STATE)
    mask = None if state is None else state.get("flex_mask")
    if mask is None:
        mask = flex_block_mask(key, ops.last_position(position_ids))
        if state is not None:
            state["flex_mask"] = mask
    out = flex_decode(query, key, value, mask=mask, scaling=scaling)
    return out.transpose(1, 2).contiguous(), None


_REFERENCE = threading.local()  # DecodeStep.reference's steps: decode_attention, whatever the model's


@contextlib.contextmanager
def reference_attention():
    """Steps inside run decode_attention (SDPA) where the model's is triton's,
    so a timed step is checked against attention it does not share."""
    _REFERENCE.on = True
    try:
        yield
    finally:
        _REFERENCE.on = False


def in_reference() -> bool:
    """Whether this thread's steps run inside reference_attention."""
    return getattr(_REFERENCE, "on", False)


def triton_decode_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                            **kwargs):
    """One query token per sequence: our Triton split-KV kernel
    (qgemm::decode_attention) over the cache up to this token's position
    (position_ids, the same for every sequence of a decode batch), in
    compiled and uncompiled steps. Elsewhere (prefill, the reference step)
    decode_attention."""
    position_ids = kwargs.get("position_ids")
    if in_reference() or query.shape[2] != 1 or dropout or position_ids is None:
        return decode_attention(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                **kwargs)
    b, h, _, d = query.shape
    scale = scaling if scaling is not None else d ** -0.5
    out = ops.decode_attention(query.reshape(b, h, d), key, value, position_ids.reshape(-1)[-1:], float(scale))
    return out.reshape(b, 1, h, d), None


def flex_block_mask(key, pos):
    """The block mask of [B, H_kv, slots, D] keys up to position pos[0] (a
    1-element tensor, the same position for every sequence) in FLEX_BLOCK
    blocks: whole blocks below it, mask_mod inside its own."""
    from torch.nn.attention.flex_attention import BlockMask

    b, length = key.shape[0], key.shape[2]
    blocks = -(-length // FLEX_BLOCK)
    num = (pos // FLEX_BLOCK + 1).to(torch.int32).reshape(1, 1, 1).expand(b, 1, 1)
    idx = torch.arange(blocks, dtype=torch.int32, device=key.device).reshape(1, 1, 1, blocks).expand(b, 1, 1, blocks)

    def upto(b, h, q_idx, kv_idx):
        return kv_idx <= pos[0]

    return BlockMask.from_kv_blocks(num, idx, BLOCK_SIZE=FLEX_BLOCK, mask_mod=upto, seq_lengths=(1, length))


def flex_decode(query, key, value, pos=None, scaling=None, kernel_options=None, mask=None):
    """flex_attention of [B, H, 1, D] queries over the cache's keys 0..pos[0]
    (or under `mask`, flex_block_mask's), GQA in the kernel; kernel_options
    are flex_attention's (scripts/flex_ab.py times them)."""
    from torch.nn.attention.flex_attention import flex_attention

    mask = flex_block_mask(key, pos) if mask is None else mask
    return flex_attention(query, key, value, block_mask=mask, scale=scaling, enable_gqa=True,
                          kernel_options=kernel_options)


def use_decode_attention(model, attention: str = "sdpa", fused_rope: bool = True) -> bool:
    """Switch `model` to decode_attention, flex_decode_attention or
    triton_decode_attention (registered with transformers once; their masks
    are sdpa's); with triton and fused_rope, its decode steps' rotary and
    cache writes in our kernel too (rope_attention, where the model is a
    Llama). Returns whether those are."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    for name, fn in ((ATTENTIONS["sdpa"], decode_attention), (ATTENTIONS["flex"], flex_decode_attention),
                     (ATTENTIONS["triton"], triton_decode_attention)):
        if name not in AttentionInterface._global_mapping:
            AttentionInterface.register(name, fn)
            ALL_MASK_ATTENTION_FUNCTIONS.register(name, sdpa_mask)
    want = ATTENTIONS[attention]
    model.set_attn_implementation(want)
    # Each attention layer reads its own module's config: one left on another (a config copied above it, as
    # tensor_parallel's was before 3fc46dc) would run another attention under this one's name.
    stale = sorted({type(m).__name__ for m in model.modules()
                    if getattr(getattr(m, "config", None), "_attn_implementation", want) != want})
    if stale:
        raise RuntimeError(f"--attention {attention}: {', '.join(stale)} kept another attention implementation")
    return rope_attention.install(model, attention == "triton" and fused_rope)


def cache_len(prompt_len: int, steps: int, attention: str = "sdpa") -> int:
    """Static cache slots of a timed decode: prompt, timed steps, warm-up, one
    spare (for flex, up to a whole KV block)."""
    n = prompt_len + steps + WARMUP_STEPS + 1
    return -(-n // FLEX_BLOCK) * FLEX_BLOCK if attention == "flex" else n


def rewind(cache, length: int) -> None:
    """Set the static cache's fill position (the K/V beyond it are just stale)."""
    for layer in cache.layers:
        n = getattr(layer, "cumulative_length", None)
        if isinstance(n, torch.Tensor):
            n.fill_(length)
        elif isinstance(n, int):
            layer.cumulative_length = length
        else:
            raise RuntimeError("this transformers' StaticCache keeps no cumulative_length (need >= 5.17)")


def spoil(cache, start: int, value: float = 1e4) -> None:
    """Fill every layer's K/V slots from `start` on with a large finite value
    (what no attention may read: masked, its softmax weight is 0, so the
    reference's 0 x value stays 0, where an inf or NaN would not)."""
    for layer in cache.layers:
        for t in (layer.keys, layer.values):
            t[:, :, start:] = value


def random_tokens(vocab: int, batch: int, length: int, seed: int, device) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, length), generator=g).to(device)


def cache_kwargs(model, cache) -> dict:
    """The forward's keyword for the KV cache: `cache` where the model's
    forward has it (transformers 5.24: past_key_values deprecated, to be
    removed in 5.40, a FutureWarning a call), else `past_key_values`."""
    import inspect

    return {"cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values": cache}


@torch.no_grad()
def prefill(model, cache, ids: torch.Tensor) -> torch.Tensor:
    """Fill the cache with a prompt; logits of the last position only (a full
    [B, T, vocab] tensor would dwarf the activations of a 128K vocabulary)."""
    return model(input_ids=ids, **cache_kwargs(model, cache), use_cache=True, logits_to_keep=1).logits


@contextlib.contextmanager
def inductor_pdl(on: bool = True):
    """Inductor's triton.enable_pdl for the steps compiled inside, set either
    way (so TORCHINDUCTOR_ENABLE_PDL in the environment never decides it
    unseen). On (--pdl): Inductor compiles its kernels to launch with
    programmatic dependent launch, as vLLM runs its full CUDA graphs, each
    starting while the kernel before it finishes and waiting in its
    prologue; ours in their chained modes (split_k_parts.chained_pdl)."""
    import torch._inductor.config as inductor_config

    from qgemm_bench.backends.triton_kernels import split_k_parts

    with inductor_config.patch({"triton.enable_pdl": on}), \
            (split_k_parts.chained_pdl() if on else contextlib.nullcontext()):
        yield


@contextlib.contextmanager
def inductor_options(overrides: dict | None = None):
    """Inductor's settings for the steps compiled inside: triton.multi_kernel
    (each reduction compiled both persistent and looped, the faster taken at
    its first calls, before the graph is captured), combo_kernels
    (independent kernels, such as each layer's q and k rotary and cache
    writes, launched as one), then `overrides` (--inductor-config, checked
    by inductor_overrides). Llama-3-8B int4 batch 1 on the H200: 2.522 ms a
    step with multi_kernel against 2.542 without; 2.439 / 2.517 with
    combo_kernels too against 2.634 / 2.632 (docs/model.md). Every variant
    of a run gets the same."""
    import torch._inductor.config as inductor_config

    with inductor_config.patch(inductor_settings(overrides)):
        yield


def inductor_settings(overrides: dict | None = None) -> dict:
    """The Inductor settings inductor_options applies: our defaults, the
    overrides, and fx_graph_cache off where both multi_kernel and
    combo_kernels are on (unless overridden). Recorded in a run's metadata."""
    opts = {"triton.multi_kernel": MULTI_KERNEL, "combo_kernels": COMBO_KERNELS, **(overrides or {})}
    if opts["combo_kernels"] and opts["triton.multi_kernel"]:
        # torch 2.11 on the H200: a graph with both, loaded from the FX graph cache, failed in
        # MultiKernelCall (a JITFunction without its hash lock); compiled afresh it runs (docs/model.md).
        # The AOTAutograd cache needs the FX graph cache: compile_s is a fresh compile's.
        opts.setdefault("fx_graph_cache", False)
    return opts


def inductor_overrides(text: str) -> dict:
    """--inductor-config's KEY=VALUE[,KEY=VALUE...] as a dict of Inductor
    config keys (dotted as torch._inductor.config names them) to Python
    literals (a bare word a string; None for any key); ValueError, one line,
    for an unknown key, triton.enable_pdl (--pdl's) or a value of another
    type than the key's default."""
    import ast
    import re

    import torch._inductor.config as inductor_config

    known, out = inductor_config.get_config_copy(), {}
    # Items end at a comma that starts the next KEY=, so a value may hold commas (ATEN,TRITON).
    for item in filter(None, (i.strip() for i in re.split(r",(?=\s*[\w.]+\s*=)", text))):
        key, eq, raw = item.partition("=")
        key, raw = key.strip(), raw.strip().rstrip(",").strip()
        if not eq or not key or not raw:
            raise ValueError(f"--inductor-config item {item!r}: expected KEY=VALUE")
        if key not in known:
            raise ValueError(f"--inductor-config: torch._inductor.config has no {key!r}")
        if key == "triton.enable_pdl":  # --pdl also chains our kernels' own PDL (inductor_pdl)
            raise ValueError("--inductor-config triton.enable_pdl: use --pdl")
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw  # a bare word: a string setting
        default = known[key]
        ok = (default is None or value is None or isinstance(value, type(default))
              or (isinstance(default, float) and type(value) is int)
              or (type(default) is int and type(value) is bool))  # 0/1 settings take True / False
        if not ok:  # Inductor's own default: the type it takes (ours may differ: inductor_options)
            raise ValueError(f"--inductor-config {key}={raw}: expected {type(default).__name__} "
                             f"(Inductor's default is {default!r})")
        out[key] = value
    return out


def pdl_runs(device: torch.device) -> bool:
    """Whether Inductor emits PDL on this device (its codegen's own test:
    CUDA, not ROCm, compute capability 9.0 or newer), as our kernels' PDL
    compiles."""
    from qgemm_bench.backends.triton_kernels.decode_attention import sm90

    return sm90(device)


def compile_mode(name: str) -> str | None:
    if name not in COMPILE_MODES:
        raise ValueError(f"compile mode {name!r}: choose one of {', '.join(COMPILE_MODES)}")
    return COMPILE_MODES[name]


def side_stream_warmup(fn, n: int):
    """fn() n times on a side stream before a CUDA graph capture (compilation,
    Triton autotuning and lazy allocations happen there, never in the graph),
    then the device synchronized; fn's last result."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(n):
            out = fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    return out


class DecodeStep:
    """One decode step at a fixed batch against a static cache: the model's
    forward as it is, or traced whole by torch.compile (`compile` != "none");
    either run directly or replayed from a CUDA graph. Inputs go through the
    static buffer `tok`."""

    def __init__(self, model, cache, batch: int, device: torch.device, compile: str = "none"):
        self.model, self.cache = model, cache
        self.tok = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.graph, self.logits = None, None
        self.compile = compile
        mode = compile_mode(compile)
        if mode is not None:  # past dynamo's recompile limit it would run eager code under a compiled label
            torch._dynamo.config.fail_on_recompile_limit_hit = True
            ops.inductor_fallbacks()
        self.fn = self.forward if mode is None else torch.compile(self.forward, fullgraph=True, dynamic=False,
                                                                   mode=mode)
        self.compile_s = None  # seconds of the first compiled call (trace, Inductor, Triton builds, autotuning)
        self.cache_kw = cache_kwargs(model, cache)

    def forward(self, tok: torch.Tensor) -> torch.Tensor:
        flex = getattr(self.model.config, "_attn_implementation", None) == ATTENTIONS["flex"]
        return self.model(input_ids=tok, **self.cache_kw, use_cache=True, **({STEP_STATE: {}} if flex else {})).logits

    @torch.no_grad()
    def eager(self) -> torch.Tensor:
        """One step without a CUDA graph (the compiled code when compiling)."""
        if self.compile_s is None and self.compile != "none":
            t0 = time.perf_counter()
            out = self.fn(self.tok)
            if self.tok.is_cuda:
                torch.cuda.synchronize(self.tok.device)
            self.compile_s = time.perf_counter() - t0
            return out
        return self.fn(self.tok)

    @torch.no_grad()
    def reference(self) -> torch.Tensor:
        """One step of the model's own forward, never compiled nor graphed,
        its attention SDPA's (reference_attention)."""
        with reference_attention():
            return self.forward(self.tok)

    def capture(self, warmup: int = WARMUP_STEPS, profiled: bool = False) -> None:
        """Warm up on a side stream (compilation, Triton autotuning and lazy
        allocations happen there, never in the graph), then capture one step.
        profiled: the replays will be profiled (profile.graph_profiling_ready)."""
        if profiled:
            from qgemm_bench.model import profile

            with contextlib.suppress(Exception):  # then the split says the replay showed no kernels
                profile.graph_profiling_ready()
        side_stream_warmup(self.eager, warmup)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits = self.eager()

    def __call__(self) -> torch.Tensor:
        if self.graph is None:
            return self.eager()
        self.graph.replay()
        return self.logits

    def feed_greedy(self, logits: torch.Tensor) -> None:
        """Next input = argmax of this step (on device, no sync): greedy decoding."""
        self.tok.copy_(logits[:, -1].argmax(-1, keepdim=True))


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    b64 = b.double()
    d = torch.linalg.vector_norm(b64).item()
    return torch.linalg.vector_norm(a.double() - b64).item() / (d or 1.0)


def time_decode(model, batch: int, prompt_len: int, steps: int, device: torch.device, mode: str = "graph",
                seed: int = 0, compile: str = "none", split: bool = True, attention: str = "sdpa",
                pdl: bool = False, inductor: dict | None = None, fused_rope: bool = True) -> Timing:
    """Per-step milliseconds of `steps` greedy decode steps at `batch` after a
    `prompt_len` prompt (static cache of prompt_len + steps + warm-up slots).
    mode: "graph" (CUDA graph per step) or "eager"; on CPU always a wall clock.
    compile: a COMPILE_MODES key, compiled under inductor_options(inductor);
    pdl: the compiled step under inductor_pdl; fused_rope: use_decode_attention's.
    extra: compile_s, the bytes one step reads (profile.step_bytes) and, with
    `split`, one step's time by category, the step as timed
    (profile.step_split)."""
    compiled = compile != "none"
    with (inductor_pdl(pdl) if compiled else contextlib.nullcontext()), \
            (inductor_options(inductor) if compiled else contextlib.nullcontext()):
        t = _time_decode(model, batch, prompt_len, steps, device, mode, seed, compile, split, attention,
                         fused_rope)
    t.extra["pdl"] = pdl and compile != "none" and pdl_runs(device)
    return t


def _time_decode(model, batch, prompt_len, steps, device, mode, seed, compile, split, attention,
                 fused_rope) -> Timing:
    from qgemm_bench.model import profile

    cuda = device.type == "cuda"
    if not cuda:
        mode = "cpu-wall"
    flex = attention == "flex" and compile != "none"  # flex runs in compiled steps only
    rope = use_decode_attention(model, attention, fused_rope)
    cache = static_cache(model, cache_len(prompt_len, steps, attention))
    ids = random_tokens(model.config.vocab_size, batch, prompt_len, seed, device)
    step = DecodeStep(model, cache, batch, device, compile)
    step.feed_greedy(prefill(model, cache, ids))
    first_tok = step.tok.clone()
    check = None
    if mode == "graph":
        step.capture(profiled=split)
    else:
        for _ in range(WARMUP_STEPS):
            step()
    if mode == "graph" or compile != "none" or attention == "triton":
        check = check_step(step, cache, prompt_len)
    samples = time_steps(step, cache, prompt_len, first_tok, steps, device)
    # flex and triton read the cache up to each token: on average the prompt and half the steps (flex in
    # whole blocks)
    upto = prompt_len + (steps + 1) // 2
    attended = -(-upto // FLEX_BLOCK) * FLEX_BLOCK if flex else upto if attention == "triton" else None
    ran = "flex" if flex else "triton" if attention == "triton" else "sdpa"
    extra = {"compile": compile, "compile_s": step.compile_s, "attention": ran,
             "fused_rope": rope and rope_attention.ran(model),
             **profile.step_bytes(model, cache, batch, attended)}
    if split:  # the step as timed: its graph's replay, or the step itself
        try:
            s = profile.step_split(step, device, reset=functools.partial(rewind, cache, prompt_len))
            extra.update(split=s.ms, split_source=s.source, split_kernels=s.kernels, split_other_top=s.other_top,
                         split_attention_top=s.attention_top)
        except Exception as e:  # the profiler failing costs the split, never the row's timing
            extra["split_source"] = f"not profiled: {type(e).__name__}: {str(e).strip()[:200]}"
    del step, cache
    if compile != "none":
        torch._dynamo.reset()  # the compiled step holds this variant's graphs; the next one compiles anew
    return Timing(samples, mode, check, extra)


def check_step(step: DecodeStep, cache, prompt_len: int) -> float:
    """The step as it is timed (its graph's replay; compiled; with our
    attention) at the prompt's end against the model's own forward there
    (SDPA's attention where the step runs ours): the relative error. The
    slots from the prompt's end on are spoilt first, so a step that reads
    its token's K/V before (or without) writing them is wrong here, not
    saved by the same values an earlier step left."""
    rewind(cache, prompt_len)
    spoil(cache, prompt_len)
    timed = step().clone()
    rewind(cache, prompt_len)
    return _rel(timed, step.reference())


def time_steps(step: DecodeStep, cache, prompt_len: int, first_tok: torch.Tensor, steps: int,
               device: torch.device) -> list[float]:
    """Milliseconds of each of `steps` greedy steps from the prompt's end
    (the cache rewound there, the first token restored): CUDA events between
    steps, or the wall clock on CPU."""
    rewind(cache, prompt_len)
    step.tok.copy_(first_tok)
    if device.type == "cuda":
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        ev[0].record()
        for i in range(steps):
            step.feed_greedy(step())
            ev[i + 1].record()
        torch.cuda.synchronize(device)
        return [ev[i].elapsed_time(ev[i + 1]) for i in range(steps)]
    samples = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step.feed_greedy(step())
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


@torch.no_grad()
def time_prefill(model, prompt_len: int, device: torch.device, batch: int = 1, reps: int = 5,
                 seed: int = 1, mode: str = "graph") -> Timing:
    """Milliseconds per prefill of `batch` x `prompt_len` tokens into a
    static cache (after one untimed warm-up), the model's forward as it is.
    mode "graph" (CUDA): the prefill captured in a CUDA graph and replayed,
    so the time is the GPU's, not the host's launches (as the decode step);
    where the capture fails, eager, the reason in
    extra["prefill_graph_error"]; extra["replay_rel_err"]: the first
    replay's logits against an eager prefill's. "eager": each prefill
    launched op by op.
    On CPU: the wall clock."""
    cache = static_cache(model, prompt_len)
    ids = random_tokens(model.config.vocab_size, batch, prompt_len, seed, device)
    cuda = device.type == "cuda"
    extra = {"batch": batch, "prompt_len": prompt_len}
    run = functools.partial(prefill, model, cache, ids)
    if cuda and mode == "graph":
        try:
            graph, _, extra["replay_rel_err"] = _prefill_graph(model, cache, ids)
            run = graph.replay
        except Exception as e:  # the capture failing costs the graph, never the row
            torch.cuda.synchronize(device)
            extra["prefill_graph_error"] = f"{type(e).__name__}: {str(e).strip()[:200]}"
            mode = "eager"
    samples = []
    for i in range(reps + 1):
        rewind(cache, 0)
        if cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            run()
            e.record()
            e.synchronize()
            ms = s.elapsed_time(e)
        else:
            t0 = time.perf_counter()
            run()
            ms = (time.perf_counter() - t0) * 1e3
        if i:
            samples.append(ms)
    return Timing(samples, mode if cuda else "cpu-wall", extra=extra)


def _prefill_graph(model, cache, ids: torch.Tensor) -> tuple[torch.cuda.CUDAGraph, torch.Tensor, float]:
    """One prefill captured in a CUDA graph, after warm-ups on a side stream
    (Triton builds, lazy allocations; DecodeStep.capture's way): the graph,
    the logits each replay writes, and the first replay's relative error
    against the last warm-up's eager logits (a replay of stale state would
    be timed, not checked, otherwise). A replay fills the cache from
    position 0 (rewind first). A capture that fails raises its first error
    (not capture_end's "previous error"), the current stream restored."""
    def warm():
        rewind(cache, 0)
        return prefill(model, cache, ids)

    want = side_stream_warmup(warm, WARMUP_STEPS)
    rewind(cache, 0)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    graph, err = torch.cuda.CUDAGraph(), None
    with torch.cuda.stream(s):
        graph.capture_begin()
        try:
            logits = prefill(model, cache, ids)
        except Exception as e:  # noqa: BLE001 - re-raised below, after the capture is ended
            err = e
        try:
            graph.capture_end()
        except Exception as e:  # noqa: BLE001
            err = err or e
    torch.cuda.current_stream().wait_stream(s)
    if err is not None:
        raise err
    rewind(cache, 0)
    graph.replay()
    return graph, logits, _rel(logits, want)
