#!/usr/bin/env bash
# The system packages the test suite needs, for `.ci/run` and for `python -m pytest` (its
# session start calls this): headless Chromium for the UI tests, Node.js as the JavaScript
# oracle, PostgreSQL for the scale-out test (plus the `postgres` user it runs as).
#
#   tools/system_deps.sh           install what is missing (as root, with apt-get); otherwise
#                                  print the one command to run and exit 1
#   tools/system_deps.sh --check   install nothing: print the missing packages (one line,
#                                  empty when none) and exit 1 when some are missing
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null || missing+=(postgresql)
no_user=0
id -u postgres >/dev/null 2>&1 || no_user=1

command_line="apt-get install -y --no-install-recommends ${missing[*]:-}"
if [ "${1:-}" = "--check" ]; then
  echo "${missing[*]:-}"
  [ ${#missing[@]} -eq 0 ] && [ "$no_user" -eq 0 ]
  exit
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "the tests need ${missing[*]}: run as root: ${command_line% }" >&2
    exit 1
  fi
  echo "installing what the tests need: ${missing[*]} (tools/system_deps.sh)" >&2
  export DEBIAN_FRONTEND=noninteractive
  if [[ " ${missing[*]} " == *" postgresql "* ]]; then
    # The test fixture runs its own throw-away cluster: the package must not create or start one.
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/brain-pipeline.conf
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "$no_user" -eq 1 ]; then
  # PostgreSQL refuses root: the fixture runs it as this user (the package normally creates it).
  if [ "$(id -u)" -ne 0 ]; then
    echo "the tests need a 'postgres' user: run as root: useradd --system --user-group --home-dir /var/lib/postgresql --shell /bin/sh postgres" >&2
    exit 1
  fi
  useradd --system --user-group --home-dir /var/lib/postgresql --shell /bin/sh postgres
fi
