#!/usr/bin/env bash
# Session 43 (2026-11-30): what ran, in order, each `source .gpu/s43<x>.sh` sourcing gpu_common.sh beside this
# file, carrying .gpu/commit, the call's script and the wheels of ../shared/scripts/fetch_gpu_wheels.sh but
# fbgemm's and transformers' (no int4 peers or model runs in A-C):
# A at 0bbed3f on nvidia-h200-x2 (fresh); B at 0bbed3f on nvidia-h200 (fresh), also carrying .gpu/rot_diag.py
# (helion_ab/nvfp4_rot_diag.py here); C at 473be55 on nvidia-h200-x2 (fresh; its rot pass committed as 0d2bdde,
# helion sha 90498b22); D at 473be55+d72b0f4 (fresh x2; its first step failed: torchrun took the pass's `--m` for
# an ambiguous option of its own; the split-K entries committed as 08203d3; its NVFP4 runs repeat call C's store
# and are not kept); E at f7a304a (fresh x2; rot pass committed as 09e4758, the split-K tuner's table kept every
# entry); F at 8d4d438 (fresh x2; rot pass committed as a07d31e). Device time: about 1636 of 1800 s.
# ---- call A: source .gpu/s43a.sh
# Session 43 call A (x2, BUDGET s), planned in session 42. GPU 0: Helion's rot (NVFP4 on ROT_DECODE's permuted
# weights, f8763ed), first its GPU test (bit for bit against the plain decode: the
# permutation assumes the Triton kernel's A-operand register order), then scripts/helion_ab.py at M 1, 16, 32 on
# two layers with the entry + rot as --config, 30 checked calls. GPU 1: the same at 4096x28672 and 8192x57344.
BUDGET=${BUDGET:-300} source results/h200/gpu_common.sh
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_helion_variants.py \
    -k "rot_gives" > $R/pytest_helion_rot.log 2>&1; echo "pytest helion rot (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"
  tail -3 $R/pytest_helion_rot.log | cut -c1-200
  for kn in 8192,8192 28672,8192; do t1=$(date +%s)
    CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( $(left) / 2 )) python3 scripts/helion_ab.py --op nvfp4_gemm --m 1,16,32 --kn $kn \
      --config '{"rot": true}' --check-calls 30 > $R/helion_ab_rot_$kn.txt 2>&1; echo "helion_ab $kn (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"
    grep -E "^ *[0-9.]+ +helion|triton|rot|WRONG" $R/helion_ab_rot_$kn.txt | cut -c1-160 | head -30; done ) &
( for kn in 4096,28672 8192,57344; do t1=$(date +%s)
    CUDA_VISIBLE_DEVICES=1 timeout -k 5 $(( $(left) / 2 )) python3 scripts/helion_ab.py --op nvfp4_gemm --m 1,16,32 --kn $kn \
      --config '{"rot": true}' --check-calls 30 > $R/helion_ab_rot_$kn.txt 2>&1; echo "helion_ab $kn (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"
    grep -E "^ *[0-9.]+ +helion|triton|rot|WRONG" $R/helion_ab_rot_$kn.txt | cut -c1-160 | head -30; done ) &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: source .gpu/s43b.sh
# Session 43 call B (one H200, BUDGET s): call A's GPU test found Helion's rot not bit for bit the plain decode
# (4 of 4 tiles at M 7), while helion_ab's checks (30 calls, tolerance) passed it. .gpu/rot_diag.py: per test
# tile and M 7/100, plain, plain again, rot, rot again and the non-PTX decode against fp64, and where rot and
# plain differ. Then the M = 1 entries (tma, where rot is dropped) on pointer loads with rot.
BUDGET=${BUDGET:-200} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 120 python3 .gpu/rot_diag.py > $R/rot_diag.txt 2>&1; echo "rot_diag rc $? wall $(( $(date +%s)-t1 )) s"
cut -c1-400 $R/rot_diag.txt | tail -12
for kn in 8192,57344 28672,8192; do t1=$(date +%s)
  timeout -k 5 $(( $(left) / 2 )) python3 scripts/helion_ab.py --op nvfp4_gemm --m 1 --kn $kn \
    --config '{"rot": true, "tma": false, "indexing": "pointer"}' --check-calls 30 > $R/helion_ab_rot_m1_$kn.txt 2>&1
  echo "helion_ab m1 $kn rc $? wall $(( $(date +%s)-t1 )) s"
  grep -E "^nvfp4|triton  |helion entry  |rot True|WRONG" $R/helion_ab_rot_m1_$kn.txt | grep -v "{" | cut -c1-160 | head -8; done
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: source .gpu/s43c.sh
# Session 43 call C (x2, BUDGET s): Helion's rot after d87b4d1 (dropped where N % 16 != 0): its GPU test at
# N = 208, then `python -m qgemm_bench.tuning.helion --rot-pass` (473be55) over both GPUs: every NVFP4 fused
# entry at M 1, 16, 32 against its rot twin, 30 checked calls; then the NVFP4 default and decode presets side by
# side, then the NVFP4 m-sweep (3 rounds) on the new store.
BUDGET=${BUDGET:-420} source results/h200/gpu_common.sh
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 90 python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/test_helion_variants.py -k "rot_gives" > $R/pytest_helion_rot2.log 2>&1; rc=$?
echo "pytest helion rot rc $rc wall $(( $(date +%s)-t1 )) s"; tail -2 $R/pytest_helion_rot2.log | cut -c1-200
if [ $rc -eq 0 ]; then
  t1=$(date +%s); timeout -k 10 200 $RUN -m qgemm_bench.tuning.helion --rot-pass > $R/helion_rot_pass.log 2>&1
  echo "helion --rot-pass rc $? wall $(( $(date +%s)-t1 )) s"
  grep -E "us with|-> |WRONG|rror|skipped" $R/helion_rot_pass.log | cut -c1-230 | tail -40; save
  pair 130 nvfp4_gemm --op nvfp4_gemm -- nvfp4_gemm_decode --op nvfp4_gemm --shapes decode
  run1 0 nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3; wait; save
