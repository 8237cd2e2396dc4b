#!/usr/bin/env bash
# Session 46 (2026-11-30): what ran, in order, each `source .gpu/s46<x>.sh` sourcing gpu_common.sh beside this
# file, on nvidia-h200-x2 (each machine fresh but D, which found C's), carrying .gpu/commit, the call's script and
# the wheels of ../shared/scripts/fetch_gpu_wheels.sh but transformers' and fbgemm's (call D: all of .gpu/).
# A at 26b40d4 (the ACC tiles, helion_ab --entry-only); B at 0b474d7 (MAXNREG, reverted by fe922b3 after it);
# C at 7eca2d1 (WS_POOL[16] with the ACC twins; its store committed as cc33265); D at cc33265 (the baselines).
# Device time: about 1030 of 1800 s.
# ---- call A: source .gpu/s46a.sh
# Session 46 call A (x2, BUDGET s). GPU 0: 1) fed27b0's per-channel and unscaled int4 in K order (the int4 file's
# helion GPU tests); 2) the WS kernel's ACC (int4 g128 scales on each K block's fp32 product: 12% fewer loop
# instructions at 16-row x tiles offline) against the same tiles without, at M = 1 and 16, K = N = 8192, with the
# run's own triton kernel, 3 rounds; its GPU test; 3) the stamps of both at M = 16. GPU 1: issue 55's rows above
# 1.2 without "triton no WS" evidence yet (scripts/helion_ab.py --entry-only: triton, triton no WS, the entry).
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 150 python3 -m pytest -m gpu -q -p no:cacheprovider \
    tests/test_int4_gemm.py -k "helion or ws_kernel_vs_fp64" > $R/pytest_int4_helion_ws.txt 2>&1
  echo "int4 -k helion/ws rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/pytest_int4_helion_ws.txt | cut -c1-200
  grep -E "^FAILED" $R/pytest_int4_helion_ws.txt | cut -c1-200 | head
  t1=$(date +%s); T=(--tiles 16x64x128s8+split2 --tiles 16x64x128s8+split2+acc --tiles 16x64x128s8+k2
    --tiles 16x64x128s8+k2+acc --tiles 16x128x128s6+split2 --tiles 16x128x128s6+split2+acc)
  CUDA_VISIBLE_DEVICES=0 timeout -k 5 200 python3 scripts/ws_ab.py --shape 1,8192,8192 --shape 16,8192,8192 \
    "${T[@]}" --triton --rounds 3 > $R/ws_acc_m1_16.txt 2>&1; echo "ws_ab rc $? wall $(( $(date +%s)-t1 )) s"
  grep -v Warn $R/ws_acc_m1_16.txt | cut -c1-150 | tail -30
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( $(left) - 15 )) python3 scripts/ws_ab.py --stamps \
    --shape 16,8192,8192 --tiles 16x64x128s8+split2 --tiles 16x64x128s8+split2+acc > $R/ws_acc_stamps.txt 2>&1
  echo "stamps rc $? wall $(( $(date +%s)-t1 )) s"; grep -v Warn $R/ws_acc_stamps.txt | cut -c1-150 | tail -24 ) &
( for job in "int4_gemm 64 4096,6144" "int4_gemm,nvfp4_gemm 64 8192,10240" "nvfp4_gemm 64 4096,4096" \
             "int4_gemm,nvfp4_gemm 128 8192,8192" "int4_gemm 256 4096,4096" "int4_gemm 256 4096,28672" \
             "nvfp4_gemm 256 28672,8192" "int4_gemm,nvfp4_gemm 64 8192,57344" "int4_gemm 256 8192,57344"; do
    set -- $job; [ $(left) -lt 40 ] && { echo "skipped $job: $(left) s left"; continue; }
    t1=$(date +%s); f=$R/nows_$(echo $1 | tr , _)_m$2_$(echo $3 | tr , x).txt
    CUDA_VISIBLE_DEVICES=1 timeout -k 5 $(( $(left) - 15 )) python3 scripts/helion_ab.py --op $1 --m $2 --kn $3 \
      --entry-only --rounds 2 --check-calls 3 > $f 2>&1
    echo "== $job rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^ +[0-9.]+ +[0-9.]+ |_gemm [0-9]|WRONG|rror" $f | cut -c1-100
  done ) &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: source .gpu/s46b.sh
