#!/usr/bin/env bash
# kube-up.sh: a real single-node Kubernetes cluster on this machine for the
# kubernetes sandbox backend's tests (sandbox/kube) and `--backend kubernetes`.
#
#   kube-apiserver, kubelet   built from the Go module proxy (scripts/kube/go.mod),
#                             cached under $KUBE_CACHE/<version>/bin
#   etcd                      Debian's etcd-server (3.4)
#   containerd + CRI          Debian's containerd, a second instance of its own
#                             (own root, state and socket)
#   pod network               none: pods get loopback only (cni/rollcage-nonet)
#   images                    the locally built rollcage images, imported with
#                             `ctr -n k8s.io images import` (nothing pulled)
#
# No scheduler or controller-manager: rollcage's pods name their node, and the
# namespace's default ServiceAccount is created here. Everything listens on
# 127.0.0.1; the API server reaches the kubelet at the node's Hostname
# address, localhost.
#
# Usage: scripts/kube-up.sh [up|build|down|status|env]   (as root; default up)
#   up      start what is not running, import missing images, write kubeconfigs
#   build   build kube-apiserver and kubelet if they are not cached; with
#           --background, return at once and build in a session of its own
#           whose autogroup runs at nice 19 (log: $KUBE_CACHE/build.log);
#           `up` waits for a build under way (a lock on $KUBE_CACHE/build.lock)
#   down    stop the cluster's processes and remove the pods' containers
#           from containerd (the state is kept; `up` starts it again)
#   env     print the exports the tests read (KUBECONFIG, ROLLCAGE_KUBE_*)
# Environment: KUBE_IMAGES (images to import; default rollcage/base:latest),
# KUBE_STATE (/var/lib/rollcage-kube), KUBE_CACHE (/var/cache/rollcage/kube).
set -euo pipefail

KUBE_VERSION=v1.34.4
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=${KUBE_STATE:-/var/lib/rollcage-kube}
RUN=/run/rollcage-kube
CACHE=${KUBE_CACHE:-/var/cache/rollcage/kube}
BIN=$CACHE/$KUBE_VERSION/bin
NODE=localhost
NAMESPACE=rollcage
IMAGES=${KUBE_IMAGES:-rollcage/base:latest}
ETCD_PORT=32379
API_PORT=6443
CTR_SOCK=$RUN/containerd.sock
LOG=$STATE/log
export PATH=/usr/local/go/bin:$PATH

say() { printf 'kube-up: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

[[ $(id -u) == 0 ]] || die "run as root (it starts containerd and the kubelet): sudo $0 $*"

pidfile_alive() { [[ -f $RUN/$1.pid ]] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

# start NAME CMD...: run CMD in the background with its log under $LOG,
# unless the process of NAME's pid file is alive.
start() {
	local name=$1
	shift
	if pidfile_alive "$name"; then
		return
	fi
	setsid "$@" >>"$LOG/$name.log" 2>&1 </dev/null &
	echo $! >"$RUN/$name.pid"
}

# wait_for WHAT SECONDS CMD...: retry CMD until it succeeds.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS > deadline)); then
			die "$what did not come up in ${secs}s; see $LOG/"
		fi
		sleep 0.2
	done
}

stop() {
	local name=$1
	if pidfile_alive "$name"; then
		kill "$(cat "$RUN/$name.pid")" 2>/dev/null || true
		for _ in $(seq 50); do pidfile_alive "$name" || break; sleep 0.2; done
		pidfile_alive "$name" && kill -9 "$(cat "$RUN/$name.pid")" 2>/dev/null || true
	fi
	rm -f "$RUN/$name.pid"
}

# remove_pod_containers kills and deletes the containers the kubelet ran in
# containerd's k8s.io namespace (the pods' and their pause sandboxes'),
# with the network namespaces and /dev/shm mounts the CRI plugin made for
# the sandboxes: their shims would otherwise outlive containerd. The pods
# stay in etcd, and at the next `up` the kubelet finds their containers
# gone (rollcage's pods, restartPolicy Never, are then failed, and their
# owner's reaper deletes them). Run with the kubelet stopped (it would
# restart them) and containerd up. A network namespace the CRI plugin
# already removed is not an error.
remove_pod_containers() {
	pidfile_alive containerd || return 0
	local c=(ctr --address "$CTR_SOCK" -n k8s.io) ids id p n=0
	ids=$("${c[@]}" containers ls -q) || { say "containerd does not answer: pod containers left running"; return 0; }
	for id in $ids; do
		local netns
		netns=$("${c[@]}" containers info "$id" 2>/dev/null |
			grep -oE '"/(var/)?run/netns/cni-[^"]+"' | tr -d '"' | sort -u) || netns= # the spec's network namespace
		"${c[@]}" tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true
		"${c[@]}" tasks delete -f "$id" >/dev/null 2>&1 || true
		if ! "${c[@]}" containers delete "$id" >/dev/null; then
			say "could not delete container $id (see 'ctr --address $CTR_SOCK -n k8s.io containers info $id')"
			continue
		fi
		n=$((n + 1))
		for p in $netns; do
			case $p in /run/netns/cni-* | /var/run/netns/cni-*) umount "$p" 2>/dev/null || true; rm -f "$p" ;; esac
		done
		p=$RUN/containerd/io.containerd.grpc.v1.cri/sandboxes/$id
		if [[ -d $p ]]; then
			umount "$p/shm" 2>/dev/null || true
			rm -rf "$p" "$STATE/containerd/io.containerd.grpc.v1.cri/sandboxes/$id"
		fi
	done
	((n == 0)) || say "removed $n pod containers"
}

