#!/usr/bin/env bash
# Session 36 (2026-11-29): what ran, in order, on one fresh nvidia-h200-x2 kept warm between the calls (commit
# 0ef73f3; carry [".gpu"], .gpu/whl holding the wheels of ../shared/scripts/fetch_gpu_wheels.sh). Device time:
# 1678 of 1800 s in five calls. The store the tunes of call 1 wrote (a2f62ff) is the one every later run read:
# pre.sh restores it, journal included, from /tmp/runs/store_h200 at the start of each call.
# ---- pre.sh (sourced by every call)
# sourced by every call: install, env, bytecode, the store a previous call on this machine left behind
if [ ! -e /tmp/site.done ]; then python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1; touch /tmp/site.done; fi
export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
if [ ! -e /tmp/pyc.done ]; then
  SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
  timeout 60 python3 -m compileall -q -j 16 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1; touch /tmp/pyc.done
fi
R=/tmp/runs; mkdir -p $R
if [ -d $R/store_h200 ]; then cp -r $R/store_h200/. qgemm_bench/configs/h200/; echo "store restored from the last call (journal too)"; fi
save() { [ -z "${NO_STORE_SAVE:-}" ] && { rm -rf $R/store_h200; cp -r qgemm_bench/configs/h200 $R/store_h200; }; tar czf $OUT/${SAVE_NAME:-runs}.tgz -C /tmp runs; }
t0=$(date +%s)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# ---- call 1 (s36x1.sh, ~490 s): int4 M 64/256/1024 and NVFP4 M 1/16 from the whole pools, over both GPUs
tune() {  # op ms stop
  local t1=$(date +%s)
  timeout -k 10 $(( $3 + 25 )) torchrun --standalone --nproc-per-node 2 runner.py tune --op $1 --backends triton \
    --ms $2 --full --stop-after-s $3 ${RESUME:+--resume} > $R/tune_$1_full_$t1.log 2>&1
  echo "tune $1 rc $? wall $(( $(date +%s)-t1 )) s"
  tr '\r' '\n' < $R/tune_$1_full_$t1.log | grep -E "^(int4|nvfp4) (fused )?M|WRONG|^tuned|unfinished|rank .*ended|Error" | tail -45 | cut -c1-230
  save
}
tune int4_gemm 64,256,1024 ${STOP1:-230}
tune nvfp4_gemm 1,16 $(( ${END:-560} - ($(date +%s)-t0) - 25 ))
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call 2 (s36x2.sh with BUDGET=555; no tune was unfinished): pairs of one-GPU runs side by side
run1() {  # gpu folder limit runner-args...: one background one-GPU run
  local g=$1 f=$2 lim=$3; shift 3
  ( t1=$(date +%s); CUDA_VISIBLE_DEVICES=$g timeout -k 10 $lim python3 "$@" > $R/$f.log 2>&1
    echo "$f (GPU $g) rc $? wall $(( $(date +%s)-t1 )) s" ) &
}
show() {  # folder
  [ -f $R/$1/report.md ] && grep "at or under the fastest peer" $R/$1/report.md | cut -c1-160
  python3 -c "import json;m=json.load(open('$R/$1/metadata.json'));print('$1 wall_s', m.get('wall_s'))" 2>/dev/null
  tail -1 $R/$1.log | cut -c1-200
}
left() { echo $(( B - ($(date +%s)-t0) )); }
S="--shape 1,8192,8192 --shape 1,8192,10240 --shape 1,4096,4096 --shape 1,8192,57344"
if [ $(left) -gt 150 ]; then
  run1 0 int4_gemm $(( $(left) - 5 )) runner.py --op int4_gemm --output-dir $R/int4_gemm
  ( t1=$(date +%s); export CUDA_VISIBLE_DEVICES=1
    timeout -k 5 150 python3 scripts/fused_ab.py --op nvfp4_gemm $S --config table --config table+SHORT_DECODE \
      --config 'table+ACC_SCALE+maxnreg=128' --config 'table+ACC_SCALE+maxnreg=128+SHORT_DECODE' --calls 30 --rounds 3 \
      > $R/fused_ab_nvfp4_m1.txt 2>&1; echo "fused_ab M 1 rc $?"
    timeout -k 5 90 python3 scripts/fused_ab.py --op nvfp4_gemm --shape 16,8192,8192 --shape 16,8192,57344 --config table \
      --config table-WS --config 'table-WS+ACC_SCALE+maxnreg=128+SHORT_DECODE' --calls 30 --rounds 3 \
      > $R/fused_ab_nvfp4_m16.txt 2>&1; echo "fused_ab M 16 rc $? wall $(( $(date +%s)-t1 )) s" ) &
  wait; show int4_gemm; grep -vi warn $R/fused_ab_nvfp4_m1.txt $R/fused_ab_nvfp4_m16.txt | tail -45 | cut -c1-170; save