fi
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: source .gpu/s43d.sh
# Session 43 call D (x2, BUDGET s): Helion's rot pass at M 64, 128, 256 (NVFP4 fused entries; Helion has no
# warp-specialized kernel there, where Triton's ROT lost to it), then Helion split-K entries (d72b0f4's --mkn) at
# the preset shapes where helion / triton was 1.13-1.28 on the Triton table's untimed config, both over the two
# GPUs; then the NVFP4 default preset beside its decode preset, then its m-sweep (the split-K preset waits for
# call E's deterministic tree entries).
BUDGET=${BUDGET:-480} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 10 150 $RUN -m qgemm_bench.tuning.helion --rot-pass --m 64,128,256 > $R/helion_rot_pass_64_256.log 2>&1
echo "helion --rot-pass 64-256 rc $? wall $(( $(date +%s)-t1 )) s"
grep -E "us with|-> |WRONG|rror|skipped" $R/helion_rot_pass_64_256.log | cut -c1-200 | tail -30; save
S=""; for s in 1,4096,16 16,4096,16 256,4096,64 64,4096,128 128,4096,128 64,16384,64; do S="$S --mkn $s"; done
t1=$(date +%s); timeout -k 10 150 $RUN -m qgemm_bench.tuning.helion --op split_k_gemm $S > $R/helion_split_k_mkn.log 2>&1
echo "helion split-K --mkn rc $? wall $(( $(date +%s)-t1 )) s"
grep -E "us with|-> |WRONG|rror|no config" $R/helion_split_k_mkn.log | cut -c1-200 | tail -20; save
pair 130 nvfp4_gemm --op nvfp4_gemm -- nvfp4_gemm_decode --op nvfp4_gemm --shapes decode
run1 0 nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3; wait; save
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: source .gpu/s43e.sh
# Session 43 call E (x2, BUDGET s). GPU 0: Helion's rot pass at M 64, 128, 256 on one GPU (call D's under
# torchrun never ran: torchrun took `--m` for an ambiguous option of its own), then, where it moved an entry,
# the NVFP4 default and decode presets and the m-sweep. GPU 1: REDUCE "tree" (381e269): its tests on the GPU,
# then the split-K tuner with --tree at the four long-K shapes where the deterministic kernel is furthest from
# the atomic one (--keep-faster against the store's table), then the split-K preset on that table.
BUDGET=${BUDGET:-480} source results/h200/gpu_common.sh
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 10 150 python3 -m qgemm_bench.tuning.helion --rot-pass --m 64,128,256 \
    > $R/helion_rot_pass_64_256.log 2>&1; echo "helion --rot-pass 64-256 (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"
  grep -E "us with|-> |WRONG|rror|skipped" $R/helion_rot_pass_64_256.log | cut -c1-200 | tail -30
  if grep -q -- "-> helion.json" $R/helion_rot_pass_64_256.log; then
    run1 0 nvfp4_gemm --op nvfp4_gemm; wait
    run1 0 nvfp4_gemm_decode --op nvfp4_gemm --shapes decode; wait
    run1 0 nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3; wait
  fi ) &
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 120 python3 -m pytest -q -p no:cacheprovider tests/test_split_k_reduce.py \
    tests/test_split_k_gemm.py -k tree > $R/pytest_tree.log 2>&1; rc=$?
  echo "pytest tree (GPU 1) rc $rc wall $(( $(date +%s)-t1 )) s"; tail -2 $R/pytest_tree.log | cut -c1-200
  if [ $rc -eq 0 ]; then
    t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 10 300 python3 -m qgemm_bench.tuning.split_k $R/split_k_tree.json \
      --base qgemm_bench/configs/h200/split_k.json --no-preset --shapes 16x65536x16 32x65536x32 16x32768x16 32x32768x32 \
      --retune --keep-faster --tree --limit-s 250 > $R/split_k_tree.log 2>&1
    echo "split_k --tree (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"; tail -12 $R/split_k_tree.log | cut -c1-220
    [ -s $R/split_k_tree.json ] && cp $R/split_k_tree.json qgemm_bench/configs/h200/split_k.json
  fi
  run1 1 split_k_gemm --op split_k_gemm; wait ) &
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call F: source .gpu/s43f.sh
# Session 43 call F (x2, BUDGET s): Helion's rot pass at M 512 and 1024 (the NVFP4 fused entries left; rot won at
# every entry of M 64-256 in call E) on one GPU, then the NVFP4 default preset beside its m-sweep on that store.
BUDGET=${BUDGET:-260} source results/h200/gpu_common.sh
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 10 100 python3 -m qgemm_bench.tuning.helion --rot-pass --m 512,1024 \
  > $R/helion_rot_pass_512_1024.log 2>&1; echo "helion --rot-pass 512-1024 rc $? wall $(( $(date +%s)-t1 )) s"
grep -E "us with|-> |WRONG|rror|skipped" $R/helion_rot_pass_512_1024.log | cut -c1-200 | tail -20; save
pair 120 nvfp4_gemm --op nvfp4_gemm -- nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3
echo "all wall $(( $(date +%s)-t0 )) s"
