"""gemlite's Triton low-bit kernels (GemLiteLinear): a peer a user could
install instead.

gemlite reads UNSIGNED 4-bit codes u and dequantizes (u - zero) * scale in the
scales' dtype (gemlite/triton_kernels/utils.py: dequantize, W_group_mode 3).
With u = q + 8, zero = 8 and our bf16 scales that is bf16(q * s): exactly our
dequantization in bf16 (checked bit for bit on the H100). pack() only
bit-packs; nothing is requantized. Two settings keep it exact:
- fma_mode=False (mode 3): its default FMA mode pre-multiplies the zeros and is
  exact only while the multiply-add stays fused;
- per-channel scales (one group of K): pack() switches to scaling the output
  after the matmul (another rounding); we set the in-loop mode back, as
  gemlite's own A16Wn helper does.
Its kernels load a K block's group scales and zeros without a mask: when K
is not a multiple of the block (x split), the last block reads rows past the
end, and (0 - zero) * garbage can be inf or NaN even where the weights and x
are masked to 0 (our ragged K = 5248 GPU test failed for groups of 64 and
unscaled weights). We keep zero rows after the scales and zeros, so those
reads find (0 - 0) * 0.
Its split-K and GEMV kernels (M < 64) add partial sums with bf16 atomics by
default: 2.3e-2 relative error at M = 1 on the H100, over our tolerance. We
switch that off (process-wide: set_native_atomic_bfp16(False); fp32 partials,
3.2e-3), and its summary says so.
Its autotuner times every shape its config cache lacks (minutes over the
default preset): configs_for() fills the cache so it never times (below).
"""

from __future__ import annotations

import ast
import copy
import math
from pathlib import Path

import torch

from qgemm_bench.backends.checks import cuda_only, missing
from qgemm_bench.backends.config_buckets import M_WEIGHT
from qgemm_bench.backends.registry import Prepared, backend
from qgemm_bench.operators import formats

INSTALL = 'pip install -e ".[peers]" (gemlite==0.6.0.post2)'
MIN_K = 32  # GemLiteLinear's in_features % 32
# Its GEMM kernel loads the per-group scales of a BLOCK_SIZE_N tile without a
# mask: N a multiple of its largest N tile keeps those loads in bounds.
N_ALIGN = 128
# Rows a K block x split can read past the last group: its configs reach
# BLOCK_SIZE_K 256 x SPLIT_K 8 = 2048 along K; twice that, in groups.
PAD_K = 4096


# gemlite ships tuned configs per GPU (gemlite/configs/<tag>.json) and loads
# the one whose tag is in the device's name (core.get_default_cache_config):
# an H200 matches none and gemlite would autotune every shape (238 s of the
# default int4 preset). The GPUs of those tags, by compute capability and SM
# count, so a GPU without a file takes the nearest of its capability.
SHIPPED = {"h100": ((9, 0), 132), "a100": ((8, 0), 108), "a6000": ((8, 6), 84), "a40": ((8, 6), 84),
           "l40": ((8, 9), 142), "l40s": ((8, 9), 142), "6000_ada": ((8, 9), 142), "4090": ((8, 9), 128),
           "l4": ((8, 9), 58), "5090": ((12, 0), 170)}
_loaded: dict[str, str] = {}  # device name -> the note of the configs loaded for it (once per process)


def nearest_shipped(tags, capability: tuple[int, int], sms: int) -> str | None:
    """The shipped tag of the same compute capability with the nearest SM
    count (ties: the first name), or None."""
    same = [t for t in tags if t in SHIPPED and SHIPPED[t][0] == tuple(capability)]
    return min(same, key=lambda t: (abs(SHIPPED[t][1] - sms), t), default=None)


def load_shipped(device: torch.device) -> str:
    """gemlite loads its own file for this GPU at import when one matches its
    name; else this loads the nearest GPU's. Returns what the rows say."""
    import gemlite.core as core

    props = torch.cuda.get_device_properties(device)
    if props.name in _loaded:
        return _loaded[props.name]
    if (own := core.get_default_cache_config()) is not None:
        note = f"gemlite configs {Path(own).name}"
    else:
        folder = Path(core.__file__).parent / "configs"
        cc = (props.major, props.minor)
        tag = nearest_shipped(sorted(p.stem for p in folder.glob("*.json")), cc, props.multi_processor_count)
        if tag is not None and core.GemLiteLinear.load_config(str(folder / f"{tag}.json")):
            note = f"gemlite configs {tag}.json (none shipped for {props.name}; nearest of compute capability " \
                   f"{cc[0]}.{cc[1]})"
        else:
            note = f"gemlite ships no configs for {props.name} or its compute capability"
    _loaded[props.name] = note
    return note


