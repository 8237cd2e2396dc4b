"""Our Helion backends: the weight-only GEMM (int4, NVFP4) and split-K (atomic,
deterministic), with checked-in configs per GPU and shape bucket
(helion_kernels/; split-K without one: the Triton table's config), and the
command-line options that re-tune them (--autotune ...). helion is imported
only when a backend is prepared."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from qgemm_bench.backends.checks import check_split_k, check_weight_only, missing, triton_why_not
from qgemm_bench.backends.helion_dispatch import (
    HelionConfigs,
    default_config,
    split_k_default,
    table_config,
    weight_only_path,
)
from qgemm_bench.backends.helion_dispatch import helion_config as helion_config  # re-exported: tests, scripts
from qgemm_bench.backends.helion_dispatch import nearest_ok as helion_nearest_ok
from qgemm_bench.backends.registry import Prepared, backend
from qgemm_bench.errors import InputError
from qgemm_bench.operators.formats import INT4, NVFP4, NVFP4_BLOCK
from qgemm_bench.target import of as target_of

# Interpreter configs (CPU). Weight-only (split path): block_sizes [N, M] and
# the K step block_k (kernels.py); entries written before block_k existed
# (block_sizes [K step in packed rows, M, N]) are translated (split_config).
# Fused: block_sizes [N, M], block_k, optionally split_k (fused_gemm's
# SPLIT_K; absent: the default config's, 1 unless the Triton table's config
# has a split). Split-K: block_sizes [N, M], block_k, split_k
# (triton_ops.SPLIT_K_INTERPRETER_CONFIG's tiles and split).
WEIGHT_ONLY_INTERPRETER_CONFIG = {"block_sizes": [32, 16], "block_k": 64, "split_k": 2, "num_warps": 4,
                                  "num_stages": 1}
FUSED_INTERPRETER_CONFIG = {"block_sizes": [64, 32], "block_k": 128, "num_warps": 4, "num_stages": 1}
SPLIT_K_INTERPRETER_CONFIG = {"block_sizes": [32, 16], "block_k": 64, "split_k": 4, "num_warps": 4, "num_stages": 1}
MIN_BLOCK_K = 32  # hl.dot needs 16 packed rows
# kernels.fused's config keys that are its arguments (tuning.ready's
# `arguments`): the weight-only ones, its split and the K-step views (tma).
FUSED_ARGUMENTS = ("block_k", "decode_asm", "split_k", "tma", "acc_scale", "pdl", "frag", "bf16_scales", "rot",
                   "tiled")
ROT_ROWS = 16  # rot_words_in_register_order pairs rows r and r + 8 of each 16 in one word
# int4 in fragment order (frag) returned wrong sums on the H100 in 8-warp tiles at M = 256 and 1024,
# and on the H200 in an 8-warp 128x256 tile (kernels.fused): on pointer loads wider tiles take it on 4
# warps only (right in 64x256 and 128x256 tiles there). On TMA loads with x K-innermost the 8-warp tile
# writes no pending wgmma operand register (offline) and was right over 30 calls on the H200
# (docs/helion.md).
FRAG_MAX_BLOCK_M = 64
K_INNER_MIN_M = 128  # kernels.fused's k_inner: from this M its TMA path reads x K-innermost
MIN_TILE = 16  # hl.dot's smallest M and N tiles: the split kernels' counters are sized for them


def frag_tile_ok(cfg: dict, tma_loads: bool = False) -> bool:
    """Whether fragment order is taken in cfg's tile: up to FRAG_MAX_BLOCK_M
    rows, on one warp group (4 warps), or where kernels.fused reads the
    tiles by TMA with x K-innermost (tma_loads: tma_k_inner)."""
    return cfg["block_sizes"][1] <= FRAG_MAX_BLOCK_M or cfg.get("num_warps", 4) <= 4 or tma_loads


def tiled_ok(cfg: dict) -> bool:
    """Whether kernels.fused reads cfg's weights tiled (kmajor_layout.TILE):
    asked for, pointer loads (not tma: its K-step views are of the untiled
    rows), a K step within a tile's 128 k."""
    from qgemm_bench.backends.kmajor_layout import TILE

    return bool(cfg.get("tiled")) and not cfg.get("tma") and cfg["block_k"] <= TILE[1]


def tma_k_inner(cfg: dict, k: int, m: int) -> bool:
    """Whether kernels.fused reads cfg's tiles by TMA with x K-innermost at
    (M, K): tma with tensor-descriptor indexing, K a whole number of K steps
    (else its pointer loads), M from K_INNER_MIN_M."""
    return (bool(cfg.get("tma")) and cfg.get("indexing") == "tensor_descriptor" and k % cfg["block_k"] == 0
            and m >= K_INNER_MIN_M)


def why_not(case) -> str | None:
    return missing("helion", "pip install helion==1.4.0") or triton_why_not(case)  # Helion emits Triton


