#!/usr/bin/env bash
# Session 48 (2026-11-30): what ran, in order, each `source .gpu/s48<x>.sh` sourcing gpu_common.sh beside this
# file, on nvidia-h200-x2, carrying .gpu/commit, the call's script and the wheels of
# ../shared/scripts/fetch_gpu_wheels.sh but transformers' and fbgemm's.
# A at eb0d66c (the 8B step with more of our weights prefetched: not kept; the WS tiles at M = 512-2048; the
# lm_head shape's fused configs); B at 2133382 (WS SS, reverted by a2c6d72: slower everywhere); C at 73899ba
# (tune --layers: the 70B TP2 shards' and the lm_heads' int4 entries, committed as 12c8d89); D at 12c8d89 on a
# fresh machine, carrying fbgemm's wheel too (the 70B TP2 and 8B baselines); E on D's machine, still warm,
# carrying .gpu/weight_only_73899ba.json (`git show 73899ba:qgemm_bench/configs/h200/weight_only.json`).
# F and G at 9961ff6 (F: the decode probe's S1 sweep at 4096x4096 and 4096x6144; G: the whole kernel with those
# rings and splits at 4096x4096, and the runner and fused_ab with splits beyond the K blocks). H (below, planned
# at the same commit) was not run: too little device time was left to start a machine.
# A's second base.a and pfpdl.b runs exited at once (their output folders existed): one run each of those.
# Device time: about 1575 of 1800 s.
# ---- call A: source .gpu/s48a.sh
# Session 48 call A (x2, BUDGET s). Issue 54: in the compiled 8B decode step (batch 1, --pdl, our kernels chained)
# the kernel before each of our GEMMs is Inductor's (norms, rotary, attention, silu-mul): latency-bound, HBM idle.
# Our fused M = 1 entries prefetch only 32 lines a tile row before their wait (PF_LINES, timed GEMM after GEMM)
# and the down projection's entry (14336x4096, TMA) has no PDL: it starts after the kernel before has finished.
# Variants, each a copy of the tree whose store's int4 fused M = 1 entries are changed: base (as committed); pf
# (PF_LINES 512: each program prefetches its whole K range to L2 before the wait); pdl (PDL 2, chained to 3, where
# the entry has none); pfpdl (both). GPU 0: base, pfpdl, pf, pdl, base; GPU 1: the WS tiles at int4 M = 512, 1024,
# 2048 (stream-K and groups; fbgemm ahead there by 0.1-3%), the lm_head shape's configs (4096x128256 runs the
# nearest bucket's), then pfpdl, base, pfpdl.
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention flex --pdl --batch 1 --backends triton --no-step-split"
mk() {  # variant: /tmp/t_<variant>, the tree with its store changed
  local v=$1 d=/tmp/t_$1; [ -d $d ] && return
  mkdir -p $d; cp -r qgemm_bench runner.py $d/
  python3 - $d/qgemm_bench/configs/h200/weight_only.json $v <<'PY'
import json, sys
p, v = sys.argv[1], sys.argv[2]
d = json.load(open(p)); n = 0
for key, e in d["kernels"]["int4_gemm_fused"].items():
    if key.startswith("M1_"):
        c = e["config"]; n += 1
        if "pf" in v: c["PF_LINES"] = 512
        if "pdl" in v and not c.get("PDL"): c["PDL"] = 2
json.dump(d, open(p, "w"), indent=1); print(v, n, "entries")
PY
}
model() {  # GPU variant tag
  local g=$1 v=$2 t1=$(date +%s); [ $(left) -lt 100 ] && { echo "skipped $v.$3: $(left) s left"; return; }
  mk $v; ( cd /tmp/t_$v && CUDA_VISIBLE_DEVICES=$g PYTHONPATH=/tmp/site:/tmp/t_$v timeout -k 10 $(( $(left) - 10 )) \
    python3 runner.py $M8 --output-dir $R/m8_${v}_$3 > $R/m8_${v}_$3.log 2>&1 )
  echo "8B $v.$3 (GPU $g) rc $? wall $(( $(date +%s)-t1 )) s: $(grep -E '^\| triton int4' $R/m8_${v}_$3/report.md | head -2 | tr -s ' ' | cut -c1-120 | tr '\n' ' ')"
}
for v in base pf pdl pfpdl; do mk $v; done
( for v in base pfpdl pf pdl base; do model 0 $v a; done ) &
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 200 python3 scripts/ws_ab.py --shape 2048,8192,8192 --shape 1024,8192,8192 \
    --shape 512,8192,8192 --tiles 256x128x64s4 --tiles 256x128x64s4+sk --tiles 256x128x64s4+mg4 --tiles 256x128x64s4+pdl \
    --tiles 256x128x64s3 --tiles 256x128x64s4+sk+pdl --cublas --rounds 3 --calls 10 > $R/ws_ab_m512_2048.txt 2>&1
  echo "ws_ab (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"; grep -v "^\s*$" $R/ws_ab_m512_2048.txt | cut -c1-150 | tail -40
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 120 python3 scripts/fused_ab.py --op int4_gemm --shape 1,4096,128256 \
    --config table --config table+PF_LINES=512 --config table+SPLIT_K=8 --config table+SPLIT_K=2 --config table+BLOCK_N=128+maxnreg=128 \
    --config table+SCALE_AHEAD --calls 10 --rounds 3 > $R/fused_ab_lmhead.txt 2>&1
  echo "fused_ab lm_head (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"; grep -v "^\s*$" $R/fused_ab_lmhead.txt | cut -c1-150 | tail -12
  for v in pfpdl base pfpdl; do model 1 $v b; done ) &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: source .gpu/s48b.sh
