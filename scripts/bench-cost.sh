#!/usr/bin/env bash
# Cost benchmark (issue 28; not a test, never run in CI): what a deployment pays in memory, disk and start-up, in
# one run, release build:
#   1. Places, 100k and 1M POIs (GeoNames cities plus seeded moved copies, imported with --map geonames):
#      import-pois peak RSS; the service's start-up (seconds to the first 200 of /health/live and of
#      /health/ready) and its resident memory once ready, less an empty service's, per POI; nearest-5 p99 of the
#      index alone at 1M (places-bench, against the same target as before: under 1 ms).
#   2. Devices, 100k then 1M (one fix each, one per request, at random places on the globe; default settings:
#      the 22 sample POIs, regions, POI regions, visit detection): disk per device (the checkpointed database's
#      growth), region-state rows, resident memory per device after ingest and after one enrichment each.
#   3. Ingest, one fix per request, with the default location settings and with them off (regions, POI regions,
#      visit detection): the ratio on/off (target 0.7).
#   4. push-sender's peak RSS for 10k and 1M tokens (--json) against the mock APNs.
#
#   scripts/bench-cost.sh             # DURATION=15 s per ingest phase; DEVICES="100000 1000000"; POIS="100000 1000000"
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
DURATION=${DURATION:-15}
CONNS=${CONNS:-32}
DEVICES=${DEVICES:-"100000 1000000"}
POIS=${POIS:-"100000 1000000"}
TOKENS=${TOKENS:-"10000 1000000"}
DATA=.cache/bench-cost
BIN=${BIN:-$RELEASE/enrichment-server}
SENDER=${SENDER:-$RELEASE/push-sender}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time; }
[ -x "$BIN" ] || release_build enrichment-server
[ -x "$SENDER" ] || release_build push-sender
[ -x "$RELEASE/places-bench" ] || release_build places-bench
PLACES=$(scripts/fetch-places.sh)
rm -rf "$DATA" && mkdir -p "$DATA"

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
stop_all() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; PIDS=(); }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
ms_since() { python3 -c "import time,sys; print(int((time.time() - float(sys.argv[1])) * 1000))" "$1"; }
row() { printf '%-58s %s\n' "$1" "$2" | tee -a "$DATA/results.txt"; }

echo "== $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); release build $(git rev-parse --short HEAD)"

# ---------------------------------------------------------------------------------------------------------------
echo "== 1. places"
python3 - "$PLACES" "$DATA" $POIS <<'PY'
import csv, random, sys
places, data, sizes = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]]
rows = list(csv.reader(open(places, newline="", encoding="utf-8")))
header, body = rows[0], rows[1:]
for n in sizes:
    rng = random.Random(11)
    with open(f"{data}/pois-{n}.csv", "w", newline="", encoding="utf-8") as out:
        w = csv.writer(out)
        w.writerow(header)
        for i in range(n):
            r = list(body[i % len(body)])
            if i >= len(body):  # a moved copy: within about 50 km of the original
                r[0] = "%.5f" % max(-89.9, min(89.9, float(r[0]) + rng.uniform(-0.5, 0.5)))
                r[1] = "%.5f" % ((float(r[1]) + rng.uniform(-0.5, 0.5) + 180) % 360 - 180)
            w.writerow(r)
PY
P=$(free_port)
"$BIN" serve --port "$P" --db "$DATA/empty.sqlite" --sample-pois false --log-level warning >>"$DATA/server.log" 2>&1 &
PIDS+=($!)
wait_healthy "$P"
sleep 1
EMPTY_KIB=$(rss_kib "${PIDS[-1]}")
stop_all
row "service RSS with no POIs (baseline)" "$((EMPTY_KIB / 1024)) MiB"
for n in $POIS; do
  db="$DATA/places-$n.sqlite"
  /usr/bin/time -f "%M" -o "$DATA/import-$n.time" "$BIN" import-pois "$DATA/pois-$n.csv" --map geonames --db "$db" >/dev/null
  row "import-pois $n rows: peak RSS" "$(( $(tail -1 "$DATA/import-$n.time") / 1024 )) MiB"
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" "$db"
  row "  database bytes per POI" "$(( $(stat -c %s "$db") / n )) B"
  P=$(free_port)
  START=$(date +%s.%N)
  "$BIN" serve --port "$P" --db "$db" --sample-pois false --log-level warning >>"$DATA/server.log" 2>&1 &
  PIDS+=($!)
  LIVE=""
  READY=""
  for _ in $(seq 1 6000); do
    if [ -z "$LIVE" ] && curl -sf "http://127.0.0.1:$P/health/live" >/dev/null 2>&1; then LIVE=$(ms_since "$START"); fi
    if [ -n "$LIVE" ] && curl -sf "http://127.0.0.1:$P/health/ready" >/dev/null 2>&1; then READY=$(ms_since "$START"); break; fi
    sleep 0.01
  done
  sleep 1
  KIB=$(rss_kib "${PIDS[-1]}")
  stop_all
  row "service with $n POIs: live after / ready after" "${LIVE} ms / ${READY} ms (target: live < 1,000, ready < 2,500)"
  row "  RSS once ready, less the baseline, per POI" "$(( (KIB - EMPTY_KIB) * 1024 / n )) B (target <= 300; total $((KIB / 1024)) MiB)"
