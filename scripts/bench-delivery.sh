#!/usr/bin/env bash
# Benchmark (not a test; never run in CI): enrich-and-send through the service next to push-sender sending the
# same number of plain pushes, both to the same mock APNs (release builds, one run, one machine):
#   1. the service: N devices, each with a fix and one sandbox token; pushes of 1,000 devices each
#      (POST /v1/push, "wait": false) until every delivery is final; deliveries/s from the first POST to the last
#      delivery recorded (committing, enriching each device with the local index, sending, recording each result);
#   2. push-sender send: the same N tokens, a 300-byte payload, 1 connection, 1,000 streams in flight, timed as a
#      whole process.
#
#   scripts/bench-delivery.sh
#   N=20000 scripts/bench-delivery.sh
#
# Prints both rates and the ratio service/push-sender (issue 25's target: at least 0.7).
# CONNECTIONS=2: two HTTP/2 connections on both sides (default 1). PERF=1: a profile of the timed part
# (PERF_CALLGRAPH="--call-graph dwarf,32768" to attribute SQLite's samples to their callers). THREADS=1: each
# thread's share of a core, from THREADS_DELAY (1 s) into the timed part for THREADS_WINDOW (2 s).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
N=${N:-10000}
# HTTP/2 connections to the mock, the same for both sides (ENRICH_APNS_CONNECTIONS, push-sender --connections).
CONNECTIONS=${CONNECTIONS:-1}
DATA=.cache/bench-delivery
SERVER=${SERVER:-$RELEASE/enrichment-server}
SENDER=${SENDER:-$RELEASE/push-sender}
[ -x "$SERVER" ] || release_build enrichment-server
[ -x "$SENDER" ] || release_build push-sender
rm -rf "$DATA" && mkdir -p "$DATA"
certs.example/make-local-certs.sh "$DATA/certs" >/dev/null

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

MOCK_PORT=$(free_port)
"$SENDER" mock-apns --port "$MOCK_PORT" --cert "$DATA/certs/server.pem" --cert-key "$DATA/certs/server-key.pem" \
  --auth-key-pub "$DATA/certs/AuthKey_TEST123456.pub.pem" --key-id TEST123456 --team-id TEAM123456 \
  --log-level error --record-capacity 1000 >/dev/null 2>&1 &
PIDS+=($!)
HTTP_PORT=$(free_port)
ENRICH_APNS_CONNECTIONS="$CONNECTIONS" ENRICH_APNS_KEY_FILE="$DATA/certs/AuthKey_TEST123456.p8" ENRICH_APNS_KEY_ID=TEST123456 ENRICH_APNS_TEAM_ID=TEAM123456 \
ENRICH_APNS_CA="$DATA/certs/ca.pem" ENRICH_APNS_SANDBOX_URL="https://127.0.0.1:$MOCK_PORT" \
  "$SERVER" serve --port "$HTTP_PORT" --db "$DATA/db.sqlite" --log-level "${LOG_LEVEL:-warning}" >"$DATA/server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "localhost:$HTTP_PORT/health" >/dev/null && break; sleep 0.1; done

python3 - "$N" > "$DATA/tokens.txt" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print(f"{i:064x}")
PY
python3 -c 'import json; p={"aps":{"alert":{"title":"Nearby","body":"bench"}},"pad":""}; p["pad"]="x"*(300-len(json.dumps(p,separators=(",",":")))); print(json.dumps(p,separators=(",",":")),end="")' > "$DATA/payload.json"

