#!/usr/bin/env bash
# The one test command (the README's quick start; .ci/run calls it): installs what a fresh machine lacks (quietly,
# and nothing when all of it is there: scripts/install-test-tools.sh), then runs every test, one at a time, with a
# throwaway PostgreSQL cluster (scripts/with-postgres.sh).
#
#   scripts/test.sh                       # everything
#   scripts/test.sh --filter Preview      # arguments go to swift test
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-tools.sh
exec bash scripts/with-postgres.sh swift test --no-parallel "$@"
