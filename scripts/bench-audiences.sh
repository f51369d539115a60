#!/usr/bin/env bash
# Benchmark of location audiences (not a test; never run in CI). In one run, for 100,000 and 1,000,000 devices
# (scripts/gen-population.py, seed 30: five European cities):
#   - the load of every device's fix through the store's own write path (fixes and the last_fixes cell index),
#     fixes/s and the database's bytes per device, on SQLite and on PostgreSQL;
#   - `near` audiences (500 m, 2 km, 10 km at Paris, 500 m at London and Lyon, 1 km where nobody is): the median
#     time of 7 resolutions (AudienceResolver, as POST /v1/audiences/preview runs it) and the count;
#   - the reference: scipy's cKDTree over the same points (unit vectors, query_ball_point, then the same age and
#     accuracy filter), the same queries: its median, the counts (which must be equal) and our ratio;
#   - the same for `tags`, `zoi` and `visited` (gen-population.py --extras: each device's tags, a home and most
#     often a work zone, 3 to 10 visits at 20,000 POIs over 30 days), loaded through the stores' own paths (tags
#     with setProfiles, zones and visits with the location store's bulk importHistory, the
#     rows updateVisits writes, --chunk devices per transaction), timed the same way (with the store's read alone,
#     to tell it from the resolver's work), against numpy (boolean arrays, cKDTree, haversine) in the same run;
#   - on PostgreSQL, EXPLAIN (ANALYZE, BUFFERS) of the largest reads (the common tag, zones within 10 km, visits
#     at every cafe) on the loaded database, before the throwaway cluster goes.
# Any count that differs from the reference's is printed with _MISMATCH and makes the script exit with 1 at the end.
#
#   scripts/bench-audiences.sh            # SIZES="100000 1000000" by default (about 1.5 hours on 2 cores, most
#                                         # of it the 1M loads); SIZES=100000 runs in under 10 minutes
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

status=0
for N in $SIZES; do
  echo "== $N devices"
  start=$(date +%s)
  python3 scripts/gen-population.py --devices "$N" --seed 30 --extras "$TMP/x-$N" > "$TMP/pop.csv"
  echo "{\"phase\":\"generate\",\"seconds\":$(( $(date +%s) - start ))}"
  echo "-- SQLite"
  "$BENCH" audiences --population "$TMP/pop.csv" --queries "$TMP/queries.csv" --database "$TMP/a-$N.sqlite" \
    --now "$NOW" --extras "$TMP/x-$N" | tee "$TMP/sqlite-$N.jsonl"
  sqlite3_bytes=$(( $(stat -c %s "$TMP/a-$N.sqlite") + $(stat -c %s "$TMP/a-$N.sqlite-wal" 2>/dev/null || echo 0) ))
  echo "{\"phase\":\"size\",\"store\":\"sqlite\",\"bytes_per_device\":$(( sqlite3_bytes / N ))}"
  echo "-- PostgreSQL"
  DB="audiences_$N"
  psql -q "$ENRICH_TEST_DATABASE_URL" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
  URL="${ENRICH_TEST_DATABASE_URL%/*}/$DB?sslmode=disable"
  "$BENCH" audiences --population "$TMP/pop.csv" --queries "$TMP/queries.csv" --database-url "$URL" \
    --now "$NOW" --extras "$TMP/x-$N" | tee "$TMP/postgres-$N.jsonl"
  pg_bytes=$(psql -At "$URL" -c "SELECT pg_database_size(current_database())")
  echo "{\"phase\":\"size\",\"store\":\"postgres\",\"bytes_per_device\":$(( pg_bytes / N ))}"
  echo "-- PostgreSQL: the plans of the largest reads (the stores' queries, the resolver's cell ranges)"
  python3 - "$TMP/x-$N/pois.csv" "$NOW" > "$TMP/explain.sql" <<'PY'
