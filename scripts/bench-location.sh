#!/usr/bin/env bash
# Benchmark (not a test; never run in CI): location intelligence, in one run.
#   1. The ZOI pipeline: one device with 1,000 visits (one request per visit, as a device reports them), and
#      10,000 devices with 10 visits each (one request per device, 8 clients at once). The reference is the
#      same 1,000 visits replayed in process by `enrichment-server zois` (the pipeline without HTTP or storage).
#   2. Fix ingest (batches of 100, every batch new fixes: fix times increase per device) with region evaluation
#      off next to ingest with it on: 144,563 GeoNames POIs (POI regions around the nearest one), 1,000 custom
#      regions around the fixes, visit detection on. Same build, same machine, same run; the ratio is on/off.
#
#   scripts/bench-location.sh                  # DURATION=10 s per ingest phase, CONNS=32
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
DURATION=${DURATION:-10}
CONNS=${CONNS:-32}
DATA=.cache/bench-location
BIN=${BIN:-$RELEASE/enrichment-server}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
[ -x "$BIN" ] || release_build enrichment-server
PLACES=$(scripts/fetch-places.sh)
rm -rf "$DATA" && mkdir -p "$DATA"

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
start_node() { # port db [settings...]
  local port=$1 db=$2
  shift 2
  env "$@" "$BIN" serve --port "$port" --db "$db" --sample-pois false --log-level warning >>"$DATA/server.log" 2>&1 &
  PIDS+=($!)
  wait_healthy "$port"
}
stop_nodes() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; PIDS=(); }

echo "== $(nproc) cores"
# 1. The ZOI pipeline.
python3 - "$DATA" <<'PY'
import json, random, sys
rng = random.Random(7)
day = 86400.0
start = 1_700_000_000.0
homes = [(48.80 + rng.uniform(-0.05, 0.05), 2.30 + rng.uniform(-0.05, 0.05)) for _ in range(8)]
visits = []
t = start
for i in range(1000):
    lat, lng = homes[rng.randrange(len(homes))]
    dur = rng.uniform(600, 9 * 3600)
    visits.append({"id": f"v{i}", "arrival": t, "departure": t + dur, "latitude": lat + rng.gauss(0, 0.0002),
                   "longitude": lng + rng.gauss(0, 0.0002), "horizontal_accuracy": rng.uniform(5, 40)})
    t += dur + rng.uniform(600, 6 * 3600)
json.dump({"visits": visits}, open(sys.argv[1] + "/one-device.json", "w"))
PY
IN_PROCESS=$( { /usr/bin/time -f "%e" "$BIN" zois --visits "$DATA/one-device.json" --json >/dev/null; } 2>&1 | tail -1 )
P=$(free_port); start_node "$P" "$DATA/zoi.sqlite" ENRICH_REGIONS=false ENRICH_DETECT_VISITS=false
python3 - "$P" "$DATA" "$IN_PROCESS" <<'PY'
import http.client, json, random, sys, threading, time
port, data, in_process = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
visits = json.load(open(data + "/one-device.json"))["visits"]
conn = http.client.HTTPConnection("127.0.0.1", port)
def post(c, device, items):
    c.request("POST", f"/v1/devices/{device}/visits", json.dumps({"visits": items}), {"Content-Type": "application/json"})
    r = c.getresponse(); body = r.read(); assert r.status == 200, (r.status, body)
    return json.loads(body)
started = time.monotonic()
for v in visits:
    post(conn, "one", [v])
one = time.monotonic() - started
zois = json.loads((conn.request("GET", "/v1/devices/one/zois"), conn.getresponse().read())[1])["zois"]
print(f"ZOI pipeline, 1 device x 1,000 visits over HTTP   {1000 / one:9.0f} visits/s   ({one:.2f} s, {len(zois)} ZOIs)")
print(f"  reference: same 1,000 visits in process (CLI)    {1000 / in_process:9.0f} visits/s   ratio HTTP/in-process {in_process / one:.2f}")
rng = random.Random(3)
devices = 10000
def worker(k):
    c = http.client.HTTPConnection("127.0.0.1", port)
    for d in range(k, devices, 8):
        lat, lng = 48.8 + rng.uniform(-1, 1), 2.3 + rng.uniform(-1, 1)
        t = 1_700_000_000.0 + d
        items = []
        for i in range(10):
            items.append({"arrival": t, "departure": t + 3600, "latitude": lat + (i % 3) * 0.001,
                          "longitude": lng, "horizontal_accuracy": 20})
            t += 86400
        assert post(c, f"dev-{d}", items)["accepted"] == 10
