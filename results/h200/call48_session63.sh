#!/usr/bin/env bash
# Session 63 (2026-12-02): what ran, in order, each `bash .gpu/s63<x>.sh` sourcing gpu_common.sh beside this file,
# on one nvidia-h200, carrying .gpu/commit, the script and wheels of ../shared/scripts/fetch_gpu_wheels.sh (A, B:
# every one but transformers', fbgemm's too: gpu_prep.sh --fbgemm; C, D: helion's and filecheck's), and in C and
# D .gpu/ws_hang_probe.py (ws_hang/ws_hang_probe.py before its first call went through the wait) and D the three
# variants (ws_hang/ws_<v>.diff applied to 34c9f70's ws_gemm.py as .gpu/ws_<v>.py). A-D at 34c9f70; E (the fix's
# GPU tests and A/B) did not run: session 64's first call.
# Device time: A about 340 s with the machine's start, B 275, C 335 (a fresh start), D 315 (a fresh start); two
# calls for E found no machine (about 210 s of the budget went), and then too little was left to start one.
# Results: ws_hang/ (A, C, D), helion_ab/nows_nvfp4_gemm_m64_4096x6144_s63.txt (A),
# ws_ab/stamps_int4_m256_4096x4096_s63.txt (A), int4_gemm_decode/ and nvfp4_gemm_decode/ (B).

# ---- call A: .gpu/s63a.sh ----
# Session 63 call A (nvidia-h200, prepared in session 62; carry fbgemm's wheel: gpu_prep.sh .gpu/s63a.sh --fbgemm):
# 1. the suspected WS hang (docs/ws_gemm.md, "A suspected hang with SPLITS 4 and PDL 2"): scripts/ws_ab.py, one
#    process per case, each stopped by a 45 s stall limit (rc 1 and "did not finish" = hung): as the test (257 x 5248
#    x 1000 g128, 16x64x128 s8 split 4 PDL 2; 1088 programs, splits 10/10/10/12), without PDL, one wave (M 16: 64
#    programs), even splits (split 3: 14 each), uneven splits without x's last K block wholly out of bounds (K 5376,
#    K_ALIGN's multiple: at K 5248 block 41 of x is all past K). ~350 s at worst.
# 2. issue 55's one row above 1.2 without item-3 evidence: NVFP4 64x4096x6144 (helion_ab --entry-only). ~40 s.
# 3. (the int4 decode preset moved to .gpu/s63b.sh)
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
hang() {  # NAME SHAPE TILES
  local t1=$(date +%s); timeout -k 5 100 python3 scripts/ws_ab.py --shape $2 --tiles $3 --group-size 128 --rounds 1 \
    --calls 3 --stall-timeout 45 > $R/hang_$1.txt 2>&1
  echo "hang $1 ($2 $3) rc $? wall $(( $(date +%s)-t1 )) s: $(grep -v '^\s*$' $R/hang_$1.txt | tail -n 1 | cut -c1-150)"
}
hang as_test 257,5248,1000 16x64x128s8+split4+pdl2
hang no_pdl 257,5248,1000 16x64x128s8+split4
hang one_wave 16,5248,1000 16x64x128s8+split4+pdl2
hang even_split3 257,5248,1000 16x64x128s8+split3+pdl2
hang uneven_no_oob 257,5376,1000 16x64x128s8+split4+pdl2
save
t1=$(date +%s); timeout -k 5 120 python3 scripts/helion_ab.py --op nvfp4_gemm --m 64 --kn 4096,6144 --entry-only \
  --rounds 2 --check-calls 3 > $R/helion_nows_nvfp4_m64_4096x6144.txt 2>&1
echo "helion_ab rc $? wall $(( $(date +%s)-t1 )) s"; grep -v '^\s*$' $R/helion_nows_nvfp4_m64_4096x6144.txt | tail -n 8 | cut -c1-160
save
# 4. where the time goes at int4 256 x 4096 x N, the rows furthest behind cuBLAS in session 62's default run (17.66
#    against 16.94 us at N 4096): per-consumer stamps of the entry's WS tiles (ws_ab --stamps). ~60 s.
t1=$(date +%s); timeout -k 5 90 python3 scripts/ws_ab.py --stamps --shape 256,4096,4096 \
  --tiles 128x128x128s3+split2+skew2+pdl2 --tiles 256x128x64s4+split2+skew4+pdl2 > $R/stamps_m256_4096.txt 2>&1
echo "stamps rc $? wall $(( $(date +%s)-t1 )) s"; grep -v '^\s*$' $R/stamps_m256_4096.txt | tail -n 24 | cut -c1-160
save
save; echo "all wall $(( $(date +%s)-t0 )) s"