import csv, math, sys
def ranges(lat, lng, radius, per):  # CellGrid.ranges(center:radius:), for these plans only
    rows, columns = 180 * per, 360 * per
    row = lambda v: min(rows - 1, max(0, math.floor((v + 90) * per)))
    column = lambda v: min(columns - 1, max(0, math.floor((v + 180) * per)))
    angle = min(math.pi, radius / 6371008.8 * 1.001 + 1e-9)
    span = math.degrees(angle)
    south, north = max(-90, lat - span), min(90, lat + span)
    phi_c = math.radians(lat)
    ratio = math.sin(phi_c) / math.cos(angle)
    widest = math.asin(ratio) if abs(ratio) <= 1 else math.copysign(math.pi / 2, phi_c)
    out = []
    for r in range(row(south), row(north) + 1):  # each row clipped to the circle, as the service does
        phi = min(math.radians((r + 1) / per - 90), max(math.radians(r / per - 90), widest))
        divisor = math.cos(phi) * math.cos(phi_c)
        h = (math.sin(angle / 2) ** 2 - math.sin((phi - phi_c) / 2) ** 2) / divisor if divisor > 1e-12 else 1
        half = math.degrees(2 * math.asin(math.sqrt(min(1, max(0, h)))))
        if h >= 1 or math.cos(angle) <= 0 or 2 * half >= 360 - 2 / per:
            out.append((r * columns, r * columns + columns - 1))
            continue
        out.append((r * columns + column(lng - half), r * columns + column(lng + half)))
        if lng - half < -180: out.append((r * columns + column(lng - half + 360), r * columns + columns - 1))
        if lng + half > 180: out.append((r * columns, r * columns + column(lng + half - 360)))
    return out
def merged(found):
    out = []
    for lo, hi in sorted(found):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out
def arrays(found):
    return "'{%s}'::int8[], '{%s}'::int8[]" % (",".join(str(a) for a, _ in found), ",".join(str(b) for _, b in found))
now = float(sys.argv[2])
cafes = [(float(r["lat"]), float(r["lng"])) for r in csv.DictReader(open(sys.argv[1])) if r["type"] == "cafe"]
zones = ranges(48.8566, 2.3522, 10000, 100)
visits = merged([c for lat, lng in cafes for c in ranges(lat, lng, 100, 1000)])
print("\\echo tags_common (device_tags, plan:free)")
print("EXPLAIN (ANALYZE, BUFFERS) SELECT string_agg(t.device_id, E'\\n') FROM device_tags t WHERE t.tag = 'plan:free';")
print("\\echo zoi_home_paris_10km (zois, %d cell ranges)" % len(zones))
print("EXPLAIN (ANALYZE, BUFFERS) SELECT string_agg(z.device_id || coalesce(E'\\t' || z.period, ''), E'\\n'),"
      " string_agg(float8send(z.latitude) || float8send(z.longitude), ''::bytea) FROM unnest(%s) AS r(lo, hi)"
      " CROSS JOIN LATERAL (SELECT device_id, period, latitude, longitude FROM zois"
      " WHERE cell BETWEEN r.lo AND r.hi OFFSET 0) AS z;" % arrays(zones))
print("\\echo visited_cafe_7d (visits, %d cell ranges)" % len(visits))
print("EXPLAIN (ANALYZE, BUFFERS) SELECT string_agg(v.device_id, E'\\n'), string_agg(float8send(v.latitude)"
      " || float8send(v.longitude) || float8send(v.arrival) || float8send(v.departure), ''::bytea)"
      " FROM unnest(%s) AS r(lo, hi) CROSS JOIN LATERAL (SELECT device_id, latitude, longitude, arrival, departure"
      " FROM visits WHERE cell BETWEEN r.lo AND r.hi OFFSET 0) AS v"
      " WHERE v.departure >= %r AND v.arrival <= %r;" % (arrays(visits), now - 604800, now))
