"""Which path and config the Helion kernels run at a shape, from the config
store and the Target: the Triton backend's paths (triton_dispatch.path_for,
through weight_only_path) and, for a shape, GPU or kernel without a Helion
config of its own, the Triton backend's configs translated
(table_config, default_config, split_k_default). helion_kernels/tuning.py
then takes the store's Helion config of the shape's bucket where it has one
(helion_ops says when another bucket's may run), through HelionConfigs:
the store is read and written here (HelionConfigs, save), never in
helion_kernels/."""

from __future__ import annotations

from pathlib import Path

from qgemm_bench.backends.helion_kernels.configs import FAMILY
from qgemm_bench.configs import store as config_store


class HelionConfigs:
    """The Helion configs of Target `target` in the store (default: the
    package's): what helion_kernels.tuning.ready looks configs up in and
    saves autotuned ones to."""

    def __init__(self, target, store: config_store.Store | None = None):
        self.target, self.store = target, store

    def lookup(self, kernel: str, m: int, k: int, n: int, path: Path | None = None,
               nearest_ok: bool = True) -> tuple[dict, str]:
        """(config, note) of the kernel at this shape (helion_kernels.configs
        .lookup) in the store's entry for the Target: its own, else the nearest
        of its compute capability (the note names it); `path` replaces the
        store (--helion-configs). ConfigMissing where none serves."""
        from qgemm_bench.backends.config_buckets import read_json
        from qgemm_bench.backends.helion_kernels.configs import ConfigMissing, lookup

        if path is not None:
            if not Path(path).exists():
                raise ConfigMissing(f"--helion-configs {path}: no such file")
            return lookup(kernel, m, k, n, read_json(path), Path(path).name, nearest_ok=nearest_ok)
        e = config_store.load(self.target, FAMILY, self.store)
        if e.gpu is None:
            raise ConfigMissing(f"no checked-in Helion configs for GPU {self.target.name!r} ({e.note}); "
                                "run with --autotune quick (add --save-configs to keep them)")
        return lookup(kernel, m, k, n, e.table, f"{e.gpu}/{FAMILY}.json", e.note, nearest_ok)

    def save_args(self, kernel: str, m: int, k: int, n: int, config: dict, info: dict) -> tuple:
        """save()'s arguments for this Target's entry (held back under
        torchrun: rank 0 saves every rank's)."""
        return (kernel, m, k, n, self.target.name, config, info, self.store)

    def save(self, args: tuple) -> Path:
        """save(*args): the file written."""
        return save(*args)


def save(kernel: str, m: int, k: int, n: int, slug: str, config: dict, info: dict,
         store: config_store.Store | None = None) -> Path:
    """Write (or replace) one bucket's entry of GPU `slug`'s helion file in
    the store, keeping the rest of it (its provenance says it was changed by
    hand or by an autotune: info's "tuned")."""
    from qgemm_bench.backends.config_buckets import bucket, parse

    store = store or config_store.DEFAULT
    doc = store.read(slug, FAMILY) or {"gpu": slug, "kernels": {}}
    doc["kernels"].setdefault(kernel, {})[bucket(m, k, n)] = {"config": config, **info}
    doc["kernels"] = {kn: dict(sorted(v.items(), key=lambda kv: parse(kv[0]))) for kn, v in
                      sorted(doc["kernels"].items())}
    provenance = {key: None for key in config_store.PROVENANCE_KEYS} | doc.get("provenance", {})
    provenance["changed"] = [*provenance.get("changed", []), f"{kernel} {bucket(m, k, n)}: {info.get('tuned')}"]
    return store.write(slug, FAMILY, doc, provenance)


def weight_only_path(m: int, fmt: int, k: int, n: int, target, store=None) -> str:
    """The weight-only path at M on Target `target`: the Triton backend's by
    M and its table's faster path (triton_dispatch.path_for; above
    FUSED_MAX_M always dequant: the Helion fused kernel has no TMA loads)."""
    from qgemm_bench.backends.triton_dispatch import path_for, weight_only_entry

    e = weight_only_entry(target, store)
    return path_for(m, fmt, k, n, e.gpu, doc=e.table)


def helion_config(c: dict, path: str, acc_scale: bool = False) -> dict:
    """A Triton weight-only config of a path as the Helion kernel's
    (configs.from_triton): the split path's with its split_k; the fused
    path's with split_k only where it splits K (SPLIT_K > 1: kernels.fused
    takes it as an argument; without it, the fused configs as before) and,
    with acc_scale (the tuner's candidates: timed before a run uses them),
    its ACC_SCALE as acc_scale."""
    from qgemm_bench.backends.helion_kernels.configs import from_triton

    return from_triton(c, split=path == "split" or c.get("SPLIT_K", 1) > 1, fused=acc_scale and path == "fused")


