"""Session 58 call B: the 8B down_proj (K 14336, N 4096, int4 g128) with the SwiGLU prologue at decode M,
each call under a watchdog that dumps every thread's stack (call A's m8_new1 had not finished). Its times are
do_bench of eager Python calls, ~150-240 us where the int4 presets time this GEMM's kernel near 10 us: most
likely the dispatch's host work per call, not kernel times. What it shows is that the prologue ran at the
8B shape and matched silu_mul first. On the GPU machine, in the tree's root:
python3 results/h200/compile_ab/step_s58/swdbg.py 1 16 64"""
import faulthandler
import sys
import time

import torch

from qgemm_bench.backends.triton_dispatch import make_weight_only
from qgemm_bench.backends.triton_kernels.fused_gemm import silu_mul
from qgemm_bench.operators import int4_gemm
from qgemm_bench.operators.formats import INT4
from qgemm_bench.target import of
from qgemm_bench.types import Case, Shape

dev = "cuda" if torch.cuda.is_available() else "cpu"
dt = torch.bfloat16 if dev == "cuda" else torch.float16
t = of(torch.device(dev))
K, N = 14336, 4096
inputs = int4_gemm.make_inputs(Case(int4_gemm.NAME, Shape(1, K, N), dt, dev, int4_gemm.Settings(group_size=128)), 0)
g = make_weight_only(inputs.w, inputs.scales, None, INT4, 128, target=t)
for m in [int(a) for a in sys.argv[1:]] or [1, 2, 4, 8, 16, 32, 64]:
    c = g.tuned(m)
    print(f"M {m}: path {g.path(m)} config {c}", flush=True)
    if dev != "cuda":
        continue
    h = torch.randn(m, 2 * K, device=dev, dtype=dt)
    faulthandler.dump_traceback_later(90, exit=True)
    t1 = time.time()
    y = g(h, swiglu=True)
    torch.cuda.synchronize()
    t2 = time.time()
    ref = g(silu_mul(h))
    torch.cuda.synchronize()
    faulthandler.cancel_dump_traceback_later()
    err = ((y.double() - ref.double()).norm() / ref.double().norm()).item()
    from triton.testing import do_bench
    a = do_bench(lambda h=h: g(h, swiglu=True), warmup=50, rep=200) * 1e3
    b = do_bench(lambda h=h: g(silu_mul(h)), warmup=50, rep=200) * 1e3
    print(f"  first call {t2 - t1:.1f} s, rel err vs silu_mul first {err:.2e}; prologue {a:.2f} us, "
          f"silu_mul + gemm {b:.2f} us", flush=True)
