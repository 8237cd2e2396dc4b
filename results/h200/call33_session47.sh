#!/usr/bin/env bash
# Session 47 (2026-11-30): what ran, in order, each `source .gpu/s47<x>.sh` sourcing gpu_common.sh beside this
# file, on nvidia-h200-x2 but D, F, G, I and J (one nvidia-h200; B found A's machine warm), carrying .gpu/commit, the call's script and
# the wheels of ../shared/scripts/fetch_gpu_wheels.sh but transformers' and fbgemm's (call C: all of .gpu/).
# A and B at 0759702 (A's ahead pass exited at once: that mode takes no --formats; B ran it again); C at a9851f6
# (the store of A and B); D at 010341c (its pass within noise: store and run not kept); E at 87d8ee2 (REDUCE
# "spread", reverted by d16ff1a after it); F at 138bfd4 (NVFP4 ACC_SCALE against the table, not kept); G at ff932f9
# (int4 M = 1, 16 at 80 registers and split 16, not kept); H at 96d4ebb (pytest -m gpu), H2 and H3 on its machine;
# I (one H200) with 0df5eb9's test; J at 18d1727 (the NVFP4 rows humming leads, other tiles: none faster).
# Device time: about 1520 of 1800 s.
# ---- call A: source .gpu/s47a.sh
# Session 47 call A (x2, BUDGET s). GPU 0: the ahead pass at int4 M = 1, 16, 32, 64 (each ACC_SCALE fused entry
# without and with SCALE_AHEAD, the faster kept) and its check (30 calls an entry); then the ws pass at NVFP4
# M = 16 (WS_POOL[16] against every entry; only 8192x8192 had been timed), the pdl pass there and its check. The
# store comes back in the tarball. GPU 1: 2c9bb83's ACC tiles without ACC at g32 / channel / unscaled (the WS GPU
# test), then Helion at int4 128x8192x8192 (issue 55): the entry with 4 stages and split 2, [128, 128] on 8 warps
# split 2 in K order, 30 checked calls, 2 rounds.
BUDGET=${BUDGET:-400} source results/h200/gpu_common.sh
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 200 python3 -m pytest -m gpu -q -p no:cacheprovider \
    tests/test_int4_gemm.py -k "ws_kernel_vs_fp64" > $R/pytest_ws_fp64.txt 2>&1
  echo "int4 ws_kernel_vs_fp64 rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/pytest_ws_fp64.txt | cut -c1-200
  grep -E "^FAILED" $R/pytest_ws_fp64.txt | cut -c1-200 | head
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 $(( $(left) - 15 )) python3 scripts/helion_ab.py --op int4_gemm \
    --m 128 --kn 8192,8192 --check-calls 30 --rounds 2 --entry-only \
    --config '{"num_stages": 4}' --config '{"split_k": 2}' --config '{"split_k": 2, "num_stages": 4}' \
    --config '{"block_sizes": [128, 128], "num_warps": 8, "frag": false, "tiled": false, "split_k": 2}' \
    > $R/int4_m128_8192x8192_s47.txt 2>&1
  echo "== helion 128x8192x8192 rc $? wall $(( $(date +%s)-t1 )) s"
  grep -E "^ +[0-9.]+ +[0-9.]+ |WRONG|rror" $R/int4_m128_8192x8192_s47.txt | cut -c1-120 ) &
