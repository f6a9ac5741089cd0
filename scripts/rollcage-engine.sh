#!/usr/bin/env bash
# rollcage-engine.sh: a Docker engine of rollcage's own, beside the
# machine's default one (which it never touches), whose limits the kernel
# enforces. Its data root is a filesystem in a sparse image file,
# loop-mounted, that limits each container's writable layer in the kernel
# (plain writes, unlinked-but-open files, fallocate, deep paths, metadata:
# all ENOSPC or EDQUOT at the limit):
#
#   - xfs with project quotas (prjquota) under overlay2, where the kernel
#     has xfs quotas (CONFIG_XFS_QUOTA): the engine takes --storage-opt size=;
#   - else btrfs with simple quotas under the btrfs driver: rollcage sets each
#     container's exclusive-bytes limit on its subvolume (the engine's own
#     size option on btrfs counts the image's shared bytes too); the probe
#     below sets one with `btrfs qgroup limit -e`.
#
# Optionally (--userns-remap) it also remaps users: a container's root is
# an unprivileged host uid from a subordinate range of its own.
#
# It listens on its own socket, with its own exec root, pidfile, cgroup
# parent, containerd namespaces and a bridge of its own that nothing uses
# (rollcage's sandboxes have no network; egress goes through the proxy's
# Unix socket). Images are loaded
# from the default engine (docker save | load), never pulled.
#
# Usage: scripts/rollcage-engine.sh [up|down|env|status] [--userns-remap] [--name NAME]
#   up      (default) make the engine answer: install xfsprogs or btrfs-progs
#           from Debian if missing, create and mount the image, start
#           dockerd, load images, probe that a limit holds.
#           Idempotent: a running engine is checked and left running.
#   down    stop the engine and unmount its filesystem (the image file stays;
#           ROLLCAGE_ENGINE_PURGE=1 removes it too).
#   env     print the lines that point a shell (or rollcage) at it:
#           eval "$(scripts/rollcage-engine.sh env)" sets DOCKER_HOST, and
#           CONTAINERD_ADDRESS (the containerd it runs) and, on btrfs,
#           CONTAINERD_SNAPSHOTTER=btrfs for --backend containerd.
#   status  exit 0 when the engine answers on its data root with quotas on.
#
# Environment (flags win over it):
#   ROLLCAGE_ENGINE_USERNS=1         as --userns-remap
#   ROLLCAGE_ENGINE_NAME             instance name (default rollcage-engine,
#                                    rollcage-engine-userns when remapping):
#                                    socket /run/NAME/docker.sock, state
#                                    /var/lib/NAME, log /var/log/NAME.log
#   ROLLCAGE_ENGINE_FS               xfs, btrfs or auto (default: xfs when the
#                                    kernel has xfs quotas, else btrfs)
#   ROLLCAGE_ENGINE_SIZE             the image file's size (default 2G, sparse:
#                                    the host disk holds only what is used;
#                                    xfs needs at least 300M)
#   ROLLCAGE_ENGINE_IMAGES           images to load from the default engine
#                                    (default: rollcage/base:latest and
#                                    rollcage/demo-textwrap:latest, what the
#                                    quota tests run)
#   ROLLCAGE_ENGINE_REMAP_USER       the user whose /etc/subuid and /etc/subgid
#                                    ranges back the remapping (default
#                                    rollcage-remap, created if missing)
set -euo pipefail

cmd=up
userns=${ROLLCAGE_ENGINE_USERNS:-0}
name=${ROLLCAGE_ENGINE_NAME:-}
while [ $# -gt 0 ]; do
  case "$1" in
    up|down|env|status) cmd=$1 ;;
    --userns-remap) userns=1 ;;
    --name) name=${2:?--name needs a value}; shift ;;
    --name=*) name=${1#--name=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "rollcage-engine: unknown argument $1: use up, down, env or status, --userns-remap, --name NAME" >&2; exit 2 ;;
  esac
  shift
done
case "$userns" in 1|true|yes) userns=1 ;; *) userns=0 ;; esac
if [ -z "$name" ]; then
  name=rollcage-engine
  [ "$userns" = 1 ] && name=rollcage-engine-userns
fi
case "$name" in
  *[!a-z0-9-]*|'') echo "rollcage-engine: name $name: use lowercase letters, digits and dashes" >&2; exit 2 ;;
esac

