#!/usr/bin/env bash
# Installs what the tests need and a fresh machine lacks (scripts/test.sh runs it before the tests).
# Idempotent: installs nothing when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: the SQLite headers (GRDB), the openssl command (the PKCS#12 test makes its .p12 with it), and
# nginx, the independent HTTP/2 server the sender's integration tests run against (scripts/nginx-apns.conf.template).
missing=()
[ -f /usr/include/sqlite3.h ] || missing+=(libsqlite3-dev)
command -v openssl >/dev/null || missing+=(openssl)
[ -x /usr/sbin/nginx ] || missing+=(nginx-light)
# nghttpd (nghttp2's server), a second independent HTTP/2 server: padding, small HPACK tables, small windows,
# trailers and stream limits, each a command-line option, for the sender's wire tests.
command -v nghttpd >/dev/null || missing+=(nghttp2-server)
# curl (built with nghttp2), an independent HTTP/2 client: it sends the mock APNs header values our typed sender
# cannot write, so the mock's answers to them are checked against a peer.
curl --version 2>/dev/null | grep -q HTTP2 || missing+=(curl)
# PostgreSQL, for the PostgreSQL store contracts (scripts/with-postgres.sh runs a throwaway cluster of it).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
# Chromium (headless), for the preview page test: it loads /preview and takes a screenshot.
command -v chromium >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]} (Debian packages the tests need)" >&2
    log=$(mktemp)
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        exit 1
    fi
    rm -f "$log"
fi

# PyPI: the OpenAPI contract tools (pinned), when they are not already there at those versions.
# (Checked against the pins in the requirements file itself, without a traceback when one is missing.)
if ! python3 - scripts/requirements-contract.txt <<'PY'
import importlib.metadata as metadata, sys
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if "==" not in line:
        continue
    name, version = (part.strip() for part in line.split("==", 1))
    try:
        if metadata.version(name) != version:
            sys.exit(1)
    except metadata.PackageNotFoundError:
        sys.exit(1)
PY
then
    echo "installing the pinned contract tools (scripts/requirements-contract.txt) from PyPI" >&2
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r scripts/requirements-contract.txt
fi

