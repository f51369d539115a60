#!/usr/bin/env bash
# Benchmark (not a test; never run in CI): push-sender against servers nobody here wrote, with independent clients
# as the reference, in one run:
#   servers: nghttpd serving an empty file per device path (Debian's nghttp2-server; --echo-upload would measure its
#            temp files), nginx as an APNs-like endpoint (Debian's nginx-light,
#            scripts/nginx-apns.conf.template) without GOAWAY, and the same nginx sending GOAWAY every 1,000 requests
#   clients: push-sender (release build), h2load (the C HTTP/2 client from nghttp2-client), aioapns (PyPI)
#   1 and 4 connections, 100 streams in flight per connection, N pushes (default 100,000; aioapns sends N_AIOAPNS,
#   default 20,000, because at ~3,000/s it would take minutes), 300-byte payload, token auth.
#
#   scripts/bench-sender.sh
#   N=20000 scripts/bench-sender.sh
#   MODE=distance scripts/bench-sender.sh   # at Apple's distance: through a delaying TCP proxy (RTT 10 and 50 ms)
#                                           # to nginx configured like APNs (1,000 streams), 1 connection, push-sender
#                                           # and h2load with 1,000 streams in flight; rate against streams / RTT
#
# Prints pushes/s per client and the ratios push-sender/h2load and push-sender/aioapns. push-sender is timed as a
# whole process (start-up, TLS handshakes and the JWT included); h2load and aioapns only while sending.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
N=${N:-100000}
N_AIOAPNS=${N_AIOAPNS:-20000}
DATA=.cache/bench-sender
BIN=${BIN:-$RELEASE/push-sender}

