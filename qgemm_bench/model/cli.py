"""`runner.py --model NAME`: the command-line face of the model benchmark.

add_arguments(parser) adds the model options (and --backends, --device,
--dtype, --output-dir, --no-plots, --seed, --stall-timeout where the parser
lacks them);
run(args) builds the plan, runs it and writes the run folder. Bad input raises
InputError (one line; the runner prints it and exits 2)."""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import sys
from pathlib import Path

import torch

from qgemm_bench.errors import one_line
from qgemm_bench.harness.args import comma_list
from qgemm_bench.model.errors import InputError
from qgemm_bench.model.quant_linear import UNQUANTIZED, check_backend, parse_quants

DEFAULTS = {  # (CUDA, CPU)
    "backends": ("bf16,torch,triton,helion,tinygemm", "bf16,torch"),
    "quant": ("int4-g128,int4-channel,nvfp4", "int4-g128,int4-channel,nvfp4"),
    "batch": ("1,16,64", "1,4"),
    "prompt_len": (512, 16),
    "decode_steps": (100, 8),
    "quality_tokens": ("2x256", "2x32"),
    "eval_window": (1024, 256),
    "prefill_reps": (5, 2),
}
DTYPES = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
          "half": torch.float16, "float32": torch.float32, "fp32": torch.float32}


