#!/usr/bin/env bash
# Session 58 (2026-12-01): what ran, in order, each `bash .gpu/s58<x>.sh` sourcing gpu_common.sh beside this file,
# on one nvidia-h200 (fresh for A, B and C; warm from C through E), carrying the whole git-ignored .gpu/ folder
# (commit, scripts, swdbg.py = compile_ab/step_s58/swdbg.py, the wheels of ../shared/scripts/fetch_gpu_wheels.sh
# but transformers'; fbgemm's re-zipped by gpu_prep.sh). A and B at 9dd9a69, C-E at c132bf8 (the SwiGLU prologue
# off by default after A and B: the 8B triton variant with it did not finish).
# Calls: A (no env), B (no env; its PYTHONFAULTHANDLER run printed no stack: C dumps it in-process), C (no env), D with BUDGET=525, E with BUDGET=235. Device time: about 1711 of 1800 s.
# Results: compile_ab/step_s58/ (A's flex_ab and m8_new1 log, B's swdbg and m8_noswiglu, C's stack dump, E's
# m8_norope), model_llama-3-8b/ (D), helion_ab/nows_int4_gemm_m256_4096x6144.txt (D), pytest_gpu/*_s58a_9dd9a69.txt.
# ---- call A: bash .gpu/s58a.sh
# Session 58 call A (nvidia-h200, BUDGET s), prepared in session 57. 1) GPU tests of the decode attention's fused
# rotary + cache write (e072fb2, 442854c) and 128-slot steps (28a2f8f), and of the SwiGLU prologue (3df4d83..1a8bd18):
# test_decode_attention.py on CUDA; -m gpu test_compiled_decode.py, test_fused_norm.py, test_model_fused_norm.py,
# test_swiglu_prologue.py, test_model_swiglu.py; a failure stops the call.
# 2) flex_ab alone (8B batch 1, 16). 3) The 8B triton step with every new default (committed flags).
BUDGET=${BUDGET:-470} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --pdl --attention triton --backends triton --batch 1,16"
show() { grep -A6 "^| variant  *|   batch |   step ms" $R/$1/report.md | grep -E "^\| triton" | cut -c1-200
  grep -A12 "^The rest's largest kernels" $R/$1/report.md | grep -E "^\| triton" | cut -c1-160; }
t1=$(date +%s); timeout -k 5 100 python3 -m pytest -q -p no:cacheprovider tests/test_decode_attention.py > $R/pytest_s58a_attn.txt 2>&1
rc1=$?; echo "pytest decode_attention rc $rc1: $(tail -1 $R/pytest_s58a_attn.txt)"
timeout -k 5 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_compiled_decode.py tests/test_fused_norm.py \
  tests/test_model_fused_norm.py tests/test_swiglu_prologue.py tests/test_model_swiglu.py > $R/pytest_s58a.txt 2>&1
