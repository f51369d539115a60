#!/usr/bin/env bash
# Benchmark (not a test; never run in CI): QA tooling at 144,563 GeoNames places, in one run.
#   1. One POI imported into a running server (POST /v1/pois): median milliseconds over 20, next to GET /health
#      on the same server (the reference).
#   2. `push-sender simulate` in process with --lat/--lng: median seconds per call over 5, next to `push-sender
#      check` of the same payload (the reference: a process that starts, reads a payload and prints).
#
#   scripts/bench-qa.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
DATA=.cache/bench-qa
BIN=${BIN:-$RELEASE/enrichment-server}
SENDER=${SENDER:-$RELEASE/push-sender}
[ -x "$BIN" ] || release_build enrichment-server
[ -x "$SENDER" ] || release_build push-sender
PLACES=$(scripts/fetch-places.sh)
rm -rf "$DATA" && mkdir -p "$DATA"
"$BIN" import-pois "$PLACES" --map geonames --db "$DATA/db.sqlite" >/dev/null
PORT=$(free_port)
"$BIN" serve --port "$PORT" --db "$DATA/db.sqlite" --sample-pois false --log-level warning >"$DATA/server.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
wait_healthy "$PORT"
echo "== $(nproc) cores, $(curl -s "http://127.0.0.1:$PORT/health" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pois"])') POIs"
python3 - "$PORT" <<'PY'
import http.client, json, statistics, sys, time
port = int(sys.argv[1])
c = http.client.HTTPConnection("127.0.0.1", port)
def timed(method, path, body=None):
    started = time.perf_counter()
    c.request(method, path, body, {"Content-Type": "application/json"} if body else {})
    r = c.getresponse(); r.read(); assert r.status == 200, r.status
    return (time.perf_counter() - started) * 1000
imports, health = [], []
for i in range(20):
    poi = {"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"store_id": f"bench-{i}", "name": f"Bench {i}"},
           "geometry": {"type": "Point", "coordinates": [2.35 + i / 1000, 48.85]}}]}
    imports.append(timed("POST", "/v1/pois", json.dumps(poi)))
    health.append(timed("GET", "/health"))
m, h = statistics.median(imports), statistics.median(health)
print(f"one POI into the running index (POST /v1/pois)   median {m:7.2f} ms   GET /health {h:6.2f} ms   ratio {m / h:5.1f}x")
PY
kill $PID; wait $PID 2>/dev/null || true
median() { python3 -c 'import statistics,sys; print(f"{statistics.median(float(x) for x in sys.argv[1:]):.3f}")' "$@"; }
SIM=(); CHK=()
for _ in 1 2 3 4 5; do
  SIM+=("$( { /usr/bin/time -f "%e" "$SENDER" simulate payloads/location.json --stamp-now --device qa --db "$DATA/db.sqlite" --lat 48.8584 --lng 2.2945 >/dev/null; } 2>&1 | tail -1)")
  CHK+=("$( { /usr/bin/time -f "%e" "$SENDER" check payloads/location.json >/dev/null || true; } 2>&1 | tail -1)")
done
S=$(median "${SIM[@]}"); C=$(median "${CHK[@]}")
echo "push-sender simulate in process, --lat/--lng     median ${S} s   push-sender check ${C} s"
