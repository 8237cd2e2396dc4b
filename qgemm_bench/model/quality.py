"""Quality of a quantized model: its logits against the bf16 model's on the
same tokens (relative error, KL divergence, top-1 agreement), and perplexity
over a text."""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
import torch.nn.functional as F

from qgemm_bench.model.errors import InputError


@torch.no_grad()
def full_logits(model, ids: torch.Tensor) -> torch.Tensor:
    """Logits at every position of `ids` [B, T] (no cache), as fp32 on the CPU,
    so the reference can be kept while the next variant takes the GPU."""
    return model(input_ids=ids, use_cache=False).logits.float().cpu()


def eval_text(path: str | Path) -> None:
    """Check --eval-text before the model loads: a regular file (bounded,
    harness/files.py); a text one (not .bz2, a compressed dump) UTF-8 with
    more than white space. InputError naming it otherwise."""
    from qgemm_bench.harness import files

    if str(path) == "":
        raise InputError("--eval-text '': expected a text file")
    if Path(path).suffix == ".bz2":
        files.read_bytes(path, "--eval-text")
    elif not files.read_text(path, "--eval-text").strip():
        raise InputError(f"--eval-text {path}: holds no text")


def logit_metrics(ref: torch.Tensor, out: torch.Tensor) -> dict:
    """rel_err: ||out - ref||_F / ||ref||_F; kl: mean over positions of
    KL(softmax(ref) || softmax(out)) in nats; top1: fraction of positions whose
    argmax agrees."""
    if ref.shape != out.shape:
        raise ValueError(f"logits {tuple(out.shape)} vs reference {tuple(ref.shape)}")
    r, o = ref.double(), out.double()
    rel = (torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r).clamp_min(1e-300)).item()
    lp_r, lp_o = F.log_softmax(r, -1), F.log_softmax(o, -1)
    kl = (lp_r.exp() * (lp_r - lp_o)).sum(-1).mean().item()
    top1 = (r.argmax(-1) == o.argmax(-1)).double().mean().item()
    return {"logits_rel_err": rel, "logits_kl": max(kl, 0.0), "top1_agree": top1}


@torch.no_grad()
def perplexity(model, ids: torch.Tensor, window: int, stride: int | None = None) -> dict:
    """Perplexity of a 1-D token sequence with windows of `window` tokens every
    `stride` (default: window, i.e. disjoint chunks). Each token after the first
    is scored once, in the first window that reaches it, with that window's
    context; a window's first token has no context there and is never a target.
    Returns {"perplexity", "nll_sum", "tokens"}."""
    stride = stride or window
    if window < 2 or not 0 < stride <= window:
        raise InputError(f"perplexity: need window >= 2 and 0 < stride <= window (got {window}, {stride})")
    ids = ids.reshape(-1)
    n = ids.numel()
    if n < 2:
        raise InputError("perplexity: the text gives fewer than 2 tokens")
    device = next(model.parameters()).device
    nll_sum, count, scored_to = 0.0, 0, 1  # tokens [0, scored_to) are done (token 0 is never a target)
    for begin in range(0, n, stride):
        end = min(begin + window, n)
        x = ids[begin:end].to(device)[None]
        logp = F.log_softmax(model(input_ids=x, use_cache=False).logits[0, :-1].float(), -1)
        nll = -logp.gather(-1, x[0, 1:, None])[:, 0]  # nll[j] is for token begin + 1 + j
        first = max(scored_to, begin + 1)
        nll_sum += nll[first - begin - 1:].double().sum().item()
        count += end - first
        scored_to = end
        if end == n:
            break
    return {"perplexity": math.exp(nll_sum / count), "nll_sum": nll_sum, "tokens": count}


_QUOTES = re.compile("'{2,3}")


def wiki_dump_text(path: Path) -> str:
    """The articles of a bz2 MediaWiki XML dump (e.g. the one in gensim's test
    data) as plain text: markup removed by gensim's filter_wiki,
    then the bold and italic quote marks it leaves (3 or 2 apostrophes)."""
    import bz2

    try:
        from gensim.corpora.wikicorpus import extract_pages, filter_wiki
    except ImportError:
        raise InputError(f"--eval-text {path}: a .bz2 Wikipedia dump needs gensim (pip install gensim)") from None
    with bz2.open(path, "rb") as f:
        texts = [_QUOTES.sub("", filter_wiki(text)).strip() for _, text, _ in extract_pages(f)]
    return "\n\n".join(t for t in texts if t)


def text_tokens(tokenizer, path: str | Path, max_tokens: int | None = None) -> torch.Tensor:
    """The file's text as one token sequence (the tokenizer's usual special
    tokens, e.g. a leading BOS), cut to max_tokens. A .bz2 file is read as a
    MediaWiki XML dump (wiki_dump_text)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"--eval-text {path}: no such file")
    text = wiki_dump_text(p) if p.suffix == ".bz2" else p.read_text(encoding="utf-8", errors="replace")
    ids = tokenizer(text, return_tensors="pt").input_ids[0]
    return ids[:max_tokens] if max_tokens else ids
