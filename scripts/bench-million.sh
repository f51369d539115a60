#!/usr/bin/env bash
# Benchmark (not a test; never run in CI): one push to every device of a million (issue 48), enriched per device,
# next to push-sender sending as many plain pushes to the same mock APNs, in one run (release builds, one machine):
#   1. N devices (gen-population.py, seed 48: five European cities), each with its last fix and one sandbox token,
#      loaded through the stores' own write paths (places-bench push-population; not timed);
#   2. POST /v1/push {"audience": {"all": []}} with a location payload (each device enriched with its own fix and
#      nearest places): the time to its 202, the resolution's time (until `resolving` is false), the time until
#      every delivery is final, deliveries/s over that; GET /v1/push/{id} timed at N deliveries (20 reads);
#      the service's RSS before the push and its peak (VmHWM); the database's size before and after;
#   3. push-sender send: the same N tokens, a 300-byte payload, 1 connection, 1,000 streams in flight.
#
#   scripts/bench-million.sh                      # SQLite, N=1000000
#   N=100000 scripts/bench-million.sh
#   STORE=postgres scripts/bench-million.sh       # one PostgreSQL node (a throwaway cluster, scripts/with-postgres.sh)
#   SQL_STATEMENTS=1 scripts/bench-million.sh     # SQLite: the statements the service ran, by total time
#                                                 # (ENRICH_SQLITE_STATEMENTS; PG_STATEMENTS=1 for PostgreSQL)
#   CANCEL_AT=0.5 scripts/bench-million.sh        # cancels the push once half is delivered: the answer's time,
#                                                 # its counts, and what was delivered after it
#   RETENTION=1 N=100000 PUSHES=20 scripts/bench-million.sh
#                                                 # 20 pushes in a row with a short retention: the file's size
#                                                 # after each (freed pages reused), on SQLite
#
# Prints each figure and the ratio service/push-sender (issue 48's target: >= 0.7 on SQLite; PostgreSQL >= 0.5 of
# the SQLite rate). RELEASE=dir uses binaries built elsewhere (enrichment-server, push-sender, places-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
STORE=${STORE:-sqlite}
if [ "$STORE" = postgres ] && [ -z "${ENRICH_TEST_DATABASE_URL:-}" ]; then
  # PG_STATEMENTS=1: the statements PostgreSQL ran during the push, by total time (pg_stat_statements).
  [ "${PG_STATEMENTS:-0}" = 1 ] &&
    export ENRICH_PG_OPTIONS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
  exec scripts/with-postgres.sh "$0" "$@"
fi
source scripts/bench-lib.sh
N=${N:-1000000}
PUSHES=${PUSHES:-1}
DATA=.cache/bench-million
[ -x "$RELEASE/enrichment-server" ] && [ -x "$RELEASE/push-sender" ] && [ -x "$RELEASE/places-bench" ] ||
  release_build enrichment-server push-sender places-bench
