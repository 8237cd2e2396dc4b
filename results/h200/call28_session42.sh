#!/usr/bin/env bash
# Session 42 (2026-11-30): what ran, in order, on nvidia-h200-x2 machines (carry [".gpu"]: .gpu/whl the wheels of
# ../shared/scripts/fetch_gpu_wheels.sh but transformers, .gpu/commit the tree's commit; each call sources
# gpu_common.sh beside this file), `source .gpu/s42<x>.sh` each:
# A at 515948b (fresh machine); B at 515948b on A's machine, still warm (inline below; its pdl pass kept
# 256x14336x4096's entry as it was, so its store was not committed); C at d212337 (fresh; its rot pass committed as
# 1c45abd); D at 1c45abd (fresh; its rot pass committed as 876db80); E and F at 1c45abd on D's machine, still warm;
# G at f2fa3f0 (fresh; its rot pass committed as 7e0ba0f), carrying .gpu/commit, .gpu/s42g.sh and the wheels but
# fbgemm's (the tree with all of .gpu is over the 64 MiB a call carries; NVFP4 runs have no fbgemm rows).
# Device time: about 1627 of 1800 s.
# ---- call A: source .gpu/s42a.sh
# Session 42 call A (x2, BUDGET s), planned in session 41. GPU 0: the M = 1 fused kernel at BLOCK_K 64 (fewer
# registers: more programs an SM to hide the decode's latency; never in the pool: FUSED_SPLIT_POOL has BLOCK_K 128
# only; offline, Triton 3.6: 16x128x64 split 16 acc r72 72 registers no spills, 16x64x64 split 8 acc 55), each
# checked over 30 calls, 3 rounds, int4 then NVFP4. GPU 1: Llama-3-8B --pdl bf16 | triton at batch 1, our kernels
# chained (as committed) against their own PDL 1/2 (chained_pdl patched to a no-op), one after the other.
# GPU 0 first runs bcb2d95's GPU test of ROT_DECODE (bit for bit against the plain decode).
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
C="--config table --config table+BLOCK_K=64 --config table+BLOCK_K=64+maxnreg=72 --config table+BLOCK_K=64-maxnreg"
C="$C --config table+BLOCK_K=64+BLOCK_N=64+maxnreg=64 --config table+BLOCK_K=64+SPLIT_K=16+maxnreg=72"
# NVFP4 also bcb2d95's ROT_DECODE (13-instruction decode of permuted words; 383 SASS a K block against 529)
CN="--config table+ROT_DECODE --config table+ROT_DECODE+ACC_SCALE --config table+ROT_DECODE+BLOCK_K=64"
S="--shape 1,8192,8192 --shape 1,4096,28672 --shape 1,8192,57344 --shape 1,4096,4096"
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_nvfp4_gemm.py \
    -k "rot_decode" > $R/pytest_rot.log 2>&1; echo "pytest rot_decode (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"
  tail -2 $R/pytest_rot.log | cut -c1-200
  for op in int4_gemm nvfp4_gemm; do t1=$(date +%s)
    X=""; [ $op = nvfp4_gemm ] && X="$CN"
    CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( $(left) / 2 )) python3 scripts/fused_ab.py --op $op $S $C $X --calls 30 --rounds 3 \
      > $R/fused_ab_bk64_$op.txt 2>&1; echo "fused_ab $op (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"
    grep -v "^\s*$" $R/fused_ab_bk64_$op.txt | cut -c1-170 | head -50; done ) &