# Setup (not timed): a fix near a sample POI and one token per device, over 8 keep-alive connections.
python3 - "$HTTP_PORT" "$N" <<'PY'
import http.client, json, sys, time, threading
port, n = int(sys.argv[1]), int(sys.argv[2])
now = int(time.time())
def work(lane):
    c = http.client.HTTPConnection("127.0.0.1", port)
    for i in range(lane, n, 8):
        fix = {"locations": [{"latitude": 48.85 + (i % 100) / 1000, "longitude": 2.29 + (i // 100 % 100) / 1000, "utc_timestamp": now}]}
        c.request("POST", f"/v1/devices/dev-{i}/locations", json.dumps(fix), {"Content-Type": "application/json"})
        assert c.getresponse().read() and True
        c.request("PUT", f"/v1/devices/dev-{i}/apns-tokens/{i:064x}", '{"topic":"com.example.app","environment":"sandbox"}', {"Content-Type": "application/json"})
        r = c.getresponse(); r.read(); assert r.status == 201, r.status
threads = [threading.Thread(target=work, args=(lane,)) for lane in range(8)]
[t.start() for t in threads]; [t.join() for t in threads]
PY

# 1. Enrich-and-send through the service (PERF=1 records a profile of the server meanwhile, in $DATA/perf.data).
SERVER_PID=${PIDS[1]}
MOCK_PID=${PIDS[0]}
# CPU seconds (user + system) a process has used so far, from /proc.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
SERVICE_CPU0=$(cpu "$SERVER_PID"); MOCK_CPU0=$(cpu "$MOCK_PID")
if [ -n "${PERF:-}" ]; then perf record -F 999 ${PERF_CALLGRAPH:--g} -p "$SERVER_PID" -o "$DATA/perf.data" >/dev/null 2>&1 & PERF_PID=$!; fi
# THREADS=1: each thread's share of a core in the service and the mock, from 1 s to 3 s into the timed part.
if [ -n "${THREADS:-}" ]; then python3 scripts/thread-cpu.py "$SERVER_PID" "$MOCK_PID" ${THREADS_DELAY:-1} ${THREADS_WINDOW:-2} > "$DATA/threads.txt" & THREADS_PID=$!; fi
python3 - "$HTTP_PORT" "$N" "${PERF_PID:-}" <<'PY' | tee "$DATA/results.txt"
import http.client, json, os, signal, sys, time
port, n, perf = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def idle():  # the machine's idle, I/O wait and total CPU time so far (/proc/stat, all cores)
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return fields[3], fields[4], sum(fields)
idle0 = idle()
c = http.client.HTTPConnection("127.0.0.1", port)
payload = {"aps": {"alert": {"title": "Nearby", "body": "Original"}, "mutable-content": 1, "category": "location", "timestamp": int(time.time())}}
started = time.time()
ids = []
for start in range(0, n, 1000):
    body = {"device_ids": [f"dev-{i}" for i in range(start, min(n, start + 1000))], "payload": payload, "wait": False}
    c.request("POST", "/v1/push", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse(); answer = json.loads(r.read()); assert r.status == 202, answer
    ids.append(answer["push_id"])
posted = time.time() - started
counts = {}
# Deliveries are claimed oldest first: wait for the last push to be done (`?wait=`: the service answers when it is,
# no polling), then make sure nothing is left anywhere (`GET /v1/push` lists the pushes with deliveries still
# pending: empty means every delivery is final; else wait for the first listed and look again).
watch = ids[-1]
while watch:
    c.request("GET", f"/v1/push/{watch}?results=false&wait=60")
    r = c.getresponse(); report = json.loads(r.read()); assert r.status == 200, report
    if not report["done"]:
        continue
    c.request("GET", "/v1/push")
    r = c.getresponse(); left = json.loads(r.read()); assert r.status == 200, left
    left = left["pushes"]
    watch = left[0]["push_id"] if left else None
seconds = time.time() - started
idle1 = idle()
idle_share = (idle1[0] - idle0[0]) / max(1, idle1[2] - idle0[2])
iowait_share = (idle1[1] - idle0[1]) / max(1, idle1[2] - idle0[2])
if perf: os.kill(int(perf), signal.SIGINT)  # the profile covers the timed part only
for push in ids:
    c.request("GET", f"/v1/push/{push}")
    report = json.loads(c.getresponse().read())
    assert report["done"], report
    for k, v in report["counts"].items(): counts[k] = counts.get(k, 0) + v
c.request("POST", "/v1/enrich", json.dumps({"device_id": "dev-1", "payload": payload}), {"Content-Type": "application/json"})
outcome = json.loads(c.getresponse().read())["outcome"]
print(f"service deliveries={n} delivered={counts.get('delivered', 0)} outcome={outcome} seconds={seconds:.3f} rate={n / seconds:.0f} posted_in={posted:.3f} idle={idle_share:.0%} iowait={iowait_share:.0%}")
PY

if [ -n "${PERF:-}" ]; then
    kill -INT "$PERF_PID" 2>/dev/null || true; wait "$PERF_PID" || true
    perf script -i "$DATA/perf.data" 2>/dev/null | python3 scripts/perf-phases.py delivery > "$DATA/phases.txt"
    echo "where the service's CPU went (perf samples by phase, timed part only; $DATA/phases.txt):"
    head -n 16 "$DATA/phases.txt"
fi
if [ -n "${THREADS:-}" ]; then
    wait "$THREADS_PID" || true
    echo "threads (share of a core, 1-3 s into the timed part; threads started meanwhile not counted):"
    cat "$DATA/threads.txt"
fi
# (The CPU includes the report reads that check every push after the timed part; the profile does not.)
python3 -c "import sys; n, s, m = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]); \
print(f'service cpu: {s:.2f} s ({s / n * 1e6:.0f} us per delivery), mock {m:.2f} s ({m / n * 1e6:.0f} us per push)')" \
  "$N" "$(python3 -c "print($(cpu "$SERVER_PID") - $SERVICE_CPU0)")" "$(python3 -c "print($(cpu "$MOCK_PID") - $MOCK_CPU0)")"
MOCK_CPU0=$(cpu "$MOCK_PID")

# 2. The same number of plain pushes with push-sender.
started=$(date +%s.%N)
"$SENDER" send --host "https://127.0.0.1:$MOCK_PORT" --ca "$DATA/certs/ca.pem" \
  --key "$DATA/certs/AuthKey_TEST123456.p8" --key-id TEST123456 --team-id TEAM123456 --topic com.example.app \
  --payload "$DATA/payload.json" --tokens-file "$DATA/tokens.txt" --connections "$CONNECTIONS" --concurrency 1000 --attempts 1 \
  --json --quiet > "$DATA/sender.jsonl" 2>/dev/null || true
ended=$(date +%s.%N)
echo "push-sender's mock cpu: $(python3 -c "print(round($(cpu "$MOCK_PID") - $MOCK_CPU0, 2))") s"
python3 - "$DATA/sender.jsonl" "$started" "$ended" <<'PY' | tee -a "$DATA/results.txt"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
seconds = float(sys.argv[3]) - float(sys.argv[2])
ok = sum(1 for r in lines if r.get("ok"))
print(f"push-sender pushes={len(lines)} ok={ok} seconds={seconds:.3f} rate={len(lines) / seconds:.0f}")
PY
python3 - "$DATA/results.txt" <<'PY'
import re, sys
rates = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) .* rate=(\d+)", line)
    if m: rates[m.group(1)] = int(m.group(2))
print(f"== ratio: service enrich-and-send {rates['service']}/s = {rates['service'] / rates['push-sender']:.2f}x push-sender send {rates['push-sender']}/s")
PY