def add_arguments(p) -> None:
    g = p.add_argument_group("Helion backends")
    g.add_argument("--autotune", choices=["none", "quick", "full"], default="none",
                   help="none (default) uses the checked-in configs for this GPU and shape bucket; a shape "
                   "without its own bucket takes the Triton table's config for the shape (weight-only "
                   "kernels, where the table has one) or the nearest bucket, said in the row; quick/full "
                   "re-tune with Helion's autotuner (minutes per shape; time recorded as autotune_s)")
    g.add_argument("--autotune-budget", type=float, metavar="S",
                   help="wall-clock budget per Helion autotune in seconds (default: none)")
    g.add_argument("--save-configs", action="store_true",
                   help="with --autotune: write the winning configs into the config store "
                   "(qgemm_bench/configs/<gpu>/helion.json)")
    g.add_argument("--helion-configs", metavar="FILE",
                   help="take configs from this JSON file (the format of the store's configs/<gpu>/"
                   "helion.json) instead of the store's; a shape without its own bucket in it takes "
                   "its nearest bucket")


def configure(args, device: torch.device) -> dict:
    """Check the options and hand them to the kernels' tuning; returns them for the run's metadata."""
    from qgemm_bench.backends.helion_kernels import configs, tuning

    if args.autotune != "none" and device.type != "cuda":
        raise InputError("--autotune needs a CUDA device (the interpreter cannot time configs)")
    if args.save_configs and args.autotune == "none":
        raise InputError("--save-configs needs --autotune quick or full")
    budget = args.autotune_budget
    if budget is not None and not (0 < budget < float("inf")):
        raise InputError("--autotune-budget must be a finite number of seconds > 0")
    if budget is not None and args.autotune == "none":  # the checked-in configs: no autotune to budget
        raise InputError("--autotune-budget needs --autotune quick or full")
    path = None
    if args.helion_configs:
        path = Path(args.helion_configs)
        if not path.is_file():
            raise InputError(f"--helion-configs {path}: " + ("is a folder; expected a file" if path.is_dir() else
                                                              "no such file"))
        try:
            configs.check_file(path)
        except ValueError as e:
            raise InputError(f"--helion-configs {e}") from None
    # Under torchrun several ranks autotune: rank 0 alone writes the file (merge_rank_states).
    ranked = int(os.environ.get("WORLD_SIZE", "1") or 1) > 1
    tuning.set_options(tuning.Options(args.autotune, budget, args.save_configs, path, defer_saves=ranked))
    return {"helion_autotune": args.autotune, "helion_configs": args.helion_configs}


def rank_state():
    """What this rank autotuned and has not saved (torchrun)."""
    from qgemm_bench.backends.helion_kernels import tuning

    return list(tuning.PENDING)


def merge_rank_states(states: list) -> list[str]:
    """Rank 0: write every rank's autotuned configs into the config files."""
    from qgemm_bench.backends.helion_dispatch import save as save_config

    saved = [save_config(*save) for state in states for save in state or []]
    return [f"helion configs from {len(saved)} autotune(s) saved to "
            f"{', '.join(sorted({f'{p.parent.name}/{p.name}' for p in saved}))}"] if saved else []


def split_config(cfg: dict) -> dict:
    """A split-path (weight_only kernel) config in today's form: block_sizes
    [BLOCK_N, BLOCK_M] and block_k. Entries from before block_k (block_sizes
    [K step in packed rows, M, N]: the H100 entry's first split buckets, the
    tests' interpreter configs) are translated, so they keep their tiles."""
    cfg = dict(cfg)
    bs = list(cfg.get("block_sizes", ()))
    if len(bs) == 3:
        cfg["block_sizes"] = [bs[2], bs[1]]
        cfg.setdefault("block_k", 2 * bs[0])
    return cfg


def split_scale_mode(fmt: int, group: int | None, block_k: int) -> str:
    """weight_only.py's scale handling for a K step: "after" (the step lies in
    one group: SCALE_AFTER), "sub" (groups tile the step; NVFP4), "gather"
    (neither divides: per packed row), "none" (unscaled)."""
    if fmt == NVFP4:
        return "sub"
    if group is None:
        return "none"
    if group % block_k == 0:
        return "after"
    return "sub" if block_k % group == 0 else "gather"


def fused_scale_mode(fmt: int, group: int | None, k: int, block_k: int) -> str:
    """kernels.fused's scale mode for a K step (fused_gemm.scale_mode; its
    per-channel scales CHANNEL, NVFP4's read in fragment order): int4 group
    128 is "block" up to block_k 128 and "sub" at 256."""
    from qgemm_bench.backends.helion_kernels.kernels import SCALE_MODES
    from qgemm_bench.backends.triton_kernels.fused_gemm import scale_mode

    return SCALE_MODES[scale_mode(fmt, group, k, block_k, frag=fmt == NVFP4, channel_block=False)]


def two_rows_for_one(x: torch.Tensor) -> torch.Tensor:
    """x of one row as two, both x's (stride 0, no copy); others as they are.
    Helion drops a dimension of 1 from its indexing and makes its tile one
    row wide, padded to the dot's 16 by joins at every K step (the fused
    kernel at M = 1 ran 2x its M = 16: docs/helion.md); callers take the
    first row of the output."""
    return x.expand(2, x.shape[1]) if x.shape[0] == 1 else x