def _add(parser: argparse.ArgumentParser, *flags: str, **kw) -> None:
    """Add an option unless the parser (runner.py's) already has it."""
    if not any(f in parser._option_string_actions for f in flags):
        parser.add_argument(*flags, **kw)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from qgemm_bench.harness.args import STALL_S, stall_seconds
    from qgemm_bench.model.llama import PRESETS

    g = parser.add_argument_group("model benchmark (--model)")
    _add(g, "--model", metavar="NAME", help=f"Llama architecture with random weights: {', '.join(PRESETS)}")
    _add(g, "--checkpoint", metavar="PATH", help="a local Hugging Face checkpoint folder (or a .gguf file) "
         "instead of random weights; its tokenizer enables --eval-text")
    _add(g, "--layers", type=int, metavar="N", help="override the preset's number of decoder layers")
    _add(g, "--quant", metavar="F,G", help="weight formats: int4-gN (N even: 32, 64, 128, ...), "
         "int4-channel (row-wise: one scale per output row), nvfp4 (default: int4-g128,int4-channel,nvfp4)")
    _add(g, "--batch", metavar="B,B", help="decode batch sizes (default 1,16,64 on CUDA; 1,4 on CPU)")
    _add(g, "--prompt-len", type=int, metavar="T", help="prompt tokens before decoding, and the prefill "
         "length that is timed (default 512 on CUDA, 16 on CPU)")
    _add(g, "--decode-steps", type=int, metavar="N", help="timed decode steps per batch size (default 100 "
         "on CUDA, 8 on CPU)")
    _add(g, "--decode-mode", choices=["graph", "eager"], help="CUDA: graph (default) "
         "replays one decode step captured in a CUDA graph, and the timed prefill likewise; eager runs them op "
         "by op (launch-bound); on CPU steps are wall-clock")
    _add(g, "--compile", choices=["none", "default", "max-autotune"], default="none", help="trace the whole "
         "decode step with torch.compile (fullgraph, static shapes; the quantized GEMMs as custom ops) before "
         "the CUDA graph capture: default or max-autotune (Inductor's, without its own CUDA graphs; "
         "its reductions by multi_kernel, the faster form picked at the first calls; independent kernels "
         "launched as one by combo_kernels); none "
         "(default) runs the model's forward as it is. The compile time is in each row")
    _add(g, "--attention", choices=["sdpa", "flex", "triton"], default="sdpa", help="decode attention: sdpa "
         "(default; one SDPA over the whole static cache, masked), flex (with --compile: flex_attention's "
         "split-KV decoding kernel, reading the cache only up to each token) or triton (ours: a split-KV "
         "kernel of one launch up to each token, compiled or not; the step it is checked against keeps SDPA)")
    _add(g, "--fused-rope", action=argparse.BooleanOptionalAction, help="with --attention triton: the "
         "token's rotary and K/V cache write done by the attention kernel too, in every variant (Llama "
         "models; docs/model.md). On by default there")
    _add(g, "--pdl", action="store_true", help="with --compile, on a GPU of compute capability 9.0+: "
         "Inductor's kernels launch with programmatic dependent launch (its triton.enable_pdl, as vLLM's full "
         "CUDA graphs), each starting while the one before finishes; ours in their chained modes (docs/model.md). "
         "Every variant of the run alike")
    _add(g, "--inductor-config", metavar="KEY=VALUE,...", help="with --compile: Inductor settings for the "
         "compiled steps of every variant, torch._inductor.config's names and Python values (e.g. "
         "combo_kernels=False,triton.multi_kernel=0; multi_kernel is 1 and combo_kernels True unless set "
         "here); listed in report.md")
    _add(g, "--fused-norms", action=argparse.BooleanOptionalAction, help="each decoder layer's two RMSNorms "
         "done by the GEMMs around them, in variants whose kernels can (triton): o_proj and down_proj add the "
         "residual and leave the norm's sums, qkv and gate_up scale their rows (docs/fused_gemm.md); the others "
         "run as they are. On by default, except with --unfused or under torchrun; report.md names the "
         "variants that took it")
    _add(g, "--swiglu-prologue", action=argparse.BooleanOptionalAction, help="down_proj computes silu(gate) * "
         "up as it loads gate_up's output, in variants whose kernels can (triton), instead of Inductor's kernel "
         "between the two GEMMs (model/swiglu.py); the others run as they are. Off by default: the 8B "
         "compiled step with it did not finish on the H200 (docs/model.md); report.md names the variants that "
         "took it")
    _add(g, "--swiglu-epilogue", action=argparse.BooleanOptionalAction, help="gate_up's columns in (gate, up) "
         "pairs in every variant, and gate_up's GEMM computes silu(gate) * up in its last store in variants whose "
         "kernels can (triton), instead of Inductor's kernel between the two GEMMs (model/swiglu.py). On by "
         "default, except with --swiglu-prologue, --unfused or under torchrun (--no-swiglu-epilogue for an "
         "A/B); report.md names the variants that took it")
    _add(g, "--no-step-split", action="store_true", help="skip the per-row profiler run of one step "
         "(its time in quantized GEMMs, dense GEMMs, attention and the rest)")
    _add(g, "--lm-head", action="store_true", help="quantize lm_head too")
    _add(g, "--unfused", action="store_true", help="run q, k, v, gate and up as the checkpoint has them, five "
         "GEMMs; by default q/k/v and gate/up are one GEMM each (weights concatenated), in every variant")
    _add(g, "--quality-tokens", metavar="BxT", help="token batch for the logit comparison against the "
         "unquantized model (default 2x256 on CUDA, 2x32 on CPU)")
    _add(g, "--eval-text", metavar="FILE", help="perplexity over this text file (needs --checkpoint with a "
         "tokenizer)")
    _add(g, "--eval-window", type=int, metavar="T", help="perplexity window in tokens (default 1024 on CUDA, "
         "256 on CPU, at most the model's context)")
    _add(g, "--eval-stride", type=int, metavar="T", help="perplexity stride (default: the window, disjoint chunks)")
    _add(g, "--eval-tokens", type=int, metavar="N", help="use at most the first N tokens of --eval-text")
    _add(g, "--backends", metavar="A,B", help="bf16 (the unquantized model, always run as the reference) and "
         "registry backends, e.g. bf16,triton,helion,tinygemm")
    _add(g, "--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    _add(g, "--dtype", help="model dtype: bfloat16 (CUDA default), float16 or float32 (CPU default)")
    _add(g, "--output-dir", metavar="DIR", help="write the run here (must be new or empty)")
    _add(g, "--no-plots", action="store_true", help="skip the PNG plot")
    _add(g, "--seed", type=int, default=0, help="seed for random weights and tokens (default 0)")
    _add(g, "--stall-timeout", type=stall_seconds, metavar="S", help="stop the run when one step (a variant's "
         "load, quantize, quality or prefill, or its decode at one batch size) takes more than S seconds: its "
         f"rows are errors, the rest `skipped`, the outputs are written, exit 1 (default {STALL_S:g} on CUDA; "
         "off on CPU and under torchrun; 0: off)")


def parse_batches(text: str) -> list[int]:
    items = comma_list(text, "--batch", "batch size", "1,16,64")  # "1,,4" is a typo, as in --backends
    try:
        out = [int(t) for t in items]
    except ValueError:
        out = []
    if not out or min(out) <= 0 or max(out) > MAX_BATCH:
        raise InputError(f"--batch {text!r}: expected integers in [1, {MAX_BATCH}] separated by commas, e.g. 1,16,64")
    if repeated := sorted({b for b in out if out.count(b) > 1}):  # as --shape and --backends: a typo, not a wish
        raise InputError(f"--batch {text!r}: {', '.join(map(str, repeated))} given twice")
    return sorted(out)


def parse_backends(text: str) -> list[str]:
    if not text.strip():
        raise InputError("--backends: give at least one backend name")
    names = list(dict.fromkeys(comma_list(text, "--backends", "name", "bf16,triton")))
    for n in names:
        if n != UNQUANTIZED:
            check_backend(n)
    return names


def parse_bxt(text: str) -> tuple[int, int]:
    try:
        b, t = (int(v) for v in text.lower().split("x"))
    except ValueError:
        b = t = 0
    if not 0 < b <= MAX_BATCH or t < 2:
        raise InputError(f"--quality-tokens {text!r}: expected BxT, e.g. 2x256 (1 <= B <= {MAX_BATCH}, T >= 2)")
    return b, t


def _default(args, name: str, cuda: bool):
    v = getattr(args, name, None)
    return DEFAULTS[name][0 if cuda else 1] if v is None else v


def check_formats_fit(specs, config, world: int = 1) -> None:
    """Every K of the decoder's linear layers (hidden, intermediate, o_proj's
    heads x head_dim; the row-parallel ones' share of it under tensor
    parallelism) must take the group / block size."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    heads = config.num_attention_heads * head_dim
    for spec in specs:
        size = 16 if spec.op == "nvfp4_gemm" else spec.group_size
        for what, k in (("hidden", config.hidden_size), ("intermediate", config.intermediate_size // world),
                        ("attention output", heads // world)):
            if isinstance(size, int) and k % size:
                raise InputError(f"--quant {spec.name}: K={k} ({what} size) is not divisible by {size}; "
                                 f"choose a group size that divides {k} or int4-channel")


def require_transformers() -> None:
    """The model bench builds models with transformers, an optional extra."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise InputError('--model/--checkpoint need transformers: pip install -e ".[model]"') from None


# Llama-architecture config keys the bench reads (check_formats_fit, describe, the decode cache).
LLAMA_KEYS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "vocab_size",
              "max_position_embeddings")
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
MAX_LAYERS = 1000  # Llama-3-70B has 80; more is a typo that would build for minutes
MAX_BATCH = 4096  # --batch and the quality batch: beyond, a typo that allocates for minutes