print("\\echo near_paris_10km (last_fixes, %d cell ranges)" % len(zones))
print("EXPLAIN (ANALYZE, BUFFERS) SELECT string_agg(l.device_id, E'\\n'),"
      " string_agg(float8send(l.latitude) || float8send(l.longitude), ''::bytea)"
      " FROM unnest(%s) AS r(lo, hi) CROSS JOIN LATERAL (SELECT device_id, fix_time, latitude, longitude,"
      " horizontal_accuracy FROM last_fixes WHERE cell BETWEEN r.lo AND r.hi OFFSET 0) AS l"
      " WHERE l.fix_time >= %r AND coalesce(l.horizontal_accuracy, 0) <= 500;" % (arrays(zones), now - 3600))
PY
  psql -X -q "$URL" -f "$TMP/explain.sql" | sed 's/^/    /'
  # Just loaded, the tables' visibility maps are not set: an index-only scan still reads the heap for each row
  # (Heap Fetches in the plans above). Autovacuum sets them; measured again after a VACUUM, the steady state of
  # append-only tables (visits, zones, tags); last_fixes, updated by every fix, lies between the two.
  echo "-- PostgreSQL after VACUUM ANALYZE (the same audiences, nothing loaded)"
  psql -q "$URL" -c "VACUUM ANALYZE"
  "$BENCH" audiences --population "$TMP/pop.csv" --queries "$TMP/queries.csv" --database-url "$URL" \
    --now "$NOW" --extras "$TMP/x-$N" --time-only | tee "$TMP/postgres-vacuumed-$N.jsonl"
  python3 - "$TMP/postgres-$N.jsonl" "$TMP/postgres-vacuumed-$N.jsonl" <<'PY' || status=1
import json, sys
def timed(path):
    out = {}
    for line in open(path):
        d = json.loads(line)
        if d.get("phase") in ("near", "audience"):
            out[d.get("name") or "near_%s_%s_%s" % (d["lat"], d["lng"], d["radius_m"])] = d
    return out
before, after = timed(sys.argv[1]), timed(sys.argv[2])
bad = False
for name, d in after.items():
    same = before[name]["count"] == d["count"]
    bad |= not same
    print(json.dumps({"phase": "postgres_vacuumed" if same else "postgres_vacuumed_MISMATCH", "name": name,
                      "count": d["count"], "loaded_ms": round(before[name]["median_ms"], 3),
                      "vacuumed_ms": round(d["median_ms"], 3)}))
sys.exit(1 if bad else 0)
PY
  echo "-- scipy cKDTree on the same points and queries, and the ratios"
  python3 - "$TMP/pop.csv" "$TMP/queries.csv" "$TMP/sqlite-$N.jsonl" "$TMP/postgres-$N.jsonl" <<'PY' || status=1
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
mismatch = False
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
            mismatch = True
    print(json.dumps(row))
sys.exit(3 if mismatch else 0)
PY
  echo "-- tags, zoi, visited: numpy on the same data, and the ratios"
  python3 - "$TMP/pop.csv" "$TMP/x-$N/extras.npz" "$NOW" "$TMP/sqlite-$N.jsonl" "$TMP/postgres-$N.jsonl" \
    <<'PY' || status=1
import json, math, sys, time
import numpy as np
from scipy.spatial import cKDTree
EARTH = 6371008.8  # Coordinate.earthRadius
MERCATOR = 6378137.0  # SphericalMercator.radius
NOW = float(sys.argv[3])
WEEK = 604800.0
PARIS = (48.8566, 2.3522)
POLYGON = [(48.905, 2.280), (48.900, 2.410), (48.850, 2.440), (48.815, 2.380), (48.825, 2.250), (48.870, 2.230)]
start = time.perf_counter()
x = np.load(sys.argv[2])
pop = np.genfromtxt(sys.argv[1], delimiter=",", skip_header=1, usecols=(1, 2, 3, 4))
n = len(pop)
def unit(lat, lng):
    lat, lng = np.radians(lat), np.radians(lng)
    return np.column_stack([np.cos(lat) * np.cos(lng), np.cos(lat) * np.sin(lng), np.sin(lat)])
