#!/usr/bin/env bash
# Session 50 (2026-11-30): what ran, in order, each `source .gpu/s50<x>.sh` sourcing gpu_common.sh beside this
# file, on nvidia-h200-x2, carrying .gpu/commit, the call's script and the wheels of
# ../shared/scripts/fetch_gpu_wheels.sh but transformers' (fbgemm's for C only).
# A at 1156f6f on a fresh machine (Llama-3-70B TP2 with the attention --attention names, new / old (1004425's
# tree, carrying .gpu/tree_1004425.tgz = `git archive 1004425 qgemm_bench runner.py`) / new: new1 ran, old1 was
# stopped by its timeout after its bf16 row, new2 had no time left); B on A's machine (M = 4: the table's config
# against M1's entry's at the decode layers); C at bbfd79e on a fresh machine (the decode presets and m-sweeps
# after M = 4's tie went to M1); D at 41391c9 on a fresh machine (A's new run again, cold then warm: the warm one
# was stopped by its timeout after its bf16 row); E at ce6496f on a fresh nvidia-h200 (scripts/flex_ab.py).
# Device time: about 1660 of 1800 s.
# ---- call A: source .gpu/s50a.sh
# Session 50 call A (x2, BUDGET s; keep BUDGET under the call's limit_s, start included): Llama-3-70B TP2 at batch
# 1 with the attention --attention names (3fc46dc; every earlier TP run's attention layers kept transformers'
# sdpa: its repeat_kv copy, 160 kernels and 1.09 ms a step, then cuDNN SDPA), alternating the tree (new) and
# 1004425's qgemm_bench and runner.py (old: .gpu/tree_1004425.tgz, `git archive 1004425 qgemm_bench runner.py`).
BUDGET=${BUDGET:-500} source results/h200/gpu_common.sh
rm -rf /tmp/t_old && mkdir -p /tmp/t_old && tar xzf .gpu/tree_1004425.tgz -C /tmp/t_old
M70="--model llama-3-70b --quant int4-g128 --batch 1 --compile default --backends bf16,triton --lm-head --attention flex --pdl"
for run in new1 old1 new2; do
  [ $(left) -lt 100 ] && { echo "skipped $run: $(left) s left"; continue; }
  d=$PWD; [ ${run%?} = old ] && d=/tmp/t_old
  t1=$(date +%s); ( cd $d && PYTHONPATH=/tmp/site:$d timeout -k 10 $(( $(left) - 12 )) $RUN runner.py $M70 --output-dir $R/m70_$run \
    > $R/m70_$run.log 2>&1 )
  echo "70B TP2 $run rc $? wall $(( $(date +%s)-t1 )) s: $(grep -E '^\| (bf16|triton int4-g128) ' $R/m70_$run/report.md | head -4 | tr -s ' ' | cut -c1-150 | tr '\n' ' ')"
  NO_STORE_SAVE=1 save
