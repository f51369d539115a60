#!/usr/bin/env bash
# Benchmark of location audiences (not a test; never run in CI). In one run, for 100,000 and 1,000,000 devices
# (scripts/gen-population.py, seed 30: five European cities):
#   - the load of every device's fix through the store's own write path (fixes and the last_fixes cell index),
#     fixes/s and the database's bytes per device, on SQLite and on PostgreSQL;
#   - `near` audiences (500 m, 2 km, 10 km at Paris, 500 m at London and Lyon, 1 km where nobody is): the median
#     time of 7 resolutions (AudienceResolver, as POST /v1/audiences/preview runs it) and the count;
#   - the reference: scipy's cKDTree over the same points (unit vectors, query_ball_point, then the same age and
#     accuracy filter), the same queries: its median, the counts (which must be equal) and our ratio.
#
#   scripts/bench-audiences.sh            # SIZES="100000 1000000" by default
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ENRICH_TEST_DATABASE_URL:-}" ]; then exec scripts/with-postgres.sh "$0" "$@"; fi
SIZES=${SIZES:-"100000 1000000"}
python3 -c "import scipy" 2>/dev/null || pip install -q scipy
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
. scripts/bench-lib.sh
release_build places-bench
BENCH=$RELEASE/places-bench
NOW=$(date +%s)
cat > "$TMP/queries.csv" <<'CSV'
lat,lng,radius_m
48.8566,2.3522,500
48.8566,2.3522,2000
48.8566,2.3522,10000
51.5074,-0.1278,500
45.7640,4.8357,500
30.0000,-40.0000,1000
CSV

for N in $SIZES; do
  echo "== $N devices"
  python3 scripts/gen-population.py --devices "$N" --seed 30 > "$TMP/pop.csv"
  echo "-- SQLite"
  "$BENCH" audiences --population "$TMP/pop.csv" --queries "$TMP/queries.csv" --database "$TMP/a-$N.sqlite" \
    --now "$NOW" | tee "$TMP/sqlite-$N.jsonl"
  sqlite3_bytes=$(( $(stat -c %s "$TMP/a-$N.sqlite") + $(stat -c %s "$TMP/a-$N.sqlite-wal" 2>/dev/null || echo 0) ))
  echo "{\"phase\":\"size\",\"store\":\"sqlite\",\"bytes_per_device\":$(( sqlite3_bytes / N ))}"
  echo "-- PostgreSQL"
  DB="audiences_$N"
  psql -q "$ENRICH_TEST_DATABASE_URL" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
  URL="${ENRICH_TEST_DATABASE_URL%/*}/$DB?sslmode=disable"
  "$BENCH" audiences --population "$TMP/pop.csv" --queries "$TMP/queries.csv" --database-url "$URL" \
    --now "$NOW" | tee "$TMP/postgres-$N.jsonl"
  pg_bytes=$(psql -At "$URL" -c "SELECT pg_database_size(current_database())")
  echo "{\"phase\":\"size\",\"store\":\"postgres\",\"bytes_per_device\":$(( pg_bytes / N ))}"
  echo "-- scipy cKDTree on the same points and queries, and the ratios"
  python3 - "$TMP/pop.csv" "$TMP/queries.csv" "$TMP/sqlite-$N.jsonl" "$TMP/postgres-$N.jsonl" <<'PY'
import csv, json, sys, time
import numpy as np
from scipy.spatial import cKDTree
EARTH = 6371008.8
def unit(lat, lng):
    lat, lng = np.radians(lat), np.radians(lng)
    return np.column_stack([np.cos(lat) * np.cos(lng), np.cos(lat) * np.sin(lng), np.sin(lat)])
pop = np.genfromtxt(sys.argv[1], delimiter=",", skip_header=1, usecols=(1, 2, 3, 4))
start = time.perf_counter()
tree = cKDTree(unit(pop[:, 0], pop[:, 1]))
print(json.dumps({"phase": "ckdtree_build", "seconds": round(time.perf_counter() - start, 3)}))
keep = (pop[:, 2] <= 3600) & (pop[:, 3] <= 500)
ours = {name: [json.loads(l) for l in open(path) if '"near"' in l] for name, path in (("sqlite", sys.argv[3]), ("postgres", sys.argv[4]))}
queries = np.loadtxt(sys.argv[2], delimiter=",", skiprows=1, ndmin=2)
for i, (lat, lng, radius) in enumerate(queries):
    chord = 2 * np.sin(radius / EARTH / 2)
    times = []
    for _ in range(7):
        t = time.perf_counter()
        hits = tree.query_ball_point(unit(np.array([lat]), np.array([lng]))[0], chord)
        count = int(keep[hits].sum()) if len(hits) else 0
        times.append((time.perf_counter() - t) * 1000)
    ref = sorted(times)[3]
    row = {"phase": "reference", "lat": lat, "lng": lng, "radius_m": radius, "ckdtree_count": count,
           "ckdtree_median_ms": round(ref, 3)}
    for name, lines in ours.items():
        mine = lines[i]
        row[f"{name}_count"] = mine["count"]
        row[f"{name}_median_ms"] = round(mine["median_ms"], 3)
        row[f"{name}_ratio_to_ckdtree"] = round(ref / mine["median_ms"], 3) if mine["median_ms"] else None
        if mine["count"] != count:
            row[f"{name}_MISMATCH"] = True
    print(json.dumps(row))
PY
done
