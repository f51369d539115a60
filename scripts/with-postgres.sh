#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL cluster: made in a temporary folder, started on a free loopback port,
# stopped and removed when the command ends (whatever its status). The command gets
#   ENRICH_TEST_DATABASE_URL=postgres://enrich@127.0.0.1:PORT/postgres
# (a superuser without a password, on loopback only), which the PostgreSQL contract tests use to make one database
# per test, and ENRICH_TEST_DATABASE_CA (the CA of the server's TLS certificate). PostgreSQL refuses to run as root: as root, the cluster runs as the unprivileged user `enrichpg`
# (created when missing). Installs Debian's postgresql when it is missing.
#
#   scripts/with-postgres.sh swift test --no-parallel
set -euo pipefail
cd "$(dirname "$0")/.."

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi

as_owner=()
if [ "$(id -u)" = 0 ]; then
    id enrichpg >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin enrichpg
    as_owner=(runuser -u enrichpg --)
fi

dir=$(mktemp -d /tmp/enrich-pg.XXXXXX)
chmod 755 "$dir"
[ "$(id -u)" = 0 ] && chown enrichpg "$dir"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

stop() {
    "${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap stop EXIT

"${as_owner[@]}" "$bin/initdb" -D "$dir/data" -U enrich --auth=trust --encoding=UTF8 --no-sync >/dev/null
# TLS is offered (not required) with a throwaway CA, so the tests can connect both ways (sslmode=require with
# ENRICH_TEST_DATABASE_CA as sslrootcert, and sslmode=disable).
certs.example/make-local-certs.sh "$dir/certs" >/dev/null
[ "$(id -u)" = 0 ] && chown -R enrichpg "$dir/certs"
# Tuned for tests and benchmarks on a throwaway cluster; durability settings stay at their defaults.
"${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=300 -c shared_buffers=256MB -c ssl=on -c ssl_cert_file=$dir/certs/server.pem -c ssl_key_file=$dir/certs/server-key.pem ${ENRICH_PG_OPTIONS:-}" \
    start >/dev/null

export ENRICH_TEST_DATABASE_URL="postgres://enrich@127.0.0.1:$port/postgres"
export ENRICH_TEST_DATABASE_CA="$dir/certs/ca.pem"
echo "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (throwaway, in $dir)" >&2
"$@"