class WeightOnly:
    """y = x @ dequant(w) through the Helion kernels (kernels.py) for any x
    [M, K], on the Triton backend's path where that has no TMA loads
    (triton_dispatch.path_for: by M, and the Triton table's faster path where it
    timed both; above FUSED_MAX_M always dequant): split (weight_only kernel,
    one launch), fused (on K-major weights made on first use), dequant
    (Helion dequantize, then torch's matmul). Same arguments as the Triton
    WeightOnlyGemm: fmt INT4 (scales [K//group, N] or None) or NVFP4 (E4M3
    block scales, fp32 0-dim tensor scale). `name`: the op, the config
    files' kernel name of the split path ("<name>_fused": the fused path's).
    Owns the split-K workspace and counters per M of the split path and of
    the fused path with split_k > 1 (zeroed once, left zeroed by every call:
    call once at an M before a graph capture). target: the GPU (default: the
    weights' device's); store: the config store (default: the package's)."""

    def __init__(self, name: str, w, scales, tensor_scale, fmt: int, group: int | None, target=None, store=None):
        if fmt == NVFP4:
            group = NVFP4_BLOCK
        elif scales is None:
            group = None
        self.name, self.w, self.scales, self.fmt, self.group = name, w, scales, fmt, group
        self.k, self.n = 2 * w.shape[0], w.shape[1]
        self.target, self.store = target if target is not None else target_of(w.device), store
        self.ts = tensor_scale.reshape(1).float() if fmt == NVFP4 else None
        self._kmajor: dict[tuple, object] = {}  # (fragment order?, tiled?) -> the K-major weights
        self._bf16_scales: torch.Tensor | None = None  # NVFP4 bf16_scales configs' block scales (bf16_scales())
        self._wt_rot: dict[bool, torch.Tensor] = {}  # tiled? -> NVFP4 rot configs' permuted weights (wt_rot())
        self._ready: dict[int, object] = {}  # M -> tuning.Ready of its path
        self._fused_runs: dict[int, object] = {}  # M -> its fused config, compiled
        self._workspace: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._dequant: dict[torch.dtype, object] = {}

    def path(self, m: int) -> str:
        return weight_only_path(m, self.fmt, self.k, self.n, self.target, self.store)

    def kmajor(self, frag: bool = False, tiled: bool = False):
        """The fused path's K-major weights (kmajor_layout.py), made on first use:
        NVFP4 in fragment order; int4 in K order unless frag (kernels.fused says why);
        tiled: in kmajor_layout.TILE tiles. One copy per byte order: configs that mix
        them across M keep each resident (e.g. the H200's int4 M = 128 and 512 entries
        in K order, the others in fragment order; a model's weight bytes count one)."""
        key = (frag or self.fmt == NVFP4, tiled)
        if key not in self._kmajor:
            from qgemm_bench.backends.kmajor_layout import TILE, to_kmajor

            self._kmajor[key] = to_kmajor(self.w, self.scales, self.group, frag=key[0], tile=TILE if tiled else None)
        return self._kmajor[key]

    def bf16_scales(self) -> torch.Tensor:
        """NVFP4's K-major block scales as FusedGemm stores them, bf16 E4M3 x
        2^118 (decode.bf16_x2_118: the PTX decode's operand), what fused
        configs with bf16_scales read; made on first use, 2 bytes a scale
        (K = N = 8192: 8 MiB, the E4M3 bytes' 4 MiB + 4)."""
        if self._bf16_scales is None:
            from qgemm_bench.backends.triton_kernels.decode import bf16_x2_118

            # Every K-major copy holds the same scales: one made already (tiled or not), not another for them.
            p = next(iter(self._kmajor.values()), None) or self.kmajor()
            self._bf16_scales = bf16_x2_118(p.scales)
        return self._bf16_scales

    def wt_rot(self, tiled: bool = False) -> torch.Tensor:
        """NVFP4's K-major weights (tiled: in tiles) with each decode call's 4
        bytes permuted for decode.NVFP4_ROT_BF16X2_PTX
        (fused_gemm.rot_words_in_register_order, the Triton path's ROT_DECODE
        bytes), what rot configs read; made on first use, a second copy beside
        the plain one."""
        if tiled not in self._wt_rot:
            from qgemm_bench.backends.triton_kernels.fused_gemm import rot_words_in_register_order

            self._wt_rot[tiled] = rot_words_in_register_order(self.kmajor(tiled=tiled))
        return self._wt_rot[tiled]

    def _rot_applies(self, x, cfg: dict) -> bool:
        """kernels.fused's rot: asked for, NVFP4, the PTX decode (bf16 on the
        GPU), pointer loads (not tma: the Triton path's ROT_DECODE takes
        none either), N a multiple of ROT_ROWS: a permuted word holds bytes
        of rows r and r + 8, and Helion masks the rows past N, so a ragged
        last group's words would lose half their bits (docs/helion.md)."""
        return (bool(cfg.get("rot")) and self.fmt == NVFP4 and self._use_asm(x, cfg) and not cfg.get("tma")
                and self.n % ROT_ROWS == 0)

    def _bf16_applies(self, cfg: dict) -> bool:
        """kernels.fused's bf16_scales: asked for, NVFP4 (int4's scales are bf16 already)."""
        return bool(cfg.get("bf16_scales")) and self.fmt == NVFP4

    def _frag_scales_ok(self, cfg: dict) -> bool:
        """int4 fragment order only with group scales (block, sub, gather):
        unscaled and per-channel weights go from the decode straight into
        the chained dot, where fragment order came back wrong on the H200
        and writes registers a pending wgmma still reads (offline, every
        tile tried; K order none): docs/helion.md."""
        return fused_scale_mode(self.fmt, self.group, self.k, cfg["block_k"]) not in ("none", "channel")

    def _frag_applies(self) -> bool:
        """kernels.fused's frag does something: int4 whose groups are whole runs
        of 32 k (fragment order permutes within them), or unscaled."""
        return self.fmt == INT4 and (self.group is None or self.group % 32 == 0)

    def resident(self, m: int) -> tuple:
        """The weight tensors the path for M reads."""
        if self.path(m) == "fused":
            r = self._ready.get(m)
            tiled = bool(r is not None and r.config.get("tiled"))  # kept only where it applies
            p = self.kmajor(bool(r is not None and r.config.get("frag")), tiled)
            scales = self.bf16_scales() if r is not None and self._bf16_applies(r.config) else p.scales
            wt = self.wt_rot(tiled) if r is not None and r.config.get("rot") else p.wt  # kept only where it applies
            return tuple(t for t in (wt, scales, self.ts) if t is not None)
        return tuple(t for t in (self.w, self.scales, self.ts) if t is not None)

    def note(self, m: int) -> str:
        return "dequantize + cuBLAS path (a K x N scratch)" if self.path(m) == "dequant" else ""

    def _use_asm(self, x, cfg: dict) -> bool:
        return bool(cfg.get("decode_asm", True)) and x.dtype == torch.bfloat16 and x.is_cuda  # PTX: bf16, GPU

    def workspace(self, m: int, rows: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        """The split-K workspace (fp32 [rows, N]) and per-tile counters of M
        (the split path's, or the fused path's with split_k > 1: M decides
        the path), made zeroed on first use; the kernels leave them zeroed."""
        if m not in self._workspace:  # counters for the smallest tiles (16 x 16): any config's fit
            self._workspace[m] = (torch.zeros(rows, self.n, device=device, dtype=torch.float32),
                                  torch.zeros(-(-rows // MIN_TILE), -(-self.n // MIN_TILE), device=device,
                                              dtype=torch.int32))
        return self._workspace[m]

    def _split_args(self, x, cfg: dict) -> tuple:
        from qgemm_bench.backends.helion_kernels.kernels import SMALL_M_ROWS

        m = x.shape[0]
        small = m if m < SMALL_M_ROWS else 0  # the kernel tiles SMALL_M_ROWS rows (kernels.weight_only)
        rows = SMALL_M_ROWS if small else m
        ws, count = self.workspace(m, rows, x.device)
        s = self.scales if self.scales is not None else self.w  # never read unscaled
        ts = self.ts if self.ts is not None else self.w  # never read for int4
        block_k = cfg["block_k"]
        x = two_rows_for_one(x)
        return (x, self.w, s, ts, ws, count, self.fmt, split_scale_mode(self.fmt, self.group, block_k),
                self.group or 2, block_k, self._use_asm(x, cfg), small)

    def _fused_args(self, x, cfg: dict) -> tuple:
        frag = bool(cfg.get("frag", False)) and self._frag_applies()
        tiled = tiled_ok(cfg)
        p = self.kmajor(frag, tiled)
        block_k = cfg["block_k"]
        m = x.shape[0]  # the workspace's key: M's own, not the rows bound
        x = two_rows_for_one(x)  # the output's first row taken (__call__)
        bf16 = self._bf16_applies(cfg)
        s = self.bf16_scales() if bf16 else p.scales
        st = s.t() if s is not None else p.wt  # [Np, Gp] view; never read unscaled
        ts = self.ts if self.ts is not None else p.wt  # never read for int4
        mode = fused_scale_mode(self.fmt, self.group, self.k, block_k)
        rot = self._rot_applies(x, cfg)
        wt = self.wt_rot(tiled) if rot else p.wt
        args = (x.t(), wt, st, ts, self.n, self.fmt, mode, self.group or 2, block_k, self._use_asm(x, cfg))
        split = cfg.get("split_k", 1)
        tma = bool(cfg.get("tma", False))  # kernels.fused's K-step views (TMA loads with indexing tensor_descriptor)
        acc = bool(cfg.get("acc_scale", False)) and self._acc_applies(block_k)
        # kernels.fused's trailing arguments, those at their defaults (off) left out from the end.
        tail = [tma, acc, self.pdl_mode(x, cfg), frag, bf16, rot, tiled]
        while tail and not tail[-1]:
            tail.pop()
        if split == 1 and not tail:  # the kernel's defaults: no split, no workspace
            return args
        ws = self.workspace(m, x.shape[0], x.device) if split > 1 else (None, None)
        return (*args, split, *ws, *tail)

    def _acc_applies(self, block_k: int) -> bool:
        """kernels.fused's acc_scale does something: NVFP4, or int4 with one group a K step (scale mode block)."""
        from qgemm_bench.backends.helion_kernels.kernels import SCALE_MODES
        from qgemm_bench.backends.triton_kernels.fused_gemm import scale_mode

        return self.fmt == NVFP4 or self.fmt == INT4 and SCALE_MODES[scale_mode(self.fmt, self.group, self.k, block_k,
                                                                                channel_block=False)] == "block"

    @staticmethod
    def pdl_mode(x, cfg: dict) -> int:
        """The fused config's PDL mode where it can run (a GPU: split_k_parts.pdl_launch)."""
        from qgemm_bench.backends.triton_kernels.split_k_parts import pdl_launch

        # Its own mode in a chain too: the kernel of an M is compiled once, with the mode of its first call.
        return pdl_launch({"PDL": cfg.get("pdl", 0)}, x.device, chain=None)["PDL"]

    def bound(self, x):
        """The tuning.Ready of x's M (bound and compiled on first use of the M)."""
        from qgemm_bench.backends.helion_kernels import kernels
        from qgemm_bench.backends.helion_kernels.tuning import ARGUMENT_KEYS, ready
        from qgemm_bench.backends.kmajor_layout import K_ALIGN

        m = x.shape[0]
        if m in self._ready:
            return self._ready[m]
        check_weight_only(x, self.w, self.scales, self.fmt, self.group or 2)
        path = self.path(m)
        if path != "dequant":
            # Helion's config of another bucket or the Triton table's: helion_dispatch.nearest_ok decides.
            table = table_config(self.fmt, path, m, self.k, self.n, self.target, self.store)
            default = table or default_config(self.fmt, path, m)
            kernel = self.name + ("_fused" if path == "fused" else "")  # the config files' kernel name
            nearest_ok = helion_nearest_ok(kernel, self.fmt, path, m, self.k, self.n, self.target, self.store)
            # A config without our argument keys (hand-written, or from an
            # older file) takes the default's K step and decode.
            arguments = {key: default[0][key] for key in ARGUMENT_KEYS}
        if path == "split":
            translated = []

            def fix(cfg):
                if len(cfg.get("block_sizes", ())) == 3:
                    translated.append(cfg)
                cfg = {**arguments, **split_config(cfg)}
                cfg["block_k"] = max(cfg["block_k"], MIN_BLOCK_K)
                return cfg

            r = ready(kernel, kernels.weight_only, lambda cfg: self._split_args(x, cfg), x.device,
                      (m, self.k, self.n), WEIGHT_ONLY_INTERPRETER_CONFIG, fix, default, nearest_ok,
                      source=HelionConfigs(self.target, self.store))
            if translated and x.device.type == "cuda":
                r.notes = "; ".join(filter(None, (r.notes, "config of the earlier split kernel, translated "
                                                  "(its timing predates this kernel)")))
        elif path == "fused":
            # split_k (fused_gemm's SPLIT_K) is an argument of kernels.fused
            # (hl.constexpr, decided at trace time; kernels.py says why), not
            # a Helion setting as the split path's tunable: one more argument
            # key here. A config without it takes the default's, as the other
            # argument keys (1 unless the Triton config for the shape splits).
            arguments["split_k"] = default[0].get("split_k", 1)

            def fix(cfg):
                cfg = {**arguments, **cfg}
                if not MIN_BLOCK_K <= cfg["block_k"] <= K_ALIGN:
                    raise ValueError(f"config {cfg}: block_k from {MIN_BLOCK_K} to {K_ALIGN} (the K-major layout's "
                                     "padding)")
                if type(cfg["split_k"]) is not int or cfg["split_k"] < 1:
                    raise ValueError(f"config {cfg}: split_k must be an integer >= 1, got {cfg['split_k']!r}")
                if cfg.get("frag") and (not self._frag_applies() or
                                        not frag_tile_ok(cfg, tma_k_inner(cfg, self.k, m)) or
                                        not self._frag_scales_ok(cfg)):
                    cfg = {k: v for k, v in cfg.items() if k != "frag"}  # NVFP4's always; int4 groups of 32n
                if cfg.get("bf16_scales") and not self._bf16_applies(cfg):
                    cfg = {k: v for k, v in cfg.items() if k != "bf16_scales"}  # int4's scales are bf16 already
                if cfg.get("tiled") and not tiled_ok(cfg):
                    cfg = {k: v for k, v in cfg.items() if k != "tiled"}  # tma, a K step of 256
                if cfg.get("rot") and not self._rot_applies(x, cfg):
                    cfg = {k: v for k, v in cfg.items() if k != "rot"}  # int4, the interpreter, fp16, tma
                if cfg.get("acc_scale") and not self._acc_applies(cfg["block_k"]):
                    # Tuned where it applied (NVFP4; int4, one group a step): its register cap goes with it.
                    cfg = {k: v for k, v in cfg.items() if k not in ("acc_scale", "maxnreg")}
                if cfg.get("maxnreg") and not str(cfg.get("pid_type", "flat")).startswith("persistent"):
                    # Helion 1.4 refuses a register cap on flat programs (InvalidConfig on CUDA).
                    cfg = {k: v for k, v in cfg.items() if k != "maxnreg"}
                return cfg

            r = ready(kernel, kernels.fused, lambda cfg: self._fused_args(x, cfg), x.device,
                      (m, self.k, self.n), FUSED_INTERPRETER_CONFIG, fix, default, nearest_ok,
                      FUSED_ARGUMENTS, source=HelionConfigs(self.target, self.store))
        else:
            r = self._dequant_ready(x.dtype, x.device)
        self._ready[m] = r
        return r

    def _dequant_args(self, out):
        s = self.scales if self.scales is not None else self.w  # never read unscaled
        ts = self.ts if self.ts is not None else self.w
        return (self.w, s, ts, out.view(self.k // 2, 2, self.n), self.fmt, self.scales is not None, self.group or 2)

    def _dequant_ready(self, dtype, device):
        """The dequant kernel with the Triton dequant_kernel's fixed config
        (weight_only.DEQUANT_CONFIG: 16 packed rows x 256 columns, 4 warps)."""
        if dtype not in self._dequant:
            import time

            from qgemm_bench.backends.helion_kernels import kernels
            from qgemm_bench.backends.helion_kernels.tuning import Ready
            from qgemm_bench.backends.triton_kernels.weight_only import DEQUANT_CONFIG

            c = DEQUANT_CONFIG
            cfg = {"block_sizes": [c["BLOCK_R"], c["BLOCK_N"]], "num_warps": c["num_warps"], "num_stages": 1}
            bound = kernels.dequant.bind(self._dequant_args(torch.empty(self.k, self.n, device=device, dtype=dtype)))
            t0 = time.perf_counter()
            bound.set_config(cfg)
            note = "Triton interpreter (CPU)" if device.type == "cpu" else ""
            self._dequant[dtype] = Ready(bound, cfg, note, time.perf_counter() - t0, None)
        return self._dequant[dtype]

    def dequantize(self, dtype: torch.dtype) -> torch.Tensor:
        """The weights as a dense [K, N] tensor in `dtype` (one Helion launch)."""
        out = torch.empty(self.k, self.n, device=self.w.device, dtype=dtype)
        self._dequant_ready(dtype, self.w.device).run(*self._dequant_args(out))
        return out

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        r = self.bound(x)
        path = self.path(x.shape[0])
        if path == "dequant":
            return x @ self.dequantize(x.dtype)
        if path == "fused":
            m = x.shape[0]
            if m not in self._fused_runs:
                # This M's own compiled config (one bound kernel serves every config of a shape, the last
                # set_config's), taken once: compile_config normalizes the config on every call.
                from qgemm_bench.backends.helion_kernels.tuning import helion_settings

                self._fused_runs[m] = r.run.compile_config(helion_settings(r.config, FUSED_ARGUMENTS))
            # With PDL, launched so the kernel may start before the one before it ends.
            launch = {"_launcher": pdl_launcher} if self.pdl_mode(x, r.config) else {}
            return self._fused_runs[m](*self._fused_args(x, r.config), **launch)[:m]
        return r.run(*self._split_args(x, r.config))[: x.shape[0]]  # small M: the first M of the 16 rows


def _weight_only(case, name: str, inputs, scales, tensor_scale, fmt: int, group: int | None) -> Prepared:
    """The weight-only GEMM for any M (each path bound and compiled once per M
    it sees); the case's own path prepared here (the fused path's K-major
    weights included), the others on first use (apply)."""
    gemm = WeightOnly(name, inputs.w.contiguous(), scales, tensor_scale, fmt, group, case.target)

    def apply(x):
        return gemm(x.contiguous())

    x = inputs.x.contiguous()
    m = x.shape[0]
    r = gemm.bound(x)
    notes = "; ".join(filter(None, (r.notes, gemm.note(m))))
    return Prepared(lambda: gemm(x), resident=gemm.resident(m), notes=notes, compile_s=r.compile_s,
                    autotune_s=r.autotune_s, apply=apply)


@backend("int4_gemm", "helion", "Helion weight-only GEMM, the Triton backend's paths in Helion: one-launch "
         "split-K for M <= 64; the fused swapped-operand kernel on K-major weights up to M = 1024 (and where the "
         "Triton table picks it at M <= 64); above, a Helion dequantize, then cuBLAS (the Triton backend's fused "
         "kernel there needs TMA loads); checked-in configs per GPU and shape bucket", why_not, compiles=True)
def int4(case, inputs):
    return _weight_only(case, case.op, inputs, inputs.scales, None, INT4, inputs.group_size)


@backend("nvfp4_gemm", "helion", "Helion weight-only GEMM with in-register E2M1 decode and E4M3 block "
         "scales, the Triton backend's paths (split-K, fused up to M = 1024, then dequantize + cuBLAS; by M and "
         "the Triton table); "
         "checked-in configs per GPU and shape bucket", why_not, compiles=True)
def nvfp4(case, inputs):
    bs = inputs.block_scales.contiguous()
    if bs.dtype != torch.float8_e4m3fn:
        raise ValueError(f"NVFP4 block scales must be float8_e4m3fn, not {bs.dtype}")
    return _weight_only(case, case.op, inputs, bs, inputs.tensor_scale, NVFP4, None)


# The split-K kernel's config keys that are kernel arguments (tuning.ready's
# `arguments`): its K step, PDL mode and who sums the planes ("last": the
# tile's last program; "kernel": reduce_planes, a second launch, in either
# mode, as the Triton SplitKGemm runs a REDUCE "kernel" config).
SPLIT_K_ARGUMENTS = ("block_k", "pdl", "reduce")


def pdl_launcher(kernel, grid, *args, **kwargs):
    """Helion's launcher with programmatic dependent launch (the kernels then
    wait in their prologue: kernels._pdl_prologue)."""
    from helion.runtime import default_launcher

    return default_launcher(kernel, grid, *args, launch_pdl=True, **kwargs)


class SplitK:
    """y = a @ b (+ bias) through kernels.split_k (and, where the config sums
    the planes in a second launch, kernels.reduce_planes): atomic or
    deterministic. Owns the kernel's fp32 workspace and per-tile counters,
    made on the first args() (zeroed once; atomics and counters left zeroed by
    every call, planes overwritten by every call), as the
    Triton SplitKGemm; any_split: deterministic planes for any split (Helion's
    autotuner tries them all on the same arguments). target: the GPU
    (default: a's device's); store: the config store."""

    def __init__(self, a, b, bias, deterministic: bool, any_split: bool = False, target=None, store=None):
        check_split_k(a, b, bias)
        self.a, self.b, self.bias, self.deterministic, self.any_split = a, b, bias, deterministic, any_split
        self.target, self.store = target if target is not None else target_of(a.device), store
        self.m, self.k = a.shape
        self.n = b.shape[1]
        self.ws = self.count = None

    def splits(self, cfg: dict) -> int:
        """How many splits a config launches (planes, deterministic or summed
        by the second launch)."""
        from qgemm_bench.backends.helion_kernels.kernels import split_chunk
        from qgemm_bench.backends.triton_kernels import split_k_configs as skc  # MAX_SPLIT: kernels.split_k's too

        k, bk = self.k, cfg["block_k"]
        return min(-(-k // bk), skc.MAX_SPLIT) if self.any_split else -(-k // split_chunk(k, bk, cfg["split_k"]))

    def args(self, cfg: dict) -> tuple:
        """The kernel's arguments for a config (its block_k, split_k, pdl and
        reduce; PDL only on a GPU: split_k_parts.pdl_launch)."""
        from qgemm_bench.backends.helion_kernels.kernels import SMALL_M_ROWS
        from qgemm_bench.backends.triton_kernels.split_k_parts import check_workspace, pdl_launch

        m, n, bk = self.m, self.n, cfg["block_k"]
        small = m if m < SMALL_M_ROWS else 0  # the kernel tiles SMALL_M_ROWS rows
        rows = SMALL_M_ROWS if small else m
        splits = self.splits(cfg)
        planes_only = cfg.get("reduce", "last") == "kernel" and splits > 1
        planes = self.deterministic or planes_only
        shape = [splits, rows, n] if planes else [rows, n]
        check_workspace(shape[0] if planes else 1, rows, n)
        if self.ws is None or self.ws.dim() != len(shape) or self.ws.shape[0] < shape[0]:
            self.ws = torch.zeros(shape, device=self.a.device, dtype=torch.float32)
            # Counters for the smallest tiles (16 x 16): any config's fit.
            self.count = torch.zeros(-(-rows // MIN_TILE), -(-n // MIN_TILE), device=self.a.device, dtype=torch.int32)
        bias = self.bias if self.bias is not None else self.b[0]  # b[0]: a placeholder, never read
        pdl = pdl_launch({"PDL": cfg.get("pdl", 0)}, self.a.device, chain=None)["PDL"]  # as pdl_mode
        return (self.a, self.b, bias, self.ws, self.count, self.bias is not None, planes, bk, small, pdl,
                planes_only)

    def call(self, r):
        """y = a @ b (+ bias) with Ready r: the split kernel, launched with PDL
        where its config has it, then (planes_only) reduce_planes over the
        planes, under the same PDL; as the Triton SplitKGemm. Returns a
        function of no arguments."""
        from qgemm_bench.backends.helion_kernels import kernels
        from qgemm_bench.backends.helion_kernels.tuning import helion_settings
        from qgemm_bench.backends.triton_kernels.split_k_parts import plane_launch

        args = self.args(r.config)
        m, pdl, planes_only = self.m, args[-2], args[-1]
        split = r.run
        if pdl:
            compiled = r.run.compile_config(helion_settings(r.config, SPLIT_K_ARGUMENTS))
            split = lambda *a: compiled(*a, _launcher=pdl_launcher)  # noqa: E731
        if not planes_only:
            return lambda: split(*args)[:m]
        ws, bias, splits = self.ws, args[2], self.splits(r.config)  # the planes args() launches, to sum
        size = m * self.n  # the M real rows only (small M: not the padding rows of the 16-row tile)
        out = torch.empty(size, device=self.a.device, dtype=self.a.dtype)  # an example to bind
        _, meta = plane_launch(m, self.n, splits, self.target.sms)
        planes = ws.view(ws.shape[0], -1)[:splits if meta["SPREAD"] else None, :size]
        reduce_args = (planes, bias, out, self.bias is not None, splits, meta["BLOCK"], pdl, meta["SPREAD"])
        reduce = kernels.reduce_planes.bind(reduce_args).compile_config({"num_warps": meta["num_warps"],
                                                                         "num_stages": 1})
        launcher = {"_launcher": pdl_launcher} if pdl else {}

        def run():
            y = split(*args)
            reduce(planes, bias, y.view(-1)[:size], *reduce_args[3:], **launcher)
            return y[:m]

        return run

    def ready(self, op: str):
        """The tuning.Ready of this case: tuning.ready's order (interpreter,
        explicit, --autotune, the checked-in config: kernel `op`, or
        "<op>_deterministic"), else the Triton table's config (split_k_default)."""
        from qgemm_bench.backends.helion_kernels import kernels
        from qgemm_bench.backends.helion_kernels.tuning import ready
        from qgemm_bench.backends.triton_dispatch import split_k_entry
        from qgemm_bench.backends.triton_kernels import split_k_configs

        default = split_k_default(self.deterministic, self.m, self.k, self.n, self.target, self.store)

        def fix(cfg):
            if len(cfg.get("block_sizes", ())) != 2:
                raise ValueError(f"split-K config {cfg}: block_sizes must be [BLOCK_N, BLOCK_M] (with block_k and "
                                 "split_k): configs of the earlier split-K kernel no longer apply")
            # A config without them: the Triton table's K step and split (args() needs both).
            cfg = {"block_k": default[0]["block_k"], "split_k": default[0]["split_k"], **cfg}
            cfg["block_k"] = max(cfg["block_k"], MIN_TILE)  # hl.dot's smallest K
            if self.any_split:
                # Helion's autotuner times the split kernel alone, so an
                # autotuned config runs as timed: one launch, no PDL (it may
                # then trail the Triton table's config, which has both).
                cfg.update(pdl=0, reduce="last")
            return cfg

        name = f"{op}_deterministic" if self.deterministic else op
        # Helion's own config of another bucket only where the Triton table
        # has no entry of the shape's own (as for the weight-only kernels): a
        # neighbour's det config ran 1.4x the table's at 256x4096x256 (H100).
        e = split_k_entry(self.target, self.store)
        exact = split_k_configs.has_entry(split_k_configs.MODES[int(self.deterministic)], self.m, self.k, self.n,
                                          e.gpu, e.table)
        return ready(name, kernels.split_k, self.args, self.a.device, (self.m, self.k, self.n),
                     SPLIT_K_INTERPRETER_CONFIG, fix, default, nearest_ok=not exact, arguments=SPLIT_K_ARGUMENTS,
                     source=HelionConfigs(self.target, self.store))


def _split_k(case, inputs, deterministic: bool) -> Prepared:
    a, b, bias = inputs.a.contiguous(), inputs.b.contiguous(), inputs.bias
    from qgemm_bench.backends.helion_kernels.tuning import autotunes

    gemm = SplitK(a, b, bias, deterministic, any_split=autotunes(a.device), target=case.target)
    r = gemm.ready(case.op)
    return Prepared(gemm.call(r), resident=(b, bias) if bias is not None else (b,), notes=r.notes,
                    compile_s=r.compile_s, autotune_s=r.autotune_s)


@backend("split_k_gemm", "helion", "Helion split-K, the Triton backend's kernel: fp32 atomics finished by the "
         "tile's last program, or per-split planes summed by a second launch where the Triton table's config "
         "says so; its PDL too; checked-in configs per GPU and shape bucket, else the Triton table's", why_not,
         compiles=True)
def split_k(case, inputs):
    return _split_k(case, inputs, deterministic=False)


@backend("split_k_gemm", "helion_deterministic", "Helion split-K, per-split partials summed in a fixed order "
         "by the tile's last program or a second launch: bit-identical run to run; configs as helion's", why_not,
         compiles=True)
def split_k_deterministic(case, inputs):
    return _split_k(case, inputs, deterministic=True)
