#!/usr/bin/env bash
# Session 62 (2026-12-01): what ran, in order, each `bash .gpu/s62<x>.sh` sourcing gpu_common.sh beside this file,
# on one nvidia-h200, carrying .gpu/commit, the script and the wheels of ../shared/scripts/fetch_gpu_wheels.sh but
# transformers' (A, B, C with fbgemm's: gpu_prep.sh --fbgemm). A at 020cd4b (`BUDGET=530`); B, C, D, E at 565a434
# (A's store committed; `BUDGET=505`, `395`, `135`, `95`). Device time: A about 645 s with the machine's start,
# B 640 (a fresh start), C 240, D 125, E 100 (about 1750 of 1800 s).
# Results: ws_pdl2_s62/ (A's pdl passes and check: the passes' table is the store's weight_only.json, 565a434);
# int4_gemm/ (B: A's copy stopped at 40 of 48 shapes on its budget, not kept), int4_gemm_msweep/,
# nvfp4_gemm_msweep/ (B), nvfp4_gemm/ (C), ws_ab/ws_ab_bk128_s62c.txt (C); pytest_gpu/ws_pdl2_s62{a,b,d,e}_*.txt (A, B, D, E).

# ---- call A: .gpu/s62a.sh ----
# ---- call A: .gpu/s62a.sh ----
# Session 62 call A (nvidia-h200, prepared in session 61; carry fbgemm's wheel: gpu_prep.sh .gpu/s62a.sh --fbgemm):
# the pdl pass with the WS kernel's PDL 2 on the entries session 61 did not re-time (NVFP4 fused at M = 64, 128,
# 256; int4 at 128), their 30-call check, then the int4 default preset (3 rounds, every backend) on the store they
# wrote: the first whole default run with PDL 2 and the PDL-prefetch split-K table. About 430 s.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
# First the WS PDL 2 GPU cases session 61's review added (59a8938; not yet run on a GPU): splits with fewer K blocks
# than stages and one program per tile, with PDL 2, on the ragged shapes (~30 s).
XD=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4"); C=$(cat .gpu/commit); t1=$(date +%s)
timeout -k 5 120 python3 -m pytest -m gpu -q -p no:cacheprovider $XD tests/test_int4_gemm.py \
  -k "ws_kernel_vs_fp64 and (tiles20 or tiles21)" > $R/pytest_ws_pdl2_s62a_$C.txt 2>&1
echo "pytest rc $? wall $(( $(date +%s)-t1 )) s: $(tail -n 1 $R/pytest_ws_pdl2_s62a_$C.txt | cut -c1-160)"
grep -E "^FAILED|^ERROR" $R/pytest_ws_pdl2_s62a_$C.txt | cut -c1-220 | head
t1=$(date +%s); timeout -k 5 150 python3 -m qgemm_bench.tuning.weight_only $R/pdl_s62a.json pdl --paths fused \
  --formats nvfp4 --ms 64,128,256 > $R/pdl_s62a.log 2>&1
echo "pdl pass nvfp4 rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/pdl_s62a.log | grep -E "fused M|wrote|rror|WRONG" | cut -c1-200 | tail -30
t1=$(date +%s); timeout -k 5 80 python3 -m qgemm_bench.tuning.weight_only $R/pdl_s62a_int4.json pdl --paths fused \
  --formats int4 --ms 128 > $R/pdl_s62a_int4.log 2>&1
echo "pdl pass int4 M 128 rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/pdl_s62a_int4.log | grep -E "fused M|wrote|rror" | cut -c1-200
t1=$(date +%s); timeout -k 5 90 python3 -m qgemm_bench.tuning.weight_only $R/pdl_s62a_check.json check --paths fused --ms 64,128,256 \
  --calls 30 > $R/pdl_s62a_check.log 2>&1
echo "check rc $? wall $(( $(date +%s)-t1 )) s"; tail -n 2 $R/pdl_s62a_check.log | cut -c1-200
save
run1 0 int4_gemm --op int4_gemm --repeats 3
save; echo "all wall $(( $(date +%s)-t0 )) s"