missing=()
command -v nghttpd >/dev/null || missing+=(nghttp2-server)
command -v h2load >/dev/null || missing+=(nghttp2-client)
[ -x /usr/sbin/nginx ] || missing+=(nginx-light)
if [ ${#missing[@]} -gt 0 ]; then apt-get update -qq && apt-get install -y -qq "${missing[@]}"; fi
python3 -c "import aioapns" 2>/dev/null || pip install -q aioapns
[ -x "$BIN" ] || release_build push-sender
rm -rf "$DATA" && mkdir -p "$DATA"
certs.example/make-local-certs.sh "$DATA/certs" >/dev/null
python3 - "$N" > "$DATA/tokens.txt" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print(f"{i:064x}")
PY
head -n "$N_AIOAPNS" "$DATA/tokens.txt" > "$DATA/tokens-aioapns.txt"
# nghttpd answers 200 for a path that exists: one empty file per token; h2load gets the same paths (-i), so both
# clients make the server open the same files.
mkdir -p "$DATA/docroot/3/device"
python3 - "$DATA" <<'PY'
import sys
for line in open(f"{sys.argv[1]}/tokens.txt"):
    open(f"{sys.argv[1]}/docroot/3/device/{line.strip()}", "w").close()
PY
# A 300-byte payload, as in the issue's measurements.
python3 -c 'import json; p={"aps":{"alert":{"title":"Nearby","body":"bench"}},"pad":""}; p["pad"]="x"*(300-len(json.dumps(p,separators=(",",":")))); print(json.dumps(p,separators=(",",":")),end="")' > "$DATA/payload.json"

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; pkill -9 -f "$PWD/$DATA/" 2>/dev/null || true; }
trap cleanup EXIT

start_nginx() { # name keepalive
  local dir="$PWD/$DATA/$1" port
  port=$(free_port)
  mkdir -p "$dir"
  sed -e "s#@DIR@#$dir#g; s#@PORT@#$port#; s#@CERT@#$PWD/$DATA/certs/server.pem#; s#@KEY@#$PWD/$DATA/certs/server-key.pem#; s#@KEEPALIVE@#$2#" \
    scripts/nginx-apns.conf.template > "$dir/nginx.conf"
  /usr/sbin/nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" >/dev/null 2>&1 &
  PIDS+=($!)
  echo "$port"
}
NGHTTPD_PORT=$(free_port)
nghttpd -d "$DATA/docroot" "$NGHTTPD_PORT" "$DATA/certs/server-key.pem" "$DATA/certs/server.pem" >/dev/null 2>&1 &
PIDS+=($!)
NGINX_PORT=$(start_nginx nginx 1000000000)
GOAWAY_PORT=$(start_nginx nginx-goaway 1000)
sleep 1

# h2load with -c C and -i sends every client through the same URI list from its start: C clients making N requests
# ask for the first N/C paths C times each, at about the same moment, and nghttpd opens each file once for the C
# requests (its file cache). push-sender gets the same requests: the first N/C tokens, each C times in a row (with
# N distinct tokens it made nghttpd open 4 times the files, and measured nghttpd's file system, not the client).
# Each token's C copies are next to each other, so that they are in flight together as h2load's clients' are
# (nghttpd shares an open file only between requests that overlap); measured, nghttpd spends a little more CPU on
# push-sender's requests shaped so (1.5 s for 500,000) than on h2load's (1.35 s). Both send N / C * C requests.
tokens_for() { # connections
  if [ "$1" -le 1 ]; then echo "$DATA/tokens.txt"; return; fi
  [ -f "$DATA/tokens-x$1.txt" ] || head -n $(( N / $1 )) "$DATA/tokens.txt" | awk -v c="$1" '{for (i = 0; i < c; i++) print}' > "$DATA/tokens-x$1.txt"
  echo "$DATA/tokens-x$1.txt"
}

ours() { # server port connections [streams per connection]
  local started ended streams=${4:-100} tokens
  tokens=$(tokens_for "$3")
  started=$(date +%s.%N)
  "$BIN" send --host "https://127.0.0.1:$2" --ca "$DATA/certs/ca.pem" --key "$DATA/certs/AuthKey_TEST123456.p8" \
    --key-id TEST123456 --team-id TEAM123456 --topic com.example.app --payload "$DATA/payload.json" \
    --tokens-file "$tokens" --connections "$3" --concurrency $(( $3 * streams )) --attempts 1 --json --quiet \
    > "$DATA/ours.jsonl" || true
  ended=$(date +%s.%N)
  python3 - "$DATA/ours.jsonl" "$started" "$ended" "$1" "$3" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
seconds = float(sys.argv[3]) - float(sys.argv[2])
ok = sum(1 for r in lines if r.get("ok"))
print(f"{sys.argv[4]} push-sender connections={sys.argv[5]} pushes={len(lines)} ok={ok} seconds={seconds:.3f} rate={len(lines) / seconds:.0f}")
PY
}

h2() { # server port connections [streams per connection]
  local out
  sed "s#^#https://127.0.0.1:$2/3/device/#" "$DATA/tokens.txt" > "$DATA/uris.txt"
  out=$(h2load -n $(( N / $3 * $3 )) -c "$3" -m "${4:-100}" -t 1 -d "$DATA/payload.json" -H "apns-topic: com.example.app" \
    -i "$DATA/uris.txt" 2>&1)
  python3 - "$1" "$3" <<PY
import re
out = """$out"""
seconds = float(re.search(r"finished in ([0-9.]+)(m?s)", out).group(1)) / (1000 if re.search(r"finished in [0-9.]+ms", out) else 1)
done = int(re.search(r"(\d+) succeeded", out).group(1))
status = int(re.search(r"status codes: (\d+) 2xx", out).group(1))
print(f"$1 h2load connections=$3 pushes={done} ok={status} seconds={seconds:.3f} rate={done / seconds:.0f}")
PY
}

aio() { # server port connections
  python3 scripts/aioapns_bench.py "$2" "$DATA/certs/ca.pem" "$DATA/certs/AuthKey_TEST123456.p8" TEST123456 TEAM123456 \
    "$DATA/tokens-aioapns.txt" "$3" $(( $3 * 100 )) 2>/dev/null | sed "s/^/$1 /" || echo "$1 aioapns failed"
}

if [ "${MODE:-}" = distance ]; then
  echo "== at a distance: $N pushes per run, 1 connection, 1,000 streams, nginx like APNs behind a delaying proxy, $(nproc) cores"
  : > "$DATA/distance.txt"
  for RTT in 10 50; do
    PROXY_PORT=$(free_port)
    python3 scripts/delay-proxy.py "$PROXY_PORT" "$NGINX_PORT" "$RTT" > "$DATA/proxy-$RTT.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 50); do grep -q ready "$DATA/proxy-$RTT.log" 2>/dev/null && break; sleep 0.1; done
    ours "rtt$RTT" "$PROXY_PORT" 1 1000 | tee -a "$DATA/distance.txt"
    h2 "rtt$RTT" "$PROXY_PORT" 1 1000 | tee -a "$DATA/distance.txt"
  done
  python3 - "$DATA/distance.txt" <<'PY'
import re, sys
rates = {}
for line in open(sys.argv[1]):
    m = re.match(r"rtt(\d+) (\S+) connections=1 pushes=(\d+) ok=(\d+) .* rate=(\d+)", line)
    if m:
        rates[(int(m.group(1)), m.group(2))] = (int(m.group(5)), int(m.group(3)) - int(m.group(4)))
print("== ratios (bound = 1,000 streams / RTT)")
for rtt in (10, 50):
    bound = 1000 / (rtt / 1000)
    ours, failed = rates.get((rtt, "push-sender"), (0, 0))
    ref = rates.get((rtt, "h2load"), (0, 0))[0]
    print(f"RTT {rtt:2d} ms: push-sender {ours}/s ({failed} not ok) = {ours / bound:.2f}x the bound {bound:.0f}/s, "
          f"{ours / ref if ref else 0:.2f}x h2load ({ref}/s = {ref / bound:.2f}x the bound)")
PY
  exit 0
fi

echo "== $N pushes per run (aioapns: $N_AIOAPNS), 300-byte payload, 100 streams per connection, $(nproc) cores"
: > "$DATA/results.txt"
for C in 1 4; do
  ours nghttpd "$NGHTTPD_PORT" "$C" | tee -a "$DATA/results.txt"
  h2 nghttpd "$NGHTTPD_PORT" "$C" | tee -a "$DATA/results.txt"
  # aioapns matches answers by the apns-id the server echoes; nghttpd does not echo it, so aioapns runs against nginx.
  ours nginx "$NGINX_PORT" "$C" | tee -a "$DATA/results.txt"
  h2 nginx "$NGINX_PORT" "$C" | tee -a "$DATA/results.txt"
  aio nginx "$NGINX_PORT" "$C" | tee -a "$DATA/results.txt"
  # h2load does not reconnect after a GOAWAY, so only the APNs clients run against this one.
  ours nginx-goaway "$GOAWAY_PORT" "$C" | tee -a "$DATA/results.txt"
  aio nginx-goaway "$GOAWAY_PORT" "$C" | tee -a "$DATA/results.txt"
done
python3 - "$DATA/results.txt" <<'PY'
import re, sys
rates, fails = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) (\S+) connections=(\d+) pushes=(\d+) ok=(\d+) .* rate=(\d+)", line)
    if m:
        key = (m.group(1), m.group(2), int(m.group(3)))
        rates[key] = int(m.group(6))
        fails[key] = int(m.group(4)) - int(m.group(5))
print("== ratios")
for server in ["nghttpd", "nginx", "nginx-goaway"]:
    for c in [1, 4]:
        ours = rates.get((server, "push-sender", c))
        if not ours:
            continue
        parts = [f"{server:12} connections={c}: push-sender {ours}/s ({fails[(server, 'push-sender', c)]} not ok)"]
        for ref in ["h2load", "aioapns"]:
            if rates.get((server, ref, c)):
                parts.append(f"{ours / rates[(server, ref, c)]:.2f}x {ref} ({rates[(server, ref, c)]}/s)")
        print(", ".join(parts))
PY
