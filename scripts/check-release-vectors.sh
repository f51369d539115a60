#!/usr/bin/env bash
# The ZOI vectors on a release build, bit for bit (.ci/run calls it; docs/TESTING.md, "ZOI vectors"), and the JSON
# parser's number fast paths on an optimised build (step 3).
#
# The SDK's numbers are what a build that calls the C library's math functions as written computes. The debug test
# run (FIGMMTests) checks that, but an optimiser may rewrite the arithmetic (Sources/LocationCore/ZOI/LibcPow.swift:
# LLVM turned pow(x, 2) into x * x), and users run release builds. So:
#   1. Tests/Fixtures/location/vectors/reference.py: the recorded vectors are the spec's bits, by an independent
#      Python port (no Swift, no optimiser);
#   2. location-vectors, built with -c release (LocationCore and what it needs only, not the whole package), replays
#      every vector and compares each zone after every visit and at the end, bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 Tests/Fixtures/location/vectors/reference.py
log=$(mktemp)
trap 'rm -f "$log"' EXIT
swift build -c release --product location-vectors >"$log" 2>&1 || { cat "$log"; exit 1; }
"$(swift build -c release --show-bin-path)/location-vectors" Tests/Fixtures/location/vectors
# 3. The JSON parser's number fast paths (integers digit by digit, Clinger's exact path for decimals) on -O, against
#    strtod bit for bit: Sources/Essentials compiled with scripts/release-checks/json-numbers/main.swift.
numbers=$(mktemp -d)
trap 'rm -f "$log"; rm -rf "$numbers"' EXIT
swiftc -O -module-name JSONNumbersCheck scripts/release-checks/json-numbers/main.swift Sources/Essentials/*.swift \
  -o "$numbers/check" >"$log" 2>&1 || { cat "$log"; exit 1; }
"$numbers/check"
