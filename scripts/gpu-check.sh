#!/usr/bin/env bash
# Builds every test and benchmark binary here (no GPU needed) and collects them, with a runner,
# into one folder that a GPU machine can run without a Rust toolchain:
#
#   scripts/gpu-check.sh [OUT]            # build; OUT defaults to target/gpu-check
#   OUT/run.sh                            # on the GPU machine: run all, print a pass/fail table
#
# run.sh sets TRIDENT_REQUIRE_CUDA=1, so a test that finds no GPU fails instead of skipping.
# Pass `--quick-bench` to run.sh for short benchmark measurements.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/gpu-check}
rm -rf "$out"
mkdir -p "$out/tests" "$out/benches"

collect() { # $1: tests|benches, rest: cargo arguments (release builds)
    local kind=$1
    shift
    cargo "$@" --no-run --message-format=json 2>"$out/build-$kind.log" |
        python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    if m["profile"]["test"] or m["target"]["kind"] == ["bench"]:
        print(m["target"]["name"] + "\t" + m["executable"])
' | while IFS=$'\t' read -r name exe; do
        # Unit-test binaries of several crates can share a target name: prefix the package.
        local dest="$out/$kind/$name"
        [ -e "$dest" ] && dest="$out/$kind/$name-$(basename "$exe")"
        cp "$exe" "$dest"
        strip --strip-debug "$dest" 2>/dev/null || true
    done
}

collect tests test --workspace --release
collect benches bench --workspace
# The binaries some tests start (found at their build path, which the GPU machine keeps when
# it runs from a copy of this checkout).
mkdir -p "$out/bin"
cp target/release/trident target/release/trident-coll "$out/bin/"

cat >"$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs every collected test and benchmark binary; prints a pass/fail and timing table.
cd "$(dirname "$0")"
export TRIDENT_REQUIRE_CUDA=1
bench_args=(--bench)
[ "${1:-}" = "--quick-bench" ] && bench_args=(--bench --warm-up-time 1 --measurement-time 2)
mkdir -p logs
rows=()
fail=0
run() { # kind, binary, args...
    local kind=$1 bin=$2
    shift 2
    local start end status
    start=$(date +%s.%N)
    if "./$kind/$bin" "$@" >"logs/$kind-$bin.log" 2>&1; then status=pass; else status=FAIL; fail=1; fi
    end=$(date +%s.%N)
    rows+=("$(printf '| %-7s | %-40s | %-4s | %8.2f |' "$kind" "$bin" "$status" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')")")
}
for t in tests/*; do run tests "$(basename "$t")"; done
for b in benches/*; do run benches "$(basename "$b")" "${bench_args[@]}"; done
printf '| kind    | binary                                   | result | seconds |\n|---|---|---|---|\n'
printf '%s\n' "${rows[@]}"
grep -h -E "(time|thrpt):" logs/benches-*.log 2>/dev/null | head -200 || true
[ $fail = 0 ] && echo "all passed" || { echo "failures: see $(pwd)/logs"; exit 1; }
RUN
chmod +x "$out/run.sh"
echo "collected $(ls "$out/tests" | wc -l) test and $(ls "$out/benches" | wc -l) benchmark binaries in $out"
echo "on the GPU machine: $out/run.sh"
