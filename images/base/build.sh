#!/usr/bin/env bash
# Builds rollcage/base from Debian packages: debootstrap into a rootfs,
# add the unprivileged sandbox user, `docker import`. Never pulls.
# Usage: images/base/build.sh TAG
set -euo pipefail
tag=$1
here=$(cd "$(dirname "$0")" && pwd)
suite=${ROLLCAGE_DEBIAN_SUITE:-bookworm}

# The mirror apt is already configured with (never a host name in the repo).
mirror=${ROLLCAGE_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -n1 || true)
fi
if [ -z "$mirror" ]; then
  mirror=$(grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}' | grep -v security | head -n1 || true)
fi
[ -n "$mirror" ] || { echo "images/base: no Debian mirror found in apt's sources; set ROLLCAGE_DEBIAN_MIRROR" >&2; exit 1; }

if ! command -v debootstrap >/dev/null 2>&1; then
  echo "images/base: installing debootstrap" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

root=$(mktemp -d /var/tmp/rollcage-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
include=$(grep -vE '^(#|$)' "$here/packages.txt" | paste -sd, -)
echo "images/base: debootstrap $suite ($include)" >&2
debootstrap --variant=minbase --include="$include" "$suite" "$root" "$mirror" >"$root.log" 2>&1 || {
  tail -n 30 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"

chroot "$root" /bin/sh -eu <<'SH'
groupadd -g 1000 agent
useradd -m -u 1000 -g 1000 -s /bin/bash agent
mkdir -p /workspace && chown agent:agent /workspace
git config --system init.defaultBranch main
git config --system --add safe.directory '*'
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* /usr/share/locale/*
SH

tar --numeric-owner -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
  --change 'WORKDIR /workspace' \
  --change 'CMD ["/bin/bash"]' \
  --change "LABEL rollcage.image=base" \
  - "$tag" >/dev/null
echo "images/base: built $tag" >&2
