#!/usr/bin/env bash
# Session 40 (2026-11-30): what ran, in order, on nvidia-h200-x2 machines (carry [".gpu"]: .gpu/whl the wheels of
# ../shared/scripts/fetch_gpu_wheels.sh but transformers, .gpu/commit the tree's commit; each call sources
# gpu_common.sh beside this file). Device time: 1639 of 1800 s in six calls, `source .gpu/s40<x>.sh` each:
# A, B and C on one machine (A at c0bfbc6, its TMA pass committed as f2e34a4; B and C at f2e34a4, B's Helion tunes
# committed after C as d8504ca), D on a fresh one at f2e34a4, E and F on another fresh one at f867e42 (E's tunes:
# 1f85979). A fresh machine starts from the tree's store, so E's tunes ran without B's entries: see 1f85979.
# Call D reads .gpu/weight_only_c0bfbc6.json: `git show c0bfbc6:qgemm_bench/configs/h200/weight_only.json`.
# ---- call A: source .gpu/s40a.sh
# Session 40 call A (x2, BUDGET s): GPU 0 helion_ab NVFP4 at M = 256, 1024 (e7c88d9's TMA: right now, and faster?),
# then the Helion M = 1024 gap check (int4 1024x8192x8192, triton+helion against helion alone, one process each);
# GPU 1 the GPU tests of the wide frag and Helion paths, then the Triton TMA pass at M <= 64 and its check.
BUDGET=${BUDGET:-480} source results/h200/gpu_common.sh
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 ${AB_S:-220} python3 scripts/helion_ab.py --op nvfp4_gemm --m 256,1024 \
    --kn 8192,8192 --rounds 3 --check-calls 30 > $R/helion_ab_nvfp4_tma.txt 2>&1
  echo "helion_ab nvfp4 (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"
  grep -vi warn $R/helion_ab_nvfp4_tma.txt | grep -E "^(int4|nvfp4)|helion|triton|WRONG|wrong" | head -40 | cut -c1-150
  for b in triton,helion helion; do
    [ $(left) -lt 60 ] && { echo "skipped gap $b"; continue; }
    CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( $(left) - 10 )) python3 runner.py --op int4_gemm --shape 1024,8192,8192 --backends $b \
      --repeats 3 --output-dir $R/gap_${b/,/_} > $R/gap_${b/,/_}.log 2>&1
    echo "gap $b rc $?"; grep -E "^\| *(triton|helion) " $R/gap_${b/,/_}/report.md 2>/dev/null | head -4 | cut -c1-160
    python3 -c "
import json
for r in json.load(open('$R/gap_${b/,/_}/results.json'))['rows']: print(r['backend'], r['p50_us'], r['round_p50_us'], r['status'], r['reason'][:90])" 2>&1 | tail -4
  done ) &
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 ${PYT_S:-170} python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_int4_gemm.py \
    -k "wide_frag or helion" > $R/pytest_gpu.log 2>&1
  echo "pytest (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"; tail -5 $R/pytest_gpu.log | cut -c1-200
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 $(( $(left) - 70 )) python3 -m qgemm_bench.tuning.weight_only $R/tma.json tma --ms 1,16,32,64 \
    > $R/tma.log 2>&1
  echo "tma pass (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"; grep -v "^ *$" $R/tma.log | tail -30 | cut -c1-180
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 5 $(( $(left) - 8 )) python3 -m qgemm_bench.tuning.weight_only $R/tma_check.json check --ms 1,16,32,64 \
    --calls 30 > $R/tma_check.log 2>&1
  echo "check (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"; tail -6 $R/tma_check.log | cut -c1-180 ) &
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: source .gpu/s40b.sh
# Session 40 call B (x2, BUDGET s): Helion NVFP4 at M = 256, 1024 at every layer (the entries' bf16_scales twins won
# in call A's helion_ab: 60.49 / 62.73 us at 256, 188.97 / 203.91 at 1024), Helion int4 at M = 128, 512 (m-sweep
# helion / triton 1.59 and 1.33), then the int4 | NVFP4 default presets on that store.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
cap() { local c=$1 l=$(( $(left) - ${2:-0} )); echo $(( c < l ? c : l )); }
tune nvfp4_256_1024 $(cap 170 330) --op nvfp4_gemm --backends helion --ms 256,1024 --helion-layers
tune int4_128_512 $(cap 190 160) --op int4_gemm --backends helion --ms 128,512 --helion-layers
pair 140 int4_gemm --op int4_gemm -- nvfp4_gemm --op nvfp4_gemm
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: source .gpu/s40c.sh
# Session 40 call C (x2, same machine as B, BUDGET s): on call B's store, the int4 | NVFP4 m-sweeps (3 rounds), the
# int4 decode preset (its M <= 32 entries changed in call A) | the split-K preset, then the two-GPU int4 default.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
pair 110 int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3 -- nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3
pair 130 int4_gemm_decode --op int4_gemm --shapes decode -- split_k_gemm --op split_k_gemm
if [ "$NG" -ge 2 ] && [ $(left) -gt 100 ]; then
  t1=$(date +%s); timeout -k 10 $(( $(left) - 5 )) $RUN runner.py --op int4_gemm --output-dir $R/x2_int4_gemm > $R/x2_int4_gemm.log 2>&1
  echo "x2 int4_gemm rc $? wall $(( $(date +%s)-t1 )) s"; grep "at or under the fastest peer" $R/x2_int4_gemm/report.md | cut -c1-160; save
