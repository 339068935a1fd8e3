#!/usr/bin/env bash
# Fault-injection soak of the collectives, on loopback only.
#
#   scripts/soak-collectives.sh [RUNS] [WORLD]        (defaults: 20 runs of 4 ranks)
#
# Each run starts WORLD ranks of `trident-coll fault run` (AllReduces in a loop) over a
# transport picked at random (tcp or shm), then, at a random moment, either SIGKILLs or
# SIGSTOPs a random rank (rank 0, the store host, included), while foreign connections
# (garbage, and silent ones held open) hit the store port. A run holds when every other
# rank exits on its own within the deadline (timeout + slack) with the fault exit code 3,
# and it counts as "named" when every survivor's error names the victim by world rank and
# pid. Shared-memory files left behind by the run are counted as leaks.
#
# With GRID=tp,pp,dp the ranks run a training step's communication on that grid instead
# (TP AllReduce, pipeline sends forward and back, DP AllReduce), so a survivor may share no
# group with the victim and must still name it: e.g. GRID=1,4,1 VICTIM=1 stops pipeline
# stage 1 of a PP 4 run, GRID=2,2,1 a rank of TP 2 x PP 2.
#
# Environment: BIN (default target/release/trident-coll, built if missing), TIMEOUT_S
# (the ranks' TRIDENT_TIMEOUT_S, default 3), SLACK_S (default 15), SEED (for $RANDOM);
# TRANSPORT (tcp|shm), FAULT (KILL|STOP) and VICTIM (a rank) fix what is otherwise random;
# GRID as above.
set -u
RUNS=${1:-20}
WORLD=${2:-4}
TIMEOUT_S=${TIMEOUT_S:-3}
SLACK_S=${SLACK_S:-15}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/target/release/trident-coll}
[ -n "${SEED:-}" ] && RANDOM=$SEED
if [ ! -x "$BIN" ]; then
    (cd "$ROOT" && cargo build --release -p trident-collectives --bin trident-coll) || exit 1
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

held=0 named=0 hung=0 wrong=0 leaks=0 setup=0
for run in $(seq 1 "$RUNS"); do
    transport=$([ $((RANDOM % 2)) = 0 ] && echo tcp || echo shm)
    fault=$([ $((RANDOM % 2)) = 0 ] && echo KILL || echo STOP)
    victim=$((RANDOM % WORLD))
    transport=${TRANSPORT:-$transport}
    fault=${FAULT:-$fault}
    victim=${VICTIM:-$victim}
    delay_ms=$((200 + RANDOM % 1800))
    port=$((20000 + RANDOM % 30000))
    token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    shm_before=$(ls /dev/shm 2>/dev/null | grep -c '^trident-' || true)
    pids=()
    for rank in $(seq 0 $((WORLD - 1))); do
        RANK=$rank WORLD_SIZE=$WORLD LOCAL_RANK=$rank LOCAL_WORLD_SIZE=$WORLD \
            MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TRIDENT_JOB_TOKEN=$token \
            TRIDENT_TRANSPORT=$transport TRIDENT_TIMEOUT_S=$TIMEOUT_S \
            "$BIN" fault run --iters 1000000000 ${GRID:+--grid "$GRID"} >"$WORK/out.$rank" 2>"$WORK/err.$rank" &
        pids+=($!)
        # The victim's end is ours; keep the shell from reporting it.
        [ "$rank" = "$victim" ] && disown $!
    done
    # Foreign connections while the job runs: garbage handshakes, and silent ones held
    # open past the store's handshake deadline (bounded: 16 of each).
    (
        for _ in $(seq 1 16); do
            { exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET / HTTP/1.0\r\n\r\nxxxxxxxxxx' >&3 && exec 3>&-; } 2>/dev/null
            { exec 4<>"/dev/tcp/127.0.0.1/$port" && sleep 0.3 && exec 4>&-; } 2>/dev/null &
            sleep 0.05
        done
        wait
    ) &
    foreign=$!
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    if ! grep -q '^step' "$WORK/out.$victim" 2>/dev/null; then
        # Not yet running (or failed to start): still inject, but say so.
        note="before its first step"
    else
        note="at step $(grep -c '^step' "$WORK/out.$victim")"
    fi
    kill -"$fault" "${pids[$victim]}" 2>/dev/null
    start=$(date +%s)
    ok=1 all_named=1
    for rank in $(seq 0 $((WORLD - 1))); do
        [ "$rank" = "$victim" ] && continue
        pid=${pids[$rank]}
        while kill -0 "$pid" 2>/dev/null && [ $(($(date +%s) - start)) -lt $((TIMEOUT_S + SLACK_S)) ]; do
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            ok=0
            hung=$((hung + 1))
            kill -KILL "$pid" 2>/dev/null
            { wait "$pid"; } 2>/dev/null
            continue
        fi
        wait "$pid"
        code=$?
        if [ "$code" != 3 ]; then
            ok=0
            wrong=$((wrong + 1))
            echo "run $run: rank $rank exited with $code: $(tail -c 400 "$WORK/err.$rank")"
        fi
        # The blamed rank, in the error's last words: "world rank V ... pid P".
        grep -qE "world rank $victim [^(]*pid ${pids[$victim]}([^0-9]|\$)" "$WORK/err.$rank" || all_named=0
    done
    kill -KILL "${pids[$victim]}" 2>/dev/null
    kill "$foreign" 2>/dev/null
    { wait "$foreign"; } 2>/dev/null
    if grep -q "MASTER_PORT free" "$WORK"/err.* 2>/dev/null; then
        setup=$((setup + 1))
    fi
    shm_after=$(ls /dev/shm 2>/dev/null | grep -c '^trident-' || true)
    leaked=$((shm_after - shm_before))
    [ "$leaked" -gt 0 ] && leaks=$((leaks + leaked))
    [ "$ok" = 1 ] && held=$((held + 1))
    [ "$ok" = 1 ] && [ "$all_named" = 1 ] && named=$((named + 1))
    took=$(($(date +%s) - start))
    echo "run $run: $transport${GRID:+, grid $GRID}, SIG$fault rank $victim $note: $([ $ok = 1 ] && echo held || echo FAILED), victim named by all: $([ $all_named = 1 ] && echo yes || echo no), ended ${took}s after the fault"
    if [ "$all_named" = 0 ]; then
        for rank in $(seq 0 $((WORLD - 1))); do
            [ "$rank" = "$victim" ] || echo "    rank $rank: $(grep -v '^step' "$WORK/err.$rank" | tail -n 1 | cut -c1-300)"
        done
    fi
done
echo "soak: $held/$RUNS runs held (no hang past ${TIMEOUT_S}s + ${SLACK_S}s, survivors exited 3), $named/$RUNS named the victim on every survivor; $hung hung ranks, $wrong wrong exit codes, $leaks leaked /dev/shm files, $setup runs with a busy port"
[ "$held" = "$RUNS" ]
