#!/usr/bin/env python3
"""No GPU: for every row of the committed H200 weight-only baselines where
helion / triton is above 1.2, the Helion config the store gives that shape
and the Triton source Helion generates for it (scripts/helion_sass.py,
compiled for sm_90 with the Triton on PYTHONPATH), one PREFIX.py.txt per config
beside this file and one line per row in summary.txt (issue 55, item 3:
the config and its generated Triton; docs/helion.md has the timings).

  PYTHONPATH=/tmp/t36:$PWD python3 results/h200/helion_generated/generate.py   # Triton 3.6, the GPU's
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

BASELINES = ("int4_gemm", "nvfp4_gemm", "int4_gemm_msweep", "nvfp4_gemm_msweep", "int4_gemm_decode",
             "nvfp4_gemm_decode")
FLAGS = {"acc_scale": "--acc", "frag": "--frag", "bf16_scales": "--bf16-scales", "rot": "--rot", "tiled": "--tiled"}


def rows_above(limit: float = 1.2) -> list[tuple[str, int, int, int, float, str]]:
    out = {}
    for name in BASELINES:
        d = pd.read_csv(ROOT / "results" / "h200" / name / "results.csv")
        d = d[d.status == "ok"].pivot_table(index=["M", "K", "N"], columns="backend", values="p50_us")
        ratio = d.helion / d.triton
        fmt = name.split("_")[0]
        for (m, k, n), r in ratio[ratio > limit].items():
            key = (fmt, int(m), int(k), int(n))
            out.setdefault(key, (r, []))[1].append(f"{name} {r:.2f}")
    return [(*key, r, ", ".join(where)) for key, (r, where) in sorted(out.items())]


def sass_args(fmt: str, m: int, k: int, n: int, cfg: dict, prefix: Path) -> list[str]:
    bn, bm = cfg["block_sizes"]
    args = ["--fmt", fmt, "--m", str(m), "--k", str(k), "--n", str(n), "--block-sizes", f"{bn},{bm}",
            "--block-k", str(cfg["block_k"]), "--split", str(cfg.get("split_k", 1)),
            "--warps", str(cfg["num_warps"]), "--stages", str(cfg["num_stages"]), "--out", str(prefix)]
    args += [flag for key, flag in FLAGS.items() if cfg.get(key)]
    return args + (["--tma"] if cfg.get("tma") else [])


def main() -> int:
    import helion_sass

    from qgemm_bench.backends.helion_dispatch import HelionConfigs, weight_only_path
    from qgemm_bench.configs import store

    target = store.entries()["h200"]
    configs = HelionConfigs(target)
    lines = ["# helion / triton > 1.2 in the committed H200 baselines: the store's Helion config, its generated "
             "Triton (PREFIX.py.txt) and its sm_90 main loop (helion_sass.py)"]
    for fmt, m, k, n, _ratio, where in rows_above():
        path = weight_only_path(m, 0 if fmt == "int4" else 1, k, n, target)
        if path != "fused":  # helion_sass.py builds kernels.fused only
            lines.append(f"{fmt} {m}x{k}x{n} ({where}): the {path} path, not built here")
            print(lines[-1], flush=True)
            continue
        cfg, note = configs.lookup(f"{fmt}_gemm_fused", m, k, n)
        prefix = HERE / f"{fmt}_m{m}_{k}x{n}"
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            rc = helion_sass.main(sass_args(fmt, m, k, n, cfg, prefix))
        for ext in ("ttgir", "ptx", "sass"):  # PREFIX.py is what item 3 asks for; the rest is rebuilt on demand
            Path(f"{prefix}.{ext}").unlink(missing_ok=True)
        Path(f"{prefix}.py").replace(f"{prefix}.py.txt")  # generated code: kept out of the linter and importers
        extra = {key: v for key, v in cfg.items() if key in ("pdl", "indexing")}
        lines.append(f"{fmt} {m}x{k}x{n} ({where}): {cfg} [{note}] rc {rc}; not in the compile: {extra}")
        lines += ["    " + x for x in buf.getvalue().strip().splitlines()]
        print(lines[-1 - len(buf.getvalue().strip().splitlines())], flush=True)
    (HERE / "summary.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