size=${ROLLCAGE_ENGINE_SIZE:-2G}
fs=${ROLLCAGE_ENGINE_FS:-auto}
images=${ROLLCAGE_ENGINE_IMAGES:-rollcage/base:latest rollcage/demo-textwrap:latest}
remap_user=${ROLLCAGE_ENGINE_REMAP_USER:-rollcage-remap}
state=/var/lib/$name
img=$state/fs.img
data=$state/data
run=/run/$name
# The engine's own bridge (no container of rollcage's is attached to it):
# an interface name of at most 15 bytes, from the engine's name.
bridge=rc$(printf '%s' "$name" | md5sum | cut -c1-10)
sock=$run/docker.sock
pidfile=$run/docker.pid
log=/var/log/$name.log
engine=(docker -H "unix://$sock")

say() { echo "rollcage-engine: $*" >&2; }
die() { say "$*"; exit 1; }

# quotas_on: the data root is mounted, with per-container limits on: xfs
# with project quotas enforced, or btrfs with quota groups enabled.
quotas_on() {
  mountpoint -q "$data" || return 1
  case "$(findmnt -n -o FSTYPE --target "$data")" in
    xfs) findmnt -n -o OPTIONS --target "$data" | tr , '\n' | grep -qx prjquota ;;
    btrfs) simple_quotas ;;
    *) return 1 ;;
  esac
}

# simple_quotas: btrfs simple quotas are on at the data root. Full quota
# groups are not enough: deleting a container's subvolume can mark them
# inconsistent (dmesg: "qgroup marked inconsistent"), and then the kernel
# stops enforcing every limit until a rescan. Simple quotas (Linux 6.7)
# charge each extent to the subvolume that wrote it and never go
# inconsistent.
simple_quotas() {
  local uuid
  uuid=$(findmnt -n -o UUID --target "$data") || return 1
  # The feature flag stays once set; the quota tree must be on as well.
  [ "$(cat "/sys/fs/btrfs/$uuid/features/simple_quota" 2>/dev/null)" = 1 ] &&
    btrfs qgroup show "$data" >/dev/null 2>&1
}

# enable_simple_quotas turns btrfs simple quotas on at the data root
# (BTRFS_IOC_QUOTA_CTL, BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA; Debian 12's
# btrfs-progs predates `btrfs quota enable --simple`), after turning full
# quota groups off if they are on.
enable_simple_quotas() {
  [ -e /sys/fs/btrfs/features/simple_quota ] || die "this kernel has no btrfs simple quotas (Linux 6.7 or later): use xfs with CONFIG_XFS_QUOTA"
  command -v python3 >/dev/null 2>&1 || {
    say "installing Debian's python3-minimal"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-minimal >/dev/null
  }
  btrfs quota disable "$data" 2>/dev/null || true
  python3 - "$data" <<'PY'
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
# _IOWR(0x94, 40, struct btrfs_ioctl_quota_ctl_args {u64 cmd, status})
fcntl.ioctl(fd, 0xC0109428, bytearray(struct.pack("QQ", 4, 0)))
PY
}

# answers: the engine answers on its socket, on its quota filesystem
# (overlay2 backed by xfs, or btrfs).
answers() {
  [ -S "$sock" ] || return 1
  local drv
  drv=$("${engine[@]}" info --format '{{.Driver}}{{range .DriverStatus}}{{if eq (index . 0) "Backing Filesystem"}}/{{index . 1}}{{end}}{{end}}' 2>/dev/null) || return 1
  [ "$drv" = overlay2/xfs ] || [ "$drv" = btrfs ]
}

