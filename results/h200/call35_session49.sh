#!/usr/bin/env bash
# Session 49 (2026-11-30): what ran, in order, each `source .gpu/s49<x>.sh` sourcing gpu_common.sh beside this
# file, on nvidia-h200-x2, carrying .gpu/commit, the call's script and the wheels of
# ../shared/scripts/fetch_gpu_wheels.sh but transformers' (fbgemm's for A and C only).
# A at d80bb62 on a fresh machine (session 48's planned call H: the empty-split repro, pytest -m gpu on the int4
# file, the ws pass at int4 M = 512 (committed as 3ad9d06), the int4 m-sweep and decode preset); B on A's machine
# (Llama-3-70B TP2, the store before 12c8d89's entries and with them, ABAB; carrying
# .gpu/weight_only_73899ba.json, `git show 73899ba:qgemm_bench/configs/h200/weight_only.json`); C at 3ad9d06 on a
# fresh machine (the presets whose baselines predated cc7b656); D on C's machine (pytest -m gpu, the other
# files); E at 102132b on a fresh machine (NVFP4 entries at M = 4 and 8, reverted by 9d09a35: not kept); F at
# 3fc46dc on a fresh machine (the 70B TP2 step with the attention --attention names): the device ended it at its
# 267-s limit (the session's budget left after the machine started) before it wrote anything, as BUDGET=275 was
# above that limit: a call's BUDGET has to stay under the limit the device gives it, start included.
# Device time: all 1800 s.
# ---- call A: source .gpu/s49a.sh
# Session 49 call A (x2, BUDGET s), planned in session 48 (its call H). GPU 0: cc7b656's empty-split repro, each
# config in its own process (call G's fused_ab stopped on an illegal address at 9961ff6; expect none now), then
# `pytest -m gpu tests/test_int4_gemm.py` (cc7b656 touched fused_kernel), then the ws pass at int4
# 512x8192x8192 (call A of session 48: plain 256x128x64 s4 93.88 us against the entry's group-4 tile 97.98) and
# its check, then the int4 m-sweep with every peer (3 rounds). GPU 1: the int4 decode preset with every peer
# (cc7b656 should change no timing). Carry fbgemm's wheel too. The store comes back in the tarball.
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
XD=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4")
( for c in table+SPLIT_K=64 table+SPLIT_K=64-PDL table+BLOCK_K=256+SPLIT_K=32-ACC_SCALE table+BLOCK_K=256+SPLIT_K=16-ACC_SCALE; do
    t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 40 python3 scripts/fused_ab.py --op int4_gemm --shape 1,4096,4096 \
      --config $c --calls 10 --rounds 1 > $R/split_beyond_$c.txt 2>&1
    echo "== $c (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s: $(grep -E '^ +[0-9.]+ |WRONG|error' $R/split_beyond_$c.txt | head -2 | cut -c1-140 | tr '\n' ' ')"
  done
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 10 150 python3 -m pytest -m gpu -q -p no:cacheprovider $XD \
    tests/test_int4_gemm.py > $R/pytest_gpu_int4.txt 2>&1
  echo "== pytest -m gpu int4 (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"; tail -1 $R/pytest_gpu_int4.txt | cut -c1-200
  grep -E "^FAILED|^ERROR" $R/pytest_gpu_int4.txt | cut -c1-200 | head
  pass ws512 ws --ms 512 --formats int4 --layers 8192x8192
  pass ws512_check check --ms 512 --formats int4 --paths fused --layers 8192x8192 --calls 30
  save; run1 0 int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3; wait ) &
run1 1 int4_gemm_decode --op int4_gemm --shapes decode
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: source .gpu/s49b.sh
# Session 49 call B (x2, BUDGET s), planned in session 48: Llama-3-70B TP2 at batch 1 with the store before
# 12c8d89's shard and lm_head entries (73899ba's weight_only.json, in a copy of the tree: "old") and the tree's
# ("new"), alternating old, new, old, new on one host (session 48's D and E were one run each, E after D).
BUDGET=${BUDGET:-580} source results/h200/gpu_common.sh
rm -rf /tmp/t_old && mkdir -p /tmp/t_old && cp -r qgemm_bench runner.py /tmp/t_old/ && cp .gpu/weight_only_73899ba.json /tmp/t_old/qgemm_bench/configs/h200/weight_only.json
M70="--model llama-3-70b --quant int4-g128 --batch 1 --compile default --backends bf16,triton --lm-head --attention flex --pdl"
for run in old1 new1 old2 new2; do
  [ $(left) -lt 110 ] && { echo "skipped $run: $(left) s left"; continue; }
  d=$PWD; [ ${run%?} = old ] && d=/tmp/t_old
  t1=$(date +%s); ( cd $d && PYTHONPATH=/tmp/site:$d timeout -k 10 $(( $(left) - 10 )) $RUN runner.py $M70 --output-dir $R/m70_$run \
    > $R/m70_$run.log 2>&1 )
  echo "70B TP2 $run rc $? wall $(( $(date +%s)-t1 )) s: $(grep -E '^\| triton int4' $R/m70_$run/report.md | head -2 | tr -s ' ' | cut -c1-140 | tr '\n' ' ')"