( M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention flex --pdl --batch 1 --backends bf16,triton"
  for v in chained own; do t1=$(date +%s)
    CUDA_VISIBLE_DEVICES=1 timeout -k 10 $(( $(left) / 2 )) python3 -c "
import contextlib, runpy, sys
if sys.argv[1] == 'own':
    from qgemm_bench.backends.triton_kernels import split_k_parts
    split_k_parts.chained_pdl = contextlib.nullcontext  # our PDL 1/2 as configured inside the --pdl step
sys.argv = ['runner.py'] + sys.argv[2:]
runpy.run_path('runner.py', run_name='__main__')" $v $M8 --output-dir $R/model8b_pdl_ours_$v > $R/model8b_$v.log 2>&1
    echo "8B --pdl ours $v (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"
    grep -A4 "^| variant  *|   batch |   step ms" $R/model8b_pdl_ours_$v/report.md | cut -c1-250; done ) &
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B (BUDGET=420, SAVE_NAME=runsB), run inline: s42b.sh's pdl pass and check, then int4 default | int4 m-sweep
BUDGET=${BUDGET:-420} source results/h200/gpu_common.sh
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 60 python3 -m qgemm_bench.tuning.weight_only $R/pdl256.json pdl --ms 256 \
  --layers 14336x4096 > $R/pdl256.log 2>&1; echo "pdl pass M 256 14336x4096 rc $? wall $(( $(date +%s)-t1 )) s"; tail -4 $R/pdl256.log | cut -c1-200
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 60 python3 -m qgemm_bench.tuning.weight_only $R/pdl256_check.json check --ms 256 \
  --layers 14336x4096 --calls 30 > $R/pdl256_check.log 2>&1; echo "check rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/pdl256_check.log | cut -c1-200
pair 150 int4_gemm --op int4_gemm -- int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3
# ---- call C: source .gpu/s42c.sh
# Session 42 call C (x2, BUDGET s): GPU 0 the rot pass on the NVFP4 fused entries at M 1, 16, 32, 64 (call A's
# A/B: ROT_DECODE won at 3 of 4 M = 1 shapes), then their check (30 calls); GPU 1 the split-K preset. Then on that
# store NVFP4 default | m-sweep (3 rounds), NVFP4 | int4 decode presets. Commit the store before the baselines.
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 200 python3 -m qgemm_bench.tuning.weight_only $R/rot.json rot --ms 1,16,32,64 \
    > $R/rot.log 2>&1; echo "rot pass (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^nvfp4|wrote|Error|WRONG" $R/rot.log | cut -c1-200
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 120 python3 -m qgemm_bench.tuning.weight_only $R/rot_check.json check --formats nvfp4 \
    --paths fused --ms 1,16,32,64 --calls 30 > $R/rot_check.log 2>&1; echo "check (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"
  grep -E "[1-9][0-9]*/30 wrong|configs with a wrong" $R/rot_check.log | cut -c1-200 ) &
run1 1 split_k_gemm --op split_k_gemm; wait; save
pair 110 nvfp4_gemm --op nvfp4_gemm -- nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3
pair 150 nvfp4_gemm_decode --op nvfp4_gemm --shapes decode -- int4_gemm_decode --op int4_gemm --shapes decode
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: source .gpu/s42d.sh
# Session 42 call D (x2, BUDGET s): GPU 0 the rot pass at M 16 and 64 again, now timing the fused kernel with
# ROT_DECODE against the entries' WS tiles too (31b2841), and their check; then on that store NVFP4 default |
# decode presets, then the NVFP4 m-sweep (3 rounds).
BUDGET=${BUDGET:-480} source results/h200/gpu_common.sh
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 150 python3 -m qgemm_bench.tuning.weight_only $R/rot2.json rot --ms 16,64 \
  > $R/rot2.log 2>&1; echo "rot pass M 16, 64 rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^nvfp4|wrote|Error|WRONG" $R/rot2.log | cut -c1-200
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 90 python3 -m qgemm_bench.tuning.weight_only $R/rot2_check.json check --formats nvfp4 \
  --paths fused --ms 16,64 --calls 30 > $R/rot2_check.log 2>&1; echo "check rc $? wall $(( $(date +%s)-t1 )) s"