done
BIGGEST=${POIS##* }
"$RELEASE/places-bench" latency --places "$PLACES" --map geonames --points "$BIGGEST" --queries 100000 --brute-queries 10 \
  > "$DATA/places-latency.jsonl" 2>/dev/null || true
python3 - "$DATA/places-latency.jsonl" "$BIGGEST" <<'PY' | tee -a "$DATA/results.txt"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("name") == "index" and r.get("k") == 5:
        print(f"{'nearest-5 at %s POIs (the index alone)' % sys.argv[2]:58} p50 {r['p50_us']} us, p99 {r['p99_us']} us (target p99 < 1,000)")
PY

# ---------------------------------------------------------------------------------------------------------------
echo "== 2. devices (one fix each, default settings, the 22 sample POIs)"
# One fix per request for devices dev-<first>..dev-<first+count-1>, split over wrk's threads; each thread stops
# after its share. Fix times are fresh, places random over the globe's inhabited latitudes.
# What both scripts share: each of wrk's 2 threads takes its share of the devices and marks a file when it has its
# share of answers.
cat > "$DATA/share.lua" <<'LUA'
local first, count, nthreads = tonumber(os.getenv("FIRST")), tonumber(os.getenv("COUNT")), 2
local id = 0
function setup(thread)
  thread:set("tid", id)
  id = id + 1
end
function init(args)
  share = math.floor(count / nthreads)
  n = first + tid * share
  last = n + share
  done = 0
  math.randomseed(tid * 7919 + first)
  now = os.time()
end
function next_device()
  if n >= last then n = last - 1 end
  local device = n
  n = n + 1
  return device
end
response = function(status, headers, body)
  if status ~= 200 then error("status " .. status .. " " .. body) end
  done = done + 1
  if done == share then io.open(os.getenv("MARKS") .. "/done-" .. tid, "w"):close() end
end
LUA
{ cat "$DATA/share.lua"; cat <<'LUA'
request = function()
  local device = next_device()
  local body = string.format('{"locations":[{"latitude":%.5f,"longitude":%.5f,"utc_timestamp":%d,"horizontal_accuracy":15}]}',
    math.random() * 130 - 60, math.random() * 360 - 180, now)
  return wrk.format("POST", string.format("/v1/devices/dev-%d/locations", device), {["Content-Type"] = "application/json"}, body)
end
LUA
} > "$DATA/fixes.lua"
{ cat "$DATA/share.lua"; cat <<'LUA'
request = function()
  local device = next_device()
  local body = string.format('{"device_id":"dev-%d","payload":{"aps":{"alert":{"title":"Nearby","body":"x"},"mutable-content":1,"category":"location","timestamp":%d}}}', device, os.time())
  return wrk.format("POST", "/v1/enrich", {["Content-Type"] = "application/json"}, body)
end
LUA
} > "$DATA/enrich.lua"
# Runs wrk with a script until both of its threads have had their share answered, then stops it (wrk itself runs
# for its whole duration).
wrk_count() { # script first count port out
  local marks
  marks=$(mktemp -d)
  FIRST=$2 COUNT=$3 MARKS=$marks wrk -t2 -c"$CONNS" -d3600s -s "$1" "http://127.0.0.1:$4" > "$5" &
  local pid=$!
  until [ -e "$marks/done-0" ] && [ -e "$marks/done-1" ]; do
    kill -0 "$pid" 2>/dev/null || { echo "wrk stopped early:" >&2; cat "$5" >&2; exit 1; }
    sleep 0.2
  done
  kill -INT "$pid"
  wait "$pid" || true
  rm -rf "$marks"
}
P=$(free_port)
DB="$DATA/devices.sqlite"
"$BIN" serve --port "$P" --db "$DB" --log-level warning >>"$DATA/server.log" 2>&1 &
PIDS+=($!)
SERVER_PID=${PIDS[-1]}
wait_healthy "$P"
sleep 1
BASE_KIB=$(rss_kib "$SERVER_PID")
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" "$DB"
BASE_BYTES=$(stat -c %s "$DB")
FIRST=0
for n in $DEVICES; do
  COUNT=$((n - FIRST))
  wrk_count "$DATA/fixes.lua" "$FIRST" "$COUNT" "$P" "$DATA/fixes-$n.txt"
  sleep 1
  KIB=$(rss_kib "$SERVER_PID")
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" "$DB"
  BYTES=$(stat -c %s "$DB")
  STATES=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM region_state').fetchone()[0])" "$DB")
  FIXB=$(python3 - "$DB" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
try:
    rows = dict(c.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
    print(f"fixes {rows.get('fixes', 0)} B, region_state {rows.get('region_state', 0)} B")
except sqlite3.OperationalError:
    print("dbstat not available")
PY
)
  row "$n devices ingested: disk per device" "$(( (BYTES - BASE_BYTES) / n )) B ($FIXB in all; $STATES region_state rows)"
  row "  RSS per device after ingest" "$(( (KIB - BASE_KIB) * 1024 / n )) B (total $((KIB / 1024)) MiB)"
  wrk_count "$DATA/enrich.lua" "$FIRST" "$COUNT" "$P" "$DATA/enrich-$n.txt"
  sleep 1
  KIB=$(rss_kib "$SERVER_PID")
  row "  RSS per device after one enrichment each" "$(( (KIB - BASE_KIB) * 1024 / n )) B (total $((KIB / 1024)) MiB; ENRICH_DEVICE_MEMORY 200,000)"
  FIRST=$n
done
stop_all

# ---------------------------------------------------------------------------------------------------------------
echo "== 3. ingest, one fix per request: default location settings against them off"
ingest_phase() { # name db [settings...]
  local name=$1 db=$2
  shift 2
  local port
  port=$(free_port)
  env "$@" "$BIN" serve --port "$port" --db "$db" --log-level warning >>"$DATA/server.log" 2>&1 &
  PIDS+=($!)
  wait_healthy "$port"
  FIRST=0 COUNT=100000000 MARKS=/nonexistent wrk -t2 -c"$CONNS" -d"${DURATION}s" -s "$DATA/fixes.lua" "http://127.0.0.1:$port" > "$DATA/$name.txt"
  stop_all
  python3 - "$name" "$DATA/$name.txt" <<'PY' | tee -a "$DATA/results.txt"
import re, sys
text = open(sys.argv[2]).read()
rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1))
open(sys.argv[2] + ".rate", "w").write(str(rps))
print(f"{'ingest, ' + sys.argv[1]:58} {rps:9.0f} fixes/s")
PY
}
# Alternated twice (the box is shared with wrk, so one phase alone is noisy); the ratio is of the sums.
for round in 1 2; do
  ingest_phase "location on ($round)" "$DATA/on-$round.sqlite"
  ingest_phase "location off ($round)" "$DATA/off-$round.sqlite" ENRICH_REGIONS=false ENRICH_DETECT_VISITS=false \
    ENRICH_POI_REGIONS=0
