#!/usr/bin/env bash
# Trident's `train` against PyTorch eager (fp32, same threads) on the same GPT shapes and
# batches, run alternately because a shared machine is noisy. Prints tokens/s of each and the
# ratio. PyTorch lives in its own virtual environment (target/peer-venv, made on first use).
#
#   benches/peers/train_step.sh [ROUNDS] [THREADS]
#
# It ends with the GEMM calibration of `cargo bench --bench train_step` before and after the
# rounds: about 340 GFLOP/s on the idle 2-core machine, lower when the machine is shared.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
threads=${2:-$(nproc)}
venv=target/peer-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check torch numpy
fi
cargo build --release --quiet
mkdir -p target/peer
text=target/peer/text.txt
# A text the byte and GPT-2 tokenizers both cover; its content does not matter for speed.
[ -s "$text" ] || for i in $(seq 1 4000); do echo "line $i: the quick brown fox jumps over the lazy dog $((i * 7919 % 1000))"; done >"$text"

ours() { # shape -> tokens/s (mean over the iterations after the first two)
    local args
    case $1 in
        tiny) args=(--model tiny --tokenizer bytes --seq-length 256 --micro-batch-size 8 --train-iters 8) ;;
        gpt2-124m) args=(--model gpt2-124m --tokenizer gpt2 --seq-length 256 --micro-batch-size 4 --train-iters 5) ;;
    esac
    RAYON_NUM_THREADS=$threads ./target/release/trident train --device cpu --data "$text" "${args[@]}" \
        --eval-iters 1 --metrics-file target/peer/m.jsonl >/dev/null 2>&1
    python3 -c '
import json, sys
rows = [json.loads(l) for l in open("target/peer/m.jsonl")][2:]
print(sum(r["tokens_per_s"] for r in rows) / len(rows))'
    rm -f target/peer/m.jsonl
}

theirs() {
    "$venv/bin/python" benches/peers/torch_train_step.py --threads "$threads" --shape "$1" --steps 4 |
        python3 -c 'import json, sys; print(json.loads(sys.stdin.readlines()[-1])["tokens_per_s"])'
}

calibrate() { # the machine's GEMM throughput now: how loaded it is (about 340 GFLOP/s idle)
    cargo bench --quiet --bench train_step -- gemm 2>/dev/null | grep -o 'gemm calibration: [0-9]* GFLOP/s' || true
}
before=$(calibrate)

printf '| shape | round | trident tokens/s | pytorch tokens/s | ratio |\n|---|---|---|---|---|\n'
summary=()
for shape in tiny gpt2-124m; do
    ratios=()
    for r in $(seq 1 "$rounds"); do
        a=$(ours "$shape")
        b=$(theirs "$shape")
        ratio=$(python3 -c "print($a / $b)")
        ratios+=("$ratio")
        printf '| %s | %d | %.0f | %.0f | %.2f |\n' "$shape" "$r" "$a" "$b" "$ratio"
    done
    summary+=("$(python3 -c "
import statistics, sys
r = [float(x) for x in sys.argv[2:]]
print(f'{sys.argv[1]}: ratio median {statistics.median(r):.2f}, lowest {min(r):.2f} over {len(r)} rounds')
" "$shape" "${ratios[@]}")")
done
printf '%s\n' "${summary[@]}"
printf 'load: %s before, %s after\n' "${before:-?}" "$(calibrate)"
