"""Llama models: presets (LlamaConfig, no download), random-weight builds on a
device, and local Hugging Face checkpoints (a folder, or a .gguf file)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import torch

from qgemm_bench.model.errors import InputError

_LLAMA3 = dict(vocab_size=128256, rms_norm_eps=1e-5, bos_token_id=128000, eos_token_id=128001,
               attention_bias=False, mlp_bias=False, hidden_act="silu")
_LLAMA3_ROPE = {"rope_type": "default", "rope_theta": 500000.0}

# Architectures of the published configs. `tiny` is for CPU and CI:
# every K is a multiple of 128 so all int4 group sizes and NVFP4 apply.
PRESETS = {
    "tiny": dict(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=1024,
                 rms_norm_eps=1e-5, rope_parameters=_LLAMA3_ROPE, tie_word_embeddings=False),
    "llama-3.2-1b": dict(_LLAMA3, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                         max_position_embeddings=131072, tie_word_embeddings=True,
                         rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 8192}),
    "llama-3-8b": dict(_LLAMA3, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=8192,
                       tie_word_embeddings=False, rope_parameters=_LLAMA3_ROPE),
    # For multi-GPU work (issue 18): ~141 GB of bf16 weights, more than one GPU holds.
    "llama-3-70b": dict(_LLAMA3, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                        num_attention_heads=64, num_key_value_heads=8, head_dim=128, max_position_embeddings=8192,
                        tie_word_embeddings=False, rope_parameters=_LLAMA3_ROPE),
}


NO_LAYERS = "no decoder layers (model.model.layers)"  # why a model-wide fusion cannot apply to a model


def decoder_layers(model) -> list:
    """A Llama-style model's decoder layers (model.model.layers; none for anything else)."""
    return list(getattr(getattr(model, "model", None), "layers", None) or [])


def config_for(name: str, **overrides):
    """The LlamaConfig of a preset (overrides e.g. num_hidden_layers=2 for a quick look)."""
    if name not in PRESETS:
        raise InputError(f"unknown model {name!r}; choose one of: {', '.join(PRESETS)} (or --checkpoint DIR)")
    from transformers import LlamaConfig

    return LlamaConfig(**{**PRESETS[name], **overrides})


def weight_bytes(config, dtype: torch.dtype, world: int = 1) -> int:
    """A model's weights in `dtype` on one rank, what building it allocates:
    the decoder's linears split over `world` ranks, embeddings, lm_head and
    norms whole."""
    h, inter, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    head_dim = getattr(config, "head_dim", None) or h // config.num_attention_heads
    q, kv = config.num_attention_heads * head_dim, config.num_key_value_heads * head_dim
    linears = h * (q + 2 * kv) + q * h + 3 * h * inter
    whole = config.vocab_size * h * (1 if getattr(config, "tie_word_embeddings", False) else 2) + (2 * layers + 1) * h
    return (layers * linears // world + whole) * dtype.itemsize


def build_model(config, device: torch.device, dtype: torch.dtype, seed: int = 0):
    """LlamaForCausalLM with random weights (transformers' init, seeded),
    created directly on `device` in `dtype`, in eval mode without grads.
    Same config, seed and device give the same weights."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM._from_config(config, dtype=dtype)
    return _frozen(model)


def _frozen(model):
    model.eval()
    model.requires_grad_(False)
    return model


def _gguf_split(path: Path) -> tuple[Path, dict]:
    return (path.parent, {"gguf_file": path.name}) if path.suffix == ".gguf" else (path, {})


def load_checkpoint(path: str | Path, dtype: torch.dtype):
    """(model on CPU, tokenizer or None) from a local HF folder or a .gguf file
    (GGUF needs the `gguf` package; its weights are dequantized on load)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"--checkpoint {path}: no such file or folder")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where, kw = _gguf_split(p)
    model = AutoModelForCausalLM.from_pretrained(where, dtype=dtype, local_files_only=True, **kw)
    try:
        tokenizer = AutoTokenizer.from_pretrained(where, local_files_only=True, **kw)
    except (OSError, ValueError, TypeError):
        tokenizer = None
    return _frozen(model), tokenizer


@dataclass
class ModelSource:
    """Where a run's models come from. Every variant starts from a fresh copy
    (quantize_model works in place), and only that copy is on the device, so
    weight and peak memory are those of the variant alone."""

    name: str  # preset name or checkpoint path (for the report)
    config: object
    dtype: torch.dtype
    seed: int = 0
    cpu_model: object = None  # a loaded checkpoint, kept on CPU
    tokenizer: object = None
    meta: dict = field(default_factory=dict)
    shard: object = None  # tensor_parallel.Shard under torchrun: this rank's part of every model
    fused: bool = True  # q/k/v and gate/up as one GEMM each (model/fuse.py), in every variant
    pairs: bool = False  # gate/up's columns in (gate, up) pairs (model/fuse.py; --swiglu-epilogue)

    @classmethod
    def preset(cls, name: str, dtype: torch.dtype, seed: int = 0, **overrides) -> ModelSource:
        return cls(name, config_for(name, **overrides), dtype, seed)

    @classmethod
    def checkpoint(cls, path: str, dtype: torch.dtype) -> ModelSource:
        model, tok = load_checkpoint(path, dtype)
        return cls(str(path), model.config, dtype, cpu_model=model, tokenizer=tok)

    @property
    def trained(self) -> bool:
        return self.cpu_model is not None

    def fresh(self, device: torch.device):
        model = self._unfused(device)
        if self.fused:
            from qgemm_bench.model.fuse import fuse_projections

            fuse_projections(model, self.pairs)
        return model

    def _unfused(self, device: torch.device):
        if self.shard is not None:
            from qgemm_bench.model import tensor_parallel

            if self.cpu_model is not None:
                return tensor_parallel.shard_model(_frozen(copy.deepcopy(self.cpu_model).to(device)), self.shard)
            return tensor_parallel.build_sharded(self.config, device, self.dtype, self.seed, self.shard)
        if self.cpu_model is not None:
            return _frozen(copy.deepcopy(self.cpu_model).to(device))
        return build_model(self.config, device, self.dtype, self.seed)

    def describe(self) -> dict:
        c = self.config
        return {"model": self.name, "trained": self.trained, "layers": c.num_hidden_layers,
                "hidden": c.hidden_size, "intermediate": c.intermediate_size, "heads": c.num_attention_heads,
                "kv_heads": c.num_key_value_heads, "vocab": c.vocab_size,
                "tied_embeddings": bool(getattr(c, "tie_word_embeddings", False)), "fused_projections": self.fused}
