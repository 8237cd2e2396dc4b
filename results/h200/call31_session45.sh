#!/usr/bin/env bash
# Session 45 (2026-11-30): what ran, in order, each `source .gpu/s45<x>.sh` sourcing gpu_common.sh beside this
# file, carrying .gpu/commit, the call's script and the wheels of ../shared/scripts/fetch_gpu_wheels.sh but
# transformers' (and fbgemm's, but in calls B and E, which carried all of .gpu/), on nvidia-h200-x2 (each
# machine fresh but E, which found D's):
# A at 8aed66a (also carrying .gpu/hcfg/tiled_1x57344.json: the store's helion.json with the int4 M1_K8192_N57344
# fused entry given "tiled": true); its store committed as 5bd4fda; B at 5bd4fda (the baselines); C at c3db9a2
# (helion_ab at M = 256); D at 7cae0d5 (the split pass; its store committed as 3fa2420); E at 3fa2420 (the
# baselines holding a shape D changed); F at 10a601d (x2: --check, the Helion GPU tests); G at e2df9cc on
# nvidia-h200 (the diagnosis of F's two failures); H at dc14e71 on nvidia-h200 (F's failing tests again: 11
# passed). Device time: about 1600 of 1800 s.
# .gpu/hcfg/tiled_1x57344.json was made before call A by:
#   python3 -c "import json; d = json.load(open('qgemm_bench/configs/h200/helion.json'))
#   d['kernels']['int4_gemm_fused']['M1_K8192_N57344']['config']['tiled'] = True
#   json.dump(d, open('.gpu/hcfg/tiled_1x57344.json', 'w'), indent=1)"
# ---- call A: source .gpu/s45a.sh
# Session 45 call A (x2, BUDGET s). Does the Helion fused kernel gain from the Triton fused kernel's tiled
# weights (kmajor_layout.TILE: a 64-row tile's K step one contiguous 4 KB run; Helion read 64 rows 64 bytes
# apart)? 1) Nsight Compute at int4 1x8192x57344 (helion / triton 1.23 in session 44's default run), one
# launch each (the run's first, checked call): Triton's table config (GPU 1), Helion's entry, then the entry
# tiled (GPU 0, --helion-configs .gpu/hcfg/tiled_1x57344.json: the store with that entry tiled). 2)
# `--tiled-pass`: every Helion fused entry with a tiled twin (84 of 113) against it, one round, 30 checked
# calls each, over both GPUs; the store comes back in the tarball.
BUDGET=${BUDGET:-480} source results/h200/gpu_common.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis"
one() {  # name GPU kernel-regex runner-args...
  local name=$1 g=$2 k=$3 t1=$(date +%s); shift 3
  CUDA_VISIBLE_DEVICES=$g timeout -k 5 150 $NCU --clock-control none -k regex:$k -c 1 $SEC python3 runner.py \
    --op int4_gemm --shape 1,8192,57344 --repeats 1 --output-dir $R/ncu_$name "$@" > $R/ncu_$name.txt 2>&1
  echo "== $name rc $? wall $(( $(date +%s)-t1 )) s"
  grep -E "^  [a-z_]+ \(|Duration|DRAM Throughput|Memory Throughput|L2 Hit|Achieved Occupancy|Registers Per|Shared Memory Config|Dynamic Shared|Waves Per SM|Block Limit|LibraryNotLoaded|ERR" $R/ncu_$name.txt | head -16 | cut -c1-150
}
( one triton 1 fused_kernel --backends triton ) &
( one helion 0 _helion_fused --backends helion; one helion_tiled 0 _helion_fused --backends helion \
    --helion-configs .gpu/hcfg/tiled_1x57344.json ) &
wait
NO_STORE_SAVE=1 SAVE_NAME=ncu save
t1=$(date +%s); timeout -k 10 $(( $(left) - 60 )) $RUN -m qgemm_bench.tuning.helion --tiled-pass > $R/helion_tiled_pass.log 2>&1
echo "helion --tiled-pass rc $? wall $(( $(date +%s)-t1 )) s"
grep -E "_fused +\(|WRONG|failed|rror" $R/helion_tiled_pass.log | cut -c1-120 | head -90
save
t1=$(date +%s); timeout -k 5 $(( $(left) - 5 )) python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_helion_variants.py -k tiled 2>&1 | tail -3 | cut -c1-300
echo "gpu tests wall $(( $(date +%s)-t1 )) s; all wall $(( $(date +%s)-t0 )) s"
# ---- call B: source .gpu/s45b.sh
# Session 45 call B (x2, BUDGET s): the baselines on 5bd4fda's store (70 Helion fused entries on tiled weights,
# call A's --tiled-pass). GPU 0: the int4 default preset, the NVFP4 default, then the int4 m-sweep (3 rounds);
# GPU 1: the int4 decode preset, the NVFP4 decode preset, then the NVFP4 m-sweep (3 rounds). Every backend.
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
run1 0 int4_gemm --op int4_gemm
run1 1 int4_gemm_decode --op int4_gemm --shapes decode
wait; save
run1 0 nvfp4_gemm --op nvfp4_gemm
run1 1 nvfp4_gemm_decode --op nvfp4_gemm --shapes decode
wait; save
run1 0 int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3
run1 1 nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: source .gpu/s45c.sh
# Session 45 call C (x2, BUDGET s): issue 55's M = 256 rows (helion / triton in call B: int4 256x14336x4096
# 1.61, 256x8192x10240 1.51; NVFP4 1.27, 1.30). Their entries leave SMs idle (14336x4096: 64 or 128
# programs; 8192x10240: 160 int4, 80 NVFP4, on 132 SMs) where Triton splits K or runs stream-K. So
# scripts/helion_ab.py at each layer (GPU 0: 14336,4096; GPU 1: 8192,10240), both formats, with more
# programs: the entry with split 2 and 4, 64-row weight tiles of 128 x rows, and that split 2; every
# candidate checked over 30 calls first (int4 fragment order on 128/256-row tiles: docs/helion.md).
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
C=(--config '{"split_k": 2}' --config '{"split_k": 4}' --config '{"block_sizes": [64, 128]}'
   --config '{"block_sizes": [64, 128], "split_k": 2}')