# ---- call B: .gpu/s62b.sh ----
# Session 62 call B (nvidia-h200; carry fbgemm's wheel: gpu_prep.sh .gpu/s62b.sh --fbgemm): the int4 default
# preset (3 rounds, every backend; call A's copy stopped at 40 of 48 shapes on its budget) on 565a434's store,
# the int4 and NVFP4 m-sweeps, then the 6 WS PDL 2 GPU cases call A's pytest did not reach. About 500 s.
BUDGET=${BUDGET:-500} source results/h200/gpu_common.sh
run1 0 int4_gemm --op int4_gemm --repeats 3
save
run1 0 int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3
save
run1 0 nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3
save
XD=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4"); C=$(cat .gpu/commit); t1=$(date +%s); T=$(( $(left) - 8 ))
[ $T -gt 20 ] && { timeout -k 5 $T python3 -m pytest -m gpu -q -p no:cacheprovider $XD tests/test_int4_gemm.py \
  -k "ws_kernel_vs_fp64 and (tiles20 or tiles21) and (shape6 or shape7 or shape8)" > $R/pytest_ws_pdl2_s62b_$C.txt 2>&1
  echo "pytest rc $? wall $(( $(date +%s)-t1 )) s: $(tail -n 1 $R/pytest_ws_pdl2_s62b_$C.txt | cut -c1-160)"
  grep -E "^FAILED|^ERROR" $R/pytest_ws_pdl2_s62b_$C.txt | cut -c1-220 | head; }
save; echo "all wall $(( $(date +%s)-t0 )) s"

# ---- call C: .gpu/s62c.sh ----
# Session 62 call C (nvidia-h200; carry fbgemm's wheel): an A/B at M = 1024 (issue 52's rows behind fbgemm):
# the table's 256x128x64 s4 WS tiles against 256x128x128 s2 (half the loop's per-block overhead: 187 SASS
# instructions per 128 k against 2 x 109, sm_90 offline), same process, 3 rounds, cuBLAS beside; then the NVFP4
# default preset (3 rounds, every backend) on 565a434's store. About 390 s.
BUDGET=${BUDGET:-390} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 150 python3 scripts/ws_ab.py --shape 1024,8192,8192 --tiles 256x128x64s4 \
  --tiles 256x128x128s2 --tiles 256x128x64s4+sk --shape 1024,4096,28672 --cublas \
  --rounds 3 --calls 5 > $R/ws_ab_bk128_s62c.txt 2>&1
echo "ws_ab rc $? wall $(( $(date +%s)-t1 )) s"; grep -v "^\s*$" $R/ws_ab_bk128_s62c.txt | tail -14 | cut -c1-200
save
run1 0 nvfp4_gemm --op nvfp4_gemm --repeats 3
save; echo "all wall $(( $(date +%s)-t0 )) s"

# ---- calls D and E: .gpu/s62d.sh, as E ran it (the 4 cases D did not finish: shape0 and shape6 x tiles20 and
# tiles21); D ran the same with `-n 8`, `timeout -k 5 110` and -k "ws_kernel_vs_fp64 and (tiles20 or tiles21)" ----
# Session 62 call D (nvidia-h200): the 18 WS PDL 2 GPU cases of 59a8938 (calls A and B ran 19 of them under
# xdist without names, each stopped by its timeout), verbose.
BUDGET=${BUDGET:-170} source results/h200/gpu_common.sh
C=$(cat .gpu/commit); t1=$(date +%s)
timeout -k 5 $(( $(left) - 5 )) python3 -m pytest -m gpu -v -p no:cacheprovider -n 4 tests/test_int4_gemm.py \
  -k "ws_kernel_vs_fp64 and (tiles20 or tiles21) and (shape0 or shape6)" > $R/pytest_ws_pdl2_s62d_$C.txt 2>&1
echo "pytest rc $? wall $(( $(date +%s)-t1 )) s: $(tail -n 1 $R/pytest_ws_pdl2_s62d_$C.txt | cut -c1-160)"
grep -cE " PASSED" $R/pytest_ws_pdl2_s62d_$C.txt; grep -E "FAILED|ERROR" $R/pytest_ws_pdl2_s62d_$C.txt | cut -c1-200 | head
save
save; echo "all wall $(( $(date +%s)-t0 )) s"