engine_pid() {
  [ -f "$pidfile" ] || return 1
  local pid
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

need_root() {
  [ "$(id -u)" = 0 ] || die "$1 needs root (loop mount, dockerd): run it as root (make quota-engine)"
}

case "$cmd" in
  env)
    echo "export DOCKER_HOST=unix://$sock"
    # The containerd this dockerd runs, for --backend containerd: its
    # btrfs snapshotter is on the same filesystem with quotas.
    echo "export CONTAINERD_ADDRESS=$run/exec/containerd/containerd.sock"
    if [ "$(findmnt -n -o FSTYPE --target "$data" 2>/dev/null)" = btrfs ]; then
      echo "export CONTAINERD_SNAPSHOTTER=btrfs"
    fi
    exit 0 ;;
  status)
    answers && quotas_on && exit 0
    say "no engine with kernel-enforced quotas answers on $sock: run scripts/rollcage-engine.sh up"
    exit 1 ;;
  down)
    need_root down
    if pid=$(engine_pid); then
      say "stopping dockerd (pid $pid)"
      kill "$pid"
      for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
      kill -0 "$pid" 2>/dev/null && die "dockerd (pid $pid) did not stop within 60s; see $log"
    fi
    if mountpoint -q "$data"; then
      # dockerd leaves overlay and shm mounts under its data root.
      { findmnt -rn -o TARGET | grep "^$data/" || true; } | sort -r | xargs -r -n1 umount -l
      umount "$data" || die "unmounting $data failed: $(findmnt -n "$data")"
    fi
    if ip link show "$bridge" >/dev/null 2>&1; then ip link del "$bridge"; fi
    if [ "${ROLLCAGE_ENGINE_PURGE:-0}" = 1 ]; then rm -rf "$state"; fi
    exit 0 ;;
esac

need_root up
command -v dockerd >/dev/null 2>&1 || die "dockerd is not installed: run 'make docker' first (Debian's docker.io)"

# The filesystem: xfs where the kernel enforces xfs project quotas, else
# btrfs (quota groups are part of btrfs itself).
if [ "$fs" = auto ]; then
  if [ -f "$img" ]; then
    fs=$(blkid -o value -s TYPE "$img" 2>/dev/null || true)
  elif zcat /proc/config.gz 2>/dev/null | grep -qx 'CONFIG_XFS_QUOTA=y'; then
    fs=xfs
  elif grep -qw btrfs /proc/filesystems; then
    fs=btrfs
  else
    fs=xfs
  fi
fi
case "$fs" in
  xfs) pkg=xfsprogs; tools=(mkfs.xfs xfs_quota); driver=overlay2 ;;
  btrfs) pkg=btrfs-progs; tools=(mkfs.btrfs btrfs); driver=btrfs ;;
  *) die "ROLLCAGE_ENGINE_FS=$fs (or the image $img holds $fs): use xfs or btrfs (down with ROLLCAGE_ENGINE_PURGE=1 starts afresh)" ;;
esac
for t in "${tools[@]}"; do
  if ! command -v "$t" >/dev/null 2>&1; then
    say "installing Debian's $pkg"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
    break
  fi
done
grep -qw "$fs" /proc/filesystems || modprobe "$fs" 2>/dev/null || die "the kernel has no $fs: set ROLLCAGE_ENGINE_FS to xfs (with CONFIG_XFS_QUOTA) or btrfs"

mkdir -p "$state" "$data" "$run"
chmod 0711 "$state" "$run"

if ! mountpoint -q "$data"; then
  if [ ! -f "$img" ]; then
    say "creating a $size $fs image at $img (sparse)"
    truncate -s "$size" "$img.tmp"
    case "$fs" in
      xfs) mkfs.xfs -q -f -n ftype=1 "$img.tmp" ;;
      btrfs) mkfs.btrfs -q -f -d single -m single "$img.tmp" >/dev/null ;;
    esac || { rm -f "$img.tmp"; die "mkfs.$fs on a $size image failed: set ROLLCAGE_ENGINE_SIZE larger (xfs needs 300M)"; }
    mv "$img.tmp" "$img"
  fi
  opts=loop
  [ "$fs" = xfs ] && opts=loop,prjquota
  mount -o "$opts" "$img" "$data" || die "mounting $img ($fs, -o $opts) on $data failed: $(dmesg 2>/dev/null | tail -1)"
fi
if [ "$fs" = btrfs ] && ! quotas_on; then
  # On before any image is loaded where the filesystem is new; extents
  # written before are charged to no one.
  say "turning btrfs simple quotas on at $data"
  enable_simple_quotas
fi
quotas_on || die "$data ($fs) is mounted without quotas (the kernel may lack CONFIG_XFS_QUOTA; see dmesg): run scripts/rollcage-engine.sh down, then ROLLCAGE_ENGINE_FS=btrfs ROLLCAGE_ENGINE_PURGE=1 and up"

