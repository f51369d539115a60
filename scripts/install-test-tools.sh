#!/usr/bin/env bash
# Installs what the tests need and a fresh machine lacks (run once before `swift test --no-parallel`; .ci/run runs it).
# Idempotent: installs nothing when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: the SQLite headers (GRDB), the openssl command (the PKCS#12 test makes its .p12 with it), and
# nginx, the independent HTTP/2 server the sender's integration tests run against (scripts/nginx-apns.conf.template).
missing=()
[ -f /usr/include/sqlite3.h ] || missing+=(libsqlite3-dev)
command -v openssl >/dev/null || missing+=(openssl)
[ -x /usr/sbin/nginx ] || missing+=(nginx-light)
# PostgreSQL, for the PostgreSQL store contracts (scripts/with-postgres.sh runs a throwaway cluster of it).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
# Chromium (headless), for the preview page test: it loads /preview and takes a screenshot.
command -v chromium >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${missing[@]}"
fi

# PyPI: the OpenAPI contract tools (pinned), when they are not already there at those versions.
if ! python3 -m pip show -q schemathesis openapi-spec-validator >/dev/null 2>&1 \
    || ! python3 -c 'import importlib.metadata as m, sys; sys.exit(m.version("schemathesis") != "4.32.5")'; then
    python3 -m pip install -q --disable-pip-version-check -r scripts/requirements-contract.txt
fi

