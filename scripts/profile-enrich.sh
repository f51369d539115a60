#!/usr/bin/env bash
# Profile: where one enrichment's CPU goes, by phase, next to /health's on the same server (not a test; never in CI).
#
#   scripts/bench-enrich.sh                      # once: imports the places and seeds the devices (.cache/bench)
#   scripts/profile-enrich.sh                    # the release build; BIN=... for another
#   MODE=woosmap scripts/profile-enrich.sh       # the Woosmap-style body (ENRICH_MODE)
#   LOADS="ingest health" scripts/profile-enrich.sh   # fix reports (100 fixes a request) instead; per request below
#
# Starts the server on the data bench-enrich.sh left, loads it with wrk (32 connections) first with enrichments,
# then with the same requests carrying a stale payload (answered without a fix, places or map: the HTTP and JSON
# floor of the route), then with /health, each under `perf record -g` for DURATION seconds, and prints the
# server's CPU per request
# (from /proc, without perf) and the profile sorted into phases by scripts/enrich-phases.py.
# Needs perf (Debian's linux-perf) and wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
BIN=${BIN:-$RELEASE/enrichment-server}
DATA=.cache/bench
DURATION=${DURATION:-8}
PORT=${PORT:-18194}
OUT=${OUT:-$DATA/profile}
[ -f "$DATA/db.sqlite" ] && [ -f "$DATA/enrich.lua" ] || { echo "run scripts/bench-enrich.sh first (it seeds $DATA)" >&2; exit 2; }
command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf; }
mkdir -p "$OUT"
# The seeded fixes are up to 10 min old when bench-enrich.sh ran, and count as none after an hour
# (ENRICH_FIX_MAX_AGE): run it again first when the outcomes below say no_fix.
ENRICH_MODE=${MODE:-default} "$BIN" serve --port "$PORT" --db "$DATA/db.sqlite" --sample-pois false --log-level warning &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.2; done
# A new process reads each device's last fix from SQLite once (then from its cache): every device first.
wrk -t1 -c32 -d"${WARM:-12}s" -s "$DATA/enrich.lua" "http://127.0.0.1:$PORT" >/dev/null
cpu() { awk '{print $14+$15}' "/proc/$SERVER/stat"; }
# The same enrichment requests with a payload an hour old: parsed, validated, judged stale and answered, with no
# fix read, no places search, no template and no map. The floor of what a POST /v1/enrich costs in HTTP and JSON.
sed 's/^local stamp = now$/local stamp = now - 3600/' "$DATA/enrich.lua" > "$OUT/stale.lua"
grep -q '^local stamp = now - 3600$' "$OUT/stale.lua" || { echo "run scripts/bench-enrich.sh again (old enrich.lua)" >&2; exit 2; }
for what in ${LOADS:-enrich stale health}; do
  perf record -F 1999 -g -p "$SERVER" -o "$OUT/$what.data" -- sleep "$DURATION" >/dev/null 2>&1 &
  PERF=$!
  before=$(cpu)
  if [ "$what" = enrich ]; then
    out=$(wrk -t1 -c32 -d"${DURATION}s" --latency -s "$DATA/enrich.lua" "http://127.0.0.1:$PORT")
  elif [ "$what" = ingest ]; then
    out=$(wrk -t1 -c32 -d"${DURATION}s" --latency -s "$DATA/ingest.lua" "http://127.0.0.1:$PORT")
  elif [ "$what" = stale ]; then
    out=$(wrk -t1 -c32 -d"${DURATION}s" --latency -s "$OUT/stale.lua" "http://127.0.0.1:$PORT")
  else
    out=$(wrk -t1 -c32 -d"${DURATION}s" --latency "http://127.0.0.1:$PORT/health")
  fi
  after=$(cpu)
  wait "$PERF" || true
  if echo "$out" | grep -E 'Non-2xx or 3xx responses' >&2; then echo "$what: wrk saw failed requests" >&2; exit 1; fi
  n=$(echo "$out" | awk '/requests in/ {print $1}')
  echo
  echo "== $what: $(echo "$out" | awk '/Requests\/sec/ {print $2}') req/s under perf, $(python3 -c "print(f'{($after-$before)*1e6/100/$n:.0f}')") us of server CPU per request (/proc)"
  python3 scripts/enrich-phases.py "$OUT/$what.data" "$n" ${PHASE:+"$PHASE"}
done
curl -s "http://127.0.0.1:$PORT/metrics" | grep '^enrichment_outcomes_total' || true
