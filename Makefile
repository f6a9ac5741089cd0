SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
BIN := $(CURDIR)/bin
export ROLLCAGE_AGENT_BIN := $(BIN)/rollcage-agent
# Tests that need Docker fail (never skip) when CI=true and no engine answers.
TESTFLAGS ?= -race -count=1 -timeout 45m
# make check's test flags: engine-backed tests skip under -short unless CI=true.
CHECKFLAGS ?= -short -race
# staticcheck, pinned; go run fetches it through the module proxy on first use.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build docker containerd quota-engine userns-engine demo-containerd images test-deps check test lint demo redteam swebench-demo harbor-demo bench gc clean gateway-image compose-e2e kube-build kube-up kube-down kube-test

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/rollcage-agent ./cmd/rollcage-agent
	$(GO) build -o $(BIN)/rollcage ./cmd/rollcage

# docker: a Docker engine that answers (installs Debian's docker.io if needed).
docker:
	@scripts/docker-engine.sh

# containerd: a containerd that answers, for --backend containerd (Docker's
# own, else Debian's containerd started on /run/containerd/containerd.sock).
containerd: docker
	@scripts/containerd.sh

# quota-engine: a Docker engine of rollcage's own on /run/rollcage-engine/
# docker.sock (scripts/rollcage-engine.sh; the default engine untouched),
# its data root a sparse loop-mounted xfs (project quotas) or btrfs (simple
# quotas) image, so each sandbox's disk limit is the kernel's, for Docker
# and for the containerd it runs; the images the quota tests need are
# loaded into it. `scripts/rollcage-engine.sh up --userns-remap` starts a
# second one that also remaps users.
quota-engine: images
	@scripts/rollcage-engine.sh up

# userns-engine: the second engine, remapping users, on
# /run/rollcage-engine-userns/docker.sock: root sandboxes run only there
# (sandbox/docker TestRoot*, e2b TestSlimeRootFlow; they load the images
# they need into it).
userns-engine: images
	@scripts/rollcage-engine.sh up --userns-remap

# images: the base and demo task images, built locally; present ones are skipped.
images: docker
	@images/build.sh

# test-deps: Chromium and docker-compose, from Debian's packages.
test-deps:
	@scripts/test-deps.sh

# lint: go vet and staticcheck (default checks) over the whole module.
lint:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# check: the fast loop, with no Docker, containerd or Kubernetes needed:
# lint, then every test under -short -race. Tests that need an engine
# skip under -short outside CI (sandboxtest.SkipShort); under CI=true
# they still fail when the engine is missing. A few minutes with a warm
# build cache; run it before every commit.
check: lint
	$(GO) test $(CHECKFLAGS) ./...

# test: what CI runs. kube-build goes first: on a machine without the cached
# kube-apiserver and kubelet it starts their build in the background (nice 19
# on an autogroup of its own, so it takes only the CPU the rest leaves idle),
# and kube-test at the end waits for it, brings the cluster up and runs the
# kubernetes backend's conformance suite and demo there.
test: kube-build build images containerd quota-engine userns-engine test-deps lint
	$(GO) test $(TESTFLAGS) ./...
	@$(MAKE) -s demo-containerd
	@$(MAKE) -s compose-e2e
	@$(MAKE) -s kube-test

# compose-e2e: the gateway brought up with docker-compose, one episode
# driven through it with curl, torn down.
compose-e2e: build images
	examples/compose-e2e.sh

demo: build images
	$(BIN)/rollcage demo

# demo-containerd: the demo suite on the containerd backend (72 rows, exit 1
# on a wrong one; about 7 minutes at load average 30, images imported once).
demo-containerd: build images containerd
	$(BIN)/rollcage demo --backend containerd --out $(BIN)/demo-containerd

# redteam: the red-team suite (demo/redteam) through Docker and the monitor,
# rules only unless ROLLCAGE_JUDGE_URL or REDTEAM_FLAGS=--judge-url=… is set;
# per-family figures, exit 1 if a goal is missed.
redteam: build images
	$(BIN)/rollcage redteam $(REDTEAM_FLAGS)

# swebench-demo: the demo suite as SWE-bench instances ($(BIN)/swebench-demo/
# instances.jsonl) and their images (swebench/sweb.eval.x86_64.<id>, the
# repository at /testbed), built FROM the demo images, never pulled;
# FAIL_TO_PASS and PASS_TO_PASS derived by running each in Docker. Play
# them with rollcage run --tasks $(BIN)/swebench-demo/instances.jsonl.
swebench-demo: build images
	$(BIN)/rollcage swebench-demo --out $(BIN)/swebench-demo

# harbor-demo: the demo's Harbor task (demo/harbor/wrap-width, its image
# built FROM local images, never pulled) played by its five scripts, each
# graded by the task's own verifier in a separate container.
harbor-demo: build images
	$(BIN)/rollcage run --tasks demo/harbor --policy replay:demo/harbor/scripts --attempts 5 --out $(BIN)/harbor-demo

bench: build images
	$(GO) test -run '^$$' -bench . -benchmem ./...

# gateway-image: rollcage/gateway, FROM the local base (see docker-compose.yml).
gateway-image: build images
	rm -rf $(BIN)/gateway-ctx && mkdir -p $(BIN)/gateway-ctx
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/gateway-ctx/rollcage ./cmd/rollcage
	cp $(BIN)/rollcage-agent Dockerfile $(BIN)/gateway-ctx/
	docker build -q -t rollcage/gateway:latest $(BIN)/gateway-ctx >/dev/null

# kube-up: a real single-node Kubernetes cluster on this machine
# (scripts/kube-up.sh: kube-apiserver and kubelet built from the Go module
# proxy once and cached, Debian's etcd and containerd, the base image and
# the demo's sealed images imported). kube-test runs the kubernetes
# backend's conformance suite on it, then the demo suite (72 rows, exit 1 on
# a wrong one); `make test` ends with it. The cluster stays up afterwards
# (on 127.0.0.1 only, its processes detached from make's output), like
# dockerd; `make kube-down` stops it (pods' containers removed). kube-build only starts the binaries'
# build in the background (see test).
# kube-up imports the sealed task images the episodes run on and the task
# images themselves: grading derives a task's expected test ids, probes and
# differential cases once, in a sandbox of the task's own image.
kube-up: build images
	KUBE_IMAGES="rollcage/base:latest $$($(BIN)/rollcage seal --refs) $$(docker images --filter 'reference=rollcage/demo-*:latest' --format '{{.Repository}}:{{.Tag}}')" scripts/kube-up.sh

kube-build:
	@scripts/kube-up.sh build --background

kube-down:
	scripts/kube-up.sh down

kube-test: kube-up
	eval "$$(scripts/kube-up.sh env)" && $(GO) test $(TESTFLAGS) -tags kube ./sandbox/kube
	eval "$$(scripts/kube-up.sh env)" && $(BIN)/rollcage demo --backend kubernetes --out $(BIN)/demo-kube

gc: build
	$(BIN)/rollcage gc

clean:
	rm -rf $(BIN)
