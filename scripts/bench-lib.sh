# Shared by the bench-*.sh scripts (sourced, not run).

# A free loopback TCP port.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits up to a minute for the service on PORT to answer /health; fails the script if it never does.
# Ready as a load balancer sees it (/health/ready: the database usable and the places index loaded), so that no
# phase measures a node still loading its index.
wait_healthy() { # port
  for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$1/health/ready" >/dev/null && return; sleep 0.2; done
  echo "the service on port $1 did not become ready (GET /health/ready says why)" >&2; exit 1
}

# Every benchmark uses one release build, in .build-release (never .build, which holds the debug build and tests).
RELEASE=${RELEASE:-.build-release/release}

# Builds the given products in release mode into .build-release when one is missing (about 20 minutes the first
# time on 2 cores); prints the build log only when it fails.
release_build() { # product...
  local product log
  log=$(mktemp)
  for product in "$@"; do
    [ -x "$RELEASE/$product" ] && continue
    swift build -c release --scratch-path .build-release --product "$product" >"$log" 2>&1 || { cat "$log"; rm -f "$log"; exit 1; }
  done
  rm -f "$log"
}

# Writes the wrk scripts the PostgreSQL benchmarks share into DIR: enrich.lua (POST /v1/enrich, a location push
# with a fresh timestamp for one of DEVICES seeded devices "dev-N") and ingest.lua (POST .../locations, 100 fixes
# per request over 5,000 devices "ingest-N"). Statuses are checked after the run from wrk's output (check_wrk).
write_wrk_scripts() { # dir devices
  # Every request is made once, before the run (one per device, in the order they are sent), and no response
  # callback is set: with one, wrk copies each answer's headers and body into Lua, which for a 2.4 KB enrichment
  # costs the client more than /health's run (no script) does, on the same two cores as the server. The status is
  # checked from wrk's own count instead ("Non-2xx or 3xx responses", check_wrk in bench-lib.sh). LUA_CHECKS=1
  # writes the scripts as before (the request formatted and the status checked in Lua for each request).
  local check=''
  [ "${LUA_CHECKS:-0}" = 1 ] && check='response = function(status, headers, body) if status ~= 200 then error("status " .. status) end end'
  # One device's request (profile-enrich.sh turns `local stamp = now` into an hour ago for its stale load).
  cat > "$1/enrich.lua" <<LUA
local devices = $2
local now = os.time()
local stamp = now
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local function make(i)
  local body = string.format('{"device_id":"dev-%d","payload":{"aps":{"alert":{"title":"Nearby","body":"x"},"mutable-content":1,"category":"location","timestamp":%d}}}', (i * 7919) % devices, stamp)
  return wrk.format(nil, "/v1/enrich", nil, body)
end
local n = math.random(1, devices)
LUA
  if [ "${LUA_CHECKS:-0}" = 1 ]; then
    cat >> "$1/enrich.lua" <<LUA
request = function()
  n = n + 1
  return make(n)
end
$check
LUA
  else
    cat >> "$1/enrich.lua" <<'LUA'
local requests = {}
for i = 1, devices do requests[i] = make(i) end
request = function()
  n = n % devices + 1
  return requests[n]
end
LUA
  fi
  cat > "$1/ingest.lua" <<LUA
local now = os.time()
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local items = {}
for i = 1, 100 do
  items[i] = string.format('{"latitude":%.5f,"longitude":%.5f,"utc_timestamp":%d,"horizontal_accuracy":10}', 48.8 + i / 1000, 2.3 + i / 1000, now - 100 + i)
end
local body = '{"locations":[' .. table.concat(items, ",") .. ']}'
local n = math.random(1, 1000000)
request = function()
  n = n + 1
  return wrk.format(nil, string.format("/v1/devices/ingest-%d/locations", n % 5000), nil, body)
end
$check
LUA
}

# Fails when a wrk run (its output file) saw an answer other than 2xx/3xx (the scripts above do not check each
# status in Lua); socket errors (a timeout under load) are shown, not failed on, as before.
check_wrk() { # output-file
  grep -E 'Socket errors' "$1" >&2 || true
  if grep -qE 'Non-2xx or 3xx responses' "$1"; then
    echo "wrk saw failed requests in $1:" >&2
    grep -E 'Non-2xx or 3xx responses' "$1" >&2
    return 1
  fi
}
