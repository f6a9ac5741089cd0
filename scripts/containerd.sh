#!/usr/bin/env bash
# Makes sure a containerd answers for the containerd backend: one at
# $CONTAINERD_ADDRESS, /run/containerd/containerd.sock, or the one a Docker
# engine runs (/var/run/docker/containerd/containerd.sock). When none does,
# installs Debian's containerd if needed and starts it on
# /run/containerd/containerd.sock (its default configuration: state under
# /var/lib/containerd, no registry is ever contacted by rollcage).
set -euo pipefail
answers() { [ -S "$1" ] && ctr --address "$1" version >/dev/null 2>&1; }
for sock in ${CONTAINERD_ADDRESS:-} /run/containerd/containerd.sock /var/run/docker/containerd/containerd.sock; do
  if command -v ctr >/dev/null 2>&1 && answers "$sock"; then exit 0; fi
done
if [ "$(id -u)" != 0 ]; then
  echo "rollcage: no containerd answers and the containerd backend needs root; run as root (make containerd) or use --backend docker" >&2
  exit 1
fi
if ! command -v containerd >/dev/null 2>&1 || ! command -v ctr >/dev/null 2>&1; then
  echo "rollcage: installing Debian's containerd" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containerd runc >/dev/null
fi
sock=${CONTAINERD_ADDRESS:-/run/containerd/containerd.sock}
echo "rollcage: starting containerd on $sock (log: /var/log/rollcage-containerd.log)" >&2
nohup containerd --address "$sock" >/var/log/rollcage-containerd.log 2>&1 &
for _ in $(seq 1 60); do
  answers "$sock" && exit 0
  sleep 1
done
echo "rollcage: containerd did not answer within 60s; see /var/log/rollcage-containerd.log" >&2
exit 1