fi
if [ $(left) -gt 150 ]; then
  run1 0 nvfp4_gemm $(( $(left) - 5 )) runner.py --op nvfp4_gemm --output-dir $R/nvfp4_gemm
  run1 1 nvfp4_gemm_decode $(( $(left) - 5 )) runner.py --op nvfp4_gemm --shapes decode --output-dir $R/nvfp4_gemm_decode
  wait; show nvfp4_gemm; show nvfp4_gemm_decode; save
fi
if [ $(left) -gt 170 ]; then
  run1 0 int4_gemm_msweep $(( $(left) - 5 )) runner.py --op int4_gemm --shapes m-sweep --repeats 3 --output-dir $R/int4_gemm_msweep
  run1 1 int4_gemm_decode $(( $(left) - 5 )) runner.py --op int4_gemm --shapes decode --output-dir $R/int4_gemm_decode
  wait; show int4_gemm_msweep; show int4_gemm_decode; save
fi
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call 3 (s36x3.sh with BUDGET=560): Llama-3-70B TP2, then helion_ab NVFP4 M 1, 16 on GPU 0
B=${BUDGET:-560}
t1=$(date +%s)
timeout -k 10 300 torchrun --standalone --nproc-per-node 2 runner.py --model llama-3-70b --quant int4-g128 --batch 1 \
  --compile default --backends bf16,triton --lm-head --attention flex --output-dir $R/model_llama-3-70b > $R/model70b.log 2>&1
echo "70B TP2 rc $? wall $(( $(date +%s)-t1 )) s"
python3 - <<'PY'
import csv
for r in csv.DictReader(open('/tmp/runs/model_llama-3-70b/results.csv')):
    f = lambda k: r.get(k) or '-'
    print(r['backend'], r['quant'], r['batch'], r['status'], f('reason')[:200], 'tok/s', f('tokens_per_s')[:7], 'x', f('speedup')[:5],
          'step', f('step_ms_p50')[:6], 'compile', f('compile_s')[:5],
          'q/d/a/o/total', *(f(f'split_{c}_ms')[:6] for c in ('quant_gemm', 'dense_gemm', 'attention', 'other', 'total')))
PY
grep -v -i "warn\|forward_call\|^\s*$" $R/model70b.log | tail -4 | cut -c1-300
save
left=$(( B - ($(date +%s)-t0) ))
if [ $left -gt 130 ]; then
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( left - 10 )) python3 scripts/helion_ab.py --op nvfp4_gemm --m 1,16 --rounds 2 \
    > $R/helion_ab_nvfp4_acc.txt 2>&1
  echo "helion_ab rc $? wall $(( $(date +%s)-t1 )) s"; grep -vi warn $R/helion_ab_nvfp4_acc.txt | tail -25 | cut -c1-160
  save
fi
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call 4: the default int4 run on both GPUs (its first on this machine: the one-GPU runs of call 2 had
# compiled), then on GPU 0 alone again (the machine's second int4 default: results/h200/int4_gemm/)
t1=$(date +%s); timeout -k 10 200 torchrun --standalone --nproc-per-node 2 runner.py --op int4_gemm --output-dir $R/int4_2gpu_warm > $R/int4_2gpu_warm.log 2>&1
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 10 200 python3 runner.py --op int4_gemm --output-dir $R/int4_gemm_warm > $R/int4_warm.log 2>&1
# ---- call 5: the default int4 run on both GPUs again (results/h200x2/int4_gemm/), then every `-m gpu` test but
# tests/test_int4_gemm.py's (those ran in session 35: 251 passed, 3 skipped) on GPU 0: 187 passed in 240 s
timeout -k 10 150 torchrun --standalone --nproc-per-node 2 runner.py --op int4_gemm --output-dir $R/int4_2gpu_warm2 > $R/int4_2gpu_warm2.log 2>&1
CUDA_VISIBLE_DEVICES=0 timeout -k 10 250 python3 -m pytest -q -p no:cacheprovider -m gpu tests --deselect tests/test_int4_gemm.py -x -n 0