pass() {  # name mode args...
  local n=$1 mode=$2 t1=$(date +%s); shift 2
  CUDA_VISIBLE_DEVICES=0 timeout -k 10 $(( $(left) - 20 )) python3 -m qgemm_bench.tuning.weight_only $R/$n.json $mode \
    "$@" > $R/$n.log 2>&1
  echo "$n rc $? wall $(( $(date +%s)-t1 )) s"
  tr '\r' '\n' < $R/$n.log | grep -v "^\s*$" | grep -E "fused M|wrote|WRONG|wrong|rror" | cut -c1-200 | tail -25
}
pass ahead ahead --ms 1,16,32,64 --formats int4
pass check_ahead check --ms 1,16,32,64 --formats int4 --calls 30
pass ws16_nvfp4 ws --ms 16 --formats nvfp4
pass pdl16_nvfp4 pdl --ms 16 --formats nvfp4
pass check16_nvfp4 check --ms 16 --formats nvfp4 --calls 30
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: source .gpu/s47b.sh
# Session 47 call B (x2, BUDGET s): call A's ahead pass again without --formats (the mode is int4's only), then
# its check (30 calls an entry); the store comes back in the tarball.
BUDGET=${BUDGET:-200} source results/h200/gpu_common.sh
pass() {  # name mode args...
  local n=$1 mode=$2 t1=$(date +%s); shift 2
  CUDA_VISIBLE_DEVICES=0 timeout -k 10 $(( $(left) - 20 )) python3 -m qgemm_bench.tuning.weight_only $R/$n.json $mode \
    "$@" > $R/$n.log 2>&1
  echo "$n rc $? wall $(( $(date +%s)-t1 )) s"
  tr '\r' '\n' < $R/$n.log | grep -v "^\s*$" | grep -E "fused M|wrote|WRONG|wrong|rror" | cut -c1-200 | tail -40
}
pass ahead ahead --ms 1,16,32,64
pass check_ahead check --ms 1,16,32,64 --formats int4 --calls 30
save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: source .gpu/s47c.sh
# Session 47 call C (x2, BUDGET s), at the store commit of calls A and B: the baselines holding int4 M <= 64 and
# NVFP4 M = 16 (every backend). GPU 0: the int4 decode preset, then the int4 default preset. GPU 1: the int4
# m-sweep (3 rounds), then the NVFP4 decode preset.
BUDGET=${BUDGET:-420} source results/h200/gpu_common.sh
( run1 0 int4_gemm_decode --op int4_gemm --shapes decode; wait; run1 0 int4_gemm --op int4_gemm; wait ) &
( run1 1 int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3; wait; run1 1 nvfp4_gemm_decode --op nvfp4_gemm --shapes decode; wait ) &
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: source .gpu/s47d.sh
# Session 47 call D (one H200, BUDGET s), at 010341c: the scale8 pass at NVFP4 M = 1, 16, 32 (each fused entry on
# pointer loads, now mostly ROT_DECODE, without and with SCALE8: fp8 block scales, 7.3 MB fewer bytes at
# 4096x28672, where humming leads the decode preset) and its check (30 calls an entry); then, with the store the
# pass left, the NVFP4 decode preset (every backend). The store comes back in the tarball.
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 10 120 python3 -m qgemm_bench.tuning.weight_only $R/scale8.json scale8 --ms 1,16,32 \
  > $R/scale8.log 2>&1; echo "scale8 rc $? wall $(( $(date +%s)-t1 )) s"
tr '\r' '\n' < $R/scale8.log | grep -v "^\s*$" | grep -E "fused M|wrote|WRONG|wrong|rror" | cut -c1-200 | tail -30
t1=$(date +%s); timeout -k 10 60 python3 -m qgemm_bench.tuning.weight_only $R/check_scale8.json check --ms 1,16,32 \
  --formats nvfp4 --calls 30 > $R/check_scale8.log 2>&1; echo "check rc $? wall $(( $(date +%s)-t1 )) s"
grep -v "0/30 wrong" $R/check_scale8.log | tail -3 | cut -c1-200
run1 0 nvfp4_gemm_decode --op nvfp4_gemm --shapes decode
save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: source .gpu/s47e.sh (twice: at da6c43a the kernel lacked SPREAD, every spread config failed to launch; again at 87d8ee2)
# Session 47 call E (x2, BUDGET s), at da6c43a (REDUCE "spread"). GPU 0: the split-K tuner at the four long-K
# shapes whose deterministic entry is furthest from the atomic one (its spread twins among the candidates),
# --retune --keep-faster over the store's table; the table comes back in the tarball. GPU 1: the spread GPU
# tests (SPREAD 16 waiters against "last", bit for bit over 20 calls), then the reduce file on the GPU.
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 120 python3 -m pytest -m gpu -q -p no:cacheprovider \
    tests/test_split_k_gemm.py -k "spread" > $R/pytest_spread.txt 2>&1
  echo "pytest spread rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/pytest_spread.txt | cut -c1-200
  grep -E "^FAILED|Error" $R/pytest_spread.txt | cut -c1-200 | head
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider \
    tests/test_split_k_reduce.py > $R/pytest_reduce_gpu.txt 2>&1
  echo "pytest reduce rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/pytest_reduce_gpu.txt | cut -c1-200
  grep -E "^FAILED" $R/pytest_reduce_gpu.txt | cut -c1-200 | head ) &
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 10 260 python3 -m qgemm_bench.tuning.split_k $R/split_k_spread.json \
  --base qgemm_bench/configs/h200/split_k.json --no-preset --shapes 16x65536x16 32x65536x32 16x32768x16 32x32768x32 \
  --retune --keep-faster --limit-s 220 > $R/split_k_spread.log 2>&1
