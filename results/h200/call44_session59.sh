#!/usr/bin/env bash
# Session 59 (2026-12-01): what ran, in order, each `bash .gpu/s59<x>.sh` sourcing gpu_common.sh beside this file,
# on one nvidia-h200 (fresh for A, C and E, warm for B), carrying the whole git-ignored .gpu/ folder (commit,
# scripts, the wheels of ../shared/scripts/fetch_gpu_wheels.sh but transformers'; fbgemm's re-zipped by
# gpu_prep.sh). A and B at 1763f0d, C at 64bc5f9 (the SwiGLU epilogue on by default after A and B), E at 96dd552.
# Calls: A (no env), B with BUDGET=430, C (no env), E with BUDGET=270 (its third set cut at the budget; a
# fourth call for that set found too little device time to start). Device time: about 1668 of 1800 s.
# Results: compile_ab/step_s59/ (A's m8_epi1 and m8_noepi, B's m8_epi2 and m8_prologue, C's m8_nvfp4_*),
# model_llama-3-8b/ (C), pytest_gpu/swiglu_epilogue_*_s59a_1763f0d.txt (A), pytest_gpu/*_s59e_96dd552.txt (E).

# ---- call A: bash .gpu/s59a.sh
s59a() {
# Session 59 call A (nvidia-h200, BUDGET s), prepared in session 58. 1) GPU tests of the SwiGLU epilogue
# (ced9c1a, 984e1b8, 8602b0e): tests/test_swiglu_epilogue.py on CUDA, then -m gpu (the store gate_up configs, 10 calls)
# tests/test_model_swiglu_epilogue.py; a failure stops the call. 2) 8B triton int4-g128, committed flags,
# batch 1,16, one host: --swiglu-epilogue, then without (call B runs it with again).
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --pdl --attention triton --backends triton --batch 1,16"
show() { grep -A6 "^| variant  *|   batch |   step ms" $R/$1/report.md | grep -E "^\| (triton|bf16)" | cut -c1-200
  grep -A12 "^The rest's largest kernels" $R/$1/report.md | grep -E "^\| triton" | head -3 | cut -c1-160; }
t1=$(date +%s); timeout -k 5 120 python3 -m pytest -q -p no:cacheprovider tests/test_swiglu_epilogue.py > $R/pytest_s59a_epi.txt 2>&1
rc1=$?; echo "pytest swiglu_epilogue rc $rc1: $(tail -1 $R/pytest_s59a_epi.txt)"
timeout -k 5 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_model_swiglu_epilogue.py tests/test_swiglu_epilogue.py > $R/pytest_s59a.txt 2>&1
rc=$?; echo "pytest -m gpu rc $rc wall $(( $(date +%s)-t1 )) s: $(tail -1 $R/pytest_s59a.txt)"; grep -hE "^FAILED|^ERROR" $R/pytest_s59a*.txt | head -8
if [ $rc -ne 0 ] || [ $rc1 -ne 0 ]; then NO_STORE_SAVE=1 save; echo "stopped: the GPU tests failed"; return 0 2>/dev/null || exit 0; fi
run1 0 m8_epi1 $M8 --swiglu-epilogue; show m8_epi1
run1 0 m8_noepi $M8; show m8_noepi
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
}

# ---- call B: bash .gpu/s59b.sh
s59b() {
# Session 59 call B (nvidia-h200, BUDGET s): 1) m8_epi2 (the epilogue's second run, after call A's pair);
# 2) the SwiGLU prologue's 8B step again now that bc3d2c2 registers our ops' Inductor fallbacks before the
# compile (session 58: it never finished compiling; cause: torch 2.11's eager operator_str); under
# outer_stack.py, which prints the outermost 60 frames if it is still running at 260 s.
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --pdl --attention triton --backends triton"
run1 0 m8_epi2 $M8 --batch 1,16 --swiglu-epilogue
grep -A6 "^| variant  *|   batch |   step ms" $R/m8_epi2/report.md | grep -E "^\| (triton|bf16)" | cut -c1-200
t1=$(date +%s); timeout -k 5 $(( $(left) - 10 )) python3 .gpu/outer_stack.py 260 runner.py $M8 --batch 1,16 \
  --swiglu-prologue --output-dir $R/m8_prologue > $R/m8_prologue.log 2>&1
echo "m8_prologue rc $? wall $(( $(date +%s)-t1 )) s"; grep -A70 "=== main thread" $R/m8_prologue.log | cut -c1-200
grep -A6 "^| variant  *|   batch |   step ms" $R/m8_prologue/report.md 2>/dev/null | grep -E "^\| (triton|bf16)" | cut -c1-200
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
}

