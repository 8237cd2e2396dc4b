#!/usr/bin/env bash
# Session 52 (2026-12-01): what ran, in order, each `source .gpu/s52<x>.sh` sourcing gpu_common.sh beside this
# file, on nvidia-h200-x2, carrying .gpu/commit, the call's script and the wheels of
# ../shared/scripts/fetch_gpu_wheels.sh but transformers' (fbgemm's for A, B and E).
# A at 7bbf883 on a fresh machine (the ws pass at int4 M = 1024 / 2048, K = N = 8192, committed as 8a4c7ba; int4
# m-sweep and default preset on that store; NVFP4 default preset; pytest -m gpu, every file). B at 8a4c7ba on a
# fresh machine (Llama-3-8B, every variant; bf16 and triton under --compile max-autotune). C at 8a4c7ba on a fresh
# machine (default against max-autotune, triton batch 1, both orders). D on C's machine (Llama-3-70B TP2). E at
# 8a4c7ba on a fresh machine (the ws and pdl passes at int4 M = 1024 over the other layers, committed as
# d78b730, and the int4 default preset on that store). Device time: about 1645 of 1800 s.
# ---- call A: source .gpu/s52a.sh
# Session 52 call A (x2, BUDGET s; under the call's limit_s), at HEAD. GPU 1: issue 52's ws pass at int4 M = 1024
# and 2048, K = N = 8192 (WS_POOL[512]'s tiles, m_group included, against each entry's own), its check (30 calls),
# then with the store it leaves the int4 m-sweep (3 rounds) and the int4 default preset, every peer (carry fbgemm).
# GPU 0: the NVFP4 default preset (every peer), then `pytest -m gpu` (4 workers) over every file but
# test_int4_gemm.py / test_weight_only_configs.py, test_compiled_decode.py first (fe8dfaa's 1.1x bound never ran
# on a GPU), then those two files if time is left. The store comes back in the tarball.
BUDGET=${BUDGET:-430} source results/h200/gpu_common.sh
XD=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4"); echo "xdist: ${XD:-none}"
rm -rf /tmp/tree_t && mkdir -p /tmp/tree_t && tar cf - --exclude=./.gpu --exclude=./.git . | tar xf - -C /tmp/tree_t
pt() { local n=$1; shift; local t1=$(date +%s); [ $(left) -gt 40 ] || { echo "skipped pytest $n: $(left) s left"; return; }
  ( cd /tmp/tree_t && CUDA_VISIBLE_DEVICES=0 PYTHONPATH=/tmp/site:/tmp/tree_t timeout -k 5 $(( $(left) - 15 )) \
    python3 -m pytest -m gpu -q -p no:cacheprovider $XD "$@" > $R/pytest_$n.txt 2>&1 ); echo "pytest $n rc $? wall $(( $(date +%s)-t1 )) s: $(tail -1 $R/pytest_$n.txt | cut -c1-160)"
  grep -E "^FAILED|^ERROR" $R/pytest_$n.txt | cut -c1-220 | head; }
( run1 0 nvfp4_gemm_s52a --op nvfp4_gemm; wait
  pt compiled_decode tests/test_compiled_decode.py
  pt rest tests --ignore tests/test_int4_gemm.py --ignore tests/test_weight_only_configs.py --ignore tests/test_compiled_decode.py
  pt int4_woc tests/test_int4_gemm.py tests/test_weight_only_configs.py ) &
( PASS_GPU=1
  pass ws1024 ws --ms 1024,2048 --formats int4 --layers 8192x8192
  pass check1024 check --paths fused --formats int4 --ms 1024,2048 --layers 8192x8192 --calls 30
  git diff --stat -- qgemm_bench/configs/h200/ 2>/dev/null | tail -1
  run1 1 int4_gemm_msweep_s52a --op int4_gemm --shapes m-sweep --repeats 3; wait
  run1 1 int4_gemm_s52a --op int4_gemm; wait ) &
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: source .gpu/s52b.sh
# Session 52 call B (x2, BUDGET s; under the call's limit_s), at the commit of call A's store. GPU 0: Llama-3-8B at
# batch 1 and 16, the committed run's command (every variant), the first run with the step split counting each
# kernel from the previous one's end (16f5551) and flex decoding's merge as attention (d162c50). GPU 1: bf16 and
# triton at batch 1 with --compile max-autotune (never run on a GPU), the same flags otherwise.
BUDGET=${BUDGET:-450} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention flex --pdl"
( run1 0 model_llama-3-8b_s52b $M8 --batch 1,16 --backends bf16,triton,tinygemm,fbgemm; wait
  grep -A6 "^| variant  *| batch 1" $R/model_llama-3-8b_s52b/report.md | cut -c1-120
  grep -A10 "^| variant  *|   batch |   step ms" $R/model_llama-3-8b_s52b/report.md | cut -c1-260 ) &
