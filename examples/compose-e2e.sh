#!/usr/bin/env bash
# Brings the gateway up with docker-compose from locally built images and
# drives one episode through it with examples/curl-episode.sh; then takes
# it down. Needs a Docker engine and the demo images (make images).
# Installs Debian's docker-compose when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

if ! command -v docker-compose >/dev/null; then
  apt-get install -y -qq docker-compose >/dev/null || { apt-get update -qq && apt-get install -y -qq docker-compose >/dev/null; }
fi

make -s gateway-image

export ROLLCAGE_BIN_DIR=$PWD/bin
export ROLLCAGE_ADMIN_TOKEN=${ROLLCAGE_ADMIN_TOKEN:-e2e-$RANDOM$RANDOM}
export ROLLCAGE_PORT=${ROLLCAGE_PORT:-18080}
project=rollcage-e2e-$$
compose() { docker-compose -p "$project" -f docker-compose.yml "$@"; }
trap 'compose logs --tail 40 gateway >&2 || true; compose down -v >/dev/null 2>&1 || true' EXIT
compose up -d gateway

url=http://127.0.0.1:$ROLLCAGE_PORT
for _ in $(seq 60); do
  curl -sf "$url/healthz" >/dev/null && break
  sleep 1
done
curl -sf "$url/healthz"
out=$(ROLLCAGE_URL=$url examples/curl-episode.sh textwrap)
echo "$out"
grep -q '"dummy":true' <<<"$out" || { echo "compose-e2e: the hacked call was not answered with a dummy" >&2; exit 1; }
grep -q 'episode_end' <<<"$out" || { echo "compose-e2e: the trajectory has no episode_end" >&2; exit 1; }
echo "compose-e2e: ok"