def check_args(args) -> None:
    """The model options' values, before anything is loaded: one InputError each."""
    if getattr(args, "checkpoint", None) == "":
        raise InputError("--checkpoint '': expected a checkpoint folder or .gguf file")
    if args.model and args.checkpoint:
        raise InputError(f"--model {args.model} and --checkpoint {args.checkpoint}: give one (a checkpoint's "
                         "config.json sets its architecture)")
    for flag, name, lo, hi in (("--layers", "layers", 1, MAX_LAYERS), ("--prompt-len", "prompt_len", 1, None),
                               ("--decode-steps", "decode_steps", 1, None), ("--eval-window", "eval_window", 2, None),
                               ("--eval-stride", "eval_stride", 1, None), ("--eval-tokens", "eval_tokens", 2, None),
                               ("--seed", "seed", 0, 2**63 - 1)):
        v = getattr(args, name, None)
        if v is not None and not (isinstance(v, int) and lo <= v and (hi is None or v <= hi)):
            raise InputError(f"{flag} {v}: expected an integer {f'in [{lo}, {hi}]' if hi else f'>= {lo}'}"
                             + (" (a window's first token has no context: it needs 2)" if lo == 2 else ""))
    if getattr(args, "eval_text", None) is None:
        if given := [f for f, n in (("--eval-window", "eval_window"), ("--eval-stride", "eval_stride"),
                                    ("--eval-tokens", "eval_tokens")) if getattr(args, n, None) is not None]:
            raise InputError(f"{', '.join(given)}: apply to --eval-text's perplexity, which was not asked for")
        return
    if not args.checkpoint:
        raise InputError("--eval-text needs --checkpoint with a tokenizer (a trained model to evaluate)")
    if args.eval_window and args.eval_stride and args.eval_stride > args.eval_window:
        raise InputError(f"--eval-stride {args.eval_stride} > --eval-window {args.eval_window}: tokens between "
                         "windows would never be scored")
    from qgemm_bench.model import quality

    quality.eval_text(args.eval_text)  # a readable, non-empty UTF-8 text file


