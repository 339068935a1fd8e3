#!/usr/bin/env bash
# Start-up under a connection flood: how long a launched 2-rank job takes to start and run
# its first collectives while another local process holds FLOOD connections open to the
# job's rendezvous port, silent, reopening each one the store drops (scripts/flood.py).
#
#   scripts/flood-start.sh [RUNS] [FLOOD]        (defaults: 3 runs, 1000 connections)
#
# Each run times the same job twice on a fresh port: alone, then under the flood (started
# before the job, so the port is already under fire when rank 0 opens it). With LATE_S set,
# rank 0 starts alone (no launcher), the flood fills the open store port for LATE_S
# seconds, and only then rank 1 starts; the time is rank 1's, from its start to the end of
# the job. It prints both times and the delay, and fails when a flooded start fails or is
# delayed by more than MAX_DELAY_S (default 5).
#
# Environment: BIN (trident-coll, default target/debug/trident-coll, built if missing),
# MAX_DELAY_S, TIMEOUT_S (the ranks' TRIDENT_TIMEOUT_S, default 60), LATE_S.
set -u
RUNS=${1:-3}
FLOOD=${2:-1000}
MAX_DELAY_S=${MAX_DELAY_S:-5}
TIMEOUT_S=${TIMEOUT_S:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/target/debug/trident-coll}
if [ ! -x "$BIN" ]; then
    (cd "$ROOT" && cargo build -p trident-collectives --bin trident-coll) || exit 1
fi
WORK=$(mktemp -d)
flood_pid=
cleanup() {
    [ -n "$flood_pid" ] && kill "$flood_pid" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

now_ms() { date +%s%3N; }

# Runs the 2-rank job on port $1; prints its wall time in ms, or FAILED.
job() {
    [ -n "${LATE_S:-}" ] && { late_job "$1"; return; }
    local port=$1 start end
    start=$(now_ms)
    if TRIDENT_TIMEOUT_S=$TIMEOUT_S "$BIN" launch --nproc-per-node 2 --master-port "$port" -- \
        "$BIN" check --lens 1,4097 >"$WORK/out" 2>"$WORK/err"; then
        end=$(now_ms)
        echo $((end - start))
    else
        echo FAILED
    fi
}

# The job with rank 1 started LATE_S seconds after rank 0; prints rank 1's time to the end
# of the job in ms, or FAILED.
late_job() {
    local port=$1 token start end r0 ok=1
    token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    rank() {
        RANK=$1 WORLD_SIZE=2 LOCAL_RANK=$1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
            MASTER_PORT=$port TRIDENT_JOB_TOKEN=$token TRIDENT_TIMEOUT_S=$TIMEOUT_S \
            "$BIN" check --lens 1,4097 >>"$WORK/out" 2>>"$WORK/err"
    }
    rank 0 &
    r0=$!
    sleep "$LATE_S"
    start=$(now_ms)
    rank 1 || ok=0
    wait "$r0" || ok=0
    end=$(now_ms)
    if [ "$ok" = 1 ]; then echo $((end - start)); else echo FAILED; fi
}

failed=0 worst=0
for run in $(seq 1 "$RUNS"); do
    port=$((20000 + RANDOM % 30000))
    alone=$(job "$port")
    port=$((20000 + RANDOM % 30000))
    python3 "$ROOT/scripts/flood.py" 127.0.0.1 "$port" "$FLOOD" 2>"$WORK/flood" &
    flood_pid=$!
    sleep 1
    flooded=$(job "$port")
    kill "$flood_pid" 2>/dev/null
    wait "$flood_pid" 2>/dev/null
    flood_state=$(tail -n 1 "$WORK/flood")
    flood_pid=
    if [ "$alone" = FAILED ] || [ "$flooded" = FAILED ]; then
        failed=$((failed + 1))
        echo "run $run: alone ${alone}, under a flood of $FLOOD: ${flooded} ($flood_state)"
        tail -n 5 "$WORK/err"
        continue
    fi
    delay=$((flooded - alone))
    [ "$delay" -gt "$worst" ] && worst=$delay
    echo "run $run: alone ${alone} ms, under a flood of $FLOOD connections ${flooded} ms: delay ${delay} ms ($flood_state)"
done
echo "flood-start: $((RUNS - failed))/$RUNS flooded starts succeeded; worst delay ${worst} ms (limit ${MAX_DELAY_S} s)"
[ "$failed" = 0 ] && [ "$worst" -le $((MAX_DELAY_S * 1000)) ]