def haversine(lat1, lng1, lat2, lng2):  # Coordinate.distance, term by term
    r1, r2 = lat1 * math.pi / 180, lat2 * math.pi / 180
    half_lat = np.sin((r2 - r1) / 2)
    half_lng = np.sin((lng2 - lng1) * math.pi / 180 / 2)
    a = half_lat * half_lat + np.cos(r1) * np.cos(r2) * half_lng * half_lng
    return 2 * EARTH * np.arcsin(np.minimum(1, np.sqrt(a)))
def stored(lat, lng):  # what the stores keep of a zone: y2lat(lat2y(lat)), x2lon(lon2x(lng)) with the C library
    la = [((math.atan(math.exp(math.log(math.tan(math.pi / 4 + (v * math.pi) / 180 / 2)) * MERCATOR / MERCATOR))
            * 2 - math.pi / 2) * 180) / math.pi for v in lat.tolist()]
    lo = [((((v * math.pi) / 180 * MERCATOR) / MERCATOR) * 180) / math.pi for v in lng.tolist()]
    return np.array(la), np.array(lo)
# Tags: one boolean array per tag.
names = [str(t) for t in x["tag_names"]]
tagged = {}
for k, name in enumerate(names):
    member = np.zeros(n, dtype=bool)
    member[x["tag_device"][x["tag_id"] == k]] = True
    tagged[name] = member
# Home zones (as stored) in a cKDTree of unit vectors.
home_lat, home_lng = stored(x["home_lat"], x["home_lng"])
home_tree = cKDTree(unit(home_lat, home_lng))
# Visits: times as the bench stores them, POIs in a cKDTree per query.
arrival = NOW - x["arrival_age"]
departure = NOW - x["departure_age"]
visit_device, visit_lat, visit_lng = x["visit_device"], x["visit_lat"], x["visit_lng"]
visit_unit = unit(visit_lat, visit_lng)
poi_types = [str(t) for t in x["poi_types"]]
poi_lat, poi_lng, poi_type = x["poi_lat"], x["poi_lng"], x["poi_type"]
fix_ok = (pop[:, 2] <= 3600) & (pop[:, 3] <= 500)
def visit_unit_of(p):
    return unit(np.array([poi_lat[p]]), np.array([poi_lng[p]]))[0]

def chord(radius):
    return 2 * math.sin(radius / EARTH / 2) * 1.000001 + 1e-12
def zoi_circle(lat, lng, radius):
    hits = np.array(home_tree.query_ball_point(unit(np.array([lat]), np.array([lng]))[0], chord(radius)), dtype=np.int64)
    member = np.zeros(n, dtype=bool)
    if len(hits):
        member[hits[haversine(lat, lng, home_lat[hits], home_lng[hits]) <= radius]] = True
    return member
def zoi_polygon(vertices):  # AudienceArea.contains: even-odd, edges straight in degrees
    inside = np.zeros(n, dtype=bool)
    j = len(vertices) - 1
    for i in range(len(vertices)):
        (alat, alng), (blat, blng) = vertices[i], vertices[j]
        crosses = (alat > home_lat) != (blat > home_lat)
        with np.errstate(divide="ignore", invalid="ignore"):
            at = (blng - alng) * (home_lat - alat) / (blat - alat) + alng
        inside ^= crosses & (home_lng < at)
        j = i
    return inside
