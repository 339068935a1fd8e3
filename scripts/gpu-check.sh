#!/usr/bin/env bash
# Builds, on a machine without a GPU, the bundle that checks Trident on one H100/H200 in under
# ten minutes, with no Rust toolchain on the GPU machine:
#
#   scripts/gpu-check.sh [OUT]     # build; OUT defaults to target/gpu-check; also OUT.tar.xz
#   OUT/run.sh                     # on the GPU machine
#
# The bundle holds the release `trident` and `trident-coll` binaries, every test binary of the
# workspace (`cargo test --release --no-run`, found through cargo's JSON messages), the time
# model's predictions for H100 SXM and H200 (`trident bench kernels --device emu`), and a text
# corpus for a short training run. run.sh runs:
#   1. every test binary with TRIDENT_REQUIRE_CUDA=1 (a test that finds no GPU fails);
#   2. `trident bench kernels --device cuda`, the predictions beside the measurements;
#   3. 50 iterations of the gpt2-124m shape on --device cuda (tokens/s, MFU);
# and writes summary.json and summary.md (predicted beside measured for every kernel).
#
# GPU_CHECK_SKIP_PREDICT=1 leaves the predictions out (they take the emulator a few minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${1:-target/gpu-check}
rm -rf "$out" "$out.tar.xz"
mkdir -p "$out/tests" "$out/tree/target/release" "$out/tree/target/tmp" "$out/data"
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}

echo "building the release binaries"
cargo build --release --bins >"$out/build-bins.log" 2>&1 || { tail -30 "$out/build-bins.log"; exit 1; }

echo "building every test binary (release)"
cargo test --workspace --release --no-run --message-format=json 2>"$out/build-tests.log" |
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["package_id"].split("#")[0].rstrip("/").split("/")[-1] + "\t" + m["target"]["name"] + "\t" + m["executable"])
' >"$out/test-binaries.tsv" || { tail -30 "$out/build-tests.log"; exit 1; }
while IFS=$'\t' read -r package name exe; do
    # Unit-test binaries of several crates share target names (`lib`): prefix the package.
    dest="$out/tests/$name"
    [ -e "$dest" ] && dest="$out/tests/$package-$name"
    cp "$exe" "$dest"
    strip --strip-all "$dest" 2>/dev/null || true
done <"$out/test-binaries.tsv"

# Tests find the binaries they start and their data at this checkout's paths (compiled in):
# the bundle carries a copy of those paths, and run.sh links the build path to it.
for bin in trident trident-coll; do
    cp "target/release/$bin" "$out/tree/target/release/"
    strip --strip-all "$out/tree/target/release/$bin" 2>/dev/null || true
done
mkdir -p "$out/tree/tests" "$out/tree/perfmodel"
cp -r tests/data "$out/tree/tests/"
cp perfmodel/resources.tsv "$out/tree/perfmodel/"
mkdir -p "$out/bin"
ln -s ../tree/target/release/trident "$out/bin/trident"
printf '%s\n' "$root" >"$out/build-root"

# A corpus for the training run: this checkout's Rust and Markdown text, about 4 MB, GPT-2
# tokenised by the binary itself.
find src kernels runtime simt collectives perfmodel hardware docs -name '*.rs' -o -name '*.md' 2>/dev/null |
    sort | xargs cat | head -c 4000000 >"$out/data/corpus.txt"

if [ "${GPU_CHECK_SKIP_PREDICT:-0}" != 1 ]; then
    echo "predicting every kernel on H100 SXM and H200 (emulator counters)"
    target/release/trident bench kernels --device emu --gpu h100-sxm,h200 --json "$out/predicted.json" \
        >"$out/predicted.md"
fi

cat >"$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the GPU check: tests, kernel benchmarks, a short gpt2-124m training run; writes
# summary.json and summary.md here. Each step has a time limit, so the whole run stays
# under ten minutes.
set -uo pipefail
cd "$(dirname "$0")"
here=$(pwd)
build_root=$(cat build-root)
if [ ! -e "$build_root/target/release/trident" ]; then
    # The tests look for binaries and data at the build machine's checkout path.
    mkdir -p "$(dirname "$build_root")" && ln -sfn "$here/tree" "$build_root" ||
        echo "warning: cannot link $build_root to the bundle: tests that start binaries will fail"
