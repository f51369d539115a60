#!/usr/bin/env bash
# Two builds alternated on the same data: the server's CPU per enrichment (not a test; never in CI).
#
#   scripts/bench-enrich.sh                                   # once: imports the places and seeds the devices
#   scripts/ab-enrich.sh /tmp/before-server /tmp/after-server # ROUNDS=3 pairs, DURATION=6 s each
#
# Each round starts each binary on .cache/bench, warms it for DURATION seconds with the enrichment script (every
# device's fix into its cache), then runs wrk for DURATION seconds and prints req/s and the server's user+system CPU
# per request (from /proc). A small change is judged by the pairs, not by one run: this host's speed moves by more
# than a few microseconds between minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 BEFORE_BINARY AFTER_BINARY" >&2; exit 2; }
DATA=.cache/bench
DURATION=${DURATION:-6}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-18197}
[ -f "$DATA/db.sqlite" ] && [ -f "$DATA/enrich.lua" ] || { echo "run scripts/bench-enrich.sh first (it seeds $DATA)" >&2; exit 2; }
SERVER=
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; true' EXIT
one() {
  "$1" serve --port "$PORT" --db "$DATA/db.sqlite" --sample-pois false --log-level warning &
  SERVER=$!
  local server=$SERVER
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.2; done
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { echo "$1 did not start on port $PORT" >&2; exit 1; }
  wrk -t1 -c32 -d"${DURATION}s" -s "$DATA/enrich.lua" "http://127.0.0.1:$PORT" >/dev/null
  local before after out n
  before=$(awk '{print $14 + $15}' "/proc/$server/stat")
  out=$(wrk -t1 -c32 -d"${DURATION}s" -s "$DATA/enrich.lua" "http://127.0.0.1:$PORT")
  after=$(awk '{print $14 + $15}' "/proc/$server/stat")
  kill "$server"; wait "$server" 2>/dev/null || true
  SERVER=
  if grep -q 'Non-2xx or 3xx responses' <<< "$out"; then echo "$1: failed requests" >&2; exit 1; fi
  n=$(echo "$out" | awk '/requests in/ {print $1}')
  seconds=$(echo "$out" | awk '/requests in/ {v = $4; sub(/s,$/, "", v); print v}')
  python3 -c "import sys; print(f'{sys.argv[1]:<40} {int(sys.argv[2]) / float(sys.argv[3]):8.0f} req/s  {($after - $before) * 1e4 / int(sys.argv[2]):5.1f} us of server CPU per enrichment')" "$1" "$n" "$seconds"
}
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round"
  one "$1"
  one "$2"
done
