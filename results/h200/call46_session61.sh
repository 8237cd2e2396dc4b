#!/usr/bin/env bash
# Session 61 (2026-12-01): what ran, in order, each `bash .gpu/s61<x>.sh` sourcing gpu_common.sh beside this file,
# on one nvidia-h200, carrying .gpu/commit, the script, the wheels of ../shared/scripts/fetch_gpu_wheels.sh but
# transformers' and fbgemm's, and .gpu/old/split_k_parts.py (f714527's, for the A/B's parent tree).
# A at 296d7c1 (finish's masked lanes zeroed). Device time: call A about 330 s with the machine's start.
# Results: pytest_gpu/split_k_s61a_296d7c1.txt, pytest_gpu/finish_s61a_296d7c1.txt, split_k_select_s61/ab.txt
# (the A/B's table, made from the runs' results.json by the summary at the end of call A).

# ---- call A: .gpu/s61a.sh ----
# Session 61 call A (nvidia-h200): `pytest -m gpu` on the split-K files after session 60's review fixes (819963a)
# and on the files whose kernels end in split_k_parts.finish after 296d7c1 (the masked lanes of the last
# program's atomic read zeroed), then the select's cost: 296d7c1 against its parent, one process each, alternated.
BUDGET=${BUDGET:-900} source results/h200/gpu_common.sh
XD=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4"); echo "xdist: ${XD:-none}"
C=$(cat .gpu/commit)
rm -rf /tmp/tree_t && mkdir -p /tmp/tree_t && tar cf - --exclude=./.gpu --exclude=./.git . | tar xf - -C /tmp/tree_t
rm -rf /tmp/tree_o && cp -r /tmp/tree_t /tmp/tree_o && cp .gpu/old/split_k_parts.py /tmp/tree_o/qgemm_bench/backends/triton_kernels/
for f in "split_k:tests/test_split_k_gemm.py tests/test_split_k_reduce.py" \
         "finish:tests/test_fused_norm.py tests/test_model_fused_norm.py tests/test_int4_gemm.py"; do
  n=${f%%:*}; files=${f#*:}; t1=$(date +%s)
  ( cd /tmp/tree_t && PYTHONPATH=/tmp/site:/tmp/tree_t timeout -k 5 300 python3 -m pytest -m gpu -q -p no:cacheprovider $XD \
    $files > $R/pytest_${n}_s61a_$C.txt 2>&1 )
  echo "pytest $n rc $? wall $(( $(date +%s)-t1 )) s: $(tail -n 1 $R/pytest_${n}_s61a_$C.txt | cut -c1-160)"
  grep -E "^FAILED|^ERROR" $R/pytest_${n}_s61a_$C.txt | cut -c1-220 | head
done
save
# The select's cost: parent (o) and 296d7c1 (t) in alternation, 2 rounds each, triton only.
for round in 1 2; do for tr in o t; do
  [ $(left) -lt 60 ] && { echo "A/B stopped: $(left) s left"; break 2; }
  for op in split_k_gemm int4_gemm; do
    if [ $op = split_k_gemm ]; then S="--shape 16,65536,16 --shape 64,8192,64 --shape 256,8192,256 --shape 32,65536,32"
    else S="--shape 1,8192,8192 --shape 1,4096,28672 --shape 4,8192,57344"; fi
    ( cd /tmp/tree_$tr && PYTHONPATH=/tmp/site:/tmp/tree_$tr timeout -k 5 $(( $(left) - 20 )) python3 runner.py --op $op $S \
      --backends triton --repeats 1 --no-plots --output-dir $R/ab_${op}_${tr}$round > $R/ab_${op}_${tr}$round.log 2>&1 )
    echo "ab $op $tr$round rc $?"
  done
done; done
python3 - <<'PY'
import json, glob, collections
t = collections.defaultdict(dict)
for f in sorted(glob.glob("/tmp/runs/ab_*/results.json")):
    tag = f.split("/")[-2]; op, tr = tag[3:-2], tag[-2:]
    rows = json.load(open(f)); rows = rows["rows"] if isinstance(rows, dict) else rows
    for r in rows:
        if r.get("backend") == "triton":
            t[(op, f"{r['M']}x{r['K']}x{r['N']}")][tr] = (r.get("p50_us"), r.get("status"))
print("p50 us, triton: parent o / 296d7c1 t, rounds 1 2")
for k, v in sorted(t.items()):
    print(k, " ".join(f"{tr} {v[tr][0]:.2f}{'' if v[tr][1]=='ok' else ' ' + str(v[tr][1])}" for tr in sorted(v) if v[tr][0]))
PY
save; echo "all wall $(( $(date +%s)-t0 )) s"