# Session 46 call B (x2, BUDGET s): the WS kernel's decode-size tiles with more programs an SM (MAXNREG 64: four;
# 80: three) and ACC, each checked first, 3 rounds, with the run's triton kernel. GPU 0: int4 K = N = 8192 at
# M = 1 and 16, then the stamps of the fastest at M = 16; the new GPU tests (the r64 tiles). GPU 1: int4 M = 1 at
# Llama-3-8B's four fused layers, then NVFP4 K = N = 8192 at M = 1 and 16.
BUDGET=${BUDGET:-420} source results/h200/gpu_common.sh
( t1=$(date +%s); T=(--tiles 16x64x128s8+split2+acc --tiles 16x64x128s6+split4+acc+r64 --tiles 16x64x128s4+split4+acc+r64
    --tiles 16x64x64s8+split4+acc+r64 --tiles 16x64x128s6+split3+acc+r80 --tiles 16x64x128s6+split4+r64)
  CUDA_VISIBLE_DEVICES=0 timeout -k 5 200 python3 scripts/ws_ab.py --shape 1,8192,8192 --shape 16,8192,8192 \
    "${T[@]}" --triton --rounds 3 > $R/ws_r64_m1_16.txt 2>&1; echo "ws_ab int4 rc $? wall $(( $(date +%s)-t1 )) s"
  grep -v Warn $R/ws_r64_m1_16.txt | cut -c1-150 | tail -24
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 60 python3 scripts/ws_ab.py --stamps --shape 16,8192,8192 \
    --tiles 16x64x128s6+split4+acc+r64 --tiles 16x64x64s8+split4+acc+r64 > $R/ws_r64_stamps.txt 2>&1
  echo "stamps rc $? wall $(( $(date +%s)-t1 )) s"; grep -v Warn $R/ws_r64_stamps.txt | cut -c1-150 | tail -12
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( $(left) - 15 )) python3 -m pytest -m gpu -q -p no:cacheprovider \
    tests/test_int4_gemm.py tests/test_nvfp4_gemm.py -k "ws_kernel_vs_fp64 and (tiles16 or tiles17 or tiles18 or tiles9)" \
    > $R/pytest_ws_r64.txt 2>&1; echo "ws r64 tests rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/pytest_ws_r64.txt | cut -c1-200 ) &
( t1=$(date +%s); T=(--tiles 16x64x128s8+split2+acc --tiles 16x64x128s6+split4+acc+r64 --tiles 16x64x64s8+split4+acc+r64
    --tiles 16x64x128s6+split2+acc+r64)
  CUDA_VISIBLE_DEVICES=1 timeout -k 5 200 python3 scripts/ws_ab.py --shape 1,4096,6144 --shape 1,4096,4096 \
    --shape 1,4096,28672 --shape 1,14336,4096 "${T[@]}" --triton --rounds 3 > $R/ws_r64_8b_m1.txt 2>&1
  echo "ws_ab 8b rc $? wall $(( $(date +%s)-t1 )) s"; grep -v Warn $R/ws_r64_8b_m1.txt | cut -c1-150 | grep -v "^  [a-z]" | tail -30
  t1=$(date +%s); T=(--tiles 16x64x128s8+split2 --tiles 16x64x128s6+split4+r64 --tiles 16x64x64s8+split4+r64
    --tiles 16x64x128s4+split4+r64)
  CUDA_VISIBLE_DEVICES=1 timeout -k 5 $(( $(left) - 15 )) python3 scripts/ws_ab.py --op nvfp4_gemm --shape 1,8192,8192 \
    --shape 16,8192,8192 "${T[@]}" --triton --rounds 3 > $R/ws_r64_nvfp4.txt 2>&1
  echo "ws_ab nvfp4 rc $? wall $(( $(date +%s)-t1 )) s"; grep -v Warn $R/ws_r64_nvfp4.txt | cut -c1-150 | tail -20 ) &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: source .gpu/s46c.sh