done
python3 - "$DATA" <<'PY' | tee -a "$DATA/results.txt"
import sys
rate = lambda name: float(open(f"{sys.argv[1]}/{name}.txt.rate").read())
on = sum(rate(f"location on ({r})") for r in (1, 2))
off = sum(rate(f"location off ({r})") for r in (1, 2))
print(f"{'  ratio on/off (sums of both rounds)':58} {on / off:.2f} (target >= 0.7)")
PY

# ---------------------------------------------------------------------------------------------------------------
echo "== 4. push-sender, --json, against the mock APNs"
certs.example/make-local-certs.sh "$DATA/certs" >/dev/null
MOCK=$(free_port)
"$SENDER" mock-apns --port "$MOCK" --cert "$DATA/certs/server.pem" --cert-key "$DATA/certs/server-key.pem" \
  --auth-key-pub "$DATA/certs/AuthKey_TEST123456.pub.pem" --key-id TEST123456 --team-id TEAM123456 \
  --log-level error --record-capacity 1000 >/dev/null 2>&1 &
PIDS+=($!)
sleep 1
for n in $TOKENS; do
  python3 -c "import sys; [print(f'{i:064x}') for i in range(int(sys.argv[1]))]" "$n" > "$DATA/tokens-$n.txt"
  /usr/bin/time -f "%M %e" -o "$DATA/sender-$n.time" "$SENDER" send --host "https://127.0.0.1:$MOCK" \
    --ca "$DATA/certs/ca.pem" --key "$DATA/certs/AuthKey_TEST123456.p8" --key-id TEST123456 --team-id TEAM123456 \
    --topic com.example.app --payload payloads/location.json --tokens-file "$DATA/tokens-$n.txt" --json \
    > /dev/null 2>&1 || true
  read -r KIB SECONDS_TAKEN < "$DATA/sender-$n.time"
  row "push-sender send, $n tokens, --json: peak RSS" "$((KIB / 1024)) MiB ($SECONDS_TAKEN s; target for 1M: <= 100 MiB)"
done
stop_all
echo "== results in $DATA/results.txt"
