#!/usr/bin/env bash
# Installs what the tests need besides Go and Docker, from Debian's
# packages: Chromium (the audit report and the dashboard are checked in a
# headless browser) and docker-compose (the gateway's compose file is
# brought up and driven); and, with npm, the pinned E2B SDK (clients/e2b-test).
set -euo pipefail
# The pinned E2B SDK the E2B API's test drives (clients/e2b-test).
root="$(cd "$(dirname "$0")/.." && pwd)"
if command -v npm >/dev/null 2>&1; then
  npm ci --prefix "$root/clients/e2b-test" --no-audit --no-fund --silent
else
  echo "rollcage: npm not found: the E2B SDK test (e2b/sdk_docker_test.go) needs Node 20 and npm" >&2
fi
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "rollcage: the tests need ${need[*]}; run as root or install them (apt-get install ${need[*]})" >&2
  exit 1
fi
echo "rollcage: installing ${need[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