# Session 48 call B (x2, BUDGET s). WS SS (ws_gemm._ss_blocks, untried until now: docs/ws_gemm.md): each K block's
# decoded weights stored to shared memory for a shared-operand wgmma, the next block decoded under it. Each tile
# with and without SS, checked first (10 calls), 3 rounds, the run's triton beside. GPU 0: int4 at M = 1, 8, 16
# (8192x8192, 28672x8192), then M = 64, then group 32 (1 round), then the stamps at 16x8192x8192; GPU 1: NVFP4.
BUDGET=${BUDGET:-420} source results/h200/gpu_common.sh
ab() {  # GPU name ws_ab-args...
  local g=$1 n=$2 t1=$(date +%s); shift 2
  CUDA_VISIBLE_DEVICES=$g timeout -k 5 $(( $(left) - 10 )) python3 scripts/ws_ab.py "$@" > $R/$n.txt 2>&1
  echo "== $n (GPU $g) rc $? wall $(( $(date +%s)-t1 )) s"; grep -v "^\s*$" $R/$n.txt | cut -c1-140 | tail -32
}
T16="--tiles 16x64x128s8+split2+acc+pdl --tiles 16x64x128s8+split2+acc+ss+pdl --tiles 16x64x128s8+split2+pdl"
T16="$T16 --tiles 16x64x128s8+split2+ss+pdl --tiles 16x128x128s6+split2+acc+pdl --tiles 16x128x128s6+split2+acc+ss+pdl"
N16="--tiles 16x64x128s8+k2+pdl --tiles 16x64x128s8+split2+pdl --tiles 16x64x128s8+split2+ss+pdl"
N16="$N16 --tiles 16x128x128s6+split2+pdl --tiles 16x128x128s6+split2+ss+pdl"
T64="--tiles 64x128x128s4+split2+skew2+pdl --tiles 64x128x128s4+split2+skew2+ss+pdl"
( ab 0 ws_ss_int4_m1_16 --op int4_gemm --shape 16,8192,8192 --shape 1,8192,8192 --shape 8,8192,8192 \
    --shape 16,28672,8192 $T16 --triton --rounds 3 --calls 10
  ab 0 ws_ss_int4_m64 --op int4_gemm --shape 64,8192,8192 --shape 64,4096,28672 $T64 --triton --rounds 3 --calls 10
  ab 0 ws_ss_int4_g32 --op int4_gemm --group-size 32 --shape 16,8192,8192 --tiles 16x64x128s8+split2+pdl \
    --tiles 16x64x128s8+split2+ss+pdl --rounds 1 --calls 10
  ab 0 ws_ss_int4_stamps --op int4_gemm --stamps --shape 16,8192,8192 --tiles 16x64x128s8+split2+acc+pdl \
    --tiles 16x64x128s8+split2+acc+ss+pdl ) &
( ab 1 ws_ss_nvfp4_m1_16 --op nvfp4_gemm --shape 16,8192,8192 --shape 1,8192,8192 --shape 16,4096,28672 $N16 \
    --triton --rounds 3 --calls 10
  ab 1 ws_ss_nvfp4_m64 --op nvfp4_gemm --shape 64,8192,8192 $T64 --triton --rounds 3 --calls 10 ) &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: source .gpu/s48c.sh
