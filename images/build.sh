#!/usr/bin/env bash
# Builds rollcage's images locally, skipping those already present.
# Tags come from a content hash of each image's sources, so an edit rebuilds
# exactly what changed:
#   rollcage/base:<hash>        images/base/ (debootstrap + docker import)
#   rollcage/demo-<id>:<hash>   images/tasks/<id>/ with the shared
#                               images/tasks/{Dockerfile,setup.sh}
# and each is also tagged :latest. `images/build.sh --list` prints what is
# built and what is missing without building.
set -euo pipefail
cd "$(dirname "$0")"

hash_dir() { (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12); }
present() { docker image inspect "$1" >/dev/null 2>&1; }

list=false
[ "${1:-}" = --list ] && list=true

base_hash=$(hash_dir base)
base="rollcage/base:$base_hash"
status=0
if present "$base"; then
  $list && echo "present  $base"
else
  if $list; then echo "missing  $base"; status=1
  else base/build.sh "$base"; fi
fi
$list || docker tag "$base" rollcage/base:latest

# Every demo task shares tasks/Dockerfile and tasks/setup.sh; a task is
# its directory (repo/, fix/, meta.env). The context is assembled from both.
shared_hash=$( (sha256sum tasks/Dockerfile tasks/setup.sh | cut -d' ' -f1) | sha256sum | cut -c1-12)
for dir in tasks/*/; do
  [ -f "$dir/meta.env" ] || continue
  id=$(basename "$dir")
  h=$( (echo "$base_hash $shared_hash"; hash_dir "$dir") | sha256sum | cut -c1-12)
  ref="rollcage/demo-$id:$h"
  if present "$ref"; then
    $list && echo "present  $ref"
  elif $list; then
    echo "missing  $ref"; status=1
  else
    echo "images: building $ref" >&2
    ctx=$(mktemp -d)
    cp -r "$dir"/. "$ctx"/ && cp tasks/setup.sh "$ctx"/setup.sh
    log=$(mktemp)
    if ! docker build -q --build-arg "BASE=$base" -f tasks/Dockerfile -t "$ref" "$ctx" >"$log" 2>&1; then
      cat "$log" >&2; rm -rf "$log" "$ctx"; exit 1
    fi
    rm -rf "$log" "$ctx"
  fi
  $list || docker tag "$ref" "rollcage/demo-$id:latest"
done
exit $status