done
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: source .gpu/s49c.sh
# Session 49 call C (x2, BUDGET s), at 3ad9d06: the presets whose committed baselines predate cc7b656 (fused_kernel's
# empty-split scale load), re-run with every peer at HEAD: GPU 0 the int4 default preset, then the NVFP4 default
# preset; GPU 1 the NVFP4 decode preset, then the NVFP4 m-sweep (3 rounds). Carry fbgemm's wheel too.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
( run1 0 int4_gemm --op int4_gemm; wait; run1 0 nvfp4_gemm --op nvfp4_gemm; wait ) &
( run1 1 nvfp4_gemm_decode --op nvfp4_gemm --shapes decode; wait; run1 1 nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3; wait ) &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: source .gpu/s49d.sh
# Session 49 call D (x2, BUDGET s), at 3ad9d06, on call C's machine: `pytest -m gpu` over every test file but
# test_int4_gemm.py (call A ran it: 291 passed, 3 skipped), split over the two GPUs, 4 workers each.
BUDGET=${BUDGET:-300} source results/h200/gpu_common.sh
t() { local g=$1 n=$2; shift 2; t1=$(date +%s); CUDA_VISIBLE_DEVICES=$g timeout -k 10 $(( $(left) - 15 )) python3 -m pytest -m gpu -q \
  -p no:cacheprovider -n 4 "$@" > $R/pytest_gpu_$n.txt 2>&1
  echo "== pytest -m gpu $n (GPU $g) rc $? wall $(( $(date +%s)-t1 )) s: $(tail -1 $R/pytest_gpu_$n.txt | cut -c1-160)"
  grep -E "^FAILED|^ERROR" $R/pytest_gpu_$n.txt | cut -c1-220 | head; }
t 0 a tests/test_nvfp4_gemm.py tests/test_helion_variants.py &
t 1 b tests/test_split_k_gemm.py tests/test_compiled_decode.py tests/test_cli.py tests/test_humming.py tests/test_plots.py tests/test_tune.py &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: source .gpu/s49e.sh
# Session 49 call E (x2, BUDGET s), at 102132b: NVFP4 entries of their own at M = 4 and 8 (they ran M = 16's
# config) for the decode preset's layers where humming leads or ties (call C: 8x8192x57344 100.2 us on M = 16's
# config against humming's 94.8; 4x and 8x28672x8192, 8x8192x10240 within 3%): the tune (--full), the scale8
# and rot passes, the check, then the NVFP4 decode preset on GPU 0 with every peer.
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
L=4096x28672,8192x57344,28672x8192,8192x10240
tune nvfp4_m4_8 170 --op nvfp4_gemm --formats nvfp4 --backends triton --ms 4,8 --full --layers $L
pass scale8_m4_8 scale8 --ms 4,8 --layers $L
pass rot_m4_8 rot --ms 4,8 --layers $L
pass check_m4_8 check --ms 4,8 --formats nvfp4 --layers $L --calls 30
save; [ $(left) -ge 140 ] && run1 0 nvfp4_gemm_decode --op nvfp4_gemm --shapes decode; wait
save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call F: source .gpu/s49f.sh (BUDGET=275; nothing came back)
# Session 49 call F (x2, BUDGET s), at 3fc46dc: Llama-3-70B TP2 at batch 1 with the attention --attention names
# (before 3fc46dc every TP run's attention layers kept transformers' sdpa: the GPU image's transformers 5.17 set
# the implementation on the top model's config alone). One run, fresh machine; bytecode not precompiled.
touch /tmp/pyc.done; BUDGET=${BUDGET:-280} source results/h200/gpu_common.sh
M70="--model llama-3-70b --quant int4-g128 --batch 1 --compile default --backends bf16,triton --lm-head --attention flex --pdl"
t1=$(date +%s); timeout -k 10 $(( $(left) - 12 )) $RUN runner.py $M70 --output-dir $R/m70_flex > $R/m70_flex.log 2>&1
echo "70B TP2 flex rc $? wall $(( $(date +%s)-t1 )) s"; grep -E '^\| (bf16|triton int4)' $R/m70_flex/report.md | head -4 | tr -s ' ' | cut -c1-200
grep -E "flex|cudnn|scaled_dot" $R/m70_flex/report.md | head -6 | tr -s ' ' | cut -c1-160; tail -3 $R/m70_flex.log | cut -c1-200
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