fi
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: source .gpu/s40d.sh
# Session 40 call D (x2, BUDGET s): int4 M = 3..16 on the two wide layers where call C's decode preset had M = 4
# 13-14% slower than before the TMA pass (M = 3..16 run M = 16's entry, now on TMA loads): GPU 0 the store as
# committed (f2e34a4), GPU 1 a copy of the tree with the table before the TMA pass (c0bfbc6), same shapes, 3 rounds.
BUDGET=${BUDGET:-200} source results/h200/gpu_common.sh
S=""; for kn in 4096,28672 8192,57344; do for m in 3 4 5 8 12 16; do S="$S --shape $m,$kn"; done; done
rm -rf /tmp/old && mkdir /tmp/old && cp -r . /tmp/old/ && cp .gpu/weight_only_c0bfbc6.json /tmp/old/qgemm_bench/configs/h200/weight_only.json
for g in 0 1; do
  ( d=$PWD; [ $g = 1 ] && d=/tmp/old; cd $d; CUDA_VISIBLE_DEVICES=$g PYTHONPATH=/tmp/site:$d timeout -k 5 $(( $(left) - 10 )) python3 runner.py --op int4_gemm \
      $S --backends triton --repeats 3 --output-dir $R/m3_16_$g > $R/m3_16_$g.log 2>&1; echo "GPU $g rc $?" ) &
done; wait
python3 - <<'PY'
import json
t = [{(r['M'], r['K'], r['N']): (r['p50_us'], r['reason']) for r in json.load(open(f'/tmp/runs/m3_16_{g}/results.json'))['rows'] if r['backend'] == 'triton'} for g in (0, 1)]
for k in sorted(t[0], key=lambda k: (k[1], k[0])):
    a, b = t[0][k], t[1].get(k, (float('nan'), ''))
    print(f"{k[0]}x{k[1]}x{k[2]}  tma-pass {a[0]:7.2f}  before {b[0]:7.2f}  {a[0]/b[0]:.3f}  | {a[1][:60]} | {b[1][:60]}")
PY
save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: source .gpu/s40e.sh
# Session 40 call E (x2, BUDGET s): f867e42's rule (a decode TMA entry borrowed under half its bucket's M runs its
# pointer loads) checked at M = 3..16 on the two wide layers; Helion int4 | NVFP4 at M = 64 from the whole pool
# (--full) at every layer (helion / triton 1.23 there in call B's default runs); then the int4 | NVFP4 decode presets.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
S=""; for kn in 4096,28672 8192,57344; do for m in 3 4 5 8 16; do S="$S --shape $m,$kn"; done; done
CUDA_VISIBLE_DEVICES=0 timeout -k 5 60 python3 runner.py --op int4_gemm $S --backends triton --repeats 3 --output-dir $R/m3_16_fix \
  > $R/m3_16_fix.log 2>&1; echo "m3_16_fix rc $?"
python3 -c "
import json
for r in json.load(open('$R/m3_16_fix/results.json'))['rows']:
    if r['backend'] == 'triton': print(f\"{r['M']}x{r['K']}x{r['N']} {r['p50_us']:7.2f} {r['reason'][:110]}\")"
tune int4_64_full 140 --op int4_gemm --backends helion --ms 64 --full --helion-layers
tune nvfp4_64_full 190 --op nvfp4_gemm --backends helion --ms 64 --full --helion-layers
pair 135 int4_gemm_decode --op int4_gemm --shapes decode -- nvfp4_gemm_decode --op nvfp4_gemm --shapes decode
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call F: source .gpu/s40f.sh
# Session 40 call F (x2, same machine as E, BUDGET s): on call E's store (Helion M = 64 re-tuned), the int4 | NVFP4
# default presets, then the int4 | NVFP4 m-sweeps (3 rounds) if the budget allows.
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
pair 150 int4_gemm --op int4_gemm -- nvfp4_gemm --op nvfp4_gemm
pair 90 int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3 -- nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3
echo "all wall $(( $(date +%s)-t0 )) s"
