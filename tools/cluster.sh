#!/usr/bin/env bash
# tools/cluster.sh - three Cairn brokers on this machine, one metadata
# quorum (make cluster).  Node N (1..3): clients on 127.0.0.1:909(1+N),
# its CONTROLLER listener (raft and the controller's APIs) on
# 127.0.0.1:1909(1+N), data in ./data/node-N, metrics on 127.0.0.1:946(3+N).
# Ctrl-C stops the three (by pid), then this script ends.
set -u

BIN=${CAIRN_BIN:-build/cairn}
CTL=${CAIRNCTL_BIN:-build/cairnctl}
DATA=${CAIRN_CLUSTER_DATA:-data}
VOTERS=1@127.0.0.1:19092,2@127.0.0.1:19093,3@127.0.0.1:19094

if [ ! -x "$BIN" ]; then
    echo "cluster.sh: $BIN not built (make build)" >&2
    exit 1
fi

pids=()
rc=0
stop() {
    trap - INT TERM EXIT
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null
    done
    for p in "${pids[@]}"; do
        wait "$p" 2>/dev/null
    done
    echo "cluster stopped"
    exit $rc
}
trap stop INT TERM EXIT

for n in 1 2 3; do
    mkdir -p "$DATA/node-$n"
    "$BIN" \
        --set node.id=$n \
        --set process.roles=broker,controller \
        --set listeners=PLAINTEXT://127.0.0.1:$((9091 + n)),CONTROLLER://127.0.0.1:$((19091 + n)) \
        --set listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT \
        --set controller.listener.names=CONTROLLER \
        --set controller.quorum.voters=$VOTERS \
        --set log.dirs="$DATA/node-$n" \
        --set http.listener=127.0.0.1:$((9463 + n)) \
        >"$DATA/node-$n.log" 2>&1 &
    pids+=($!)
done

sleep 1
for i in 0 1 2; do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
        echo "cluster.sh: node $((i + 1)) did not start; its log ($DATA/node-$((i + 1)).log):" >&2
        tail -n 20 "$DATA/node-$((i + 1)).log" >&2
        exit 1
    fi
done

cat <<MSG
Three brokers are running (pids ${pids[*]}):
  node 1: 127.0.0.1:9092   log $DATA/node-1.log
  node 2: 127.0.0.1:9093   log $DATA/node-2.log
  node 3: 127.0.0.1:9094   log $DATA/node-3.log
Clients: --bootstrap-server 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094
See the cluster:  $CTL --bootstrap-server 127.0.0.1:9092 cluster describe
Ctrl-C stops all three.
MSG

# Until one of them exits (or Ctrl-C).
# Ctrl-C in a terminal reaches the brokers too: one that stopped cleanly
# (status 0) is that, not a failure.
st=0
wait -n "${pids[@]}" || st=$?
if [ "$st" -ne 0 ]; then
    echo "cluster.sh: a broker exited with status $st (see data/node-N.log); stopping the others" >&2
    rc=1
fi