# ---- call C: bash .gpu/s59c.sh
s59c() {
# Session 59 call C (nvidia-h200, BUDGET s; gpu_prep.sh --fbgemm): Llama-3-8B, the committed run's command with
# the SwiGLU epilogue on by default (calls A/B: b1 2.263/2.264 ms with it, 2.301 without, 2.654 with the prologue),
# every variant, batch 1, 16; then, with what is left, NVFP4 triton b1,16 with the epilogue and without.
BUDGET=${BUDGET:-590} source results/h200/gpu_common.sh
M8="--model llama-3-8b --compile default --lm-head --attention triton --pdl"
run1 0 model_llama-3-8b_s59c $M8 --quant int4-g128 --batch 1,16 --backends bf16,triton,tinygemm,fbgemm
grep -A6 "^| variant  *| batch 1" $R/model_llama-3-8b_s59c/report.md | cut -c1-120
grep -A10 "^| variant  *|   batch |   step ms" $R/model_llama-3-8b_s59c/report.md | cut -c1-200
for v in epi noepi; do [ $(left) -gt 150 ] || break; f=; [ $v = noepi ] && f=--no-swiglu-epilogue
  run1 0 m8_nvfp4_$v $M8 --quant nvfp4 --backends triton --batch 1,16 $f
  grep -A6 "^| variant  *|   batch |   step ms" $R/m8_nvfp4_$v/report.md | grep -E "^\| triton" | cut -c1-200; done
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
}

# ---- call E: BUDGET=270 bash .gpu/s59e.sh
s59e() {
# Session 59 call E (nvidia-h200, BUDGET s), at the session's last commit: `pytest -m gpu` over every test file
# (4 xdist workers if the machine has xdist), in three sets as session 52's call A: the model and decode files
# first (the most changed since: fused norms, rotary, attention, SwiGLU epilogue by default), then the rest but
# test_int4_gemm.py / test_weight_only_configs.py, then those two. Issue 52 item 5: -m gpu passes on the H200.
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
XD=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4"); echo "xdist: ${XD:-none}"
rm -rf /tmp/tree_t && mkdir -p /tmp/tree_t && tar cf - --exclude=./.gpu --exclude=./.git . | tar xf - -C /tmp/tree_t
C=$(cat .gpu/commit)
pt() { local n=$1; shift; local t1=$(date +%s); [ $(left) -gt 40 ] || { echo "skipped pytest $n: $(left) s left"; return; }
  ( cd /tmp/tree_t && PYTHONPATH=/tmp/site:/tmp/tree_t timeout -k 5 $(( $(left) - 15 )) \
    python3 -m pytest -m gpu -q -p no:cacheprovider $XD "$@" > $R/pytest_${n}_s59e_$C.txt 2>&1 )
  echo "pytest $n rc $? wall $(( $(date +%s)-t1 )) s: $(tail -n 1 $R/pytest_${n}_s59e_$C.txt | cut -c1-160)"
  grep -E "^FAILED|^ERROR" $R/pytest_${n}_s59e_$C.txt | cut -c1-220 | head; }
MODEL=$(cd /tmp/tree_t && ls tests/test_model*.py tests/test_compiled_decode.py tests/test_decode*.py tests/test_swiglu*.py tests/test_fused_norm*.py 2>/dev/null | sort -u)
pt model $MODEL
IGN=$(for f in $MODEL tests/test_int4_gemm.py tests/test_weight_only_configs.py; do echo --ignore $f; done)
pt rest tests $IGN
pt int4_woc tests/test_int4_gemm.py tests/test_weight_only_configs.py
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
}
