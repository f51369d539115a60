#!/usr/bin/env bash
# Benchmark (not a test; never run in CI): push-sender sending N messages to the local FCM (send --fcm: OAuth
# access token, FCM HTTP v1 JSON bodies, HTTP/2 over AsyncHTTPClient) next to N pushes to the local APNs mock
# (send: its own HTTP/2 client), same payload, same concurrency, one run, one machine, release builds. Each side is
# timed as a whole process (start, token or JWT, connection, every send, results written).
#
#   scripts/bench-fcm.sh
#   N=50000 CONCURRENCY=200 scripts/bench-fcm.sh
#
# Prints both rates, the ratio FCM/APNs, and what each mock counted. ROUNDS=3 alternates the two three times.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
N=${N:-20000}
CONCURRENCY=${CONCURRENCY:-100}
ROUNDS=${ROUNDS:-1}
DATA=.cache/bench-fcm
SENDER=${SENDER:-$RELEASE/push-sender}
[ -x "$SENDER" ] || release_build push-sender
rm -rf "$DATA" && mkdir -p "$DATA"
certs.example/make-local-certs.sh "$DATA/certs" >/dev/null

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

APNS_PORT=$(free_port)
"$SENDER" mock-apns --port "$APNS_PORT" --cert "$DATA/certs/server.pem" --cert-key "$DATA/certs/server-key.pem" \
  --auth-key-pub "$DATA/certs/AuthKey_TEST123456.pub.pem" --key-id TEST123456 --team-id TEAM123456 \
  --log-level error --record-capacity 1000 >/dev/null 2>&1 &
PIDS+=($!)
FCM_PORT=$(free_port)
"$SENDER" mock-fcm --port "$FCM_PORT" --cert "$DATA/certs/server.pem" --cert-key "$DATA/certs/server-key.pem" \
  --account-out "$DATA/service-account.json" --max-concurrent-streams 1000 --log-level error \
  --record-capacity 1000 >"$DATA/mock-fcm.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$DATA/service-account.json" ] && break; sleep 0.1; done

python3 - "$N" "$DATA" <<'PY'
import json, sys
n, data = int(sys.argv[1]), sys.argv[2]
with open(f"{data}/apns-tokens.txt", "w") as f:
    for i in range(n): print(f"{i:064x}", file=f)
with open(f"{data}/fcm-tokens.txt", "w") as f:
    for i in range(n): print(f"bench{i:010d}:APA91b" + "Hx_-" * 35, file=f)
p = {"aps": {"alert": {"title": "Nearby", "body": "bench"}}, "pad": ""}
p["pad"] = "x" * (300 - len(json.dumps(p, separators=(",", ":"))))
open(f"{data}/payload.json", "w").write(json.dumps(p, separators=(",", ":")))
PY

# One timed run: prints the rate and writes the results' accepted count.
run() { # name args...
  local name=$1; shift
  local started ended
  started=$(date +%s.%N)
  "$SENDER" send "$@" --payload "$DATA/payload.json" --concurrency "$CONCURRENCY" --attempts 1 --json --quiet \
    > "$DATA/$name.jsonl" 2>/dev/null || true
  ended=$(date +%s.%N)
  python3 - "$DATA/$name.jsonl" "$started" "$ended" "$name" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ok = sum(1 for l in lines if l.get("ok"))
seconds = float(sys.argv[3]) - float(sys.argv[2])
print(f"{sys.argv[4]}: {ok} of {len(lines)} accepted in {seconds:.2f} s: {len(lines) / seconds:.0f} sends/s")
PY
}

for round in $(seq "$ROUNDS"); do
  echo "round $round (N=$N, concurrency $CONCURRENCY)"
  apns=$(run apns --host "https://127.0.0.1:$APNS_PORT" --ca "$DATA/certs/ca.pem" \
    --key "$DATA/certs/AuthKey_TEST123456.p8" --key-id TEST123456 --team-id TEAM123456 --topic com.example.app \
    --tokens-file "$DATA/apns-tokens.txt")
  echo "  $apns"
  fcm=$(run fcm --fcm --service-account "$DATA/service-account.json" --fcm-url "https://127.0.0.1:$FCM_PORT" \
    --ca "$DATA/certs/ca.pem" --tokens-file "$DATA/fcm-tokens.txt")
  echo "  $fcm"
  python3 -c "
import re, sys
a = float(re.search(r'([0-9]+) sends/s', sys.argv[1]).group(1)); f = float(re.search(r'([0-9]+) sends/s', sys.argv[2]).group(1))
print(f'  FCM / APNs: {f / a:.2f}')" "$apns" "$fcm"
done
echo "local FCM counted: $(curl -sk "https://127.0.0.1:$FCM_PORT/control/stats")"