# Session 46 call C (x2, BUDGET s). GPU 0: the ws pass at int4 M = 16 (WS_POOL[16] with its ACC twins against
# each entry), then the pdl pass there (the pool's tiles carry no PDL), then the check (30 calls an entry); the
# store comes back in the tarball. GPU 1: the int4 file's last helion GPU test (cut by call A's timeout).
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 200 python3 -m pytest -m gpu -q -p no:cacheprovider \
    tests/test_int4_gemm.py -k "helion_stored_wide_frag_tiles_right_over_30_calls or helion_every_path" \
    > $R/pytest_int4_helion_rest.txt 2>&1; echo "int4 helion rest rc $? wall $(( $(date +%s)-t1 )) s"
  tail -2 $R/pytest_int4_helion_rest.txt | cut -c1-200 ) &
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 10 170 python3 -m qgemm_bench.tuning.weight_only $R/ws16.json ws \
  --ms 16 --formats int4 > $R/ws16_acc.log 2>&1
echo "ws M16 rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/ws16_acc.log | grep -v "^\s*$" | grep -E "fused M16|wrote" | cut -c1-200
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 10 $(( $(left) - 60 )) python3 -m qgemm_bench.tuning.weight_only \
  $R/pdl16.json pdl --ms 16 --formats int4 > $R/pdl16_acc.log 2>&1
echo "pdl M16 rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/pdl16_acc.log | grep -E "fused M16|wrote" | cut -c1-200
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 10 $(( $(left) - 10 )) python3 -m qgemm_bench.tuning.weight_only \
  $R/check16.json check --ms 16 --formats int4 --calls 30 > $R/check16_acc.log 2>&1
echo "check M16 rc $? wall $(( $(date +%s)-t1 )) s"; tail -3 $R/check16_acc.log | cut -c1-200
git diff --stat -- qgemm_bench/configs/h200/weight_only.json 2>/dev/null | tail -1
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: source .gpu/s46d.sh
# Session 46 call D (x2, BUDGET s), at the store commit of call C: the baselines holding int4 M = 16 (every
# backend): the int4 decode preset (GPU 0) and the int4 m-sweep, 3 rounds (GPU 1).
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
run1 0 int4_gemm_decode --op int4_gemm --shapes decode
run1 1 int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: source .gpu/s46e.sh
# Session 46 call E (x2, BUDGET s). GPU 0: issue 55's two rows where Helion's code, not warp roles, costs
# (helion_ab, 30 checked calls, 2 rounds): int4 256x4096x28672 with the Triton entry's tile in Helion (128 x 256
# on 8 warps, TMA, K order and fragment order) and int4 128x8192x8192 with the entry on 8 warps in K order, beside
# the default variants. GPU 1: Nsight Compute, one launch each, of the triton backend's kernel at int4 16x8192x8192
# (the ACC WS tiles) and 1x8192x8192 (fused_kernel): what bounds the decode-size loops (issue 53).
BUDGET=${BUDGET:-300} source results/h200/gpu_common.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats"
one() {  # name kernel-regex M
  local t1=$(date +%s)
  CUDA_VISIBLE_DEVICES=1 timeout -k 5 100 $NCU --clock-control none -k regex:$2 -c 1 $SEC python3 runner.py \
    --op int4_gemm --shape $3,8192,8192 --backends triton --repeats 1 --output-dir $R/ncu_$1 > $R/ncu_$1.txt 2>&1
  echo "== $1 rc $? wall $(( $(date +%s)-t1 )) s"
  grep -E "^  [a-z_]+|Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\)|Issue Slots Busy|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Theoretical Occupancy" $R/ncu_$1.txt | head -22 | cut -c1-150
}
( one ws_m16 ws_kernel 16; one fused_m1 fused_kernel 1 ) &
C256=(--config '{"block_sizes": [128, 256], "num_warps": 8, "frag": false, "tma": true}'
      --config '{"block_sizes": [128, 256], "num_warps": 8, "frag": true, "tma": true}'
      --config '{"block_sizes": [128, 256], "num_warps": 8, "frag": false, "tma": false}')
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 120 python3 scripts/helion_ab.py --op int4_gemm --m 256 --kn 4096,28672 \
  --frag-rows 256 --check-calls 30 --rounds 2 "${C256[@]}" > $R/int4_m256_4096x28672_wide.txt 2>&1