started = time.monotonic()
threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
[t.start() for t in threads]; [t.join() for t in threads]
many = time.monotonic() - started
print(f"ZOI pipeline, 10,000 devices x 10 visits over HTTP {100000 / many:9.0f} visits/s   ({many:.2f} s, 8 clients)")
PY
stop_nodes

# 2. Ingest with region evaluation off and on.
"$BIN" import-pois "$PLACES" --map geonames --db "$DATA/off.sqlite" >/dev/null
cp "$DATA/off.sqlite" "$DATA/on.sqlite"
cat > "$DATA/ingest.lua" <<'LUA'
local base = os.time() - 86400
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local n = math.random(1, 1000000)
request = function()
  n = n + 1
  local device = n % 5000
  local t0 = base + math.floor(n / 5000) * 100
  local items = {}
  for i = 1, 100 do
    items[i] = string.format('{"latitude":%.5f,"longitude":%.5f,"utc_timestamp":%d,"horizontal_accuracy":10}',
      48.8 + (device % 50) / 100 + i / 10000, 2.3 + (device % 70) / 100 + i / 10000, t0 + i)
  end
  return wrk.format(nil, string.format("/v1/devices/ingest-%d/locations", device), nil,
    '{"locations":[' .. table.concat(items, ",") .. ']}')
end
response = function(status, headers, body) if status ~= 200 then error("status " .. status) end end
LUA
phase() { # name port
  wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency -s "$DATA/ingest.lua" "http://127.0.0.1:$2" > "$DATA/$1.txt"
  python3 - "$1" "$DATA/$1.txt" <<'PY'
import re, sys
text = open(sys.argv[2]).read()
rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1))
p99 = re.search(r"^\s+99%\s+(\S+)", text, re.M).group(1)
e = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
print(f"{sys.argv[1]:40} {rps * 100:9.0f} fixes/s  p99 {p99:9} non-2xx {int(e.group(1)) if e else 0}")
open(sys.argv[2] + ".rate", "w").write(str(rps * 100))
PY
}
P=$(free_port); start_node "$P" "$DATA/off.sqlite" ENRICH_REGIONS=false ENRICH_DETECT_VISITS=false ENRICH_POI_REGIONS=0
phase "ingest, location off" "$P"; stop_nodes
P=$(free_port); start_node "$P" "$DATA/on.sqlite"
python3 - "$P" <<'PY'
import http.client, json, random, sys
port = int(sys.argv[1]); rng = random.Random(5)
c = http.client.HTTPConnection("127.0.0.1", port)
for i in range(1000):
    body = {"id": f"r{i}", "latitude": 48.8 + rng.uniform(0, 0.6), "longitude": 2.3 + rng.uniform(0, 0.8),
            "radius": rng.uniform(50, 2000)}
    c.request("POST", "/v1/regions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse(); r.read(); assert r.status in (200, 201), r.status
PY
phase "ingest, regions + POI regions + visits" "$P"
EVENTS=$(curl -s "http://127.0.0.1:$P/v1/devices/ingest-1/events?limit=10000" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["events"]))')
stop_nodes
python3 - "$DATA" "$EVENTS" <<'PY'
import sys
off = float(open(sys.argv[1] + "/ingest, location off.txt.rate").read())
on = float(open(sys.argv[1] + "/ingest, regions + POI regions + visits.txt.rate").read())
print(f"ratio on/off {on / off:.2f}   target: on >= 50,000 fixes/s ({'met' if on >= 50000 else 'NOT met'}); device ingest-1 has {sys.argv[2]} events")
PY
