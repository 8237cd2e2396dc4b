#!/usr/bin/env bash
# Session 44 (2026-11-30): what ran, in order, each `source .gpu/s44<x>.sh` sourcing gpu_common.sh beside this
# file, carrying .gpu/commit, the call's script and the wheels of ../shared/scripts/fetch_gpu_wheels.sh but
# transformers' (and fbgemm's, but in call C):
# A at e1189e8 on nvidia-h200 (fresh), also carrying .gpu/hcfg/sk_pdl{0,1,2}.json: the store's helion.json with
# the split-K entries at 1x4096x16 and 16x4096x16 given PDL 0, 1 or 2 instead of 3 (what --helion-configs took);
# B at ccb4162 on nvidia-h200-x2 (fresh; its split-K entries committed as d79efe3, its table pass as 1f11634);
# C at 1f11634 on nvidia-h200-x2 (fresh; the int4 and NVFP4 default and decode baselines); D at 226dc34 (the
# deterministic tuner; fresh x2; entries committed as f6f7f89; its split-K preset run not kept); E at f6f7f89
# (fresh x2; the 64x8192x64 re-tune committed as 6d7da5a, the split-K baseline from its GPU 0); F at 162580c on
# nvidia-h200 (fresh; `pytest -m gpu tests/test_split_k_gemm.py`: 40 passed, 131 s); G at 77a22e9 on
# nvidia-h200-x2 (fresh; `--check`: 0 wrong calls at 24 entries). Device time: about 1610 of 1800 s.
# .gpu/hcfg was made before call A by:
#   python3 -c "import json; d = json.load(open('qgemm_bench/configs/h200/helion.json'))
#   [([d['kernels']['split_k_gemm'][b]['config'].update(pdl=p) for b in ('M1_K4096_N16', 'M16_K4096_N16')],
#     json.dump(d, open(f'.gpu/hcfg/sk_pdl{p}.json', 'w'), indent=1)) for p in (0, 1, 2)]"
# ---- call A: source .gpu/s44a.sh
# Session 44 call A (one H200, BUDGET s), planned in session 43: why Helion's split-K tune timed 1x4096x16 at
# 2.52 us while the preset runs the same config at 3.01 (triton 2.36, helion / triton 1.28; 16x4096x16 1.21).
# The preset's rows for the two shapes (3 rounds) with triton and helion alone, then with every backend (as the
# preset: torch_compile runs first in the process), then triton and helion with QGEMM_PDL=0, then Helion's
# entry with PDL 0, 1, 2 instead of 3 (--helion-configs: .gpu/hcfg/sk_pdl*.json, the store with the two
# entries' pdl changed), then the Helion tuner at those shapes (--mkn), one after the other in one call.
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
S="--shape 1,4096,16 --shape 16,4096,16"
for v in alone all nopdl pdl0 pdl1 pdl2; do t1=$(date +%s); f=sk_small_$v; B="--backends triton,helion"; E=""; H=""
  [ $v = all ] && B=""; [ $v = nopdl ] && E="QGEMM_PDL=0"
  case $v in pdl?) H="--helion-configs .gpu/hcfg/sk_$v.json";; esac
  env $E timeout -k 5 120 python3 runner.py --op split_k_gemm $B $H $S --repeats 3 --output-dir $R/$f > $R/$f.log 2>&1
  echo "split-K small $v rc $? wall $(( $(date +%s)-t1 )) s"
  grep -E "^\| (1|16)x4096x16" $R/$f/report.md | grep -E "triton |helion " | head -6 | cut -c1-100; done
t1=$(date +%s); timeout -k 5 100 python3 -m qgemm_bench.tuning.helion --op split_k_gemm --mkn 1,4096,16 \
  --mkn 16,4096,16 > $R/sk_small_tune.log 2>&1; echo "helion tune rc $? wall $(( $(date +%s)-t1 )) s"