( run1 1 model_llama-3-8b_maxat_s52b ${M8/--compile default/--compile max-autotune} --batch 1 --backends bf16,triton; wait
  grep -A4 "^| variant  *| batch 1" $R/model_llama-3-8b_maxat_s52b/report.md | cut -c1-120
  grep -A4 "^| variant  *|   batch |   step ms" $R/model_llama-3-8b_maxat_s52b/report.md | cut -c1-260 ) &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: source .gpu/s52c.sh
# Session 52 call C (x2, BUDGET s; under the call's limit_s), at 8a4c7ba: is --compile max-autotune faster than
# default for our int4 step (call B: 380.1 tok/s on GPU 1 against 361.0 on GPU 0, kernel sums 2.631 / 2.664 ms)?
# Llama-3-8B triton int4-g128 at batch 1, the committed flags; each GPU runs both modes, in opposite orders.
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --lm-head --attention flex --pdl --batch 1 --backends triton"
show() { grep -A4 "^| variant  *|   batch |   step ms" $R/$1/report.md | tail -1 | cut -c1-240; }
( run1 0 m8_def_g0 $M8 --compile default; wait; show m8_def_g0
  run1 0 m8_ma_g0 $M8 --compile max-autotune; wait; show m8_ma_g0 ) &
( run1 1 m8_ma_g1 $M8 --compile max-autotune; wait; show m8_ma_g1
  run1 1 m8_def_g1 $M8 --compile default; wait; show m8_def_g1 ) &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: source .gpu/s52d.sh
# Session 52 call D (x2, BUDGET s; under the call's limit_s), at 8a4c7ba: Llama-3-70B TP2 at batch 1, bf16 and
# triton int4-g128, flex attention (the committed run's command): the first 70B run whose step split counts each
# kernel from the previous one's end (16f5551) and flex decoding's merge as attention (d162c50).
BUDGET=${BUDGET:-430} source results/h200/gpu_common.sh
M70="--model llama-3-70b --quant int4-g128 --batch 1 --compile default --backends bf16,triton --lm-head --attention flex --pdl"
t1=$(date +%s); timeout -k 10 $(( $(left) - 12 )) $RUN runner.py $M70 --output-dir $R/m70_s52d > $R/m70_s52d.log 2>&1
echo "70B TP2 rc $? wall $(( $(date +%s)-t1 )) s"
grep -E "^\| (bf16|triton)" $R/m70_s52d/report.md | head -4 | cut -c1-250
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: source .gpu/s52e.sh
# Session 52 call E (x2, BUDGET s; under the call's limit_s), at 8a4c7ba: issue 52's int4 default-preset rows
# behind a peer (call A: M = 1024 at five layers within 0.6-3.1% of fbgemm, 256x4096x4096 / 6144 behind cuBLAS):
# the ws pass at int4 M = 1024 (every other layer) and M = 256 (K = 4096, N = 4096 / 6144), then the pdl pass at
# M = 1024 over the layers, the check (30 calls), then the int4 default preset, every peer (carry fbgemm).
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
L=4096x4096,4096x6144,4096x28672,14336x4096,8192x10240,8192x57344,28672x8192
pass ws_m1024 ws --ms 1024 --formats int4 --layers $L
pass ws_m256 ws --ms 256 --formats int4 --layers 4096x4096,4096x6144
pass pdl_m1024 pdl --ms 1024 --formats int4 --layers $L
pass check_e check --paths fused --formats int4 --ms 256,1024 --layers $L --calls 30
git diff --stat -- qgemm_bench/configs/h200/ 2>/dev/null | tail -1; save
run1 0 int4_gemm_s52e --op int4_gemm; wait
save; echo "all wall $(( $(date +%s)-t0 )) s"