done
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: source .gpu/s50b.sh
# Session 50 call B (x2, BUDGET s; under the call's limit_s): M = 4 runs M = 16's bucket (config_buckets.nearest's
# tie goes to the smaller key string), and below half that bucket's M its TMA loads and WS tiles are dropped
# (_tma_borrowed, the WS rows rule): int4 4x8192x8192 16.1 us against 15.1 at M = 2 and 8 (session 49's
# m-sweep), NVFP4 18.3 against 17.2 / 17.0. Here, at each decode layer and M = 4: the table's config against
# M = 1's entry's (what a tie going to M1 would run), each checked over 10 calls, 3 rounds. int4 on GPU 0,
# NVFP4 on GPU 1.
BUDGET=${BUDGET:-300} source results/h200/gpu_common.sh
m1() { python3 -c "
import json,sys; d=json.load(open('qgemm_bench/configs/h200/weight_only.json'))['kernels']['$1_gemm_fused']
print(json.dumps(d['M1_K$2_N$3']['config']))"; }
ab() { local g=$1 fmt=$2; for kn in 4096x6144 4096x4096 4096x28672 14336x4096 8192x10240 8192x8192 8192x57344 28672x8192; do
    k=${kn%x*}; n=${kn#*x}; [ $(left) -lt 20 ] && { echo "skipped $fmt $kn"; continue; }
    CUDA_VISIBLE_DEVICES=$g timeout -k 5 $(( $(left) - 10 )) python3 scripts/fused_ab.py --op ${fmt}_gemm --shape 4,$k,$n \
      --config table --config "$(m1 $fmt $k $n)" --calls 10 --rounds 3 > $R/m4_${fmt}_$kn.txt 2>&1
    echo "$fmt 4x$kn rc $?: $(grep -E '^ +[0-9.]+ ' $R/m4_${fmt}_$kn.txt | cut -c1-120 | tr '\n' '|')"; done; }
ab 0 int4 > $R/m4_int4.log 2>&1 & ab 1 nvfp4 > $R/m4_nvfp4.log 2>&1 & wait
cat $R/m4_int4.log $R/m4_nvfp4.log; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: source .gpu/s50c.sh
# Session 50 call C (x2, BUDGET s; under the call's limit_s), at the commit sending M = 4 to the M1 bucket: GPU 0
# the int4 decode preset then the int4 m-sweep (3 rounds); GPU 1 the NVFP4 decode preset then the NVFP4 m-sweep
# (3 rounds); every peer (carry fbgemm's wheel too).
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
( run1 0 int4_gemm_decode --op int4_gemm --shapes decode; wait; run1 0 int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3; wait ) &
( run1 1 nvfp4_gemm_decode --op nvfp4_gemm --shapes decode; wait; run1 1 nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3; wait ) &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: source .gpu/s50d.sh
# Session 50 call D (x2, BUDGET s; under the call's limit_s), on a fresh host: call A's new run again (Llama-3-70B
# TP2 at batch 1, bf16 and triton int4-g128, flex attention running), cold caches then warm, to see 1.89x hold on
# another host.
BUDGET=${BUDGET:-480} source results/h200/gpu_common.sh
M70="--model llama-3-70b --quant int4-g128 --batch 1 --compile default --backends bf16,triton --lm-head --attention flex --pdl"
for run in new3 new4; do
  [ $(left) -lt 100 ] && { echo "skipped $run: $(left) s left"; continue; }
  t1=$(date +%s); timeout -k 10 $(( $(left) - 12 )) $RUN runner.py $M70 --output-dir $R/m70_$run > $R/m70_$run.log 2>&1
  echo "70B TP2 $run rc $? wall $(( $(date +%s)-t1 )) s: $(grep -E '^\| (bf16|triton int4-g128) ' $R/m70_$run/report.md | head -4 | tr -s ' ' | cut -c1-150 | tr '\n' ' ')"
  NO_STORE_SAVE=1 save
done
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: source .gpu/s50e.sh (nvidia-h200)
# Session 50 call E (one H200, the session's last ~280 s): scripts/flex_ab.py, the decode step's flex attention at
# Inductor's default SPLIT_KV and at 1-16 splits: Llama-3-8B at batch 1 and 16 (32 query heads, 8 KV heads), a
# Llama-3-70B TP2 rank at batch 1 (32, 4); 2 rounds. No wheels needed (torch and triton of the image).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; mkdir -p $OUT/runs; t0=$(date +%s)
for c in 1,32,8 16,32,8 1,32,4; do
  left=$(( ${BUDGET:-180} - ($(date +%s)-t0) )); [ $left -lt 25 ] && { echo "skipped $c: $left s left"; continue; }
  timeout -k 5 $(( left - 5 )) python3 scripts/flex_ab.py --case $c --split 1,2,4,8,16 --rounds 2 2>&1 | tee -a $OUT/runs/flex_ab.txt
done; echo "all wall $(( $(date +%s)-t0 )) s"