grep -E "ok .* us|us with" $R/sk_small_tune.log | cut -c1-160 | head -12
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: source .gpu/s44b.sh
# Session 44 call B (x2, BUDGET s). 1) Helion's split-K tune (c276eb3: the Triton table's config at its own PDL
# mode, then at PDL 3, then the curated list) at the 14 skinny-preset shapes whose table config has PDL 1 or 2,
# over both GPUs. 2) `python -m qgemm_bench.tuning.helion --table-pass` (every Helion fused entry with a table
# twin, 51 on the H200 store) over both GPUs. The store comes back in the tarball.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
S="--mkn 16,4096,16 --mkn 64,8192,64 --mkn 64,16384,64 --mkn 128,4096,128 --mkn 128,8192,128 --mkn 128,16384,128 --mkn 128,32768,128 --mkn 256,4096,256 --mkn 1,4096,16 --mkn 1,4096,128 --mkn 64,4096,16 --mkn 64,4096,128 --mkn 256,14336,128 --mkn 256,4096,64"
t1=$(date +%s); timeout -k 10 150 $RUN -m qgemm_bench.tuning.helion --op split_k_gemm $S > $R/helion_split_k_pdl.log 2>&1
echo "helion split-K tune rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^split_k_gemm +\(" $R/helion_split_k_pdl.log | cut -c1-120
save
t1=$(date +%s); timeout -k 10 $(( $(left) - 20 )) $RUN -m qgemm_bench.tuning.helion --table-pass > $R/helion_table_pass.log 2>&1
echo "helion --table-pass rc $? wall $(( $(date +%s)-t1 )) s"
grep -E "_fused +\(|WRONG|failed|rror" $R/helion_table_pass.log | cut -c1-120 | head -60
save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: source .gpu/s44c.sh
# Session 44 call C (x2, BUDGET s): the baselines on 1f11634's store (Helion: split-K at the Triton config's PDL
# mode, c276eb3 + d79efe3; table twins at 22 fused entries, 1f11634). GPU 0: the int4 default preset, then the
# NVFP4 default; GPU 1: the int4 decode preset, then the NVFP4 decode preset and the split-K preset. Every backend.
# The m-sweeps (K = N = 8192) are not re-run: no Helion or Triton entry of that layer changed.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
run1 0 int4_gemm --op int4_gemm
run1 1 int4_gemm_decode --op int4_gemm --shapes decode
wait; save
run1 0 nvfp4_gemm --op nvfp4_gemm
( run1 1 nvfp4_gemm_decode --op nvfp4_gemm --shapes decode; wait; run1 1 split_k_gemm --op split_k_gemm; wait )
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: source .gpu/s44d.sh
# Session 44 call D (x2, BUDGET s). 1) Helion's deterministic split-K tune (--op split_k_gemm_deterministic:
# the Triton table's deterministic config at its PDL mode and at 3, then the curated list) at the 19 skinny-preset
# shapes whose deterministic config has PDL 1 or 2, over both GPUs. 2) The split-K preset on that store (GPU 0).
BUDGET=${BUDGET:-400} source results/h200/gpu_common.sh
S="--mkn 64,8192,64 --mkn 128,4096,128 --mkn 1,4096,128 --mkn 64,4096,16 --mkn 256,14336,128 --mkn 16,4096,16 --mkn 64,16384,64 --mkn 128,8192,128 --mkn 256,4096,256 --mkn 16,4096,64 --mkn 256,4096,64 --mkn 16,8192,16 --mkn 32,65536,32 --mkn 128,16384,128 --mkn 1,4096,16 --mkn 64,4096,128 --mkn 64,4096,64 --mkn 128,32768,128 --mkn 1,14336,64"
t1=$(date +%s); timeout -k 10 200 $RUN -m qgemm_bench.tuning.helion --op split_k_gemm_deterministic $S > $R/helion_split_k_det.log 2>&1
echo "helion det split-K tune rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^split_k_gemm_deterministic +\(" $R/helion_split_k_det.log | cut -c1-120
save
run1 0 split_k_gemm --op split_k_gemm; wait
save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: source .gpu/s44e.sh
# Session 44 call E (x2, BUDGET s). GPU 0: Helion's split-K tune at 64x8192x64 on one GPU, second in its process
# (after 16x4096x16), atomic then deterministic: calls B and D tuned it first in their rank's process and took PDL 1
# (4.1 us against PDL 3's 4.4), while the preset runs PDL 1 there at 5.2 (PDL 3 4.38 in session 43's run). Then
# the split-K preset on the resulting store. GPU 1: the split-K preset on the committed store (f6f7f89) meanwhile:
# a second run of the same store, for the run-to-run spread.
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
run1 1 split_k_gemm_f6f7f89 --op split_k_gemm
for op in split_k_gemm split_k_gemm_deterministic; do t1=$(date +%s)
  CUDA_VISIBLE_DEVICES=0 timeout -k 10 90 python3 -m qgemm_bench.tuning.helion --op $op --mkn 16,4096,16 --mkn 64,8192,64 \
    > $R/helion_${op}_64x8192x64.log 2>&1; echo "helion $op tune rc $? wall $(( $(date +%s)-t1 )) s"
  grep -E "ok .* us|us with" $R/helion_${op}_64x8192x64.log | cut -c1-170 | head -24; done
run1 0 split_k_gemm --op split_k_gemm
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call F: source .gpu/s44f.sh
# Session 44 call F (one H200, BUDGET s): the split-K GPU tests on 162580c (Helion's split-K at the Triton
# config's PDL mode, both modes' entries; every skinny shape with the store's configs, both kernels, both modes).
BUDGET=${BUDGET:-260} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 220 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_split_k_gemm.py \
  > $R/pytest_split_k_gpu.log 2>&1; echo "pytest -m gpu split-K rc $? wall $(( $(date +%s)-t1 )) s"
tail -4 $R/pytest_split_k_gpu.log | cut -c1-200
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call G: source .gpu/s44g.sh
# Session 44 call G (x2, BUDGET s): `python -m qgemm_bench.tuning.helion --check --op int4_gemm --m 128,256,512`
# (77a22e9) over both GPUs: every int4 fused entry of M 128-512, 30 calls each on two input sets, untimed. Five
# of them read fragment order on pointer loads in 128- or 256-row tiles on 4 warps, whose SASS writes a pending
# wgmma's A registers (docs/helion.md); two split-2 twins of that kind were wrong in call B.
BUDGET=${BUDGET:-200} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 10 $(( $(left) - 15 )) $RUN -m qgemm_bench.tuning.helion --check --op int4_gemm --ms 128,256,512 \
  > $R/helion_check_int4.log 2>&1; echo "helion --check rc $? wall $(( $(date +%s)-t1 )) s"
grep -E "calls wrong|skipped|rror" $R/helion_check_int4.log | cut -c1-150
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
