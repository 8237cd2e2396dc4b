#!/usr/bin/env bash
# Session 27 call 1 (nvidia-h200, carry .gpu): the default int4 run alone from cold caches (complete: wall and
# phases), then a warm rerun of 12 shapes under cProfile (where prepare time goes), then GPU tests not yet run.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
R=/tmp/runs; mkdir -p $R
t0=$(date +%s)
timeout -k 10 330 python3 runner.py --op int4_gemm --no-plots --output-dir $R/int4_gemm > $R/int4.log 2>&1
echo "int4 default rc $? wall $(( $(date +%s)-t0 )) s"
tr '\r' '\n' < $R/int4.log | grep -E "^wall time|terminated|compiled" | cut -c1-300
python3 -c "import json;m=json.load(open('$R/int4_gemm/metadata.json'));print(m.get('wall_s'), {k: round(v,1) for k,v in m.get('phase_s',{}).items()})" 2>&1 | tail -2
tar czf $OUT/runs.tgz -C /tmp runs
t1=$(date +%s)
S=""; for kn in 4096,6144 14336,4096; do for m in 1 16 64 256 1024 4096; do S="$S --shape $m,$kn"; done; done
timeout -k 5 150 python3 -m cProfile -o $R/prof.out runner.py --op int4_gemm --no-plots --compile-jobs 0 $S --output-dir $R/prof_run > $R/prof.log 2>&1
echo "profile run rc $? wall $(( $(date +%s)-t1 )) s"
python3 -c "import json;m=json.load(open('$R/prof_run/metadata.json'));print(m.get('wall_s'), {k: round(v,1) for k,v in m.get('phase_s',{}).items()})" 2>&1 | tail -2
python3 - > $R/prof.txt 2>&1 <<'PY'
import pstats
s = pstats.Stats('/tmp/runs/prof.out'); s.sort_stats('cumtime').print_stats(120)
s.sort_stats('tottime').print_stats(40)
PY
tar czf $OUT/runs.tgz -C /tmp runs
timeout -k 5 $(( 575 - ($(date +%s)-t0) )) python3 -m pytest -m gpu -q -rfE -p no:cacheprovider tests/test_fused_fold.py tests/test_split_k_reduce.py tests/test_helion_fused_split.py tests/test_int4_gemm.py tests/test_nvfp4_gemm.py > $R/pytest.log 2>&1
echo "pytest rc $?"; tail -8 $R/pytest.log | cut -c1-300
tar czf $OUT/runs.tgz -C /tmp runs
echo "all wall $(( $(date +%s)-t0 )) s"