# ---- call B: .gpu/s63b.sh ----
# Session 63 call B (nvidia-h200, prepared in session 62; carry fbgemm's wheel): the int4 and NVFP4 decode presets
# (every backend, humming included) on the current store (M = 64 rows now WS PDL 2), issue 53's baselines. ~250 s.
BUDGET=${BUDGET:-300} source results/h200/gpu_common.sh
run1 0 int4_gemm_decode --op int4_gemm --shapes decode
save
run1 0 nvfp4_gemm_decode --op nvfp4_gemm --shapes decode
save; echo "all wall $(( $(date +%s)-t0 )) s"

# ---- call C: .gpu/s63c.sh ----
# Session 63 call C: where the WS hang stands (.gpu/ws_hang_probe.py: counters and per-launch stamps read on a
# second stream while the launch spins), then ws_ab variants with a 20 s stall limit (which factor matters).
BUDGET=${BUDGET:-420} source results/h200/gpu_common.sh
probe() {  # NAME args...
  local n=$1 t1=$(date +%s); shift
  timeout -k 5 70 python3 .gpu/ws_hang_probe.py "$@" > $R/probe_$n.txt 2>&1
  echo "== probe $n ($*) rc $? wall $(( $(date +%s)-t1 )) s"; grep -v "^\s*$" $R/probe_$n.txt | grep -v Warning | tail -n 16 | cut -c1-220
}
probe m257_nopdl_sync --shape 257,5248,1000 --tiles 16,64,128,8,1,4 --sync --calls 20
probe m257_nopdl_sync_st --shape 257,5248,1000 --tiles 16,64,128,8,1,4 --sync --calls 20 --stamps
probe m16_pdl2_b2b_st --shape 16,5248,1000 --tiles 16,64,128,8,1,4 --pdl 2 --calls 60 --stamps
probe m16_nopdl_b2b_st --shape 16,5248,1000 --tiles 16,64,128,8,1,4 --calls 60 --stamps
save
hang() {  # NAME SHAPE TILES
  local t1=$(date +%s); timeout -k 5 60 python3 scripts/ws_ab.py --shape $2 --tiles $3 --group-size 128 --rounds 1 \
    --calls 3 --stall-timeout 20 > $R/hang_$1.txt 2>&1
  echo "hang $1 ($2 $3) rc $? wall $(( $(date +%s)-t1 )) s: $(grep -v '^\s*$' $R/hang_$1.txt | tail -n 1 | cut -c1-110)"
}
hang even_split4_k5120 257,5120,1000 16x64x128s8+split4
hang s3 257,5248,1000 16x64x128s3+split4
hang bm64 257,5248,1000 64x64x128s3+split4
hang split3_k5120 257,5120,1000 16x64x128s8+split3
hang skew6 257,5248,1000 16x64x128s8+split4+skew6
save; echo "all wall $(( $(date +%s)-t0 )) s"

# ---- call D: .gpu/s63d.sh ----
# Session 63 call D: the WS hang (uneven splits, 8 stages, several waves): which change ends it. Each case one
# process (.gpu/ws_hang_probe.py; a hang exits 3 or is killed at 45 s): this checkout's kernel, with a proxy fence
# after the barriers' init (ws_fence), without the unused `done` barrier's init (ws_nodone), fence + invalidate at
# the end (ws_inval); then this checkout's at 6 and 7 stages (the guard's threshold if none of them does).
BUDGET=${BUDGET:-400} source results/h200/gpu_common.sh
probe() {  # NAME args...
  local n=$1 t1=$(date +%s); shift
  timeout -k 5 38 python3 .gpu/ws_hang_probe.py "$@" > $R/probe_$n.txt 2>&1
  echo "== probe $n rc $? wall $(( $(date +%s)-t1 )) s: $(grep -v '^\s*$' $R/probe_$n.txt | grep -v Warn | tail -n 1 | cut -c1-150)"
}
S4="--shape 257,5248,1000 --tiles 16,64,128,8,1,4"; S3="--shape 257,5120,1000 --tiles 16,64,128,8,1,3"
probe fence_s4 $S4 --module .gpu/ws_fence.py --sync --calls 30
probe fence_s3 $S3 --module .gpu/ws_fence.py --sync --calls 30
probe nodone_s4 $S4 --module .gpu/ws_nodone.py --sync --calls 30
grep -q "all 30 calls finished" $R/probe_fence_s4.txt || probe inval_s4 $S4 --module .gpu/ws_inval.py --sync --calls 30
probe main_s6 --shape 257,5248,1000 --tiles 16,64,128,6,1,4 --sync --calls 30
probe main_s7 --shape 257,5248,1000 --tiles 16,64,128,7,1,4 --sync --calls 30
probe main_s5_split3 --shape 257,5120,1000 --tiles 16,64,128,5,1,3 --sync --calls 30
save; echo "all wall $(( $(date +%s)-t0 )) s"
