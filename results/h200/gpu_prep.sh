#!/usr/bin/env bash
# Run here (no GPU), in the tree's root, before a session's device calls: puts the wheels the GPU machine lacks
# into .gpu/whl (git-ignored; ../shared/scripts/fetch_gpu_wheels.sh downloads them into .whl), writes
# .gpu/commit (gpu_common.sh reads it) and prints the `carry` list for the call's script, with what the call
# carries in all against the 64 MiB limit. transformers' wheel stays out (the tree would not fit with fbgemm's).
# Usage: bash results/h200/gpu_prep.sh .gpu/s52a.sh [--fbgemm]   (--fbgemm: runs with fbgemm's rows)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
script=${1:?usage: gpu_prep.sh .gpu/SCRIPT.sh [--fbgemm]}; fb=${2:-}
[ -f "$script" ] || { echo "error: $script: no such file" >&2; exit 2; }
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
names="filecheck gemlite helion humming_kernels"; [ "$fb" = --fbgemm ] && names="$names fbgemm_gpu_genai"
for n in $names; do ls .whl/$n-*.whl > /dev/null 2>&1 || { bash ../shared/scripts/fetch_gpu_wheels.sh > /dev/null; break; }; done
rm -rf .gpu/whl && mkdir -p .gpu/whl
for n in $names; do cp .whl/$n-*.whl .gpu/whl/; done
git rev-parse --short HEAD > .gpu/commit
[ -z "$(git status --porcelain --untracked-files=no)" ] || echo "note: uncommitted changes travel too; .gpu/commit names HEAD"
carry=(.gpu/commit "$script" .gpu/whl/*.whl)
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1); extra=$(du -cb "${carry[@]}" | tail -1 | cut -f1)
echo "carried: tree $(( tree >> 20 )) MiB + .gpu $(( extra >> 20 )) MiB of 64"
[ $(( tree + extra )) -lt $(( 64 << 20 )) ] || echo "warning: over 64 MiB: the call will refuse it"
python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${carry[@]}"