for g in 0 1; do kn=$([ $g = 0 ] && echo 14336,4096 || echo 8192,10240)
  ( t1=$(date +%s); CUDA_VISIBLE_DEVICES=$g timeout -k 5 $(( $(left) - 10 )) python3 scripts/helion_ab.py \
      --op int4_gemm,nvfp4_gemm --m 256 --kn $kn --rounds 2 --check-calls 30 "${C[@]}" > $R/m256_$kn.txt 2>&1
    echo "== $kn rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^ +[0-9.]+ +[0-9.]+ |_gemm 256|WRONG|rror" $R/m256_$kn.txt | cut -c1-110 ) &
done; wait
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: source .gpu/s45d.sh
# Session 45 call D (x2, BUDGET s): `--split-pass` (every Helion fused entry whose programs are fewer than the
# SMs, 27 of 113, against its twin with twice the K split; 30 checked calls each) over both GPUs; the store
# comes back in the tarball.
BUDGET=${BUDGET:-200} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 10 150 $RUN -m qgemm_bench.tuning.helion --split-pass > $R/helion_split_pass.log 2>&1
echo "helion --split-pass rc $? wall $(( $(date +%s)-t1 )) s"
grep -E "_fused +\(|WRONG|failed|rror" $R/helion_split_pass.log | cut -c1-120 | head -40
save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: source .gpu/s45e.sh
# Session 45 call E (x2, BUDGET s): the runs that hold a shape call D's split pass changed, on 3fa2420's store:
# the int4 default preset (256x14336x4096; GPU 0) and the NVFP4 m-sweep (128x8192x8192, 3 rounds; GPU 1),
# every backend.
BUDGET=${BUDGET:-300} source results/h200/gpu_common.sh
run1 0 int4_gemm --op int4_gemm
run1 1 nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call F: source .gpu/s45f.sh
# Session 45 call F (x2, BUDGET s): the final store checked. 1) `python -m qgemm_bench.tuning.helion --check --op
# int4_gemm --ms 128,256,512` over both GPUs (every int4 fused entry of M 128-512, 30 calls on two input sets:
# the fragment-order pointer-load tiles, now tiled, are the ones with pending-wgmma register writes offline).
# 2) The GPU tests that run the Helion backend: tests/test_helion_variants.py on GPU 0, the int4 and NVFP4
# files' helion tests on GPU 1 (-k helion), side by side.
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 10 120 $RUN -m qgemm_bench.tuning.helion --check --op int4_gemm --ms 128,256,512 \
  > $R/check_int4_m128_512.log 2>&1; echo "--check rc $? wall $(( $(date +%s)-t1 )) s"
grep -E "calls wrong|rror" $R/check_int4_m128_512.log | cut -c1-60 | sort | uniq -c | sort -rn | head -5
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider -m gpu \
    tests/test_helion_variants.py > $R/pytest_helion_variants.txt 2>&1; echo "variants rc $? wall $(( $(date +%s)-t1 )) s"
  tail -2 $R/pytest_helion_variants.txt | cut -c1-200 ) &
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider -m gpu \
    tests/test_int4_gemm.py tests/test_nvfp4_gemm.py -k helion > $R/pytest_helion_ops.txt 2>&1
  echo "int4/nvfp4 -k helion rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/pytest_helion_ops.txt | cut -c1-200 ) &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call G: source .gpu/s45g.sh
# Session 45 call G (one H200, BUDGET s): results/h200/helion_ab/int4_tma_frag_scale_mode_diag.py (which
# variant of the TMA fragment-order entry is wrong at per-channel and unscaled int4).
BUDGET=${BUDGET:-200} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 120 python3 results/h200/helion_ab/int4_tma_frag_scale_mode_diag.py \
  > $R/int4_tma_frag_scale_mode_diag.txt 2>&1; echo "diag rc $? wall $(( $(date +%s)-t1 )) s"
grep -v Warn $R/int4_tma_frag_scale_mode_diag.txt | grep -v "^ " | cut -c1-400 | tail -8
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call H: source .gpu/s45h.sh
# Session 45 call H (one H200, BUDGET s): call F's failing GPU tests again after dc14e71 (no int4 fragment
# order by TMA for unscaled or per-channel weights), with the rest of that file's helion tests.
BUDGET=${BUDGET:-150} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_int4_gemm.py -k helion \
  > $R/pytest_int4_helion.txt 2>&1; echo "int4 -k helion rc $? wall $(( $(date +%s)-t1 )) s"
tail -2 $R/pytest_int4_helion.txt | cut -c1-200; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
