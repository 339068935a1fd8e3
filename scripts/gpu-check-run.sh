#!/usr/bin/env bash
# run.sh of the GPU-check bundle that scripts/gpu-check.sh builds (it is copied in as run.sh):
# run it on the GPU machine, from anywhere. Needs bash, coreutils and awk; no Rust toolchain,
# no root, no path of the build machine.
#
# Phases, in this order, each within its own time limit (seconds; under ten minutes in all):
#   a. selftest  60   the instruction self-test (dev/tests/simt_selftest), TRIDENT_CUDA_SYNC=1:
#                     launches are synchronous, so a fault names its kernel;
#   b. tests    240   every other test binary, TRIDENT_REQUIRE_CUDA=1 (no GPU: they fail);
#   c. bench    110   `trident bench kernels --device cuda` beside the emulator's predictions;
#   d. train    120   50 iterations of GPT-2 124M in bf16 on --device cuda.
# Whatever happens it writes summary.json and summary.md here: each phase's status, each test
# binary's result, and measured beside predicted for every kernel case (predicted even where
# nothing was measured). Logs are in logs/.
#
# Exit status: 0 when every phase passed, 1 when one failed or ran out of time, 2 when every
# phase skipped because no CUDA driver (libcuda.so.1) is present.
set -uo pipefail
cd "$(dirname "$0")" || exit 1
here=$(pwd)
budget_selftest=60
budget_tests=240
budget_bench=110
budget_train=120

# The tests start the bundle's own binaries and read its data (see tests/common/mod.rs).
export TRIDENT_BIN_DIR=$here/bin
export TRIDENT_TEST_DATA=$here/data/tests
threads=$(nproc 2>/dev/null || echo 8)
rm -rf logs summary.json summary.md
mkdir -p logs
: >logs/phases.tsv
: >logs/tests.tsv

# The CUDA driver is loaded at run time (dlopen of libcuda.so.1): look for it the same way.
no_driver=
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null ||
        no_driver="no CUDA driver (libcuda.so.1 not found)"
else
    found=
    { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep -q 'libcuda\.so\.1 ' && found=1
    IFS=: read -ra dirs <<<"${LD_LIBRARY_PATH:-}"
    for d in "${dirs[@]}"; do [ -n "$d" ] && [ -e "$d/libcuda.so.1" ] && found=1; done
    [ -n "$found" ] || no_driver="no CUDA driver (libcuda.so.1 not found)"
fi
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
if [ -n "$no_driver" ]; then
    gpu_name="no GPU: $no_driver"
    echo "$no_driver: every phase skips"
else
    gpu_name=${gpu_name:-an unnamed GPU}
    echo "GPU: $gpu_name"
fi

# record PHASE STATUS SECONDS DETAIL: one line of logs/phases.tsv, and said.
record() {
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>logs/phases.tsv
    printf 'phase %-8s %s%s\n' "$1" "$2" "${4:+: $4}"
}
now() { date +%s.%N; }
# first_error LOG: the line of a log that says what went wrong (an error or a panic), else its last.
first_error() { grep -m1 -iE 'error|panicked' "$1" 2>/dev/null || tail -1 "$1" 2>/dev/null; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# run_test NAME SECONDS [VAR=VALUE...]: one test binary; a line of logs/tests.tsv; returns 0 on pass.
run_test() {
    local name=$1 limit=$2 start status rc passed failed
    shift 2
    start=$(now)
    env "$@" timeout "$limit" "tests/$name" --test-threads "$threads" >"logs/test-$name.log" 2>&1
    rc=$?
    case $rc in
        0) status=pass ;;
        124) status="TIMEOUT (${limit}s)" ;;
        *) status="FAIL (exit $rc)" ;;
    esac
    passed=$(grep -ho '[0-9]* passed' "logs/test-$name.log" | awk '{s += $1} END {print s + 0}')
    failed=$(grep -ho '[0-9]* failed' "logs/test-$name.log" | awk '{s += $1} END {print s + 0}')
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$passed" "$failed" "$(since "$start")" >>logs/tests.tsv
    printf '  %-40s %s\n' "$name" "$status"
    [ $rc = 0 ]
}

# --- a. the instruction self-test -----------------------------------------------------------
if [ -n "$no_driver" ]; then
    record selftest skipped 0 "$no_driver"
else
    start=$(now)
    if run_test simt_selftest "$budget_selftest" TRIDENT_CUDA_SYNC=1 TRIDENT_REQUIRE_CUDA=1; then
        record selftest pass "$(since "$start")" "TRIDENT_CUDA_SYNC=1"
    else
        record selftest FAIL "$(since "$start")" "$(tail -1 logs/tests.tsv | cut -f2); see logs/test-simt_selftest.log"
    fi
fi

# --- b. every other test binary -------------------------------------------------------------
if [ -n "$no_driver" ]; then
    record tests skipped 0 "$no_driver"