rc=$?; echo "pytest -m gpu rc $rc wall $(( $(date +%s)-t1 )) s: $(tail -1 $R/pytest_s58a.txt)"; grep -hE "^FAILED|^ERROR" $R/pytest_s58a*.txt | head -8
if [ $rc -ne 0 ] || [ $rc1 -ne 0 ]; then NO_STORE_SAVE=1 save; echo "stopped: the GPU tests failed"; return 0 2>/dev/null || exit 0; fi
t1=$(date +%s); timeout -k 5 60 python3 scripts/flex_ab.py --case 1,32,8 --case 16,32,8 --rounds 2 > $R/attn_ab_s58a.txt 2>&1
echo "flex_ab rc $? wall $(( $(date +%s)-t1 )) s"; cut -c1-100 $R/attn_ab_s58a.txt | grep -E "case|triton|default"
run1 0 m8_new1 $M8; show m8_new1
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: bash .gpu/s58b.sh
# Session 58 call B (nvidia-h200, BUDGET s): call A's m8_new1 (8B triton, every new default) ran past 337 s in
# the triton variant (bf16 done: 218.4 / 3265.1 tok/s). 1) swdbg.py: the 8B down_proj with the SwiGLU prologue
# alone at M 1, 16, 64 under a 90 s stack-dump watchdog; 2) the 8B triton batch 1 run again, its stack dumped
# (PYTHONFAULTHANDLER, SIGABRT) at 200 s; 3) m8_noswiglu (--no-swiglu-prologue), batch 1,16.
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --pdl --attention triton --backends triton"
show() { grep -A6 "^| variant  *|   batch |   step ms" $R/$1/report.md | grep -E "^\| triton" | cut -c1-200; }
t1=$(date +%s); timeout -k 5 110 python3 results/h200/compile_ab/step_s58/swdbg.py 1 16 64 > $R/swdbg.txt 2>&1; echo "swdbg rc $? wall $(( $(date +%s)-t1 )) s"
grep -v Warn $R/swdbg.txt | grep -v warn | tail -30 | cut -c1-250
t1=$(date +%s); PYTHONFAULTHANDLER=1 timeout -s ABRT -k 5 200 python3 runner.py $M8 --batch 1 --output-dir $R/m8_hang > $R/m8_hang.log 2>&1
echo "m8_hang rc $? wall $(( $(date +%s)-t1 )) s"; grep -v Warn $R/m8_hang.log | grep -v warn | grep -vE "^\s*$" | tail -45 | cut -c1-200
run1 0 m8_noswiglu $M8 --batch 1,16 --no-swiglu-prologue; show m8_noswiglu
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: bash .gpu/s58d.sh
# Session 58 call D (nvidia-h200, BUDGET s): where the 8B triton step with --swiglu-prologue stops (call A 337 s,
# call B 200 s in the triton variant): runner.py in-process under faulthandler.dump_traceback_later (every
# thread's stack, then exit) at 165 s, batch 1.
BUDGET=${BUDGET:-200} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 190 python3 -c "
import faulthandler, runpy, sys
faulthandler.dump_traceback_later(165, exit=True)
sys.argv = ['runner.py', '--model', 'llama-3-8b', '--quant', 'int4-g128', '--compile', 'default', '--lm-head', '--pdl',
            '--attention', 'triton', '--backends', 'triton', '--batch', '1', '--swiglu-prologue', '--output-dir', '$R/m8_hang2']
runpy.run_path('runner.py', run_name='__main__')" > $R/m8_hang2.log 2>&1
echo "m8_hang2 rc $? wall $(( $(date +%s)-t1 )) s"; grep -v Warn $R/m8_hang2.log | grep -v warn | grep -vE "^\s*$" | head -120 | cut -c1-180
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: bash .gpu/s58c.sh
# Session 58 call C (nvidia-h200, BUDGET s; gpu_prep.sh --fbgemm): Llama-3-8B, the committed run's command
# (--attention triton; session 57's fused rotary, 128-slot steps and SwiGLU prologue by default, or with the
# switches call B found slower in EXTRA), every variant, batch 1, 16.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention triton --pdl ${EXTRA:-}"
run1 0 model_llama-3-8b_s58c $M8 --batch 1,16 --backends bf16,triton,tinygemm,fbgemm
grep -A6 "^| variant  *| batch 1" $R/model_llama-3-8b_s58c/report.md | cut -c1-120
grep -A10 "^| variant  *|   batch |   step ms" $R/model_llama-3-8b_s58c/report.md | cut -c1-260
# issue 55's one row without item-3 evidence: int4 256x4096x6144, helion's entry against triton and triton no WS
if [ $(left) -gt 60 ]; then t1=$(date +%s); timeout -k 5 $(( $(left) - 10 )) python3 scripts/helion_ab.py --op int4_gemm \
  --m 256 --kn 4096,6144 --entry-only --rounds 2 --check-calls 3 > $R/nows_int4_m256_4096x6144.txt 2>&1
  echo "helion_ab rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^ +[0-9]" $R/nows_int4_m256_4096x6144.txt | cut -c1-110; fi
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: bash .gpu/s58e.sh
# Session 58 call E (nvidia-h200, BUDGET s): leave-one-out of the fused rotary + cache write: 8B triton
# int4-g128, committed flags, --no-fused-rope, batch 1,16 (call C's committed run has it on).
BUDGET=${BUDGET:-240} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --pdl --attention triton --backends triton"
run1 0 m8_norope $M8 --batch 1,16 --no-fused-rope
grep -A6 "^| variant  *|   batch |   step ms" $R/m8_norope/report.md | grep -E "^\| (triton|bf16)" | cut -c1-200
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
