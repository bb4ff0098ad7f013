#!/usr/bin/env bash
# The README's first command (first version): deps, build, a real Kafka broker, a topic of
# Wikimedia-recentchange-shaped events, then the tidemark CLI. The connector runtime
# (`tidemark run`) is not built yet; the lead extends this script when it is.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec </dev/null
TOPIC=wikimedia.recentchange
COUNT="${TIDEMARK_DEMO_EVENTS:-2000}"
T0=$SECONDS
step() { echo; echo "=== [demo] $*"; }

step "install deps"
bash scripts/install-deps.sh

step "build (build/)"
GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
cmake -S . -B build "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2

step "start Kafka"
bash scripts/kafka.sh start
. scripts/env.sh
B="$TIDEMARK_KAFKA_BOOTSTRAP"

step "topic $TOPIC (4 partitions, recreated so every run publishes the same records)"
bash scripts/kafka.sh topics --delete --if-exists --topic "$TOPIC"
for i in $(seq 1 30); do   # deletion is asynchronous: retry the create for ~15 s
  if bash scripts/kafka.sh topics --create --topic "$TOPIC" --partitions 4 --replication-factor 1 2>/dev/null; then
    break
  fi
  [ "$i" -lt 30 ] || { echo "demo: could not create $TOPIC" >&2; exit 1; }
  sleep 0.5
done
bash scripts/kafka.sh topics --describe --topic "$TOPIC"

step "publish $COUNT deterministic recentchange events (key = wiki:title)"
python3 scripts/demo/gen-recentchange.py "$COUNT" |
  kcat -q -P -b "$B" -t "$TOPIC" -K $'\t' -z lz4 -X enable.idempotence=true
echo "one event:"
kcat -q -C -b "$B" -t "$TOPIC" -p 0 -o beginning -c 1 -f 'key=%k partition=%p offset=%o\n%s\n'

step "per-partition watermarks"
kcat -q -Q -b "$B" -t "$TOPIC:0:-2" -t "$TOPIC:1:-2" -t "$TOPIC:2:-2" -t "$TOPIC:3:-2" \
  | sed 's/^/  low  /' || true
kcat -q -Q -b "$B" -t "$TOPIC:0:-1" -t "$TOPIC:1:-1" -t "$TOPIC:2:-1" -t "$TOPIC:3:-1" \
  | sed 's/^/  high /'

step "build/host/tidemark --help"
build/host/tidemark --help

step "build/host/tidemark plugins (plugins built in this tree: build/plugins-out)"
TIDEMARK_PLUGIN_PATH="$PWD/build/plugins-out${TIDEMARK_PLUGIN_PATH:+:$TIDEMARK_PLUGIN_PATH}" build/host/tidemark plugins

step "validate the demo connector config (configs/wikimedia-to-sqlite.json)"
mkdir -p var/demo
TIDEMARK_PLUGIN_PATH="$PWD/build/plugins-out" build/host/tidemark validate configs/wikimedia-to-sqlite.json

step "prove the example sink with the conformance kit (build/host/sinkcheck/tidemark-sinkcheck)"
build/host/sinkcheck/tidemark-sinkcheck build/plugins-out/example_file.so \
  --config tests/conformance/example_file.json

echo
echo "=== [demo] done in $((SECONDS - T0)) s. Kafka is still running (scripts/kafka.sh stop)."
echo "=== [demo] Not built yet: the connector runtime (\`tidemark run configs/...\`), so nothing"
echo "=== [demo] consumes $TOPIC into a sink in this demo."