echo "tune rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/split_k_spread.log | grep -vi warn | tail -20 | cut -c1-240
python3 - <<'PY'
import json, collections
log = json.load(open("/tmp/runs/split_k_spread.timings.json"))
print("log entries", len(log))
best = collections.defaultdict(dict)
for r in log:
    if r.get("us") is None or r.get("mode") != "deterministic": continue
    red = r["config"].get("REDUCE", "last"); k = (r["shape"], red)
    best[r["shape"]][red] = min(best[r["shape"]].get(red, 1e9), r["us"])
for s, v in best.items(): print(s, {k: round(x, 2) for k, x in v.items()})
PY
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call F: source .gpu/s47f.sh
# Session 47 call F (one H200, BUDGET s), at 138bfd4: NVFP4 ACC_SCALE (each K block's dot on its own, times the
# tensor scale: one fence and wait a block where the chained dot has one per k-16 group, 0 writes to pending
# wgmma operands offline, 364 against 383 SASS a block at the M = 1 ROT tile) against the table's config at
# M = 1 and 16, every Llama layer (fused_ab.py, 10 checked calls, 3 rounds).
BUDGET=${BUDGET:-200} source results/h200/gpu_common.sh
S=(); for kn in 4096,4096 4096,6144 4096,28672 8192,8192 8192,10240 8192,57344 14336,4096 28672,8192; do
  S+=(--shape 1,$kn --shape 16,$kn); done
t1=$(date +%s); timeout -k 5 $(( $(left) - 10 )) python3 scripts/fused_ab.py --op nvfp4_gemm "${S[@]}" \
  --config table --config table+ACC_SCALE --calls 10 --rounds 3 > $R/nvfp4_acc_ab.txt 2>&1
echo "fused_ab rc $? wall $(( $(date +%s)-t1 )) s"; grep -vi warn $R/nvfp4_acc_ab.txt | cut -c1-170
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call G: source .gpu/s47g.sh
# Session 47 call G (one H200, BUDGET s), at ff932f9: int4 M = 1 and 16 fused entries capped at 80 registers.
# Offline (Triton 3.6) the 16x128x128 split 8 ACC tile takes 72 registers there, no spills, every k-16 wgmma
# fenced and waited (WARPGROUP 32 a block, 372 SASS against 337 at r128): 7 programs an SM where r128 fits 4,
# so the grid of split 16 (1024 programs) nearly fits one wave. The table's config, it at r80, at split 16,
# and both; fused_ab.py, 10 checked calls, 3 rounds.
BUDGET=${BUDGET:-240} source results/h200/gpu_common.sh
S=(); for kn in 4096,4096 4096,6144 4096,28672 8192,8192 8192,10240 8192,57344 14336,4096 28672,8192; do
  S+=(--shape 1,$kn); done
S+=(--shape 16,4096,4096 --shape 16,4096,28672 --shape 16,8192,10240 --shape 16,8192,57344 --shape 16,14336,4096)
t1=$(date +%s); timeout -k 5 $(( $(left) - 10 )) python3 scripts/fused_ab.py --op int4_gemm "${S[@]}" \
  --config table --config table+maxnreg=80 --config table+SPLIT_K=16 --config table+maxnreg=80+SPLIT_K=16 \
  --calls 10 --rounds 3 > $R/int4_r80_ab.txt 2>&1
