"""Which path and config the Triton kernels run at a shape, from the config
store and the Target: the one place that decides it (the kernels in
triton_kernels/ take a config and a Target and decide nothing).

- Weight-only GEMM (int4, NVFP4): path_for (by M: split up to
  weight_only.SPLIT_PATH_MAX_M unless the table timed the fused kernel
  faster, fused up to weight_only.FUSED_MAX_M, above it where its config's
  TMA loads run and the table did not time dequantize + cuBLAS faster, else
  dequant) and WeightOnlyDispatch (the path and config at each M of one
  weight); the Helion backend takes the same paths.
- Split-K GEMM: choose_split_k (the store's split_k table, else the
  heuristic).
- make_weight_only and make_split_k: the launchers (WeightOnlyGemm,
  SplitKGemm) with those decisions handed in; the kernel modules never
  import this one.

The store is read here (weight_only_entry, split_k_entry), never in
triton_kernels/: a Target without its own store entry takes the nearest
entry of its compute capability (configs.store), and the notes say which.
"""

from __future__ import annotations

from qgemm_bench.backends.config_buckets import parse
from qgemm_bench.backends.triton_kernels import split_k_configs, weight_only_configs
from qgemm_bench.backends.triton_kernels.weight_only import FUSED_MAX_M, SPLIT_PATH_MAX_M
from qgemm_bench.configs import store as config_store
from qgemm_bench.operators.formats import INT4
from qgemm_bench.target import Target

PATHS = ("auto", "split", "fused", "dequant")


def weight_only_entry(target: Target, store: config_store.Store | None = None) -> config_store.Entry:
    """The store's weight_only Entry for `target` (its own, the nearest of its
    compute capability, or none), checked (weight_only_configs.check_table):
    pass entry.gpu and entry.table as weight_only_configs.lookup's gpu and doc."""
    return config_store.load(target, weight_only_configs.FAMILY, store, weight_only_configs.check_table)


def split_k_entry(target: Target, store: config_store.Store | None = None) -> config_store.Entry:
    """The store's split_k Entry for `target`, checked (split_k_configs
    .check_table): pass entry.gpu and entry.table as split_k_configs.lookup's."""
    return config_store.load(target, split_k_configs.FAMILY, store, split_k_configs.check_table)


def path_for(m: int, fmt: int | None = None, k: int | None = None, n: int | None = None,
             gpu: str | None = None, fused_above: bool = False, doc: dict | None = None) -> str:
    """The path a weight-only GEMM takes at M (the Helion backend's too): by
    the M bounds (weight_only.SPLIT_PATH_MAX_M, FUSED_MAX_M; fused_above: the
    fused kernel runs above FUSED_MAX_M too, as WeightOnlyDispatch.path
    decides: it takes TMA loads at this shape and the table did not time
    dequantize + cuBLAS faster), except that up to SPLIT_PATH_MAX_M the fused
    kernel (with split-K) runs where GPU `gpu`'s table timed it faster at the
    shape's bucket (weight_only_configs.faster_path; doc: the store entry's
    table, weight_only_entry)."""
    if m <= SPLIT_PATH_MAX_M:
        if fmt is not None and weight_only_configs.faster_path(fmt, m, k, n, gpu, doc) == "fused":
            return "fused"
        return "split"
    return "fused" if m <= FUSED_MAX_M or fused_above else "dequant"