TOKENIZER = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json")


def check_checkpoint(path: str, tokenizer: bool = False) -> None:
    """A local Hugging Face folder (config.json of a Llama-architecture model
    and whole weight files) or a GGUF file, checked before transformers reads
    it (whose errors are tracebacks): one InputError naming what is wrong.
    tokenizer: a folder must hold one (--eval-text); a GGUF file embeds it."""
    from qgemm_bench.harness import files

    where = f"--checkpoint {path}"
    p = Path(path)
    try:
        if path == "" or not p.exists():
            raise InputError(f"{where}: no such file or folder")
        if p.is_file():
            if p.suffix != ".gguf":
                raise InputError(f"{where}: a file, not a .gguf; expected a Hugging Face checkpoint folder "
                                 "(config.json and weights) or a .gguf file")
            with open(p, "rb") as f:
                magic = f.read(4)
            if magic != b"GGUF":
                raise InputError(f"{where}: not a GGUF file (it does not start with the GGUF magic bytes)")
            try:
                import gguf  # noqa: F401
            except ImportError:
                raise InputError(f"{where}: reading GGUF needs the gguf package: pip install gguf") from None
            return
        if not p.is_dir():
            raise InputError(f"{where}: neither a folder nor a regular file")
        config = p / "config.json"
        if not config.exists():
            raise InputError(f"{where}: no config.json (not a Hugging Face checkpoint folder)")
        cfg = files.read_json(config)
        if not isinstance(cfg, dict):
            raise InputError(f"{config}: expected a JSON object")
        if missing := [k for k in LLAMA_KEYS if not isinstance(cfg.get(k), int)]:
            raise InputError(f"{where}: not a Llama-architecture model (model_type {cfg.get('model_type')!r}; "
                             f"config.json has no {missing[0]})")
        if tokenizer and not any((p / t).is_file() for t in TOKENIZER):
            raise InputError(f"{where} has no tokenizer ({', '.join(TOKENIZER)}), which --eval-text needs")
        weights = [p / w for w in WEIGHTS if (p / w).exists()]
        if not weights:
            raise InputError(f"{where}: no weights ({' or '.join(WEIGHTS[::2])})")
        shards = [weights[0]]
        if weights[0].name.endswith(".index.json"):
            index = files.read_json(weights[0])
            names = set(index.get("weight_map", {}).values()) if isinstance(index, dict) and \
                isinstance(index.get("weight_map"), dict) else set()
            if not names or not all(isinstance(n, str) for n in names):
                raise InputError(f"{weights[0]}: no weight_map of tensor names to files")
            shards = [p / n for n in sorted(names)]
        for shard in shards:
            if not shard.is_file():
                raise InputError(f"{where}: {shard.name} is missing (named in {weights[0].name})")
            if shard.suffix == ".safetensors":
                _check_safetensors(shard)
    except OSError as e:  # a name too long, a symlink loop, no permission
        raise InputError(f"{where}: {e.strerror or type(e).__name__}") from None


def _check_safetensors(path: Path) -> None:
    """A safetensors file's header against its size: a cut-off copy is named."""
    import json
    import struct

    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if not 0 < n <= min(size - 8, 100 * 2**20):
            raise InputError(f"{path}: not a safetensors file (no valid header; {size} bytes)")
        try:
            header = json.loads(f.read(n))
            end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            raise InputError(f"{path}: not a safetensors file (its header is not valid)") from None
    if 8 + n + end > size:
        raise InputError(f"{path}: truncated: its header describes {8 + n + end} bytes, the file has {size}")


