"""Decode and prefill timing with a static KV cache.

One decode step is `model(tok, past_key_values=cache, use_cache=True)`: in
transformers >= 5.17 the StaticCache keeps its fill position in an on-device
tensor that the step itself advances, and positions and the attention mask are
derived from it, so the step needs no host-side position and replays correctly
as a CUDA graph. (Those versions take no cache_position argument.) Each CUDA
graph replay is what a serving stack pays per token; eager steps on an H100 are
launch-bound (GPU.md: 46 ms vs a ~5 ms weight-read floor for the 8B model).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch

WARMUP_STEPS = 3


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


def random_tokens(vocab: int, batch: int, length: int, seed: int, device) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, length), generator=g).to(device)


@torch.no_grad()
def prefill(model, cache, ids: torch.Tensor) -> torch.Tensor:
    """Fill the cache with a prompt; logits of the last position only (a full
    [B, T, vocab] tensor would dwarf the activations of a 128K vocabulary)."""
    return model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1).logits


class DecodeStep:
    """One decode step at a fixed batch against a static cache, eager or
    replayed from a CUDA graph. Inputs go through the static buffer `tok`."""

    def __init__(self, model, cache, batch: int, device: torch.device):
        self.model, self.cache = model, cache
        self.tok = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.graph, self.logits = None, None

    @torch.no_grad()
    def eager(self) -> torch.Tensor:
        return self.model(input_ids=self.tok, past_key_values=self.cache, use_cache=True).logits

    def capture(self, warmup: int = WARMUP_STEPS) -> None:
        """Warm up on a side stream (Triton autotuning and lazy allocations happen
        there, never in the graph), then capture one step."""
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warmup):
                self.eager()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
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
                seed: int = 0) -> Timing:
    """Per-step milliseconds of `steps` greedy decode steps at `batch` after a
    `prompt_len` prompt (static cache of prompt_len + steps + warm-up slots).
    mode: "graph" (CUDA graph per step) or "eager"; on CPU always a wall clock."""
    cuda = device.type == "cuda"
    if not cuda:
        mode = "cpu-wall"
    cache = static_cache(model, prompt_len + steps + WARMUP_STEPS + 1)
    ids = random_tokens(model.config.vocab_size, batch, prompt_len, seed, device)
    step = DecodeStep(model, cache, batch, device)
    step.feed_greedy(prefill(model, cache, ids))
    first_tok = step.tok.clone()
    check = None
    if mode == "graph":
        step.capture()
        rewind(cache, prompt_len)
        graphed = step().clone()
        rewind(cache, prompt_len)
        check = _rel(graphed, step.eager())
    else:
        for _ in range(WARMUP_STEPS):
            step()
    rewind(cache, prompt_len)
    step.tok.copy_(first_tok)

    samples = []
    if cuda:
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        ev[0].record()
        for i in range(steps):
            step.feed_greedy(step())
            ev[i + 1].record()
        torch.cuda.synchronize(device)
        samples = [ev[i].elapsed_time(ev[i + 1]) for i in range(steps)]
    else:
        for _ in range(steps):
            t0 = time.perf_counter()
            step.feed_greedy(step())
            samples.append((time.perf_counter() - t0) * 1e3)
    del step, cache
    return Timing(samples, mode, check)


@torch.no_grad()
def time_prefill(model, prompt_len: int, device: torch.device, batch: int = 1, reps: int = 5,
                 seed: int = 1) -> Timing:
    """Milliseconds per eager prefill of `batch` x `prompt_len` tokens into a
    static cache (after one untimed warm-up)."""
    cache = static_cache(model, prompt_len)
    ids = random_tokens(model.config.vocab_size, batch, prompt_len, seed, device)
    cuda = device.type == "cuda"
    samples = []
    for i in range(reps + 1):
        rewind(cache, 0)
        if cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            prefill(model, cache, ids)
            e.record()
            e.synchronize()
            ms = s.elapsed_time(e)
        else:
            t0 = time.perf_counter()
            prefill(model, cache, ids)
            ms = (time.perf_counter() - t0) * 1e3
        if i:
            samples.append(ms)
    return Timing(samples, "eager" if cuda else "cpu-wall", extra={"batch": batch, "prompt_len": prompt_len})