echo "== 256x4096x28672 rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^ +[0-9.]+ +[0-9.]+ |WRONG|rror" $R/int4_m256_4096x28672_wide.txt | cut -c1-110
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( $(left) - 15 )) python3 scripts/helion_ab.py --op int4_gemm --m 128 \
  --kn 8192,8192 --check-calls 30 --rounds 2 --config '{"num_warps": 8, "frag": false, "tiled": false}' \
  --config '{"block_sizes": [64, 128], "num_warps": 4, "tma": true, "tiled": false}' > $R/int4_m128_8192x8192_w8.txt 2>&1
echo "== 128x8192x8192 rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^ +[0-9.]+ +[0-9.]+ |WRONG|rror" $R/int4_m128_8192x8192_w8.txt | cut -c1-110
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call F: source .gpu/s46f.sh
# Session 46 call F (x2, BUDGET s), at the Helion store commit of call E: the int4 default preset (every backend,
# GPU 0); on GPU 1 the int4 file's helion GPU tests (the stored 8-warp fragment-order tiles over 30 calls: the
# new 256x4096x28672 entry's included).
BUDGET=${BUDGET:-300} source results/h200/gpu_common.sh
run1 0 int4_gemm --op int4_gemm
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 200 python3 -m pytest -m gpu -q -p no:cacheprovider \
    tests/test_int4_gemm.py -k helion > $R/pytest_int4_helion_f.txt 2>&1; echo "int4 -k helion rc $? wall $(( $(date +%s)-t1 )) s"
  tail -2 $R/pytest_int4_helion_f.txt | cut -c1-200 ) &
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call G: source .gpu/s46g.sh
# Session 46 call G (one H200, BUDGET s): where the decode-size loops stall, per SASS instruction (Nsight Compute's
# source page with PC sampling, one launch each): triton's kernel at int4 16x8192x8192 (the ACC WS tiles) and at
# 1x8192x8192 (fused_kernel).
BUDGET=${BUDGET:-200} source results/h200/gpu_common.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
src() {  # name kernel-regex M
  local t1=$(date +%s)
  timeout -k 5 80 $NCU --clock-control none -k regex:$2 -c 1 --section SourceCounters --section WarpStateStats \
    --page source --csv --print-source sass python3 runner.py --op int4_gemm --shape $3,8192,8192 --backends triton \
    --repeats 1 --output-dir $R/src_$1 > $R/src_$1.csv 2>&1
  echo "== $1 rc $? wall $(( $(date +%s)-t1 )) s, $(wc -l < $R/src_$1.csv) lines"; head -3 $R/src_$1.csv | cut -c1-400
}
src ws_m16 ws_kernel 16
src fused_m1 fused_kernel 1
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call H: source .gpu/s46h.sh
# Session 46 call H (x2, BUDGET s). GPU 0: fused_kernel with ACC_SCALE's scale row a K block ahead (this tree)
# against the kernel before (.gpu/fused_gemm_old.py, a copy of the tree with it), each the table's config at int4
# M = 1 (K = N = 8192 and Llama-3-8B's four fused layers), 10 checked calls, 2 rounds a process, four processes
# alternating old / new. GPU 1: the int4 decode preset on this tree (every backend).
BUDGET=${BUDGET:-300} source results/h200/gpu_common.sh
run1 1 int4_gemm_decode --op int4_gemm --shapes decode
rm -rf /tmp/old && mkdir /tmp/old && cp -r qgemm_bench runner.py scripts /tmp/old/ && cp .gpu/fused_gemm_old.py /tmp/old/qgemm_bench/backends/triton_kernels/fused_gemm.py
S=(--shape 1,8192,8192 --shape 1,4096,6144 --shape 1,4096,4096 --shape 1,4096,28672 --shape 1,14336,4096)
ab() {  # name dir
  local t1=$(date +%s)
  ( cd $2 && CUDA_VISIBLE_DEVICES=0 PYTHONPATH=/tmp/site:$2 timeout -k 5 100 python3 scripts/fused_ab.py --op int4_gemm \
      "${S[@]}" --calls 10 --rounds 2 ) > $R/scale_ahead_$1.txt 2>&1
  echo "== $1 rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^int4|^ +[0-9.]+ |WRONG|rror" $R/scale_ahead_$1.txt | cut -c1-100
}
ab old1 /tmp/old; ab new1 $PWD; ab old2 /tmp/old; ab new2 $PWD
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
