#!/usr/bin/env bash
# Profile (not a test; never run in CI): where one PostgreSQL node's enrichment time goes. Runs a node on a
# throwaway cluster with pg_stat_statements, seeds DEVICES devices, drives POST /v1/enrich with wrk for DURATION
# seconds, then prints the statements PostgreSQL ran (calls per enrichment, mean time), the CPU seconds each
# process used during the load, and a perf profile of the node's hottest symbols.
#
#   scripts/profile-postgres.sh              # DURATION=10 CONNS=32 DEVICES=10000
#   MODE=ingest scripts/profile-postgres.sh  # POST /v1/devices/{id}/locations with 100 fixes each instead
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
if [ -z "${ENRICH_TEST_DATABASE_URL:-}" ]; then
  ENRICH_PG_OPTIONS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all" \
    exec scripts/with-postgres.sh "$0" "$@"
fi
DURATION=${DURATION:-10}
CONNS=${CONNS:-32}
DEVICES=${DEVICES:-10000}
MODE=${MODE:-enrich}
DATA=.cache/profile-postgres
BIN=${BIN:-$RELEASE/enrichment-server}
[ -x "$BIN" ] || release_build enrichment-server
rm -rf "$DATA" && mkdir -p "$DATA"
DB="profile_$(date +%s)"
psql -q "$ENRICH_TEST_DATABASE_URL" -c "CREATE DATABASE $DB"
URL="${ENRICH_TEST_DATABASE_URL%/*}/$DB?sslmode=disable"
psql -q "$URL" -c "CREATE EXTENSION pg_stat_statements"
PORT=$(free_port)
ENRICH_DATABASE_URL="$URL" "$BIN" serve --port "$PORT" --log-level warning >"$DATA/server.log" 2>&1 &
NODE=$!
trap 'kill $NODE 2>/dev/null || true' EXIT
wait_healthy "$PORT"
python3 - "$PORT" "$DEVICES" <<'PY'
import http.client, json, random, sys, time
port, devices = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(1); conn = http.client.HTTPConnection("127.0.0.1", port); now = int(time.time())
for d in range(devices):
    body = json.dumps({"locations": [{"latitude": 48.85 + rng.uniform(-0.05, 0.05), "longitude": 2.35 + rng.uniform(-0.05, 0.05), "utc_timestamp": now - 60}]})
    conn.request("POST", f"/v1/devices/dev-{d}/locations", body, {"Content-Type": "application/json"}); r = conn.getresponse(); r.read()
PY
write_wrk_scripts "$DATA" "$DEVICES"
psql -q "$URL" -c "SELECT pg_stat_statements_reset()" >/dev/null
# CPU in clock ticks per process (ps's whole seconds rounded each of 20 short-lived backends down to 0).
cpu() { for s in /proc/[0-9]*/stat; do awk '{sub(/.*\) /, ""); print FILENAME, $12 + $13}' "$s" 2>/dev/null || true; done |
  while read -r f t; do p=${f#/proc/}; p=${p%/stat}; echo "$p $(tr ' ' '_' <"/proc/$p/comm" 2>/dev/null || echo gone) $t"; done; }
cpu >"$DATA/cpu-before.txt"
threads() { for t in /proc/$NODE/task/*; do echo "$(basename "$t") $(tr ' ' '_' <"$t/comm") $(awk '{print $14 + $15}' "$t/stat")"; done; }
threads >"$DATA/threads-before.txt"
perf record -F 499 -g -p "$NODE" -o "$DATA/perf.data" -- sleep "$DURATION" >/dev/null 2>&1 &
PERF=$!
wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency -s "$DATA/$MODE.lua" "http://127.0.0.1:$PORT" >"$DATA/wrk.txt"
wait $PERF || true
check_wrk "$DATA/wrk.txt"
cpu >"$DATA/cpu-after.txt"
threads >"$DATA/threads-after.txt"
REQUESTS=$(awk '/requests in/ {print $1}' "$DATA/wrk.txt")
grep -E "Requests/sec|99%" "$DATA/wrk.txt"
echo "== statements per request ($REQUESTS $MODE requests)"
psql -q -A -F' | ' "$URL" -c "SELECT round(calls::numeric / $REQUESTS, 3) AS per_request, round(mean_exec_time::numeric, 3) AS mean_ms, left(regexp_replace(query, '\s+', ' ', 'g'), 90) FROM pg_stat_statements WHERE calls > $REQUESTS / 100 ORDER BY calls DESC LIMIT 12"
echo "== CPU seconds during the load, by process name"
python3 - "$DATA/cpu-before.txt" "$DATA/cpu-after.txt" "$DURATION" <<'PY'
import sys, collections, os
tick = os.sysconf("SC_CLK_TCK")
def read(f): return {p: (c, int(t)) for p, c, t in (l.split() for l in open(f) if len(l.split()) == 3)}
a, b, d = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
use = collections.Counter()
for p, (c, t) in b.items(): use[c] += (t - a.get(p, (c, 0))[1]) / tick
for c, t in use.most_common(6): print(f"{c:20} {t:6.2f} s  ({t / d:.2f} cores)")
PY
echo "== the node's threads: CPU seconds during the load"
python3 - "$DATA/threads-before.txt" "$DATA/threads-after.txt" <<'PY'
import sys, collections, os
tick = os.sysconf("SC_CLK_TCK")
def read(f): return {t: (c, int(j)) for t, c, j in (l.split() for l in open(f))}
a, b = read(sys.argv[1]), read(sys.argv[2])
use = collections.Counter()
for t, (c, j) in b.items(): use[f"{c} ({t})"] += (j - a.get(t, (c, 0))[1]) / tick
for c, s in use.most_common(8): print(f"{c:32} {s:6.2f} s")
PY
echo "== the node's hottest symbols (perf, self time)"
perf report -i "$DATA/perf.data" --no-children --sort symbol --stdio 2>/dev/null | grep -E "^ +[0-9]" | cut -c1-140 | head -15
