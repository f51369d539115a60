#!/usr/bin/env bash
# Benchmark (not a test; never run in CI): fix ingest (batches of 100) and enrichment, in one run, with
#   1. SQLite (one node),
#   2. PostgreSQL and one node,
#   3. PostgreSQL and two nodes behind the same load (two wrk processes, one per node, half the connections each).
# PostgreSQL is a throwaway cluster (scripts/with-postgres.sh) with its default durability (synchronous_commit on);
# PG_SYNCHRONOUS_COMMIT=off runs it without waiting for each commit's WAL flush (a diagnosis: how much of a batch's
# time is the flush; not a setting to run the service with, since an acknowledged fix may then be lost on a crash).
# POIs: the 144,563 GeoNames places (scripts/fetch-places.sh); DEVICES devices with a fix near a real place.
#
#   scripts/bench-scale.sh                       # DURATION=10 s per phase, CONNS=32, DEVICES=10000
#   DURATION=20 CONNS=64 scripts/bench-scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
if [ -z "${ENRICH_TEST_DATABASE_URL:-}" ]; then exec scripts/with-postgres.sh "$0" "$@"; fi
DURATION=${DURATION:-10}
CONNS=${CONNS:-32}
DEVICES=${DEVICES:-10000}
DATA=.cache/bench-scale
BIN=${BIN:-$RELEASE/enrichment-server}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
[ -x "$BIN" ] || release_build enrichment-server
PLACES=$(scripts/fetch-places.sh)
rm -rf "$DATA" && mkdir -p "$DATA"

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

start_node() { # port [database-url]
  local port=$1 url=${2:-}
  # The database URL is a secret: the environment only, never a flag.
  local with_database=(env -u ENRICH_DATABASE_URL)
  [ -n "$url" ] && with_database=(env ENRICH_DATABASE_URL="$url")
  "${with_database[@]}" "$BIN" serve --port "$port" --db "$DATA/db.sqlite" --sample-pois false \
    --log-level warning >>"$DATA/server.log" 2>&1 &
  PIDS+=($!)
  wait_healthy "$port"
}

seed() { # port
  python3 - "$1" "$DEVICES" "$PLACES" <<'PY'
import csv, http.client, json, random, sys, time
port, devices, places = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = random.Random(1)
with open(places, newline="", encoding="utf-8") as f:
    coords = [(float(r["lat"]), float(r["lon"])) for r in csv.DictReader(f)]
conn = http.client.HTTPConnection("127.0.0.1", port)
now = int(time.time())
for d in range(devices):
    lat, lng = rng.choice(coords)
    body = json.dumps({"locations": [{"latitude": lat + rng.uniform(-0.02, 0.02), "longitude": lng + rng.uniform(-0.02, 0.02), "utc_timestamp": now - rng.randint(0, 600)}]})
    conn.request("POST", f"/v1/devices/dev-{d}/locations", body, {"Content-Type": "application/json"})
    r = conn.getresponse(); r.read(); assert r.status == 200, r.status
PY
}

write_wrk_scripts "$DATA" "$DEVICES"

phase() { # name script connections port [port2]
  local name=$1 script=$2 conns=$3
  shift 3
  local outs=() loads=() i=0
  for port in "$@"; do
    wrk -t1 -c"$conns" -d"${DURATION}s" --latency -s "$DATA/$script" "http://127.0.0.1:$port" > "$DATA/${name// /-}-$i.txt" &
    loads+=($!); outs+=("$DATA/${name// /-}-$i.txt"); i=$((i + 1))
  done
  wait "${loads[@]}"
  for out in "${outs[@]}"; do check_wrk "$out"; done
  python3 - "$name" "$script" "${outs[@]}" <<'PY'
import re, sys
name, script, files = sys.argv[1], sys.argv[2], sys.argv[3:]
rps, p99s, errors = 0.0, [], 0
for f in files:
    text = open(f).read()
    rps += float(re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1))
    m = re.search(r"^\s+99%\s+(\S+)", text, re.M); p99s.append(m.group(1) if m else "?")
    e = re.search(r"Non-2xx or 3xx responses: (\d+)", text); errors += int(e.group(1)) if e else 0
