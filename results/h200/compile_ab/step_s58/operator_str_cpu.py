"""Where the SwiGLU prologue's compile went (session 58, c_m8_hang2.log): run on CPU under torch 2.11
(the GPU machine's version, its CPU part; this machine's Triton interpreter), it times each call of
Inductor's exc.OperatorIssue.operator_str, which graph.py's implicit fallback evaluates for its log line
whether or not the line is logged (lazy from torch 2.13), and prints the string's length:

  TRITON_INTERPRET=1 python operator_str_cpu.py runner.py --model tiny --layers N --device cpu \
      --dtype float16 --quant int4-g64 --backends triton --compile default --swiglu-prologue --fused-norms \
      --attention triton --fused-rope --batch 1 --no-step-split --lm-head --output-dir DIR

At 2 layers qgemm.linear_swiglu's string was 17.6M characters (2.3 s), at 3 layers 447M (79 s): its one
call, the last layer's down_proj, takes gate_up's output at the end of our ops' chain through every layer.
ops.inductor_fallbacks registers the ops' lowerings first, so the branch never runs (a helper's run at 3
layers: no operator_str call)."""
import runpy
import sys
import time

import torch._inductor.exc as exc

orig = exc.OperatorIssue.operator_str


def timed(target, args, kwargs):
    t = time.time()
    s = orig(target, args, kwargs)
    print(f"[operator_str] {target}: {len(s)} chars, {time.time() - t:.3f} s", file=sys.stderr, flush=True)
    return s


exc.OperatorIssue.operator_str = staticmethod(timed)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
