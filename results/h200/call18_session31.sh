#!/usr/bin/env bash
# Session 31, one H200, commit 5506fad: six calls on one warm machine, each `bash call18_... STEP` (a-f) over a
# fresh copy of the tree with the wheels of ../../.gpu/whl; each restores the Helion store the call before wrote
# (/tmp/runs/store_h200) so that the runs after the tunes use it (committed as 2dd0740).
#  a: Helion layer tunes, NVFP4 then int4, M 1, 16, 64 (two-row M = 1 binding, frag twins)
#  b: Helion layer tunes with the TMA and persistent variants, int4 then NVFP4, M 256, 1024
#  c: the default int4 and NVFP4 runs (every peer), then helion_ab int4 M 256, 1024 with "triton no WS"
#  d: helion_ab NVFP4 M 256, 1024 with "triton no WS"; pytest -m gpu tests/test_compiled_decode.py
#  e: int4 and NVFP4 m-sweeps (every backend, 1 round)    f: int4 and NVFP4 decode presets (every backend)
set -u; STEP=${1:?step a-f}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
if [ ! -e /tmp/pyc.done ]; then
  SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
  timeout 60 python3 -m compileall -q -j 16 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1; touch /tmp/pyc.done
fi
R=/tmp/runs; mkdir -p $R
if [ -d $R/store_h200 ]; then cp $R/store_h200/*.json qgemm_bench/configs/h200/; echo "store restored from the last call"; fi
save() { rm -rf $R/store_h200; cp -r qgemm_bench/configs/h200 $R/store_h200; tar czf $OUT/runs.tgz -C /tmp runs; }
t0=$(date +%s)
tune() {  # op, tag, extra args...
  local op=$1 tag=$2; shift 2; local t1=$(date +%s)
  timeout -k 10 $(( $STOP + 20 )) python3 runner.py tune --op $op --backends helion --helion-layers "$@" --stop-after-s $STOP > $R/tune_${tag}_$op.log 2>&1
  echo "tune $op rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/tune_${tag}_$op.log | grep -E "^(int4|nvfp4)_gemm \(|InvalidConfig|WRONG|^tuned" | tail -26 | cut -c1-160
  save
}
run() {  # op, shapes (or ""), folder, limit
  local t1=$(date +%s)
  timeout -k 10 $4 python3 runner.py --op $1 ${2:+--shapes $2} --output-dir $R/$3 > $R/$3.log 2>&1
  echo "$3 rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/$3.log | cut -c1-200; save
}
case $STEP in
  a) STOP=180; tune nvfp4_gemm a --ms 1,16,64; tune int4_gemm a --ms 1,16,64 ;;
  b) STOP=225; tune int4_gemm b --helion-variants --ms 256,1024; tune nvfp4_gemm b --helion-variants --ms 256,1024 ;;
  c) run int4_gemm "" int4_gemm 230; run nvfp4_gemm "" nvfp4_gemm 230
     timeout -k 5 $(( 560 - ($(date +%s)-t0) )) python3 scripts/helion_ab.py --op int4_gemm --m 256,1024 --rounds 2 > $R/helion_ab_int4_nows.txt 2>&1; save ;;
  d) timeout -k 5 150 python3 scripts/helion_ab.py --op nvfp4_gemm --m 256,1024 --rounds 2 > $R/helion_ab_nvfp4_nows.txt 2>&1; save
     timeout -k 5 240 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/test_compiled_decode.py > $R/pytest_compiled.txt 2>&1
     echo "pytest rc $?"; tail -5 $R/pytest_compiled.txt; save ;;
  e) run int4_gemm m-sweep int4_gemm_msweep 250; run nvfp4_gemm m-sweep nvfp4_gemm_msweep 250 ;;
  f) run int4_gemm decode int4_gemm_decode 170; run nvfp4_gemm decode nvfp4_gemm_decode 160 ;;
esac
echo "all wall $(( $(date +%s)-t0 )) s"