def table_config(fmt: int, path: str, m: int, k: int, n: int, target, store=None) -> tuple[dict, str] | None:
    """The Triton table's config for this path and shape on this Target (the
    store's weight_only entry for it, triton_dispatch.weight_only_entry; its
    pointer-load config where the entry's has TMA loads, which the Helion
    kernels lack), as a Helion config (helion_config), or None."""
    from qgemm_bench.backends.triton_dispatch import weight_only_entry
    from qgemm_bench.backends.triton_kernels import weight_only_configs

    e = weight_only_entry(target, store)
    found = weight_only_configs.lookup(fmt, path, m, k, n, e.gpu, e.table, tma=False)
    if found is None:
        return None
    note = "; ".join(filter(None, (e.note, found[1])))
    where = f" ({note})" if note else ""
    return helion_config(found[0], path), f"the Triton table's {path} config{where}, untimed in Helion"


def nearest_ok(kernel: str, fmt: int, path: str, m: int, k: int, n: int, target, store=None) -> bool:
    """Whether Helion's config of another bucket may run at this shape
    (tuning.ready's nearest_ok) rather than the Triton table's: where the
    table has no entry of the shape's own bucket and Helion's nearest bucket
    of `kernel` is no farther from it (config_buckets.distance) than the
    table's. A far one is no better for having been timed in Helion: the
    H100's fused entries are all M >= 128, whose 128-row 8-warp tiles would
    run at M = 2 where the table's nearest is M = 1's."""
    from qgemm_bench.backends.config_buckets import bucket, distance, nearest
    from qgemm_bench.backends.triton_dispatch import weight_only_entry
    from qgemm_bench.backends.triton_kernels import weight_only_configs

    e = weight_only_entry(target, store)
    table = weight_only_configs.entries_of(fmt, path, e.gpu, e.table)
    if not table:
        return True
    want = bucket(m, k, n)
    if want in table:
        return False
    h = config_store.load(target, FAMILY, store)
    mine = (h.table.get("kernels") or {}).get(kernel) if h.gpu is not None else None
    if not mine:
        return True  # nothing to borrow: tuning.ready takes the table's (its default)
    return distance(want, nearest(mine, m, k, n)) <= distance(want, nearest(table, m, k, n))


def default_config(fmt: int, path: str, m: int, k: int | None = None, n: int | None = None,
                   target=None, store=None) -> tuple[dict, str]:
    """The Triton backend's config for this path and shape, as a Helion config
    (helion_config), for a shape, GPU or kernel without a checked-in
    Helion one: the Triton table's (table_config), else
    fused_gemm.POINTER_CONFIGS (nearest M bucket) or the first of weight_only's
    curated split configs of M's bucket (its best at K = N = 8192 where it
    was measured)."""
    from qgemm_bench.backends.triton_kernels import fused_gemm, weight_only

    if target is not None and k is not None and (found := table_config(fmt, path, m, k, n, target, store)):
        return found
    if path == "fused":
        return helion_config(fused_gemm.tuned_config(fmt, m, tma=False), path), \
            "Triton's fused config for this M (untimed in Helion)"
    c = weight_only.config_dict(weight_only.split_pool(m)[0])
    return helion_config(c, path), "Triton's first split config for this M range (untimed in Helion)"


def split_k_default(deterministic: bool, m: int, k: int, n: int, target, store=None) -> tuple[dict, str]:
    """The Triton backend's config for this mode and shape
    (triton_dispatch.choose_split_k: the store's table), as a Helion config
    (configs.from_triton) with the same PDL mode and plane sum: the split-K
    kernel's config where the store has no Helion one, on Target `target`.
    Which mode is faster in Helion varies by GPU and shape, so the tuner
    times mode 3 beside it (docs/pdl.md)."""
    from qgemm_bench.backends.helion_kernels.configs import from_triton
    from qgemm_bench.backends.triton_dispatch import choose_split_k
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, DETERMINISTIC
    from qgemm_bench.backends.triton_kernels.split_k_configs import describe

    c, source = choose_split_k(DETERMINISTIC if deterministic else ATOMIC, m, k, n, target, store)
    cfg = {**from_triton(c, split=True, decode=False), "pdl": c.get("PDL", 0), "reduce": c.get("REDUCE", "last")}
    shown = {k: v for k, v in c.items() if k != "PF_ROWS"}  # Helion's prologue prefetches its own rows
    return cfg, f"Triton table config {describe(shown)} ({source}; untimed in Helion)"