class WeightOnlyDispatch:
    """The path and config of one weight-only GEMM (format fmt, K x N
    weights whose fused kernel runs group `fused_group`: K for unscaled int4)
    at each M on Target `target`, from the store's weight_only entry for it
    (store: default the package's). config: explicit (it decides alone);
    path: auto (by M), split, fused or dequant."""

    def __init__(self, fmt: int, fused_group: int | None, k: int, n: int, target: Target, store=None,
                 config: dict | None = None, path: str = "auto"):
        if path not in PATHS:
            raise ValueError(f"path {path!r}: expected auto, split, fused or dequant")
        self.fmt, self.fused_group, self.k, self.n = fmt, fused_group, k, n
        self.target, self.config, self.forced_path = target, config, path
        self.entry = weight_only_entry(target, store)  # the store entry the table lookups use
        self._configs: dict[tuple[int, str], tuple[dict | None, str]] = {}

    def path(self, m: int) -> str:
        if self.forced_path != "auto":
            return self.forced_path
        k, n, gpu, doc = self.k, self.n, self.entry.gpu, self.entry.table
        fused_above = False
        if m > FUSED_MAX_M:
            from qgemm_bench.backends.triton_kernels.fused_gemm import tma_usable

            # The config's TMA loads where they run (tuned gives way to the
            # entry's pointer config where they do not; an explicit config is
            # checked here), and not where the table timed dequantize + cuBLAS
            # faster at the bucket (an explicit config decides alone).
            c = self.tuned(m, "fused")[0]
            fused_above = bool(c.get("TMA")) and \
                tma_usable(self.fmt, self.fused_group, k, c["BLOCK_K"], self.target, c["BLOCK_M"]) and \
                (self.config is not None or not weight_only_configs.dequant_faster(self.fmt, m, k, n, gpu, doc))
        return path_for(m, self.fmt, k, n, gpu, fused_above, doc)

    def _tma_borrowed(self, m: int, path: str) -> bool:
        """Whether M borrows a fused decode bucket's config (up to
        SPLIT_PATH_MAX_M) at under half the bucket's M: the tma pass times its
        TMA loads at the bucket's own M, and below half of it they lost to the
        pointer loads on the H200 (docs/fused_gemm.md, the tma pass)."""
        near = weight_only_configs.bucket_of(self.fmt, path, m, self.k, self.n, self.entry.gpu, self.entry.table)
        return path == "fused" and near is not None and 2 * m < parse(near)[0] <= SPLIT_PATH_MAX_M

    def tuned(self, m: int, path: str | None = None) -> tuple[dict | None, str]:
        """(config, note) of the split or fused path (default: M's) at M: the
        explicit one, else the store table's for this Target and shape
        (weight_only_configs; int4: the entry's config for this group size
        where it has one), else (None, note) for the split path (the
        kernel autotunes at run time) and fused_gemm.FUSED_CONFIGS for the
        fused one. A fused config with TMA loads where they do not run
        (fused_gemm.tma_usable: int4 GATHER groups, more than two groups to a
        K block in tiles under 256 rows, a GPU before Hopper), or borrowed by
        an M under half its decode bucket's (_tma_borrowed), gives way to
        the pointer-load config of the same entry or bucket, tuned without
        TMA, keeping the entry's WS tiles (where ws_gemm.usable says no,
        the pointer-load config runs). WS tiles of more than twice M's rows
        (a bucket's, borrowed by a smaller M) are left out, said in the
        note. A Target using another GPU's entry (or none of its
        capability) says so in the note."""
        if self.config is not None:
            return self.config, ""
        path = path or self.path(m)
        if (m, path) not in self._configs:
            from qgemm_bench.backends.triton_kernels.fused_gemm import tma_refused, tuned_config

            k, n, gpu, doc = self.k, self.n, self.entry.gpu, self.entry.table
            group = weight_only_configs.group_key(self.fused_group, k) if self.fmt == INT4 else None
            found = weight_only_configs.lookup(self.fmt, path, m, k, n, gpu, doc, group=group)
            if found is None:
                found = (tuned_config(self.fmt, m), "") if path == "fused" else \
                    (None, "triton split config autotuned at run time (no checked-in config for this GPU)")
            c = found[0]
            borrowed = c is not None and c.get("TMA") and self._tma_borrowed(m, path)
            if c is not None and (tma_refused(c, self.fmt, self.fused_group, k, self.target) or borrowed):
                found = weight_only_configs.lookup(self.fmt, path, m, k, n, gpu, doc, tma=False) or \
                    (tuned_config(self.fmt, m, tma=False), "")
                if c.get("WS"):  # the WS kernel's own loads (ws_gemm.usable decides per x; int4 group 32)
                    found = ({**found[0], "WS": c["WS"]}, found[1])
                if borrowed:
                    found = (found[0], "; ".join(filter(None, (
                        found[1], f"the entry's TMA loads not at M = {m} (under half its bucket's M)"))))
            ws = (found[0] or {}).get("WS")
            if ws and 2 * m < ws["BLOCK_M"]:
                # The ws pass times a bucket's WS tiles at its own M; below half their rows they lost to the
                # fused kernel on the H200 (docs/ws_gemm.md).
                found = ({key: v for key, v in found[0].items() if key != "WS"}, "; ".join(filter(None, (
                    found[1], f"the entry's {ws['BLOCK_M']}-row WS tiles not at M = {m} (under half their rows)"))))
            if self.entry.note and not self.target.is_cpu:  # another GPU's entry, or none: say so
                found = (found[0], "; ".join(filter(None, (self.entry.note, found[1]))))
            self._configs[(m, path)] = found
        return self._configs[(m, path)]


def choose_split_k(mode: int, m: int, k: int, n: int, target: Target, store=None) -> tuple[dict, str]:
    """(config, where it came from) of the split-K GEMM in mode (split_k
    .ATOMIC / DETERMINISTIC) at this shape on this Target: the store's
    split_k entry (split_k_entry, then split_k_configs.lookup: exact, nearest of
    the bucket, else the heuristic for target.sms); a GPU using another's
    entry says which."""
    e = split_k_entry(target, store)
    c, source = split_k_configs.lookup(split_k_configs.MODES[mode], m, k, n, target.sms, e.gpu, e.table)
    return c, (f"{e.note}; {source}" if e.note and not target.is_cpu else source)


def make_weight_only(w, scales, tensor_scale, fmt: int, group: int, config: dict | None = None, path: str = "auto",
                     *, target: Target, store=None):
    """A WeightOnlyGemm of these weights whose path and config at each M this
    module decides (WeightOnlyDispatch over the store's entry for target;
    store: default the package's)."""
    from qgemm_bench.backends.triton_kernels.weight_only import WeightOnlyGemm, fused_group

    dispatch = WeightOnlyDispatch(fmt, fused_group(w, scales, group), 2 * w.shape[0], w.shape[1], target, store,
                                  config, path)
    return WeightOnlyGemm(w, scales, tensor_scale, fmt, group, config, path, target=target, dispatch=dispatch)


def make_split_k(a, b, bias, mode: int, config: dict | None = None, autotune: bool | None = None, *,
                 target: Target, store=None):
    """A SplitKGemm (split_k.ATOMIC / DETERMINISTIC) running config, else the
    store's (choose_split_k), unless it autotunes (split_k.autotunes)."""
    from qgemm_bench.backends.triton_kernels.split_k import SplitKGemm, autotunes

    source = "explicit config"
    if config is None and not autotunes(a, config, autotune):
        config, source = choose_split_k(mode, a.shape[0], a.shape[1], b.shape[1], target, store)
    return SplitKGemm(a, b, bias, mode, config, autotune, target=target, source=source)
