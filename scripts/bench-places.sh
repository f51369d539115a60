#!/usr/bin/env bash
# Benchmark: nearest-5 on the in-memory index, one query at a time, against scipy's cKDTree on the same 144,563
# GeoNames places in the same run; then the index's latency with 1M places. Not a test; never run in CI.
#
#   scripts/bench-places.sh            # QUERIES=200000 by default
set -euo pipefail
cd "$(dirname "$0")/.."
QUERIES=${QUERIES:-200000}
PLACES=$(scripts/fetch-places.sh)
python3 -c "import scipy" 2>/dev/null || pip install -q scipy
swift build -c release --product places-bench >/dev/null
BIN=.build/release/places-bench

echo "== places-bench (k-d tree on unit vectors, exact great-circle), 144k places"
OURS=$("$BIN" "$PLACES" --queries "$QUERIES" --k 5)
echo "$OURS"
echo "== scipy cKDTree on the same points as unit vectors (exact for great-circle order), one query per call"
REF=$(python3 - "$PLACES" "$QUERIES" <<'PY'
import csv, json, sys, time
import numpy as np
from scipy.spatial import cKDTree
rows = list(csv.DictReader(open(sys.argv[1], newline="", encoding="utf-8")))
lat = np.radians(np.array([float(r["lat"]) for r in rows])); lng = np.radians(np.array([float(r["lng"]) for r in rows]))
xyz = np.column_stack([np.cos(lat) * np.cos(lng), np.cos(lat) * np.sin(lng), np.sin(lat)])
tree = cKDTree(xyz)
rng = np.random.default_rng(42)
n = int(sys.argv[2])
base = rng.integers(0, len(rows), n)
qlat = np.radians(np.clip(np.degrees(lat[base]) + rng.uniform(-0.05, 0.05, n), -90, 90))
qlng = np.radians(np.clip(np.degrees(lng[base]) + rng.uniform(-0.05, 0.05, n), -180, 180))
q = np.column_stack([np.cos(qlat) * np.cos(qlng), np.cos(qlat) * np.sin(qlng), np.sin(qlat)])
started = time.perf_counter()
for i in range(n):
    tree.query(q[i], k=5)
seconds = time.perf_counter() - started
print(json.dumps({"points": len(rows), "queries": n, "qps": int(n / seconds)}))
PY
)
echo "$REF"
python3 -c "import json,sys; o=json.loads('$OURS'); r=json.loads('$REF'); print(f\"nearest-5: {o['qps']}/s vs cKDTree {r['qps']}/s = {o['qps']/r['qps']:.1f}x (target >= 2x)\")"
echo "== 1,000,000 places (real places plus moved copies)"
"$BIN" "$PLACES" --queries "$QUERIES" --k 5 --points 1000000 | python3 -c "import json,sys; o=json.loads(sys.stdin.read()); print(json.dumps(o)); print(f\"1M places: p99 {o['p99_us']:.1f} us (target < 1000 us), {o['qps']}/s\")"
