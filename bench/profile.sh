#!/bin/bash
# Where a broker's CPU goes: one Cairn (its defaults, fsync on) sampled by
# perf while it takes 1 KiB acks=all produce over 6 partitions, then while
# it serves raw Fetch passes over a 3 GB topic.  Uses perf's cpu-clock
# software event, which works in VMs without hardware counters.
#
#   bench/profile.sh [BUILD_DIR] [OUT_DIR]
#
# Writes OUT_DIR/{produce,fetch}.data (perf report -i ...), the top
# symbols of each in OUT_DIR/{produce,fetch}.top, and the broker's user /
# system CPU ticks over each window in OUT_DIR/split.txt.  Run it on a
# machine doing nothing else.
set -eu
B=$(cd "${1:-build}" && pwd)
D=${2:-bench/out/profile}
rm -rf "$D"
mkdir -p "$D/data"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(port)
HTTP=$(port)
"$B/cairn" --set listeners=PLAINTEXT://127.0.0.1:$PORT --set "log.dirs=$D/data" \
    --set http.listener=127.0.0.1:$HTTP >"$D/broker.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 50); do
    (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break
    sleep 0.1
done
ticks() { awk '{print $14, $15}' "/proc/$PID/stat"; }
sample() { # name seconds
    local u0 s0 u1 s1
    read -r u0 s0 < <(ticks)
    perf record -e cpu-clock -F 999 -g -p "$PID" -o "$D/$1.data" -- sleep "$2" 2>/dev/null
    read -r u1 s1 < <(ticks)
    echo "$1: utime $((u1 - u0)) stime $((s1 - s0)) ticks over $2 s" >>"$D/split.txt"
}
"$B/bench_client" --brokers 127.0.0.1:$PORT --topic p --partitions 6 --size 1024 \
    --acks -1 --produce-only --seconds 8 --create >"$D/produce.json" &
CL=$!
sleep 2
sample produce 5
wait $CL
"$B/bench_client" --brokers 127.0.0.1:$PORT --topic f --partitions 6 --size 1024 \
    --acks -1 --produce-only --messages 3000000 --create >/dev/null
"$B/bench_fetch_raw" --brokers 127.0.0.1:$PORT --topic f --passes 1 \
    --max-bytes 52428800 >/dev/null
"$B/bench_fetch_raw" --brokers 127.0.0.1:$PORT --topic f --passes 6 \
    --max-bytes 52428800 >"$D/fetch.json" &
CL=$!
sleep 0.5
sample fetch 4
wait $CL
kill $PID
wait $PID || true
for w in produce fetch; do
    perf report -i "$D/$w.data" --no-children --sort symbol --stdio 2>/dev/null |
        grep -v '^#' | grep '%' | head -40 >"$D/$w.top"
done
cat "$D/split.txt" "$D/produce.json" "$D/fetch.json"
echo "top symbols: $D/produce.top $D/fetch.top"