mkdir -p "$DATA"
rm -f "$DATA"/db.sqlite* "$DATA"/*.log
[ -d "$DATA/certs" ] || certs.example/make-local-certs.sh "$DATA/certs" >/dev/null

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# 1. The population: generated once per N (seeded), loaded for each run.
[ -s "$DATA/pop-$N.csv" ] || python3 scripts/gen-population.py --devices "$N" --seed 48 > "$DATA/pop-$N.csv"
DB_ARGS=(--db "$DATA/db.sqlite")
LOAD_ARGS=(--database "$DATA/db.sqlite")
if [ "$STORE" = postgres ]; then
  URL="$ENRICH_TEST_DATABASE_URL"
  case "$URL" in *sslmode=*) ;; *\?*) URL="$URL&sslmode=disable" ;; *) URL="$URL?sslmode=disable" ;; esac
  DB_ARGS=(--db "$DATA/unused.sqlite")
  LOAD_ARGS=(--database-url "$URL")
  export ENRICH_DATABASE_URL="$URL"
fi
"$RELEASE/places-bench" push-population --population "$DATA/pop-$N.csv" "${LOAD_ARGS[@]}" | tee "$DATA/load.txt"
# A database that served for a while has its statistics; one loaded a second ago has none until autovacuum's next
# round (a minute on): the tables are analyzed as that round would, so the plans are those of a live service.
[ "$STORE" = postgres ] && psql -q "$URL" -c "ANALYZE"
if [ "$STORE" = postgres ] && [ "${PG_STATEMENTS:-0}" = 1 ]; then
  psql -q "$URL" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "SELECT pg_stat_statements_reset()" >/dev/null
fi
python3 - "$N" > "$DATA/tokens.txt" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print(f"{i:064x}")
PY
python3 -c 'import json; p={"aps":{"alert":{"title":"Nearby","body":"bench"}},"pad":""}; p["pad"]="x"*(300-len(json.dumps(p,separators=(",",":")))); print(json.dumps(p,separators=(",",":")),end="")' > "$DATA/payload.json"

MOCK_PORT=$(free_port)
"$RELEASE/push-sender" mock-apns --port "$MOCK_PORT" --cert "$DATA/certs/server.pem" \
  --cert-key "$DATA/certs/server-key.pem" --auth-key-pub "$DATA/certs/AuthKey_TEST123456.pub.pem" \
  --key-id TEST123456 --team-id TEAM123456 --log-level error --record-capacity 1000 >/dev/null 2>&1 &
MOCK_PID=$!
PIDS+=($MOCK_PID)
HTTP_PORT=$(free_port)
ENRICH_APNS_KEY_FILE="$DATA/certs/AuthKey_TEST123456.p8" ENRICH_APNS_KEY_ID=TEST123456 ENRICH_APNS_TEAM_ID=TEAM123456 \
ENRICH_APNS_CA="$DATA/certs/ca.pem" ENRICH_APNS_SANDBOX_URL="https://127.0.0.1:$MOCK_PORT" \
ENRICH_PUSH_RETENTION="${RETENTION:-2592000}" \
ENRICH_SQLITE_STATEMENTS="$([ "${SQL_STATEMENTS:-0}" = 1 ] && echo "$PWD/$DATA/sqlite-statements.tsv")" \
  "$RELEASE/enrichment-server" serve --port "$HTTP_PORT" "${DB_ARGS[@]}" --log-level "${LOG_LEVEL:-warning}" \
  >"$DATA/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=($SERVER_PID)
wait_healthy "$HTTP_PORT"

# 2. The push (PUSHES of them in a row with RETENTION set), timed from the client.
python3 - "$HTTP_PORT" "$N" "$SERVER_PID" "$STORE" "$DATA" "$PUSHES" "${ENRICH_DATABASE_URL:-}" "$MOCK_PID" <<'PY' | tee "$DATA/results.txt"
import http.client, json, os, statistics, subprocess, sys, threading, time
port, n, pid, store, data, pushes, url, mock = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), sys.argv[7], sys.argv[8]
def cpu():  # CPU seconds so far (user + system) of the service, the mock, and every postgres process
    tick = os.sysconf("SC_CLK_TCK")
    def of(p):
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            return 0.0
    pg = 0.0
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if open(f"/proc/{p}/comm").read().strip() == "postgres": pg += of(p)
            except OSError:
                pass
    return {"service": of(pid), "mock": of(mock), "postgres": pg}
def status(field):  # kB from /proc/PID/status
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field): return int(line.split()[1]) * 1024
def size():
    if store == "sqlite":
        return sum(os.path.getsize(os.path.join(data, f)) for f in os.listdir(data) if f.startswith("db.sqlite"))
    out = subprocess.run(["psql", url, "-Atc", "SELECT pg_database_size(current_database())"], capture_output=True, text=True)
    return int(out.stdout.strip() or 0)
c = http.client.HTTPConnection("127.0.0.1", port)
def get(path):
    c.request("GET", path); r = c.getresponse(); return r.status, json.loads(r.read())
size_before = size()
rss_before = status("VmRSS:")
# RSS sampled every 0.1 s: its anonymous part (the heap) and its file part (SQLite's mapped pages, the binary).
peaks = {"RssAnon:": 0, "RssFile:": 0, "VmRSS:": 0}
anon_before = status("RssAnon:")
sampling = True
def sample():
    while sampling:
        try:
            for field in peaks: peaks[field] = max(peaks[field], status(field))
        except Exception:
            pass
        time.sleep(0.1)
threading.Thread(target=sample, daemon=True).start()
print(f"database before: {size_before / 1e6:.1f} MB; service RSS before: {rss_before / 2**20:.0f} MiB")
for round in range(pushes):
    payload = {"aps": {"alert": {"title": "Nearby", "body": "Original"}, "mutable-content": 1, "category": "location", "timestamp": int(time.time())}}
    body = json.dumps({"audience": {"all": []}, "payload": payload})
    cpu_before = cpu()
    started = time.time()
    c.request("POST", "/v1/push", body, {"Content-Type": "application/json"})
    r = c.getresponse(); answer = json.loads(r.read())
    accepted = time.time() - started
    assert r.status in (200, 202), answer
    push = answer["push_id"]
    resolved = None
    cancel = None
    cancel_at = float(os.environ.get("CANCEL_AT", "0"))
    while True:
        code, report = get(f"/v1/push/{push}?results=false")
        if cancel_at and cancel is None and report["counts"]["delivered"] >= cancel_at * n:
            t = time.perf_counter()
            c.request("POST", f"/v1/push/{push}/cancel", "{}", {"Content-Type": "application/json"})
            r = c.getresponse(); cancel = json.loads(r.read()); cancel_ms = (time.perf_counter() - t) * 1000
            assert r.status == 200, cancel
        if resolved is None and not report.get("resolving"):
            resolved = time.time() - started
            rss_resolved = status("VmRSS:")
            delivered_at_resolved = report["counts"]["delivered"]
        if report.get("done"): break
        time.sleep(0.05)
    seconds = time.time() - started
    cpu_after = cpu()
    counts = report["counts"]
    reads = []
    for _ in range(20):
        t = time.perf_counter(); code, _ = get(f"/v1/push/{push}?results=false"); reads.append((time.perf_counter() - t) * 1000)
        assert code == 200
    page_t = time.perf_counter(); code, page = get(f"/v1/push/{push}/deliveries?state=delivered&limit=100"); page_ms = (time.perf_counter() - page_t) * 1000
    print(f"push {round + 1}: {counts['delivered']} delivered of {report['summary']['matched']} devices, {counts['failed']} failed, "
          f"{counts['expired']} expired; 202 after {accepted * 1000:.0f} ms; resolved after {resolved:.2f} s; "
          f"done after {seconds:.2f} s")
    print(f"service rate={n / seconds:.0f} deliveries/s (while resolving: {delivered_at_resolved / resolved:.0f}/s; "
          f"after: {(counts['delivered'] - delivered_at_resolved) / max(seconds - resolved, 1e-9):.0f}/s)")
    print(f"GET /v1/push/{{id}} at {counts['delivered']} deliveries: median {statistics.median(reads):.2f} ms, max {max(reads):.2f} ms; "
          f"a page of 100 deliveries: {page_ms:.1f} ms")
    print(f"service RSS peak {status('VmHWM:') / 2**20:.0f} MiB (growth {(status('VmHWM:') - rss_before) / 2**20:.0f} MiB); database after: {size() / 1e6:.1f} MB")
    print(f"service RSS at resolved {rss_resolved / 2**20:.0f} MiB, at done {status('VmRSS:') / 2**20:.0f} MiB; sampled peaks: "
          f"anonymous {peaks['RssAnon:'] / 2**20:.0f} MiB (growth {(peaks['RssAnon:'] - anon_before) / 2**20:.0f} MiB), "
          f"file {peaks['RssFile:'] / 2**20:.0f} MiB")
    if cancel is not None:
        # Nothing is sent after the answer: what was delivered in the end is what the answer called sent, plus at
        # most what it said was still on the wire.
        late = counts["delivered"] - cancel["sent"]
        print(f"cancel at {cancel['sent']} sent: answered in {cancel_ms:.0f} ms; sent {cancel['sent']}, cancelled "
              f"{cancel['cancelled']}, still sending {cancel['still_sending']}; in the end delivered {counts['delivered']} "
              f"({late} after the answer's count), cancelled {counts['cancelled']}, pending {counts['pending']}; "
              f"delivered + cancelled = {counts['delivered'] + counts['cancelled']} of {n}")
    used = {k: cpu_after[k] - cpu_before[k] for k in cpu_after}
    print(f"CPU during the push (2 cores, {2 * seconds:.1f} core-s): service {used['service']:.1f} s, mock {used['mock']:.1f} s, "
          f"postgres {used['postgres']:.1f} s, rest {max(0.0, 2 * seconds - sum(used.values())):.1f} s")
    if pushes > 1:
        time.sleep(float(os.environ.get("RETENTION", "0")) + 1)
PY

if [ "$STORE" = postgres ] && [ "${PG_STATEMENTS:-0}" = 1 ]; then
  psql "$URL" -c "SELECT calls, round(total_exec_time::numeric, 0) AS total_ms, round(mean_exec_time::numeric, 3) AS mean_ms,
    rows, left(regexp_replace(query, '\s+', ' ', 'g'), 150) AS query
    FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 15" | tee "$DATA/statements.txt"
fi
if [ "$STORE" = sqlite ] && [ "${SQL_STATEMENTS:-0}" = 1 ]; then
  sleep 2.5 # the service writes its table every 2 s
  echo "SQLite statements during the run, by total time (total_s, calls, mean_ms, sql):"
  head -16 "$DATA/sqlite-statements.tsv" | cut -c1-220 | tee "$DATA/statements.txt"
fi
if [ "$STORE" = postgres ]; then
  # Row versions written to deliveries: an update that is heap-only (HOT) adds no index entries.
  psql "$URL" -c "SELECT n_tup_ins AS inserted, n_tup_upd AS updated, n_tup_hot_upd AS heap_only_updates
    FROM pg_stat_user_tables WHERE relname = 'deliveries'" | tee -a "$DATA/statements.txt"
fi

# 3. The same number of plain pushes with push-sender, to the same mock.
if [ "$PUSHES" = 1 ] && [ -z "${CANCEL_AT:-}" ]; then
  started=$(date +%s.%N)
  "$RELEASE/push-sender" send --host "https://127.0.0.1:$MOCK_PORT" --ca "$DATA/certs/ca.pem" \
    --key "$DATA/certs/AuthKey_TEST123456.p8" --key-id TEST123456 --team-id TEAM123456 --topic com.example.app \
    --payload "$DATA/payload.json" --tokens-file "$DATA/tokens.txt" --connections 1 --concurrency 1000 --attempts 1 \
    --json --quiet > "$DATA/sender.jsonl" 2>/dev/null || true
  ended=$(date +%s.%N)
  python3 - "$DATA/sender.jsonl" "$started" "$ended" <<'PY' | tee -a "$DATA/results.txt"
import json, sys
ok = total = 0
for line in open(sys.argv[1]):
    total += 1; ok += 1 if json.loads(line).get("ok") else 0
seconds = float(sys.argv[3]) - float(sys.argv[2])
print(f"push-sender pushes={total} ok={ok} seconds={seconds:.2f} rate={total / seconds:.0f}")
PY
  python3 - "$DATA/results.txt" "$STORE" <<'PY'
import re, sys
rates = {}
for line in open(sys.argv[1]):
    m = re.match(r"(service|push-sender) .*rate=(\d+)", line)
    if m: rates[m.group(1)] = int(m.group(2))
print(f"== {sys.argv[2]}: one push to everyone {rates['service']}/s = {rates['service'] / rates['push-sender']:.2f}x push-sender send {rates['push-sender']}/s")
PY
fi