# Session 48 call C (x2, BUDGET s), at 73899ba: int4 store entries of their own for the shapes the model bench
# runs beside the presets' layers: Llama-3-70B's TP2 shards (8192x5120 q/k/v, 4096x8192 o, 8192x28672 gate/up,
# 14336x8192 down) and the lm_heads (4096x128256, 8192x128256), at M = 1 and 16 (the model rows' batches),
# every candidate (--full) on both GPUs; then on GPU 0 the tma and ahead passes on those entries and their
# check (30 calls an entry). The store comes back in the tarball.
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
L=8192x5120,4096x8192,8192x28672,14336x8192,4096x128256,8192x128256
tune layers 230 --op int4_gemm --formats int4 --backends triton --ms 1,16 --full --layers $L
pass() {  # name mode args...
  local n=$1 mode=$2 t1=$(date +%s); shift 2
  CUDA_VISIBLE_DEVICES=0 timeout -k 10 $(( $(left) - 20 )) python3 -m qgemm_bench.tuning.weight_only $R/$n.json $mode \
    "$@" > $R/$n.log 2>&1
  echo "$n rc $? wall $(( $(date +%s)-t1 )) s"
  tr '\r' '\n' < $R/$n.log | grep -v "^\s*$" | grep -E "fused M|wrote|WRONG|wrong|rror" | cut -c1-200 | tail -16
}
pass tma_layers tma --ms 1,16 --formats int4 --layers $L; save
pass ahead_layers ahead --ms 1,16 --formats int4 --layers $L; save
pass check_layers check --ms 1,16 --formats int4 --layers $L --calls 30
save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: source .gpu/s48d.sh
# Session 48 call D (x2, BUDGET s), at 12c8d89 (call C's store: entries of their own for the 70B TP2 shards and
# the lm_heads): Llama-3-70B TP2 at batch 1 (bf16, triton int4-g128; the committed run's command), then
# Llama-3-8B on GPU 0 with every variant at batch 1 and 16 (the committed run's command).
BUDGET=${BUDGET:-575} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 10 $(( $(left) - 20 )) $RUN runner.py --model llama-3-70b --quant int4-g128 --batch 1 \
  --compile default --backends bf16,triton --lm-head --attention flex --pdl --output-dir $R/model_llama-3-70b \
  > $R/model_llama-3-70b.log 2>&1
echo "70B TP2 rc $? wall $(( $(date +%s)-t1 )) s"; grep -A4 "^| variant  *| batch 1" $R/model_llama-3-70b/report.md | cut -c1-120
grep -A4 "^| variant  *|   batch |   step ms" $R/model_llama-3-70b/report.md | cut -c1-230
run1 0 model_llama-3-8b --model llama-3-8b --quant int4-g128 --batch 1,16 --compile default \
  --backends bf16,triton,tinygemm,fbgemm --lm-head --attention flex --pdl; wait
grep -A6 "^| variant  *| batch 1" $R/model_llama-3-8b/report.md | cut -c1-120
grep -A10 "^| variant  *|   batch |   step ms" $R/model_llama-3-8b/report.md | cut -c1-230
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: source .gpu/s48e.sh
# Session 48 call E (x2, BUDGET s), at 12c8d89 on call D's machine: Llama-3-70B TP2 at batch 1 again with the
# store before call C's entries (73899ba's weight_only.json, in a copy of the tree): the same host's before.
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
rm -rf /tmp/t_old && mkdir -p /tmp/t_old && cp -r qgemm_bench runner.py /tmp/t_old/ && cp .gpu/weight_only_73899ba.json /tmp/t_old/qgemm_bench/configs/h200/weight_only.json
t1=$(date +%s); ( cd /tmp/t_old && PYTHONPATH=/tmp/site:/tmp/t_old timeout -k 10 $(( $(left) - 15 )) $RUN runner.py --model llama-3-70b \
  --quant int4-g128 --batch 1 --compile default --backends bf16,triton --lm-head --attention flex --pdl \
  --output-dir $R/model_llama-3-70b_before > $R/model_llama-3-70b_before.log 2>&1 )