visit_tree = cKDTree(visit_unit)
print(json.dumps({"phase": "reference_prepare", "seconds": round(time.perf_counter() - start, 3)}))
def visited(pois, radius, seconds):
    member = np.zeros(n, dtype=bool)
    if len(pois) <= 16:  # a few POIs: the visits around each (a cKDTree over every visit), then the window
        for p in pois:
            hits = np.array(visit_tree.query_ball_point(visit_unit_of(p), chord(radius)), dtype=np.int64)
            if len(hits) == 0:
                continue
            hits = hits[(departure[hits] >= NOW - seconds) & (arrival[hits] <= NOW)]
            hits = hits[haversine(poi_lat[p], poi_lng[p], visit_lat[hits], visit_lng[hits]) <= radius]
            member[visit_device[hits]] = True
        return member
    # Many POIs: the visits of the window, each against its nearest POI (a cKDTree over the POIs).
    window = (departure >= NOW - seconds) & (arrival <= NOW)
    rows = np.nonzero(window)[0]
    if len(pois) == 0 or len(rows) == 0:
        return member
    tree = cKDTree(unit(poi_lat[pois], poi_lng[pois]))
    _, nearest = tree.query(visit_unit[rows], distance_upper_bound=chord(radius), workers=-1)
    close = nearest < len(pois)
    rows, nearest = rows[close], nearest[close]
    near = haversine(poi_lat[pois][nearest], poi_lng[pois][nearest], visit_lat[rows], visit_lng[rows]) <= radius
    member[visit_device[rows[near]]] = True
    return member
def near(lat, lng, radius):
    return fix_ok & (haversine(lat, lng, pop[:, 0], pop[:, 1]) <= radius)
poi_id = 0  # the bench's --poi-id p0
cafes = np.nonzero(poi_type == poi_types.index("cafe"))[0]
gyms = np.nonzero(poi_type == poi_types.index("gym"))[0]
queries = {
    "tags_common": lambda: tagged["plan:free"],
    "tags_two": lambda: tagged["lang:fr"] & tagged["topic:sports"],
    "tags_rare": lambda: tagged["beta:tester"],
    "zoi_home_paris_2km": lambda: zoi_circle(*PARIS, 2000),
    "zoi_home_paris_10km": lambda: zoi_circle(*PARIS, 10000),
    "zoi_home_paris_polygon": lambda: zoi_polygon(POLYGON),
    "visited_poi_7d": lambda: visited(np.array([poi_id]), 100, WEEK),
    "visited_cafe_7d": lambda: visited(cafes, 100, WEEK),
    "all_near_paris_2km_not_home_there": lambda: near(*PARIS, 2000) & ~zoi_circle(*PARIS, 2000),
    "all_pro_visited_gym_7d": lambda: tagged["plan:pro"] & visited(gyms, 100, WEEK),
}
ours = {name: {row["name"]: row for row in map(json.loads, open(path)) if row.get("phase") == "audience"}
        for name, path in (("sqlite", sys.argv[4]), ("postgres", sys.argv[5]))}
mismatch = False
for query, compute in queries.items():
    times = []
    for _ in range(7):
        t = time.perf_counter()
        count = int(np.count_nonzero(compute()))
        times.append((time.perf_counter() - t) * 1000)
    ref = sorted(times)[3]
    row = {"phase": "reference", "name": query, "numpy_count": count, "numpy_median_ms": round(ref, 3)}
    for name, lines in ours.items():
        mine = lines.get(query)
        if mine is None:
            row[f"{name}_MISSING"] = True
            mismatch = True
            continue
        row[f"{name}_count"] = mine["count"]
        row[f"{name}_median_ms"] = round(mine["median_ms"], 3)
        if "store_ms" in mine:
            row[f"{name}_store_ms"] = round(mine["store_ms"], 3)
            row[f"{name}_store_rows"] = mine["store_rows"]
        row[f"{name}_ratio_to_numpy"] = round(ref / mine["median_ms"], 4) if mine["median_ms"] else None
        if mine["count"] != count:
            row[f"{name}_MISMATCH"] = True
            mismatch = True
    print(json.dumps(row))
if mismatch:
    print("MISMATCH: a count differs from the reference's (see _MISMATCH / _MISSING above)", file=sys.stderr)
sys.exit(3 if mismatch else 0)
PY
done
[ "$status" = 0 ] || echo "MISMATCH in at least one audience (see above)" >&2
exit "$status"