def fill_nearest(cache: dict, kind: str, signature: tuple) -> str | None:
    """Makes gemlite's config cache hold `signature` (M bucket, N, K, group,
    elements per packed word, type id: the key its config pruners look up) for
    the kernel `kind`, so its autotuner has one config and times nothing: the
    entry itself, else a copy of the nearest entry of the same group, packing
    and type (log2 distance, M weighted most). Returns "" for its own entry,
    the shape copied ("MxKxN"), or None when no entry fits (gemlite autotunes)."""
    entries = cache.get(kind) or {}
    want = str(tuple(signature))
    if want in entries:
        return ""
    m, n, k, *rest = signature
    keys = [t for t in map(ast.literal_eval, entries) if list(t[3:]) == rest]
    if not keys:
        return None
    best = min(keys, key=lambda t: (M_WEIGHT * abs(math.log2(t[0] / m)) + abs(math.log2(t[1] / n))
                                    + abs(math.log2(t[2] / k)), t))
    cache.setdefault(kind, {})[want] = copy.deepcopy(entries[str(best)])
    return f"{best[0]}x{best[2]}x{best[1]}"


def configs_for(layer, m: int) -> str:
    """Fills gemlite's config cache for the kernel `layer` runs at M = m (see
    fill_nearest); returns the row's note on it."""
    import gemlite.core as core
    from gemlite.triton_kernels import utils

    kind = core.get_matmul_type(m, layer.W_nbits)
    dtype = layer.input_dtype.value
    # forward_functional's type id: bf16 shares fp16's configs
    type_id = (core.DType.FP16.value if dtype == core.DType.BF16.value else dtype) * 100 + layer.W_nbits
    sig = (utils.get_closest_m(m), layer.out_features, layer.in_features, layer.group_size,
           layer.elements_per_sample, type_id)
    source = fill_nearest(core.GEMLITE_TRITON_CONFIG_CACHE, kind, sig)
    if source is None:
        return f"no gemlite {kind} config of this group size: gemlite autotunes it (in prepare_s)"
    return f"{kind} config of {source}" if source else ""


def group_for(k: int, group_size: int | None) -> int:
    return k if group_size is None else group_size


def why_not(case) -> str | None:
    if reason := cuda_only(case) or missing("gemlite", INSTALL):
        return reason
    k, n = case.shape.K, case.shape.N
    if case.dtype != torch.bfloat16:
        return "gemlite is run with bfloat16 activations only here"
    if k % MIN_K or n % N_ALIGN:
        return f"gemlite needs K % {MIN_K} == 0 and N % {N_ALIGN} == 0 (K={k}, N={n})"
    g = group_for(k, case.settings.resolve(k))
    # Its kernels load one scale row per K block of a power of two >= 32.
    if g != k and (g < 32 or g & (g - 1)):
        return f"gemlite needs a group size of K or a power of two >= 32, not {g}"
    return None


def padded(t: torch.Tensor, rows: int) -> torch.nn.Parameter:
    """t [G, N] as a view into zero-filled storage of G + rows rows (same
    strides), a Parameter as gemlite's pack() leaves its tensors."""
    with torch.no_grad():
        out = torch.zeros(t.shape[0] + rows, t.shape[1], dtype=t.dtype, device=t.device)
        out[: t.shape[0]] = t
    return torch.nn.Parameter(out[: t.shape[0]], requires_grad=False)


def operands(w: torch.Tensor, scales: torch.Tensor | None, k: int, n: int):
    """Our packed [K//2, N] int4 (+ scales) -> gemlite's pack() operands:
    codes u = q + 8 as uint8 [N, K], scales [N, K//g] bf16, zeros 8 like them."""
    u = (formats.unpack_int4(w).to(torch.int16) + 8).to(torch.uint8).t().contiguous()
    s = torch.ones(1, n, dtype=torch.bfloat16, device=w.device) if scales is None else scales
    s = s.to(torch.bfloat16).t().contiguous()
    return u, s, torch.full_like(s, 8)


@backend("int4_gemm", "gemlite", "gemlite 0.6's Triton GemLiteLinear (bf16; groups of K or powers of two "
         ">= 32) on our codes and scales, split-K partials in fp32 (its bf16 atomics fail the accuracy check "
         "at small M)", why_not, compiles=True)
def prepare(case, inputs):
    import gemlite
    from gemlite import DType, GemLiteLinear

    gemlite.set_native_atomic_bfp16(False)
    k, n = case.shape.K, case.shape.N
    g = group_for(k, inputs.group_size)
    u, s, z = operands(inputs.w, inputs.scales, k, n)
    layer = GemLiteLinear(4, group_size=g, in_features=k, out_features=n, input_dtype=DType.BF16,
                          output_dtype=DType.BF16)
    layer.pack(u, s, z, None, fma_mode=False)
    if g == k:  # keep the scale inside the dequantization (see the module docstring)
        layer.W_group_mode, layer.channel_scale_mode = 3, 0
    rows = PAD_K // g + 1  # zero rows past the last group (see the module docstring)
    layer.scales, layer.zeros = padded(layer.scales, rows), padded(layer.zeros, rows)
    resident = tuple(t for t in (layer.W_q, layer.scales, layer.zeros) if isinstance(t, torch.Tensor))

    def apply(x):
        return layer(x)

    x = inputs.x
    notes = "; ".join(filter(None, (load_shipped(x.device), configs_for(layer, x.shape[0]))))
    apply(x)  # compiling (and any autotuning configs_for could not avoid) runs here, never timed
    return Prepared(lambda: apply(x), resident=resident, notes=notes, apply=apply)