# The remapping's subordinate ranges: 65536 ids of its own.
remap_flags=()
if [ "$userns" = 1 ]; then
  if ! id -u "$remap_user" >/dev/null 2>&1; then
    say "creating the system user $remap_user for --userns-remap"
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$remap_user"
  fi
  for f in /etc/subuid /etc/subgid; do
    touch "$f"
    if ! grep -q "^$remap_user:" "$f"; then
      # Past every range already given out, and never below 100000.
      start=$(awk -F: 'BEGIN{m=100000} {e=$2+$3; if (e>m) m=e} END{print m}' "$f")
      echo "$remap_user:$start:65536" >>"$f"
      say "gave $remap_user the range $start+65536 in $f"
    fi
  done
  remap_flags=(--userns-remap="$remap_user")
fi

# The engine itself.
if ! answers; then
  if pid=$(engine_pid); then
    die "dockerd (pid $pid) runs but does not answer on $sock with its quota filesystem; see $log, or run scripts/rollcage-engine.sh down"
  fi
  # A bridge of its own: dockerd started with --bridge none deletes the
  # host's docker0, the default engine's bridge.
  ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge ||
    die "creating the engine's bridge $bridge failed"
  # Its own (empty) configuration: never /etc/docker/daemon.json, which is
  # the default engine's.
  [ -f "$state/daemon.json" ] || echo '{}' >"$state/daemon.json"
  say "starting dockerd on $sock ($driver on $fs at $data, log: $log)"
  nohup dockerd \
    --config-file "$state/daemon.json" \
    --host "unix://$sock" \
    --data-root "$data" \
    --exec-root "$run/exec" \
    --pidfile "$pidfile" \
    --storage-driver "$driver" \
    --bridge "$bridge" --iptables=false --ip6tables=false --ip-masq=false \
    --cgroup-parent "/$name" \
    --containerd-namespace "$name" \
    --containerd-plugins-namespace "$name-plugins" \
    "${remap_flags[@]}" \
    >>"$log" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    answers && break
    sleep 1
  done
  answers || die "dockerd did not answer on $sock within 60s; see $log"
fi

# Images, from the default engine. One missing there is an error naming
# the make target that builds it.
for ref in $images; do
  id=$(DOCKER_HOST= docker image inspect --format '{{.Id}}' "$ref" 2>/dev/null) || die "image $ref is not in the default engine: run 'make images' first"
  have=$("${engine[@]}" image inspect --format '{{.Id}}' "$ref" 2>/dev/null || true)
  if [ "$have" != "$id" ]; then
    say "loading $ref"
    DOCKER_HOST= docker save "$ref" | "${engine[@]}" load -q >/dev/null
  fi
done
if [ "$fs" = btrfs ]; then
  # The btrfs driver makes a base layer's subvolume root 0700 (overlay2's
  # is 0755), and every container's / inherits it: no user but root could
  # run a thing. Layer roots are 0755 there, as on overlay2.
  root=$("${engine[@]}" info --format '{{.DockerRootDir}}')
  find "$root/btrfs/subvolumes" -mindepth 1 -maxdepth 1 -type d -perm 0700 -exec chmod 0755 {} +
fi

# A probe: a container limited to 16 MiB gets ENOSPC or EDQUOT writing 32,
# or the engine does not limit and says so.
probe_img=${images%% *}
probe_cmd='head -c 33554432 /dev/zero >/big 2>/dev/null && echo unbounded || echo bounded'
case "$fs" in
  xfs)
    probe=$("${engine[@]}" run --rm --network none --user 0:0 --storage-opt size=16m --entrypoint /bin/sh "$probe_img" -c "$probe_cmd" 2>&1) || true ;;
  btrfs)
    cid=$("${engine[@]}" create --network none --user 0:0 --entrypoint /bin/sh "$probe_img" -c "$probe_cmd")
    root=$("${engine[@]}" info --format '{{.DockerRootDir}}')
    subvol=$root/btrfs/subvolumes/$(cat "$root/image/btrfs/layerdb/mounts/$cid/mount-id")
    btrfs qgroup limit -e 16M "$subvol"
    "${engine[@]}" start "$cid" >/dev/null
    "${engine[@]}" wait "$cid" >/dev/null
    probe=$("${engine[@]}" logs "$cid" 2>&1) || true
    "${engine[@]}" rm -f "$cid" >/dev/null ;;
esac
[ "${probe##*$'\n'}" = bounded ] || die "the engine on $sock does not limit a container's disk (probe: $probe); see $log"
say "ready: DOCKER_HOST=unix://$sock ($driver on $fs with quotas${remap_flags:+, users remapped to $remap_user})"