else
    start=$(now)
    end=$(($(date +%s) + budget_tests))
    bad=0
    total=0
    for t in tests/*; do
        name=$(basename "$t")
        [ "$name" = simt_selftest ] && continue
        total=$((total + 1))
        left=$((end - $(date +%s)))
        if [ "$left" -le 5 ]; then
            printf '%s\tNOT RUN (phase time)\t0\t0\t0\n' "$name" >>logs/tests.tsv
            printf '  %-40s %s\n' "$name" "NOT RUN (phase time)"
            bad=$((bad + 1))
            continue
        fi
        run_test "$name" "$left" TRIDENT_REQUIRE_CUDA=1 || bad=$((bad + 1))
    done
    if [ $bad = 0 ]; then
        record tests pass "$(since "$start")" "$total binaries, TRIDENT_REQUIRE_CUDA=1"
    else
        record tests FAIL "$(since "$start")" "$bad of $total binaries failed or did not run"
    fi
fi

# --- c. the kernels, measured beside predicted ----------------------------------------------
if [ -n "$no_driver" ]; then
    record bench skipped 0 "$no_driver"
else
    start=$(now)
    pred_args=()
    [ -f data/predicted.json ] && pred_args=(--predictions data/predicted.json)
    echo "trident bench kernels --device cuda on $gpu_name"
    timeout "$budget_bench" bin/trident bench kernels --device cuda --min-time-ms 100 "${pred_args[@]}" \
        --json logs/bench.json >logs/bench.md 2>logs/bench.err
    rc=$?
    cat logs/bench.md
    case $rc in
        0) record bench pass "$(since "$start")" "" ;;
        124) record bench TIMEOUT "$(since "$start")" "over ${budget_bench}s; see logs/bench.err" ;;
        *) record bench FAIL "$(since "$start")" "exit $rc: $(first_error logs/bench.err)" ;;
    esac
fi

# --- d. GPT-2 124M, bf16, 50 iterations -----------------------------------------------------
if [ -n "$no_driver" ]; then
    record train skipped 0 "$no_driver"
else
    start=$(now)
    echo "50 iterations of gpt2-124m in bf16 on cuda"
    timeout "$budget_train" bin/trident train --model gpt2-124m --bf16 --data data/corpus.txt --tokenizer gpt2 \
        --micro-batch-size 8 --seq-length 1024 --train-iters 50 --eval-iters 1 --device cuda \
        --metrics-file logs/train.jsonl >logs/train.log 2>&1
    rc=$?
    tail -2 logs/train.log
    case $rc in
        0) record train pass "$(since "$start")" "50 iterations" ;;
        124) record train TIMEOUT "$(since "$start")" "over ${budget_train}s; see logs/train.log" ;;
        *) record train FAIL "$(since "$start")" "exit $rc: $(first_error logs/train.log)" ;;
    esac
fi

# --- the summary ----------------------------------------------------------------------------
if [ -n "$no_driver" ]; then
    verdict="skipped: $no_driver"
    code=2
elif awk -F'\t' '$2 != "pass" { bad = 1 } END { exit !bad }' logs/phases.tsv; then
    verdict="FAILED"
    code=1
else
    verdict="all passed"
    code=0
fi
[ -f data/predicted.tsv ] || : >data/predicted.tsv
[ -f logs/bench.md ] || : >logs/bench.md
[ -f logs/train.jsonl ] || : >logs/train.jsonl
train_tail=$(tail -2 logs/train.log 2>/dev/null)
awk -F'\t' -v gpu="$gpu_name" -v verdict="$verdict" -v build="$(paste -sd";" BUILD 2>/dev/null | sed "s/;/; /g")" \
    -v train_tail="$train_tail" -v nodriver="$no_driver" '
function js(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); gsub(/\t/, " ", s); gsub(/\n/, "\\n", s); return "\"" s "\"" }
function trim(s) { gsub(/^ +| +$/, "", s); return s }
function num(s) { return s ~ /^[0-9.eE+-]+$/ && s != "-" }
FILENAME ~ /phases.tsv$/ { np++; ph[np] = $1; pst[np] = $2; psec[np] = $3; pdet[np] = $4; next }
FILENAME ~ /tests.tsv$/ { nt++; tn[nt] = $1; tst[nt] = $2; tp[nt] = $3; tf[nt] = $4; ts[nt] = $5; next }
FILENAME ~ /cases.txt$/ { if ($0 != "" && !($0 in seen)) { seen[$0] = 1; nc++; cs[nc] = $0 }; next }
FILENAME ~ /predicted.tsv$/ {
    if (!($1 in seen)) { seen[$1] = 1; nc++; cs[nc] = $1 }
    if (!($3 in gseen) && $3 != "") { gseen[$3] = 1; ng++; gs[ng] = $3 }
    kern[$1] = $2; pred[$1, $3] = $4; bound[$1] = $5; next
}
FILENAME ~ /bench.md$/ {
    if ($0 !~ /^\| /) next
    n = split($0, f, "|"); c = trim(f[2]); m = trim(f[3])
    if (!num(m)) next
    meas[c] = m; mrate[c] = trim(f[4]); mpred[c] = trim(f[6]); mratio[c] = trim(f[7]); next
}
FILENAME ~ /train.jsonl$/ { if ($0 ~ /^\{/) last_metrics = $0; next }
END {
    why = nodriver != "" ? "not measured: skipped, " nodriver : "not measured"
    md = "# Trident GPU check on " gpu "\n\n" verdict "\n\n" (build != "" ? "bundle: " build "\n\n" : "")
    md = md "## Phases\n\n| phase | status | seconds | detail |\n|---|---|---|---|\n"
    for (i = 1; i <= np; i++) md = md "| " ph[i] " | " pst[i] " | " psec[i] " | " pdet[i] " |\n"
    md = md "\n## Tests (TRIDENT_REQUIRE_CUDA=1)\n\n"
    if (nt == 0) md = md "none ran\n"
    else {
        md = md "| binary | result | passed | failed | seconds |\n|---|---|---|---|---|\n"
        for (i = 1; i <= nt; i++) md = md "| " tn[i] " | " tst[i] " | " tp[i] " | " tf[i] " | " ts[i] " |\n"
    }
    md = md "\n## Kernels: measured beside predicted\n\n"
    if (ng == 0) md = md "(this bundle carries no predictions: built with GPU_CHECK_SKIP_PREDICT=1)\n\n"
    hdr = "| case | measured ms | rate | predicted ms (this GPU) | predicted / measured |"
    sep = "|---|---|---|---|---|"
    for (g = 1; g <= ng; g++) { hdr = hdr " predicted ms, " gs[g] " |"; sep = sep "---|" }
    md = md hdr " bound |\n" sep "---|\n"
    for (i = 1; i <= nc; i++) {
        c = cs[i]
        row = "| " c " | " (c in meas ? meas[c] " | " mrate[c] " | " mpred[c] " | " mratio[c] : why " | - | - | -") " |"
        for (g = 1; g <= ng; g++) row = row " " ((c, gs[g]) in pred ? pred[c, gs[g]] : "-") " |"
        md = md row " " (c in bound ? bound[c] : "-") " |\n"
    }
    md = md "\n## GPT-2 124M, bf16, 50 iterations\n\n"
    md = md (train_tail != "" ? "```\n" train_tail "\n```\n" : (nodriver != "" ? "skipped: " nodriver "\n" : "no output\n"))
    printf "%s", md > "summary.md"

    j = "{\n \"gpu\": " js(gpu) ",\n \"verdict\": " js(verdict) ",\n \"all_passed\": " (verdict == "all passed" ? "true" : "false")
    j = j ",\n \"bundle\": " js(build) ",\n \"phases\": ["
    for (i = 1; i <= np; i++) j = j (i > 1 ? "," : "") "\n  {\"phase\": " js(ph[i]) ", \"status\": " js(pst[i]) ", \"seconds\": " psec[i] ", \"detail\": " js(pdet[i]) "}"
    j = j "\n ],\n \"tests\": ["
    for (i = 1; i <= nt; i++) j = j (i > 1 ? "," : "") "\n  {\"binary\": " js(tn[i]) ", \"status\": " js(tst[i]) ", \"passed\": " tp[i] ", \"failed\": " tf[i] ", \"seconds\": " ts[i] "}"
    j = j "\n ],\n \"kernels\": ["
    for (i = 1; i <= nc; i++) {
        c = cs[i]
        j = j (i > 1 ? "," : "") "\n  {\"case\": " js(c) ", \"kernel\": " js(kern[c]) ", \"measured_ms\": " (c in meas ? meas[c] : "null")
        j = j ", \"predicted_ms_this_gpu\": " (c in meas && num(mpred[c]) ? mpred[c] : "null")
        if (!(c in meas)) j = j ", \"not_measured\": " js(why)
        j = j ", \"predicted_ms\": {"
        k = 0
        for (g = 1; g <= ng; g++) if ((c, gs[g]) in pred && num(pred[c, gs[g]])) j = j (k++ ? ", " : "") js(gs[g]) ": " pred[c, gs[g]]
        j = j "}, \"predicted_bound\": " js(bound[c]) "}"
    }
    j = j "\n ],\n \"train\": {\"last_metrics\": " (last_metrics != "" ? last_metrics : "null") ", \"log_tail\": " js(train_tail) "}\n}\n"
    printf "%s", j > "summary.json"
}' logs/phases.tsv logs/tests.tsv data/cases.txt data/predicted.tsv logs/bench.md logs/train.jsonl
cat summary.md
echo "$verdict (summary.md, summary.json and logs/ in $here)"
exit $code
