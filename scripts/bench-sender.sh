#!/usr/bin/env bash
# Benchmark: push-sender to the mock APNs over HTTP/2 + TLS, over 1 and 4 connections, against aioapns (PyPI)
# sending the same pushes to the same mock in the same run. Not a test; never run in CI.
#
#   scripts/bench-sender.sh                  # N=20000 pushes per run
#   N=50000 scripts/bench-sender.sh
#
# Needs openssl and pip (aioapns is installed if missing) and a release build of push-sender (built if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}
PORT=${PORT:-12297}
DATA=.cache/bench-sender
BIN=.build/release/push-sender

python3 -c "import aioapns" 2>/dev/null || pip install -q aioapns
[ -x "$BIN" ] || swift build -c release --product push-sender
rm -rf "$DATA" && mkdir -p "$DATA"
certs.example/make-local-certs.sh "$DATA/certs" >/dev/null
python3 - "$N" > "$DATA/tokens.txt" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print(f"{i:064x}")
PY

"$BIN" mock-apns --port "$PORT" --cert "$DATA/certs/server.pem" --cert-key "$DATA/certs/server-key.pem" \
  --auth-key-pub "$DATA/certs/AuthKey_TEST123456.pub.pem" --key-id TEST123456 --team-id TEAM123456 --log-level error \
  > "$DATA/mock.log" 2>&1 &
MOCK=$!
trap 'kill $MOCK 2>/dev/null || true; wait $MOCK 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do grep -q listening "$DATA/mock.log" 2>/dev/null && break; sleep 0.1; done

ours() { # connections concurrency
  # Timed as a whole process: start-up, TLS handshakes and the first JWT are included (aioapns is timed after
  # a warm-up), so the comparison leans against push-sender.
  local started ended
  started=$(date +%s.%N)
  "$BIN" send --host "https://127.0.0.1:$PORT" --ca "$DATA/certs/ca.pem" --key "$DATA/certs/AuthKey_TEST123456.p8" \
    --key-id TEST123456 --team-id TEAM123456 --topic com.example.app --payload payloads/location.json \
    --tokens-file "$DATA/tokens.txt" --connections "$1" --concurrency "$2" --json > "$DATA/ours-$1.json"
  ended=$(date +%s.%N)
  python3 - "$DATA/ours-$1.json" "$started" "$ended" "$1" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))
seconds = float(sys.argv[3]) - float(sys.argv[2])
ok = sum(1 for r in results if r.get("ok"))
print(f"push-sender connections={sys.argv[4]} pushes={len(results)} ok={ok} seconds={seconds:.3f} rate={len(results) / seconds:.0f}")
PY
}

echo "== $N pushes per run to the mock APNs on 127.0.0.1:$PORT (HTTP/2 + TLS, token auth)"
for C in 1 4; do
  ours "$C" $(( C * 100 )) | tee -a "$DATA/results.txt"
  python3 scripts/aioapns_bench.py "$PORT" "$DATA/certs/ca.pem" "$DATA/certs/AuthKey_TEST123456.p8" TEST123456 TEAM123456 \
    "$DATA/tokens.txt" "$C" $(( C * 100 )) 2>/dev/null | tee -a "$DATA/results.txt"
done
python3 - "$DATA/results.txt" <<'PY'
import re, sys
rates = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) connections=(\d+) .* rate=(\d+)", line)
    if m:
        rates[(m.group(1), int(m.group(2)))] = int(m.group(3))
for c, target in [(1, 5), (4, 10)]:
    ours, ref = rates.get(("push-sender", c)), rates.get(("aioapns", c))
    if ours and ref:
        print(f"connections={c}: push-sender {ours}/s vs aioapns {ref}/s = {ours / ref:.1f}x (target >= {target}x)")
PY