unit = f"req/s = {rps * 100:.0f} fixes/s" if script == "ingest.lua" else "req/s"
print(f"{name:28} {rps:9.0f} {unit:24} p99 {' / '.join(p99s):18} non-2xx {errors}")
PY
}

echo "== $(nproc) cores; ${DURATION}s per phase, $CONNS connections in all, $DEVICES devices, 144,563 POIs"
# 1. SQLite.
"$BIN" import-pois "$PLACES" --map geonames --db "$DATA/db.sqlite" >/dev/null
P1=$(free_port); start_node "$P1"; seed "$P1"
phase "sqlite enrich" enrich.lua "$CONNS" "$P1" | tee -a "$DATA/results.txt"
phase "sqlite ingest" ingest.lua "$CONNS" "$P1" | tee -a "$DATA/results.txt"
kill "${PIDS[0]}"; wait "${PIDS[0]}" 2>/dev/null || true; PIDS=()

# 2. PostgreSQL, one node.
if [ -n "${PG_SYNCHRONOUS_COMMIT:-}" ]; then
  psql -q "$ENRICH_TEST_DATABASE_URL" -c "ALTER SYSTEM SET synchronous_commit = '$PG_SYNCHRONOUS_COMMIT'" \
    -c "SELECT pg_reload_conf()" >/dev/null
  echo "== PostgreSQL synchronous_commit: $(psql -tA "$ENRICH_TEST_DATABASE_URL" -c 'SHOW synchronous_commit')"
fi
DB="bench_$(date +%s)"
psql -q "$ENRICH_TEST_DATABASE_URL" -c "CREATE DATABASE $DB"
URL="${ENRICH_TEST_DATABASE_URL%/*}/$DB?sslmode=disable"
ENRICH_DATABASE_URL="$URL" "$BIN" import-pois "$PLACES" --map geonames >/dev/null
P1=$(free_port); start_node "$P1" "$URL"; seed "$P1"
phase "postgres 1 node enrich" enrich.lua "$CONNS" "$P1" | tee -a "$DATA/results.txt"
phase "postgres 1 node ingest" ingest.lua "$CONNS" "$P1" | tee -a "$DATA/results.txt"

# 3. PostgreSQL, two nodes, the same load split between them.
P2=$(free_port); start_node "$P2" "$URL"
phase "postgres 2 nodes enrich" enrich.lua $((CONNS / 2)) "$P1" "$P2" | tee -a "$DATA/results.txt"
phase "postgres 2 nodes ingest" ingest.lua $((CONNS / 2)) "$P1" "$P2" | tee -a "$DATA/results.txt"

# 4. Each PostgreSQL figure as a ratio of the same build's SQLite figure (issue 24: one PostgreSQL node's enrich
#    rate >= 0.5x SQLite's with p99 <= 10 ms; one node's ingest >= 100,000 fixes/s).
python3 - "$DATA/results.txt" <<'PY'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(.+?)\s{2,}\s*(\d+) req/s.*?p99 (\S+)", line)
    if m: rows[m.group(1).strip()] = (float(m.group(2)), m.group(3))
print("\n== ratios to SQLite (same build, same run)")
for kind in ("enrich", "ingest"):
    base = rows.get(f"sqlite {kind}")
    for name in (f"postgres 1 node {kind}", f"postgres 2 nodes {kind}"):
        if base and name in rows:
            rps, p99 = rows[name]
            extra = f" = {rps * 100:.0f} fixes/s" if kind == "ingest" else ""
            print(f"{name:28} {rps / base[0]:.2f}x  ({rps:.0f} vs {base[0]:.0f} req/s{extra}; p99 {p99})")
PY
