"""Session 43 call B: why Helion rot was not bit for bit the plain decode in its GPU test (N = 200):
per test tile and M 7 / 100, plain, plain again, rot, rot again and the non-PTX decode against fp64,
and where rot and plain differ (output: nvfp4_rot_diag_n200.txt). Run from the tree root with
PYTHONPATH=$PWD; on the CPU (the interpreter) it runs one tile. Before d87b4d1: rot is now dropped at N = 200."""
import torch

from qgemm_bench.backends import helion_ops
from qgemm_bench.backends.helion_kernels import tuning
from qgemm_bench.operators import nvfp4_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.operators.formats import NVFP4
from tests.support import DEV, DT, case, fp64

tiles = [(([64, 16], 128, 4), 1), (([64, 16], 128, 4), 2), (([128, 16], 256, 8), 2), (([128, 128], 128, 8), 1)]
for ((bn, bm), bk, warps), split in (tiles[:1] if DEV.type == "cpu" else tiles):
    for m in ((7,) if DEV.type == "cpu" else (7, 100)):
        cfg = {"block_sizes": [bn, bm], "block_k": bk, "num_warps": warps, "num_stages": 3, "split_k": split}
        inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, (m, 1280, 200), DT, DEV), 1234)
        ref = fp64(inputs.x, nvfp4_gemm.dequantize(inputs))
        outs = {}
        for name, extra in (("plain", {"rot": False}), ("plain2", {"rot": False}), ("rot", {"rot": True}),
                            ("rot2", {"rot": True}), ("noasm", {"decode_asm": False})):
            with tuning.options(explicit={**cfg, **extra}):
                g = helion_ops.WeightOnly("nvfp4_gemm", inputs.w, inputs.block_scales.contiguous(),
                                          inputs.tensor_scale, NVFP4, None)
                path = g.path(m)
                outs[name] = g(inputs.x).float()
        p, r = outs["plain"], outs["rot"]
        d = (p != r)
        line = (f"tile {bn}x{bm} bk {bk} w{warps} split {split} M {m} path {path}: "
                + " ".join(f"{k} err {rel_error(v, ref):.2e}" for k, v in outs.items())
                + f" | plain==plain2 {torch.equal(p, outs['plain2'])} rot==rot2 {torch.equal(r, outs['rot2'])}"
                + f" | rot!=plain at {int(d.sum())} of {d.numel()}, max |diff| {float((p - r).abs().max()):.3g}")
        if d.any():
            rows = d.any(1).nonzero().flatten().tolist()
            cols = d.any(0).nonzero().flatten().tolist()
            line += (f" rows {rows[:8]}{'...' if len(rows) > 8 else ''}"
                     f" cols {cols[:12]}{'...' if len(cols) > 12 else ''} ({len(cols)})")
        print(line, flush=True)