stop_all() {
	stop kubelet
	remove_pod_containers
	for name in kube-apiserver etcd containerd; do
		stop "$name"
	done
}

print_env() {
	echo "export KUBECONFIG=$STATE/rollcage.kubeconfig"
	echo "export ROLLCAGE_KUBE_NAMESPACE=$NAMESPACE"
	echo "export ROLLCAGE_KUBE_NODE=$NODE"
	echo "export ROLLCAGE_KUBE_ADMIN_KUBECONFIG=$STATE/admin.kubeconfig"
}

cmd=${1:-up}
case $cmd in
up | build) ;;
down) stop_all; say "stopped (state kept in $STATE)"; exit 0 ;;
env) print_env; exit 0 ;;
status)
	for name in containerd etcd kube-apiserver kubelet; do
		if pidfile_alive "$name"; then echo "$name running"; else echo "$name stopped"; fi
	done
	exit 0
	;;
*) die "unknown command '$1': use up, build, down, status or env" ;;
esac

# build: kube-apiserver and kubelet, built once per version from the module
# proxy into $BIN, under the lock of $CACHE/build.lock: a second caller waits
# for a build under way, then finds the binaries.
build() {
	mkdir -p "$CACHE"
	# --background hands its child the lock already taken, as fd 9.
	[[ ${KUBE_BUILD_LOCKED:-} == 1 ]] || exec 9>"$CACHE/build.lock"
	unset KUBE_BUILD_LOCKED
	if ! flock -n 9; then
		say "waiting for the build under way (log: $CACHE/build.log)"
		tw=$(now)
		# Nothing else waits for the CPU now: a background build's
		# autogroup goes back to nice 0.
		if [[ -f $CACHE/build.pid ]]; then
			echo 0 >"/proc/$(cat "$CACHE/build.pid")/autogroup" 2>/dev/null || true
		fi
		flock 9
		took=$(tail -n 1 "$CACHE/build.time" 2>/dev/null || true)
		say "waited $(since "$tw")s for it${took:+; it took $took}"
	fi
	if [[ -x $BIN/kube-apiserver && -x $BIN/kubelet ]]; then
		exec 9>&-
		return
	fi
	say "building kube-apiserver and kubelet $KUBE_VERSION (cold: about 1,200 CPU-seconds)"
	rm -rf "$BIN.tmp"
	mkdir -p "$BIN.tmp"
	minor=${KUBE_VERSION#v1.}
	minor=${minor%%.*}
	ld="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
	ld+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
	ld+=" -X k8s.io/component-base/version.gitTreeState=clean"
	local TIMEFORMAT="%R s wall, %U s user + %S s sys"
	{ time (cd "$ROOT/scripts/kube" && CGO_ENABLED=0 nice -n 19 go build -trimpath -ldflags "$ld" -o "$BIN.tmp/" \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubelet); } 2>"$CACHE/build.time" ||
		{ cat "$CACHE/build.time" >&2; die "building kube-apiserver and kubelet failed (output above)"; }
	mkdir -p "$(dirname "$BIN")"
	rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
	say "built: $(tail -n 1 "$CACHE/build.time")"
	exec 9>&-
}

if [[ $cmd == build ]]; then
	if [[ ${2:-} == --background ]]; then
		if [[ -x $BIN/kube-apiserver && -x $BIN/kubelet ]]; then
			exit 0
		fi
		mkdir -p "$CACHE"
		exec 9>"$CACHE/build.lock"
		flock -n 9 || exit 0 # a build is under way
		# A session of its own gets an autogroup of its own: nice 19 on
		# that group keeps the build off the CPU that make, dockerd and the
		# containers want (the nice of a process counts only inside its
		# autogroup). It keeps no descriptor of its caller's but the lock
		# (fd 9): nothing of it holds make's output or a CI runner's pipe.
		KUBE_BUILD_LOCKED=1 setsid bash -c '
			for fd in /proc/self/fd/*; do
				fd=${fd##*/}
				[[ $fd == [0129] ]] || eval "exec $fd>&-" 2>/dev/null
			done
			echo 19 >/proc/self/autogroup 2>/dev/null
			exec "$0" build' "$0" >>"$CACHE/build.log" 2>&1 </dev/null &
		echo $! >"$CACHE/build.pid"
		say "building kube-apiserver and kubelet in the background (log: $CACHE/build.log)"
		exit 0
	fi
	build
	exit 0
