#!/usr/bin/env bash
# Session 54 (2026-12-01): what ran, in order, each `bash .gpu/s54<x>.sh` sourcing gpu_common.sh beside this
# file, on nvidia-h200 (one GPU: the x2 kind was not lent), carrying .gpu/commit, the call's script and the
# wheels of ../shared/scripts/fetch_gpu_wheels.sh but transformers' (fbgemm's, re-zipped by gpu_prep.sh, for C
# and D). A at c7fee47 on a fresh machine (with .gpu/mma2.py, below); B at c7fee47 on A's machine; C at c80898f
# (A's store) on a fresh machine with BUDGET=500; D at c8afd38 on a fresh machine with BUDGET=535. Device time: about 1584 of 1800 s.
# ---- .gpu/mma2.py (call A's wrapper: scripts/fused_ab.py with the 8-warp int4 split-K refusal lifted)
: <<'PY'
import os
import runpy
import sys

sys.path.insert(0, os.getcwd())
from qgemm_bench.backends.triton_kernels import fused_gemm  # noqa: E402

fused_gemm.wrong_on_sm90 = lambda fmt, c: False
sys.argv = ["fused_ab.py"] + sys.argv[1:]
runpy.run_path("scripts/fused_ab.py", run_name="__main__")
PY
# ---- call A: bash .gpu/s54a.sh
# Session 54 call A (nvidia-h200, BUDGET s). 1) Experiment: fused_kernel's dot as mma.sync (Triton's
# DISABLE_MMA_V3=1, whole process) against wgmma, at 4 and 8 warps, int4 M = 1 / 16 decode rows (8-warp split-K
# allowed by .gpu/mma2.py; each config checked over 20 calls first). 2) issue 52: the ws pass at M = 128 / 256
# (3512393's 128x128x128 split-2 tile), its check (30 calls), the WS fp64 tests.
BUDGET=${BUDGET:-500} source results/h200/gpu_common.sh
S1="--shape 1,8192,8192 --shape 1,4096,28672 --shape 1,4096,4096"
ab() { local n=$1; shift; local t1=$(date +%s); timeout -k 5 $(( $(left) - 20 )) "$@" > $R/$n.txt 2>&1; echo "$n rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^[a-z0-9]+ [0-9]+x|^ +[0-9.]+ |WRONG|FAILED" $R/$n.txt | cut -c1-150; }
ab mma3_m1 python3 .gpu/mma2.py --op int4_gemm $S1 --config table --config table+num_warps=8 --calls 20 --rounds 3
DISABLE_MMA_V3=1 ab mma2_m1 python3 .gpu/mma2.py --op int4_gemm $S1 --config table --config table+num_warps=8 --config table+num_warps=8-maxnreg --config table+num_warps=8+maxnreg=128 --calls 20 --rounds 3
DISABLE_MMA_V3=1 ab mma2_m16 python3 .gpu/mma2.py --op int4_gemm --shape 16,8192,8192 --config table-WS --config table-WS+num_warps=8 --config table-WS+num_warps=8-maxnreg --calls 20 --rounds 3
ab mma3_m16 python3 .gpu/mma2.py --op int4_gemm --shape 16,8192,8192 --config table --config table-WS --calls 20 --rounds 3
save
pass ws256 ws --ms 128,256
pass check256 check --paths fused --ms 128,256 --calls 30
git diff --stat -- qgemm_bench/configs/h200/ 2>/dev/null | tail -1; save
[ $(left) -gt 60 ] && ( t1=$(date +%s); timeout -k 5 $(( $(left) - 15 )) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_int4_gemm.py tests/test_nvfp4_gemm.py -k ws_kernel_vs_fp64 > $R/pytest_ws_fp64.txt 2>&1; echo "pytest ws fp64 rc $? wall $(( $(date +%s)-t1 )) s: $(tail -1 $R/pytest_ws_fp64.txt)" )
save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: bash .gpu/s54b.sh
# Session 54 call B (nvidia-h200, BUDGET s): issue 54, Llama-3-8B triton int4-g128 batch 1 (committed flags), Inductor
# default against TORCHINDUCTOR_MULTI_KERNEL=1, then default again; then pytest -m gpu tests/test_compiled_decode.py.
BUDGET=${BUDGET:-520} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention flex --pdl --batch 1 --backends triton"
show() { grep -A4 "^| variant  *|   batch |   step ms" $R/$1/report.md | tail -1 | cut -c1-240; }
run1 0 m8_def1 $M8; show m8_def1
( export TORCHINDUCTOR_MULTI_KERNEL=1; run1 0 m8_mk $M8 ); show m8_mk
run1 0 m8_def2 $M8; show m8_def2
NO_STORE_SAVE=1 save
[ $(left) -gt 60 ] && ( t1=$(date +%s); timeout -k 5 $(( $(left) - 15 )) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_compiled_decode.py > $R/pytest_cd.txt 2>&1; echo "pytest compiled_decode rc $? wall $(( $(date +%s)-t1 )) s: $(tail -1 $R/pytest_cd.txt)"; grep -E "^FAILED|^ERROR" $R/pytest_cd.txt | head )
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: bash .gpu/s54c.sh
# Session 54 call C (nvidia-h200, BUDGET s), on the store of call A's ws pass: int4 and NVFP4 default presets with
# every peer (carry fbgemm), 3 rounds each; then scripts/helion_ab.py --entry-only at int4 256x4096x6144 and
# 8x4096x6144 (issue 55's two rows without Helion-generated evidence).
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
run1 0 int4_gemm_s54c --op int4_gemm --repeats 3
save
run1 0 nvfp4_gemm_s54c --op nvfp4_gemm --repeats 3
save
[ $(left) -gt 60 ] && ( t1=$(date +%s); timeout -k 5 $(( $(left) - 10 )) python3 scripts/helion_ab.py --op int4_gemm --m 8,256 --kn 4096,6144 --entry-only > $R/helion_ab_s54c.txt 2>&1; echo "helion_ab rc $? wall $(( $(date +%s)-t1 )) s"; tail -15 $R/helion_ab_s54c.txt | cut -c1-200 )
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: bash .gpu/s54d.sh
# Session 54 call D (nvidia-h200, BUDGET s), at c8afd38 (multi_kernel reductions in compiled steps, the shared
# flex block mask of 59aaa08): Llama-3-8B, the committed run's command, every variant, batch 1 and 16.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention flex --pdl"
run1 0 model_llama-3-8b_s54d $M8 --batch 1,16 --backends bf16,triton,tinygemm,fbgemm
grep -A6 "^| variant  *| batch 1" $R/model_llama-3-8b_s54d/report.md | cut -c1-120
grep -A10 "^| variant  *|   batch |   step ms" $R/model_llama-3-8b_s54d/report.md | cut -c1-260
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
