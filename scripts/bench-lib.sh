# Shared by the bench-*.sh scripts (sourced, not run).

# A free loopback TCP port.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits up to a minute for the service on PORT to answer /health; fails the script if it never does.
wait_healthy() { # port
  for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return; sleep 0.2; done
  echo "the service on port $1 did not start" >&2; exit 1
}

# Every benchmark uses one release build, in .build-release (never .build, which holds the debug build and tests).
RELEASE=.build-release/release

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