def load_source(path: str, dtype, tokenizer: bool = False):
    """The checkpoint as a ModelSource; a load failure is one line naming the checkpoint."""
    from qgemm_bench.model.llama import ModelSource
    from qgemm_bench.model.quant_linear import DECODER_LINEARS, target_names

    check_checkpoint(path, tokenizer)
    try:
        source = ModelSource.checkpoint(path, dtype)
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - transformers' many load errors: one line, not a traceback
        raise InputError(f"--checkpoint {path}: cannot load it ({one_line(e)})") from None
    layers = source.config.num_hidden_layers
    found = len(target_names(source.cpu_model))
    if found != len(DECODER_LINEARS) * layers:
        raise InputError(f"--checkpoint {path}: not a Llama-architecture model ({found} q/k/v/o/gate/up/down "
                         f"projections in {layers} decoder layers; expected {len(DECODER_LINEARS) * layers})")
    return source


def build_plan(args, world=None):
    from qgemm_bench.backends import checks
    from qgemm_bench.harness.environment import resolve_device
    from qgemm_bench.harness.plan import stall_timeout_s

    check_args(args)
    device = resolve_device(args.device)
    if device.type == "cpu":
        checks.use_interpreter_on_cpu()  # as the sweep does: before anything imports triton
    require_transformers()
    from qgemm_bench.model import bench, decode, quality
    from qgemm_bench.model.llama import ModelSource

    stall_s = stall_timeout_s(args, device, world)  # the sweep's rule: one copy of it
    cuda = device.type == "cuda"
    dtype_name = args.dtype or ("bfloat16" if cuda else "float32")
    if dtype_name.lower() not in DTYPES:
        raise InputError(f"--dtype {dtype_name!r}: choose bfloat16, float16 or float32")
    dtype = DTYPES[dtype_name.lower()]
    if args.decode_mode and not cuda:  # as the sweep refuses --timing there
        raise InputError(f"--decode-mode {args.decode_mode} is for CUDA: CPU decode steps are timed by the wall "
                         "clock")
    backends = parse_backends(_default(args, "backends", cuda))
    specs = parse_quants(_default(args, "quant", cuda))
    batches = parse_batches(_default(args, "batch", cuda))
    prompt_len, steps = _default(args, "prompt_len", cuda), _default(args, "decode_steps", cuda)
    if prompt_len < 1 or steps < 1:
        raise InputError("--prompt-len and --decode-steps must be >= 1")
    qb, qt = parse_bxt(_default(args, "quality_tokens", cuda))
    if getattr(args, "attention", "sdpa") == "flex" and getattr(args, "compile", "none") == "none":
        raise InputError("--attention flex runs in compiled steps: add --compile default")
    fused_rope = getattr(args, "fused_rope", None)  # None: on with --attention triton, as --help says
    if fused_rope and getattr(args, "attention", "sdpa") != "triton":
        raise InputError("--fused-rope is --attention triton's: add --attention triton or drop it")
    fused_rope = getattr(args, "attention", "sdpa") == "triton" and fused_rope is not False
    if getattr(args, "attention", "sdpa") == "triton" and device.type != "cuda":
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise InputError("--attention triton on CPU runs in the Triton interpreter: set TRITON_INTERPRET=1 "
                             "before the run")
        if dtype == torch.bfloat16:  # the interpreter computes bfloat16 wrong, not with an error
            raise InputError("--attention triton on CPU: the Triton interpreter has no bfloat16; use --dtype "
                             "float16 or float32")
    pdl = getattr(args, "pdl", False)
    if pdl:
        check_pdl(device, getattr(args, "compile", "none"))
    fused_norms = getattr(args, "fused_norms", None)  # None: on where it can be, as said in --help
    if fused_norms and getattr(args, "unfused", False):
        raise InputError("--fused-norms needs q/k/v and gate/up fused: drop --unfused")
    if fused_norms is None:
        fused_norms = not getattr(args, "unfused", False) and world is None
    swiglu_prologue = bool(getattr(args, "swiglu_prologue", False))
    swiglu_epilogue = getattr(args, "swiglu_epilogue", None)  # None: on where it can be, as said in --help
    if swiglu_epilogue and swiglu_prologue:
        raise InputError("--swiglu-epilogue and --swiglu-prologue: one or the other")
    if swiglu_epilogue and getattr(args, "unfused", False):
        raise InputError("--swiglu-epilogue needs gate/up fused: drop --unfused")
    if swiglu_epilogue and world is not None:
        raise InputError("--swiglu-epilogue runs on one GPU: under torchrun gate_up's output is a shard")
    if swiglu_epilogue is None:
        swiglu_epilogue = not (swiglu_prologue or getattr(args, "unfused", False) or world is not None)
    if swiglu_prologue and getattr(args, "unfused", False):
        raise InputError("--swiglu-prologue needs gate/up fused: drop --unfused")
    if swiglu_prologue and world is not None:
        raise InputError("--swiglu-prologue runs on one GPU: under torchrun down_proj's input is a shard")
    inductor = {}
    if getattr(args, "inductor_config", None) is not None:
        if getattr(args, "compile", "none") == "none":
            raise InputError("--inductor-config applies to compiled steps: add --compile default")
        from qgemm_bench.model import decode

        try:
            inductor = decode.inductor_overrides(args.inductor_config)
        except ValueError as e:
            raise InputError(str(e)) from None
        if not inductor:
            raise InputError("--inductor-config: no KEY=VALUE given")
    if args.checkpoint:
        if args.layers:
            raise InputError("--layers applies to the presets, not to --checkpoint")
        source = load_source(args.checkpoint, dtype, tokenizer=args.eval_text is not None)
    elif args.model:
        overrides = {}
        if args.layers is not None:
            if args.layers < 1:
                raise InputError("--layers must be >= 1")
            overrides["num_hidden_layers"] = args.layers
        source = ModelSource.preset(args.model, dtype, args.seed, **overrides)
    else:
        raise InputError("give --model NAME or --checkpoint PATH")
    source.fused = not getattr(args, "unfused", False)
    source.pairs = swiglu_epilogue
    cfg = source.config
    shard = None
    if world is not None:
        if fused_norms:
            raise InputError("--fused-norms runs on one GPU: under torchrun the all-reduce sits between a GEMM and "
                             "its residual add")
        from qgemm_bench.model import tensor_parallel

        tensor_parallel.check_divisible(cfg, world.size)
        shard = source.shard = tensor_parallel.Shard(world.rank, world.size)
    check_formats_fit(specs, cfg, world.size if world else 1)
    if not source.trained:  # a preset is built whole on the device: refused before it allocates until it fails
        from qgemm_bench.harness.capacity import gib, total_bytes
        from qgemm_bench.model.llama import weight_bytes

        need, total = weight_bytes(cfg, dtype, world.size if world else 1), total_bytes(device)
        if need > total:
            raise InputError(f"--model {args.model} in {dtype_name}: its weights alone take about {gib(need)}"
                             f"{' a rank' if world else ''}, more than {device}'s {gib(total)}; try fewer "
                             "--layers" + ("" if dtype.itemsize < 4 else " or --dtype float16"))
    ctx = cfg.max_position_embeddings
    if prompt_len + steps + decode.WARMUP_STEPS + 1 > ctx or qt > ctx:
        raise InputError(f"--prompt-len + --decode-steps and the quality length must fit the context ({ctx})")
    quality_ids = decode.random_tokens(cfg.vocab_size, qb, qt, args.seed + 2, "cpu")
    eval_ids = None
    if args.eval_text:
        if source.tokenizer is None:
            raise InputError("--eval-text needs --checkpoint with a tokenizer (a trained model to evaluate)")
        eval_ids = quality.text_tokens(source.tokenizer, args.eval_text, args.eval_tokens)
        if eval_ids.numel() < 2:
            raise InputError(f"--eval-text {args.eval_text}: {eval_ids.numel()} token(s); perplexity needs 2")
        if eval_ids.numel() >= qb * qt:  # real text for the logit comparison too
            quality_ids = eval_ids[: qb * qt].reshape(qb, qt).clone()
    window = min(_default(args, "eval_window", cuda), ctx)
    if eval_ids is not None and (args.eval_stride or 0) > window:
        raise InputError(f"--eval-stride {args.eval_stride} > the window ({window} tokens): tokens between windows "
                         "would never be scored")
    # Our kernels take float16 or bfloat16 activations (checks.triton_why_not): a float32 model's rows are
    # unavailable. Said once the arguments are known good, so bad usage stays one line.
    half_only = [b for b in backends if b in ("triton", "helion")]
    if dtype == torch.float32 and half_only:
        print(f"note: the model runs in float32{'' if args.dtype else ' (the CPU default)'}, and "
              f"{', '.join(half_only)} take{'s' if len(half_only) == 1 else ''} float16 or bfloat16 activations: "
              f"{'its' if len(half_only) == 1 else 'their'} rows will be unavailable; "
              "add --dtype float16", file=sys.stderr)
    return bench.Plan(source=source, device=device, dtype=dtype, variants=bench.variants(backends, specs),
                      batches=batches, prompt_len=prompt_len, decode_steps=steps,
                      decode_mode=args.decode_mode or "graph",
                      prefill_reps=DEFAULTS["prefill_reps"][0 if cuda else 1], quality_ids=quality_ids,
                      eval_ids=eval_ids, eval_window=window, eval_stride=args.eval_stride, lm_head=args.lm_head,
                      seed=args.seed, shard=shard, stall_s=stall_s, compile=getattr(args, "compile", "none"),
                      split=not getattr(args, "no_step_split", False),
                      attention=getattr(args, "attention", "sdpa"), pdl=pdl, inductor=inductor,
                      fused_norms=fused_norms, fused_rope=fused_rope, swiglu_prologue=swiglu_prologue,
                      swiglu_epilogue=swiglu_epilogue)


