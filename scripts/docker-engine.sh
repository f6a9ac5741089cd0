#!/usr/bin/env bash
# Makes sure a Docker engine answers: installs Debian's docker.io when no
# dockerd is installed, starts dockerd when none runs, waits until it answers.
set -euo pipefail
if docker info >/dev/null 2>&1; then exit 0; fi
if ! command -v dockerd >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "rollcage: no Docker engine reachable and dockerd is not installed; run as root (apt-get install docker.io) or start a Docker engine" >&2
    exit 1
  fi
  echo "rollcage: installing Debian's docker.io" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "rollcage: no Docker engine reachable; start one (sudo dockerd &) or add yourself to the docker group" >&2
    exit 1
  fi
  echo "rollcage: starting dockerd (log: /var/log/rollcage-dockerd.log)" >&2
  nohup dockerd >/var/log/rollcage-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && exit 0
    sleep 1
  done
  echo "rollcage: dockerd did not answer within 60s; see /var/log/rollcage-dockerd.log" >&2
  exit 1
fi
