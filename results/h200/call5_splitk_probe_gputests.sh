#!/usr/bin/env bash
# H200 call C: split-K baseline with the re-tuned entry, the decode probe, GPU tests of the store move.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
R=/tmp/runs; mkdir -p $R
t0=$(date +%s)
timeout -k 5 150 python3 runner.py --op split_k_gemm --backends torch,triton,triton_deterministic --no-plots --output-dir $R/split_k_gemm > $R/splitk.log 2>&1
echo "split-K rc $? wall $(( $(date +%s)-t0 )) s"
tr '\r' '\n' < $R/splitk.log | grep -E "^wall time|terminated" | cut -c1-300
tar czf $OUT/runs.tgz -C /tmp runs
t1=$(date +%s)
timeout -k 5 160 python3 scripts/decode_probe.py --out $R/probe.txt > $R/probe.log 2>&1
echo "probe rc $? wall $(( $(date +%s)-t1 )) s"
tail -40 $R/probe.log | cut -c1-200
tar czf $OUT/runs.tgz -C /tmp runs
t2=$(date +%s)
timeout -k 5 $(( 480 - (t2-t0) )) python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/test_config_store.py tests/test_weight_only_configs.py tests/test_split_k_gemm.py tests/test_helion_configs.py > $R/pytest.log 2>&1
echo "pytest rc $? wall $(( $(date +%s)-t2 )) s"
tail -8 $R/pytest.log | cut -c1-300
tar czf $OUT/runs.tgz -C /tmp runs
echo "all wall $(( $(date +%s)-t0 )) s"