def check_pdl(device: torch.device, compile: str) -> None:
    """--pdl's conditions, as one-line InputErrors."""
    if compile == "none":
        raise InputError("--pdl applies to Inductor's kernels: add --compile default")
    from qgemm_bench.model import decode

    if not decode.pdl_runs(device):
        raise InputError(f"--pdl needs an NVIDIA GPU of compute capability 9.0 or newer (programmatic dependent "
                         f"launch); {device} is not")
    import torch._inductor.config as inductor_config

    if not hasattr(inductor_config.triton, "enable_pdl"):
        raise InputError(f"--pdl: torch {torch.__version__}'s Inductor has no triton.enable_pdl")


def default_folder(plan) -> Path:
    from qgemm_bench.harness.environment import runs_dir

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    where = "cpu" if plan.device.type == "cpu" else torch.cuda.get_device_name(plan.device).split()[-1]
    name = Path(plan.source.name).name.replace(" ", "_")
    return runs_dir() / f"{stamp}-model-{name}-{where.lower()}"


def metadata(plan, args) -> dict:
    from qgemm_bench import target
    from qgemm_bench.configs import store as config_store
    from qgemm_bench.harness import environment
    from qgemm_bench.model.decode import inductor_settings

    meta = environment.collect(plan.device)
    meta["transformers"] = importlib.metadata.version("transformers")
    meta["model"] = plan.source.describe()
    meta["store"] = config_store.DEFAULT.fingerprint(target.of(plan.device))  # the tuned configs its kernels ran
    inductor = inductor_settings(plan.inductor) if plan.compile != "none" else None  # what compiled steps ran
    meta["settings"] = {
        "variants": [f"{b} {s.name if s else 'none'}" for b, s in plan.variants], "batches": plan.batches,
        "dtype": str(plan.dtype).removeprefix("torch."), "timing": plan.timing, "prompt_len": plan.prompt_len,
        "decode_steps": plan.decode_steps, "prefill_reps": plan.prefill_reps, "lm_head": plan.lm_head,
        "quality_tokens": "x".join(map(str, plan.quality_ids.shape)), "eval_text": args.eval_text,
        "eval_tokens": None if plan.eval_ids is None else int(plan.eval_ids.numel()),
        "eval_window": plan.eval_window, "eval_stride": plan.eval_stride, "seed": plan.seed,
        "stall_timeout_s": plan.stall_s, "compile": plan.compile, "pdl": plan.pdl, "attention": plan.attention,
        "multi_kernel": inductor["triton.multi_kernel"] if inductor else None,
        "combo_kernels": inductor["combo_kernels"] if inductor else None,
        "fx_graph_cache": inductor.get("fx_graph_cache", True) if inductor else None,
        "inductor_config": plan.inductor, "fused_norms": plan.fused_norms, "fused_rope": plan.fused_rope,
        "swiglu_prologue": plan.swiglu_prologue,
        "swiglu_epilogue": plan.swiglu_epilogue,
        "step_split": plan.split, "argv": getattr(args, "argv", sys.argv[1:]),
    }
    meta["ceilings"] = environment.measure_ceilings(plan.device)  # copy GB/s: the rows' copy_pct
    return meta


