#!/usr/bin/env bash
# Installs what the tests need besides Go and Docker, from Debian's
# packages: Chromium (the audit report and the dashboard are checked in a
# headless browser) and docker-compose (the gateway's compose file is
# brought up and driven).
set -euo pipefail
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
