#!/usr/bin/env bash
# Session 56 (2026-12-01): what ran, in order, each `bash .gpu/s56<x>.sh` sourcing gpu_common.sh beside this
# file, on one nvidia-h200 held warm through all five calls, carrying the whole git-ignored .gpu/ folder (commit,
# scripts, the wheels of ../shared/scripts/fetch_gpu_wheels.sh but transformers'; fbgemm's, re-zipped by
# gpu_prep.sh, from call D). A-C at 2ff691d; E on 2ff691d with 444b2e2 reverted and the prefill test mended (as
# committed in 87d59f6 and 8e1a1c0), .gpu/commit still naming 2ff691d; D at 87d59f6's tree, which its metadata
# named 88fd058 (the same tree before the revert's message was amended; the committed copy says 87d59f6).
# Device time: about 1679 of 1800 s.
# ---- call A: bash .gpu/s56a.sh
# Session 56 call A (nvidia-h200, BUDGET s), prepared in session 55 at f87b02d. 1) GPU tests: the decode step and
# the fused norms (-m gpu: 583676d no FX graph cache with combo + multi kernels, which session 55's calls G/H failed
# without; fb0b132 the prefill's CUDA graph; 257e4de --attention triton in the compiled graph test) and
# tests/test_decode_attention.py on CUDA (bf16; not gpu-marked); a failure stops the call. 2) The attention alone:
# scripts/flex_ab.py, flex against ours, 8B batch 1 / 16 and a 70B TP2 rank.
BUDGET=${BUDGET:-400} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider tests/test_decode_attention.py > $R/pytest_s56a_attn.txt 2>&1
rc1=$?; echo "pytest decode_attention rc $rc1: $(tail -1 $R/pytest_s56a_attn.txt)"
timeout -k 5 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_compiled_decode.py tests/test_model_fused_norm.py tests/test_fused_norm.py tests/test_model.py > $R/pytest_s56a.txt 2>&1
rc=$?; echo "pytest -m gpu rc $rc wall $(( $(date +%s)-t1 )) s: $(tail -1 $R/pytest_s56a.txt)"; grep -hE "^FAILED|^ERROR" $R/pytest_s56a*.txt | head -8
if [ $rc -ne 0 ] || [ $rc1 -ne 0 ]; then NO_STORE_SAVE=1 save; echo "stopped: the GPU tests failed"; return 0 2>/dev/null || exit 0; fi
t1=$(date +%s); timeout -k 5 $(( $(left) - 20 )) python3 scripts/flex_ab.py --case 1,32,8 --case 16,32,8 --case 1,32,4 --split 8,16,32 > $R/attn_ab_s56a.txt 2>&1
echo "flex_ab rc $? wall $(( $(date +%s)-t1 )) s"; cut -c1-120 $R/attn_ab_s56a.txt
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: bash .gpu/s56b.sh
# Session 56 call B (nvidia-h200, BUDGET s): issue 54, 8B triton int4-g128 with the committed flags but the
# attention, --attention flex against triton (257e4de, our split-KV kernel), batch 1,16, sandwiched flex / triton /
# flex on one host.
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --pdl --backends triton --batch 1,16"
show() { grep -A6 "^| variant  *|   batch |   step ms" $R/$1/report.md | grep -E "^\| (bf16|triton)" | cut -c1-200; }
run1 0 m8_flex1 $M8 --attention flex; show m8_flex1
run1 0 m8_tri $M8 --attention triton; show m8_tri
run1 0 m8_flex2 $M8 --attention flex; show m8_flex2
grep -h "prefill\|Prefill" $R/m8_tri/report.md | head -2 | cut -c1-300
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: ATTN=flex bash .gpu/s56c.sh
# Session 56 call C (nvidia-h200, BUDGET s): 8B triton int4-g128, the split-K parts read before the counter
# (444b2e2) against a copy of the tree with split_k_parts.py as at 583676d (read after it): head / old / head, with
# whichever attention call B found faster (ATTN, default flex).
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
rm -rf /tmp/old && mkdir /tmp/old && cp -r qgemm_bench runner.py /tmp/old/ && cp .gpu/split_k_parts_s55.py /tmp/old/qgemm_bench/backends/triton_kernels/split_k_parts.py
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention ${ATTN:-flex} --pdl --backends triton --batch 1,16"
show() { grep -A6 "^| variant  *|   batch |   step ms" $R/$1/report.md | grep -E "^\| triton" | cut -c1-200; }
run1 0 m8_head1 $M8; show m8_head1
( cd /tmp/old && t1=$(date +%s); timeout -k 10 $(( $(left) - 5 )) env PYTHONPATH=/tmp/site:/tmp/old QGEMM_GIT_COMMIT="$QGEMM_GIT_COMMIT+split_k_parts@583676d" python3 runner.py $M8 --output-dir $R/m8_old > $R/m8_old.log 2>&1; echo "m8_old rc $? wall $(( $(date +%s)-t1 )) s" ); show m8_old
run1 0 m8_head2 $M8; show m8_head2
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: BUDGET=480 bash .gpu/s56e.sh
# Session 56 call E: the GPU tests again with the prefill test's unpacking mended; 444b2e2 reverted; then flex_ab.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_compiled_decode.py tests/test_model_fused_norm.py tests/test_fused_norm.py tests/test_model.py > $R/pytest_s56e.txt 2>&1
rc=$?; echo "pytest -m gpu rc $rc wall $(( $(date +%s)-t1 )) s: $(tail -1 $R/pytest_s56e.txt)"; grep -hE "^FAILED|^ERROR" $R/pytest_s56e.txt | head -8
t1=$(date +%s); timeout -k 5 $(( $(left) - 20 )) python3 scripts/flex_ab.py --case 1,32,8 --case 16,32,8 --case 1,32,4 --split 8,16,32 > $R/attn_ab_s56e.txt 2>&1
echo "flex_ab rc $? wall $(( $(date +%s)-t1 )) s"; cut -c1-120 $R/attn_ab_s56e.txt
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: ATTN=flex BUDGET=440 bash .gpu/s56d.sh
# Session 56 call D (nvidia-h200, BUDGET s), at HEAD (the prefill timed as a CUDA graph; the attention call B chose):
# Llama-3-8B, the committed run's command, every variant, batch 1 and 16.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention ${ATTN:-flex} --pdl"
run1 0 model_llama-3-8b_s56d $M8 --batch 1,16 --backends bf16,triton,tinygemm,fbgemm
grep -A6 "^| variant  *| batch 1" $R/model_llama-3-8b_s56d/report.md | cut -c1-120
grep -A10 "^| variant  *|   batch |   step ms" $R/model_llama-3-8b_s56d/report.md | cut -c1-260
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