def run(args) -> int:
    """Under torchrun: tensor parallelism over the ranks (one GPU each, NCCL);
    every rank runs every variant on its shard, rank 0 alone reports."""
    from qgemm_bench.harness import distributed
    from qgemm_bench.harness.environment import threads_kept

    world = distributed.from_env()
    if world is not None:
        args.device = distributed.start(world, args.device, backend="nccl")
    try:
        with threads_kept():  # a CPU run's one thread (one_cpu_thread) ends with it
            return _run(args, world)
    finally:
        if world is not None:
            distributed.stop()


def _run(args, world) -> int:
    from qgemm_bench.harness import signals
    from qgemm_bench.harness.outputs import claim_run_folder
    from qgemm_bench.model import bench, outputs

    main = world is None or world.main
    plan = build_plan(args, world)
    folder = claim_run_folder(args.output_dir, lambda: default_folder(plan), world, outputs.RunFolder)
    if plan.device.type == "cuda":
        from qgemm_bench.harness.environment import cache_autotuning, pin_triton_cache

        torch.cuda.set_device(plan.device)
        pin_triton_cache()
        cache_autotuning()
    else:
        from qgemm_bench.harness.environment import one_cpu_thread

        one_cpu_thread()
        if main:
            print("note: CPU run: timings are wall-clock CPU timings, not comparable with GPU numbers",
                  file=sys.stderr)
    meta = metadata(plan, args)
    plan.copy_gbps = meta["ceilings"].get("copy_GBps")
    if world is not None:
        meta["tensor_parallel"] = world.size  # weights and memory columns are per GPU
    if main:
        folder.write_metadata(meta)  # what `runner.py report DIR` rebuilds a killed run with

    def finish(rows, signal: KeyboardInterrupt | None, stalled: str = "", not_run: int = 0) -> int:
        """Write the outputs; the exit status (as the sweep's: 130 Ctrl-C, 143
        SIGTERM, 1 a stall). stalled: why a stall ended the run (then this
        runs on the watchdog's thread, before the process exits)."""
        meta["interrupted"] = bool(stalled) or signal is not None
        meta["stopped"] = stalled or (signals.describe(signal) if signal is not None else "")
        folder.write(rows, meta, plots=not args.no_plots)
        print(outputs.console(rows))
        if stalled:
            print(f"\nerror: the run stopped early: {stalled}; {not_run} row(s) not run", file=sys.stderr)
        elif signal is not None:
            print(f"\n{signals.describe(signal)}: {len(rows)} row(s) kept", file=sys.stderr)
        print(f"\nresults: {folder.path}")
        return 1 if stalled else signals.exit_code(signal) if signal is not None else 0

    rows, signal = bench.run(plan, folder, print if main else (lambda text: None),
                             lambda rows, why, not_run: finish(rows, None, why, not_run))
    if not main:
        folder.close()
        return signals.exit_code(signal) if signal is not None else 0
    with signals.deferred() as late:  # a second Ctrl-C or SIGTERM waits for the outputs, as the sweep's does
        code = finish(rows, signal)
    return code or (128 + late[0] if late else 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qgemm_bench.model",
                                     description="Decode tokens/s, memory and quality of a Llama model per "
                                     "GEMM backend and weight format.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)  # the metadata's record of the command
    from qgemm_bench.harness import signals
    from qgemm_bench.harness import stdout as console

    with console.guarded() as out:  # a full or ASCII-only stdout costs the printed text, not the run
        try:
            with signals.terminate_as_interrupt():  # SIGTERM stops the run as Ctrl-C does (bench.run)
                code = run(args)
        except InputError as e:
            print(f"error: {e}", file=sys.stderr)
            code = 2
        except KeyboardInterrupt as e:  # before or after the variants' loop
            print(f"\n{signals.describe(e)}", file=sys.stderr)
            code = signals.exit_code(e)
    return console.lost(out, code)