grep -E "[1-9][0-9]*/30 wrong|configs with a wrong" $R/rot2_check.log | cut -c1-200; save
pair 130 nvfp4_gemm --op nvfp4_gemm -- nvfp4_gemm_decode --op nvfp4_gemm --shapes decode
run1 0 nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3; wait; save
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: source .gpu/s42e.sh
# Session 42 call E (x2, BUDGET s): where humming stays ahead of NVFP4 after the rot passes (decode preset M <= 8:
# 4096x28672 by 6-8%, 8192x57344 by 3-7%), ROT_DECODE in other tiles of the split pool and beyond it, 3 rounds,
# 30 checked calls each: GPU 0 K = 4096, N = 28672; GPU 1 K = 8192, N = 57344; M = 1 and 16 (the decode rows' buckets).
BUDGET=${BUDGET:-240} source results/h200/gpu_common.sh
C="--config table --config table+ROT_DECODE --config table+ROT_DECODE+SPLIT_K=8 --config table+ROT_DECODE+SPLIT_K=2"
C="$C --config table+ROT_DECODE+BLOCK_N=64 --config table+ROT_DECODE+BLOCK_N=64+SPLIT_K=8 --config table+ROT_DECODE+num_stages=4"
C="$C --config table+ROT_DECODE+num_stages=5 --config table+ROT_DECODE+num_warps=8 --config table+ROT_DECODE+BLOCK_N=256+num_warps=8"
C="$C --config table+ROT_DECODE-PDL --config table+ROT_DECODE+SCALE8"
for g in 0 1; do
  ( KN=$([ $g = 0 ] && echo 4096,28672 || echo 8192,57344); t1=$(date +%s)
    CUDA_VISIBLE_DEVICES=$g timeout -k 5 $(( $(left) - 10 )) python3 scripts/fused_ab.py --op nvfp4_gemm --shape 1,$KN --shape 16,$KN \
      $C --calls 30 --rounds 3 > $R/fused_ab_rot_$g.txt 2>&1; echo "fused_ab $KN (GPU $g) rc $? wall $(( $(date +%s)-t1 )) s"
    grep -v "^\s*$" $R/fused_ab_rot_$g.txt | cut -c1-150 | head -40 ) &
done; wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call F: source .gpu/s42f.sh
# Session 42 call F (x2, BUDGET s): call E found NVFP4 ROT_DECODE faster at SPLIT_K 2 than the table's split 8 at
# 1x8192x57344 (94.17 against 100.06). The same question for int4 at Llama-3-8B's batch-1 layers (lm_head's
# 4096x128256 included): the table's config against other splits, BLOCK_N 128, 4 stages; 3 rounds, 30 checked calls.
BUDGET=${BUDGET:-150} source results/h200/gpu_common.sh
C="--config table --config table+SPLIT_K=2 --config table+SPLIT_K=4 --config table+SPLIT_K=8 --config table+num_stages=4"
C="$C --config table+BLOCK_N=128+maxnreg=128 --config table+BLOCK_N=128+SPLIT_K=2+maxnreg=128 --config table-PDL"
for g in 0 1; do
  ( S=$([ $g = 0 ] && echo "--shape 1,4096,6144 --shape 1,4096,28672" || echo "--shape 1,14336,4096 --shape 1,4096,128256"); t1=$(date +%s)
    CUDA_VISIBLE_DEVICES=$g timeout -k 5 $(( $(left) - 10 )) python3 scripts/fused_ab.py --op int4_gemm $S $C --calls 30 --rounds 3 \
      > $R/fused_ab_int4_8b_$g.txt 2>&1; echo "fused_ab int4 (GPU $g) rc $? wall $(( $(date +%s)-t1 )) s"
    grep -v "^\s*$" $R/fused_ab_int4_8b_$g.txt | cut -c1-150 | head -24 ) &
done; wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call G: source .gpu/s42g.sh
# Session 42 call G (x2, BUDGET s): GPU 0 the rot pass at M 1, 16, 32 with ROT_DECODE at SPLIT_K 2, 4, 8 and 16
# (call E: split 2 ran 1x8192x57344 in 94.17 us against the table's split 8's 100.06), its check; then on that
# store the NVFP4 decode | default presets, then the NVFP4 m-sweep (3 rounds).
BUDGET=${BUDGET:-440} source results/h200/gpu_common.sh
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 170 python3 -m qgemm_bench.tuning.weight_only $R/rot3.json rot --ms 1,16,32 \
  > $R/rot3.log 2>&1; echo "rot pass M 1, 16, 32 rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^nvfp4|wrote|Error|WRONG" $R/rot3.log | cut -c1-230
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 60 python3 -m qgemm_bench.tuning.weight_only $R/rot3_check.json check --formats nvfp4 \
  --paths fused --ms 1,16,32 --calls 30 > $R/rot3_check.log 2>&1; echo "check rc $? wall $(( $(date +%s)-t1 )) s"
grep -E "[1-9][0-9]*/30 wrong|configs with a wrong" $R/rot3_check.log | cut -c1-200; save
pair 125 nvfp4_gemm_decode --op nvfp4_gemm --shapes decode -- nvfp4_gemm --op nvfp4_gemm
run1 0 nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3; wait; save
echo "all wall $(( $(date +%s)-t0 )) s"