echo "70B TP2 before rc $? wall $(( $(date +%s)-t1 )) s"; grep -A4 "^| variant  *| batch 1" $R/model_llama-3-70b_before/report.md | cut -c1-120
grep -A4 "^| variant  *|   batch |   step ms" $R/model_llama-3-70b_before/report.md | cut -c1-230
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call F: source .gpu/s48f.sh
# Session 48 call F (x2, BUDGET s), at 9961ff6: the decode probe with its S1 sweep (other grids and deeper rings,
# reading only) at the 8B's small layers, where our M = 1 kernel reads at a third of the floor (docs/fused_gemm.md
# named this sweep the next measurement): int4, 4096x4096 on GPU 0, 4096x6144 on GPU 1.
BUDGET=${BUDGET:-300} source results/h200/gpu_common.sh
probe() {  # GPU K N
  local t1=$(date +%s)
  CUDA_VISIBLE_DEVICES=$1 timeout -k 10 $(( $(left) - 15 )) python3 scripts/decode_probe.py --formats int4 --k $2 --n $3 \
    --budget-s $(( $(left) - 60 )) --out $R/probe_sweep_$2x$3.txt > $R/probe_sweep_$2x$3.log 2>&1
  echo "== probe $2x$3 (GPU $1) rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "S1 sweep|S4|read|S1 read" $R/probe_sweep_$2x$3.txt | cut -c1-150 | head -60
}
probe 0 4096 4096 & probe 1 4096 6144 & wait
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call G: source .gpu/s48g.sh
# Session 48 call G (x2, BUDGET s), at 9961ff6. GPU 0: call F's probe stopped with an illegal memory access at
# its S1 sweep's 16x64x256 split 32 at K = 4096 (16 K blocks: splits with no block; PDL 2's prefetch then
# computes its lines from an empty range): does the production kernel do that where a config splits K into more
# parts than it has blocks (the runner at small K, where the nearest bucket's split 8 config runs; fused_ab with
# such splits)? GPU 1: the full kernel at 4096x4096 with the deeper rings and splits whose loops read faster in
# call F's S1 sweep (16x128x128 s8, split 16 and 32), 10 checked calls, 3 rounds.
BUDGET=${BUDGET:-280} source results/h200/gpu_common.sh
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 100 python3 runner.py --op int4_gemm --shape 1,256,4096 \
    --shape 16,256,4096 --shape 1,512,8192 --backends torch,triton --output-dir $R/small_k > $R/small_k.log 2>&1
  echo "== small K runner (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "triton|error|rror" $R/small_k/report.md | cut -c1-170 | head
  tail -3 $R/small_k.log | cut -c1-200
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 90 python3 scripts/fused_ab.py --op int4_gemm --shape 1,4096,4096 \
    --config table+SPLIT_K=32 --config table+SPLIT_K=64 --config table+BLOCK_K=256+SPLIT_K=32-ACC_SCALE --calls 10 --rounds 1 \
    > $R/fused_ab_split_beyond.txt 2>&1
  echo "== fused_ab splits beyond blocks (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"; grep -v "^\s*$" $R/fused_ab_split_beyond.txt | cut -c1-170 | tail -8 ) &
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 150 python3 scripts/fused_ab.py --op int4_gemm --shape 1,4096,4096 \
    --shape 16,4096,4096 --config table --config table+num_stages=6 --config table+num_stages=8 --config table+SPLIT_K=16 \
    --config table+SPLIT_K=16+num_stages=4 --config table+BLOCK_N=128+maxnreg=128+num_stages=8 \
    --config table+BLOCK_N=128+maxnreg=128+SPLIT_K=16+num_stages=4 --config table+BLOCK_N=128+maxnreg=128+SPLIT_K=32+num_stages=4 \
    --calls 10 --rounds 3 > $R/fused_ab_4096_rings.txt 2>&1
  echo "== fused_ab 4096x4096 rings (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"; grep -v "^\s*$" $R/fused_ab_4096_rings.txt | cut -c1-170 | tail -24 ) &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call H (not run): source .gpu/s48h.sh
# # Session 48 call H (x2, BUDGET s), at 9961ff6. GPU 0: call G's illegal address (fused_ab at 1x4096x4096 with
# # splits beyond its 32 K blocks, in the graph timing after every check passed), each config alone in its own
# # process: SPLIT_K 64 with and without PDL, BLOCK_K 256 split 32 without ACC_SCALE. GPU 1: call A's ws_ab had
# # plain 256x128x64 s4 at int4 512x8192x8192 at 93.88 us against the entry's group-4 tile's 97.98: the ws pass
# # there, its check, then the int4 m-sweep with every peer (3 rounds). The store comes back in the tarball.
# BUDGET=${BUDGET:-235} source results/h200/gpu_common.sh
# ( for c in table+SPLIT_K=64 table+SPLIT_K=64-PDL table+BLOCK_K=256+SPLIT_K=32-ACC_SCALE table+BLOCK_K=256+SPLIT_K=16-ACC_SCALE; do
#     t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 40 python3 scripts/fused_ab.py --op int4_gemm --shape 1,4096,4096 \
#       --config $c --calls 10 --rounds 1 > $R/split_beyond_$c.txt 2>&1
#     echo "== $c (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s: $(grep -E '^ +[0-9.]+ |WRONG|illegal' $R/split_beyond_$c.txt | head -2 | cut -c1-120 | tr '\n' ' ')"
#   done ) &
# ( t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 60 python3 -m qgemm_bench.tuning.weight_only $R/ws512.json ws --ms 512 \
#     --formats int4 --layers 8192x8192 > $R/ws512.log 2>&1
#   echo "ws pass M 512 (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/ws512.log | grep -E "fused M|wrote|rror" | cut -c1-200 | tail -4
#   t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 40 python3 -m qgemm_bench.tuning.weight_only $R/ws512_check.json check \
#     --ms 512 --formats int4 --paths fused --layers 8192x8192 --calls 30 > $R/ws512_check.log 2>&1
#   echo "check (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "wrong" $R/ws512_check.log | cut -c1-200 | tail -3
#   save; run1 1 int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3; wait ) &
# wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