fi
export TRIDENT_REQUIRE_CUDA=1
mkdir -p logs
threads=$(nproc 2>/dev/null || echo 8)
: >logs/tests.tsv
fail=0
# Time limits (seconds): tests 300 in all, bench 120, training 150: under ten minutes.
tests_end=$(($(date +%s) + 300))
for t in tests/*; do
    name=$(basename "$t")
    left=$((tests_end - $(date +%s)))
    if [ "$left" -le 5 ]; then
        printf '%s	NOT RUN (time)	0	0	0\n' "$name" >>logs/tests.tsv
        fail=1
        continue
    fi
    start=$(date +%s.%N)
    if timeout "$left" "$t" --test-threads "$threads" >"logs/test-$name.log" 2>&1; then status=pass; else status=FAIL; fail=1; fi
    end=$(date +%s.%N)
    passed=$(grep -ho '[0-9]* passed' "logs/test-$name.log" | awk '{s += $1} END {print s + 0}')
    failed=$(grep -ho '[0-9]* failed' "logs/test-$name.log" | awk '{s += $1} END {print s + 0}')
    printf '%s\t%s\t%s\t%s\t%.1f\n' "$name" "$status" "$passed" "$failed" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" >>logs/tests.tsv
    printf '%-40s %s\n' "$name" "$status"
done

gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
pred_args=()
[ -f predicted.json ] && pred_args=(--predictions predicted.json)
echo "trident bench kernels --device cuda on ${gpu_name:-an unnamed GPU}"
timeout 120 bin/trident bench kernels --device cuda --min-time-ms 100 "${pred_args[@]}" --json logs/bench.json \
    >logs/bench.md 2>logs/bench.err || { fail=1; echo "bench kernels failed: see logs/bench.err"; }
cat logs/bench.md

echo "50 iterations of gpt2-124m on cuda"
timeout 150 bin/trident train --model gpt2-124m --data data/corpus.txt --tokenizer gpt2 \
    --micro-batch-size 8 --seq-length 1024 --train-iters 50 --eval-iters 1 --device cuda \
    --metrics-file logs/train.jsonl >logs/train.log 2>&1 || { fail=1; echo "training failed: see logs/train.log"; }
tail -2 logs/train.log

python3 - "$gpu_name" "$fail" <<'PY' || echo "python3 missing or failed: the raw results are in logs/"
import json, os, sys
gpu, fail = sys.argv[1], sys.argv[2] == "1"
tests = []
for line in open("logs/tests.tsv"):
    name, status, passed, failed, secs = line.rstrip("\n").split("\t")
    tests.append({"binary": name, "status": status, "passed": int(passed), "failed": int(failed), "seconds": float(secs)})
bench = json.load(open("logs/bench.json")) if os.path.exists("logs/bench.json") else None
train = open("logs/train.log").read().strip().splitlines()[-1:] if os.path.exists("logs/train.log") else []
summary = {"gpu": gpu, "all_passed": not fail, "tests": tests, "bench": bench, "train": train}
json.dump(summary, open("summary.json", "w"), indent=1)
md = [f"# Trident GPU check on {gpu}", "", "## Tests (TRIDENT_REQUIRE_CUDA=1)", "",
      "| binary | result | passed | failed | seconds |", "|---|---|---|---|---|"]
md += [f"| {t['binary']} | {t['status']} | {t['passed']} | {t['failed']} | {t['seconds']:.1f} |" for t in tests]
if bench:
    md += ["", "## Kernels: measured beside predicted", "", f"ceilings: {bench['ceilings']}", "",
           "| case | measured ms | rate | of ceiling | predicted ms | predicted / measured | predicted bound |",
           "|---|---|---|---|---|---|---|"]
    for r in bench["rows"]:
        p = r.get("predicted_s")
        m = r["measured_s"]
        md.append(f"| {r['case']} | {m * 1e3:.3f} | {r['rate']:.1f} {r['rate_unit']} | {100 * r['fraction_of_ceiling']:.1f}% | "
                  + (f"{p * 1e3:.3f} | {p / m:.2f} | {r.get('predicted_bound')} |" if p else "- | - | - |"))
md += ["", "## gpt2-124m, 50 iterations", ""] + train
open("summary.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
[ $fail = 0 ] && echo "all passed" || { echo "failures: see $here/logs"; exit 1; }
RUN
chmod +x "$out/run.sh"

# One xz stream with a 64 MiB dictionary: the test binaries share most of their code.
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -9 -T1 >"$out.tar.xz"
echo "collected $(ls "$out/tests" | wc -l) test binaries in $out"
echo "bundle: $(du -sh "$out" | cut -f1) unpacked, $(du -h "$out.tar.xz" | cut -f1) as $out.tar.xz"
echo "on the GPU machine: tar xJf $(basename "$out").tar.xz && $(basename "$out")/run.sh"