echo "fused_ab rc $? wall $(( $(date +%s)-t1 )) s"; grep -vi warn $R/int4_r80_ab.txt | cut -c1-170
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call H: source .gpu/s47h.sh
# Session 47 call H (x2, BUDGET s), at 96d4ebb: `pytest -m gpu` over every file with marked tests, this
# session's code included. GPU 0: tests/test_int4_gemm.py; GPU 1: the other files. pytest-xdist where the
# machine has it (4 workers a GPU: the tests assert sums, not times).
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
XD=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4")
echo "xdist: ${XD:-none}"
gpu() {  # GPU name files...
  local g=$1 n=$2 t1=$(date +%s); shift 2
  CUDA_VISIBLE_DEVICES=$g timeout -k 10 $(( $(left) - 15 )) python3 -m pytest -m gpu -q -p no:cacheprovider $XD "$@" \
    > $R/pytest_gpu_$n.txt 2>&1
  echo "== $n rc $? wall $(( $(date +%s)-t1 )) s"; tail -1 $R/pytest_gpu_$n.txt | cut -c1-200
  grep -E "^FAILED|^ERROR" $R/pytest_gpu_$n.txt | cut -c1-220 | head -20
}
gpu 0 int4 tests/test_int4_gemm.py &
gpu 1 rest tests/test_nvfp4_gemm.py tests/test_split_k_gemm.py tests/test_cli.py tests/test_humming.py \
  tests/test_helion_variants.py tests/test_compiled_decode.py tests/test_tune.py tests/test_plots.py &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- calls H2 and H3 (the same machine, warm): the compiled-decode GPU tests alone, before and after 3d12586
# (H2 at 96d4ebb: the same one failure; H3 with the fix in the tree: 5 passed)
BUDGET=150 source results/h200/gpu_common.sh; t1=$(date +%s); timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_compiled_decode.py > $R/pytest_gpu_compiled_fixed.txt 2>&1; echo "rc $? wall $(( $(date +%s)-t1 )) s"; tail -1 $R/pytest_gpu_compiled_fixed.txt; grep -E "^FAILED|^E  " $R/pytest_gpu_compiled_fixed.txt | head; NO_STORE_SAVE=1 save
# ---- call I (one H200, fresh): the compiled-decode GPU tests with the 1.5x PDL bound in the tree (0df5eb9's): 5 passed
BUDGET=150 source results/h200/gpu_common.sh; t1=$(date +%s); timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_compiled_decode.py > $R/pytest_gpu_compiled_15.txt 2>&1; echo "rc $? wall $(( $(date +%s)-t1 )) s"; tail -1 $R/pytest_gpu_compiled_15.txt; grep -E "^FAILED|^E  " $R/pytest_gpu_compiled_15.txt | head; NO_STORE_SAVE=1 save
# ---- call J: source .gpu/s47j.sh
# Session 47 call J (one H200, BUDGET s), at 18d1727: NVFP4 rows humming leads by 3-5% (4096x28672 at M = 1 and
# 8, 28672x8192 at M = 8): the table's config against narrower tiles, other splits and a deeper ring, each with
# its ROT_DECODE (fused_ab.py, 10 checked calls, 3 rounds).
BUDGET=${BUDGET:-200} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 $(( $(left) - 10 )) python3 scripts/fused_ab.py --op nvfp4_gemm \
  --shape 1,4096,28672 --shape 8,4096,28672 --shape 8,28672,8192 \
  --config table --config table+BLOCK_N=64 --config table+BLOCK_N=64+SPLIT_K=4 --config table+SPLIT_K=3 \
  --config table+num_stages=5 --config table+num_stages=6 --config table+BLOCK_K=64+SPLIT_K=4 \
  --calls 10 --rounds 3 > $R/nvfp4_humming_rows_ab.txt 2>&1
echo "fused_ab rc $? wall $(( $(date +%s)-t1 )) s"; grep -vi warn $R/nvfp4_humming_rows_ab.txt | cut -c1-170
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