fi

T0=$(now)

# Packages: Debian's, installed when missing.
need=()
command -v etcd >/dev/null || need+=(etcd-server)
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[[ -x /usr/lib/cni/loopback ]] || need+=(containernetworking-plugins)
command -v openssl >/dev/null || need+=(openssl)
command -v docker >/dev/null || die "docker is needed to export the rollcage images: run 'make docker images'"
if ((${#need[@]})); then
	say "installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; }
	# Debian's etcd-server starts the system etcd where systemd runs;
	# this cluster runs its own on another port either way.
fi

build

mkdir -p "$STATE" "$RUN" "$LOG" "$STATE/pki" "$STATE/cni/bin" "$STATE/cni/net.d" "$STATE/images"
chmod 0700 "$STATE" "$RUN"

# PKI: a CA, the API server's certificate, the kubelet client's, the
# service-account signing key, and two static tokens.
PKI=$STATE/pki
if [[ ! -f $PKI/ca.crt ]]; then
	say "making certificates"
	openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=rollcage-kube-ca \
		-keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2>/dev/null
	sign() { # name subject san
		openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$PKI/$1.key" -out "$PKI/$1.csr" 2>/dev/null
		openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 \
			-extfile <(printf '%s\n' "$3") -out "$PKI/$1.crt" 2>/dev/null
	}
	sign apiserver /CN=kube-apiserver \
		"subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
	sign kubelet-client "/CN=kube-apiserver-kubelet-client/O=system:masters" "extendedKeyUsage=clientAuth"
	openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
	openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	{
		echo "$(openssl rand -hex 16),admin,admin,system:masters"
		echo "$(openssl rand -hex 16),rollcage,rollcage"
	} >"$PKI/tokens.csv"
	chmod 0600 "$PKI"/*.key "$PKI/tokens.csv"
fi
token() { awk -F, -v u="$1" '$2 == u { print $1 }' "$PKI/tokens.csv"; }
kubeconfig() { # file user
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: rollcage-kube
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $2
  user:
    token: $(token "$2")
contexts:
- name: rollcage-kube
  context: {cluster: rollcage-kube, user: $2, namespace: $NAMESPACE}
current-context: rollcage-kube
EOF
	chmod 0600 "$1"
}
kubeconfig "$STATE/admin.kubeconfig" admin
kubeconfig "$STATE/rollcage.kubeconfig" rollcage
KC=(kubectl --kubeconfig "$STATE/admin.kubeconfig")

# containerd: a second instance with the CRI plugin, pods with no network.
install -m 0755 "$ROOT/scripts/kube/cni/rollcage-nonet" "$STATE/cni/bin/rollcage-nonet"
ln -sf /usr/lib/cni/loopback "$STATE/cni/bin/loopback"
cat >"$STATE/cni/net.d/10-rollcage-nonet.conflist" <<'EOF'
{"cniVersion": "0.4.0", "name": "rollcage-nonet", "plugins": [{"type": "rollcage-nonet"}]}
EOF
cat >"$STATE/containerd.toml" <<EOF
version = 2
root = "$STATE/containerd"
state = "$RUN/containerd"
[grpc]
  address = "$CTR_SOCK"
[ttrpc]
  address = "$CTR_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/rollcage/pause:1"
  # This VM refuses negative oom_score_adj, which the kubelet asks for.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$STATE/cni/bin"
    conf_dir = "$STATE/cni/net.d"
EOF
tc=$(now)
start containerd containerd --config "$STATE/containerd.toml"
wait_for containerd 60 ctr --address "$CTR_SOCK" version
say "containerd up ($(since "$tc")s)"

# Images: the pause image and the agent image (both FROM scratch, built
# here), and the task images; each imported once per docker image id.
ti=$(now)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
(cd "$ROOT/scripts/kube" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/pause/pause" ./pause)
printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/pause/Dockerfile"
docker build -q -t rollcage/pause:1 "$ctx/pause" >/dev/null
mkdir -p "$ctx/agent"
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/agent/rollcage-agent" ./cmd/rollcage-agent)
printf 'FROM scratch\nCOPY rollcage-agent /rollcage-agent\nENTRYPOINT ["/rollcage-agent"]\n' >"$ctx/agent/Dockerfile"
docker build -q -t rollcage/agent:latest "$ctx/agent" >/dev/null
imported=0
for img in rollcage/pause:1 rollcage/agent:latest $IMAGES; do
	id=$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null) ||
		die "image $img is not in Docker: run 'make images' (or name built ones in KUBE_IMAGES)"
	stamp=$STATE/images/$(printf '%s' "$img" | tr '/:' '__')
	if [[ -f $stamp && $(cat "$stamp") == "$id" ]] &&
		ctr --address "$CTR_SOCK" -n k8s.io images ls -q | grep -qx "docker.io/$img"; then
		continue
	fi
	docker save "$img" | ctr --address "$CTR_SOCK" -n k8s.io images import - >/dev/null
	echo "$id" >"$stamp"
	imported=$((imported + 1))
done
say "images: $imported imported ($(since "$ti")s)"

# etcd and the API server.
te=$(now)
start etcd etcd --name rollcage-kube --data-dir "$STATE/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
	--initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
	--initial-cluster "rollcage-kube=http://127.0.0.1:$((ETCD_PORT + 1))"
start kube-apiserver "$BIN/kube-apiserver" \
	--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
	--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
	--endpoint-reconciler-type none \
	--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
	--client-ca-file "$PKI/ca.crt" --token-auth-file "$PKI/tokens.csv" \
	--kubelet-client-certificate "$PKI/kubelet-client.crt" --kubelet-client-key "$PKI/kubelet-client.key" \
	--kubelet-preferred-address-types Hostname \
	--service-account-issuer https://kubernetes.default.svc \
	--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
	--service-cluster-ip-range 10.96.0.0/24 \
	--authorization-mode RBAC \
	--enable-admission-plugins NamespaceLifecycle,ServiceAccount,LimitRanger,ResourceQuota,PodSecurity \
	--allow-privileged=false \
	--profiling=false
wait_for kube-apiserver 180 "${KC[@]}" get --raw /readyz
say "etcd and kube-apiserver up ($(since "$te")s)"

# The kubelet, talking to the API server as admin.
cat >"$STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CTR_SOCK
failSwapOn: false
failCgroupV1: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
maxPods: 110
# Limits.Pids cannot be set per pod: the kubelet bounds every pod at 512,
# rollcage's default.
podPidsLimit: 512
serializeImagePulls: false
registerNode: true
EOF
tk=$(now)
start kubelet "$BIN/kubelet" --config "$STATE/kubelet.yaml" \
	--kubeconfig "$STATE/admin.kubeconfig" --root-dir "$STATE/kubelet" \
	--hostname-override "$NODE" --v=1
wait_for "the node" 120 bash -c "${KC[*]} get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
say "kubelet up, node $NODE ready ($(since "$tk")s)"

# The namespace: its default ServiceAccount by hand (no controller manager),
# Pod Security "baseline" enforced, and rollcage's Role bound to the
# rollcage user.
"${KC[@]}" get namespace "$NAMESPACE" >/dev/null 2>&1 || "${KC[@]}" create namespace "$NAMESPACE" >/dev/null
"${KC[@]}" label --overwrite namespace "$NAMESPACE" pod-security.kubernetes.io/enforce=baseline >/dev/null
"${KC[@]}" -n "$NAMESPACE" get serviceaccount default >/dev/null 2>&1 ||
	"${KC[@]}" -n "$NAMESPACE" create serviceaccount default >/dev/null
"${KC[@]}" -n "$NAMESPACE" apply -f "$ROOT/deploy/kubernetes/rollcage-role.yaml" >/dev/null

say "cluster up in $(since "$T0")s; for the tests: eval \"\$($0 env)\""
