#!/usr/bin/env bash
# Measures what sealing costs on a large repository: builds
# rollcage/sealbench:<commits>x<files> (a generated history of COMMITS
# commits over FILES files, plus an upstream branch, tags and a stash, made
# with git fast-import from rollcage/base), then seals it with
# `rollcage seal` twice (sealing, then the cached lookup) and prints the
# times next to a container start-and-commit that changes nothing.
# Usage: scripts/seal-bench.sh [COMMITS] [FILES]   (default 20000 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
commits=${1:-20000} files=${2:-5000}
img="rollcage/sealbench:${commits}x${files}"
bin=${ROLLCAGE_BIN:-bin/rollcage}
if ! docker image inspect "$img" >/dev/null 2>&1; then
  echo "seal-bench: generating $img" >&2
  cid=$(docker create --network none -u 1000:1000 -w /workspace rollcage/base:latest python3 -c '
import os, subprocess, sys
commits, files = int(sys.argv[1]), int(sys.argv[2])
subprocess.run(["git", "init", "-q", "-b", "main", "."], check=True)
p = subprocess.Popen(["git", "fast-import", "--quiet"], stdin=subprocess.PIPE)
w = p.stdin.write
def blob(text):
    data = text.encode()
    w(b"data %d\n" % len(data) + data + b"\n")
for c in range(commits):
    w(b"commit refs/heads/main\n")
    w(b"committer Bench <b@x> %d +0000\n" % (1600000000 + c))
    blob("commit %d" % c)
    touched = range(files) if c == 0 else [(c * 7919 + k) % files for k in range(2)]
    for f in touched:
        w(b"M 100644 inline pkg/m%03d/f%05d.py\n" % (f % 100, f))
        blob("".join("def f%d_%d(x):\n    return x + %d  # rev %d\n" % (f, i, i, c) for i in range(12)))
w(b"commit refs/remotes/origin/main\ncommitter Bench <b@x> 1700000000 +0000\n")
blob("Upstream fix")
w(b"from refs/heads/main\nM 100644 inline pkg/m000/f00000.py\n")
blob("def fixed(x):\n    return x - 1  # SEALBENCH-FIX\n")
w(b"reset refs/tags/v2\nfrom refs/remotes/origin/main\n\n")
p.stdin.close(); p.wait()
subprocess.run(["git", "checkout", "-q", "main"], check=True)
subprocess.run(["git", "config", "branch.main.remote", "origin"], check=True)
subprocess.run(["git", "config", "branch.main.merge", "refs/heads/main"], check=True)
subprocess.run(["git", "remote", "add", "origin", "https://example.invalid/big.git"], check=True)
' "$commits" "$files")
  docker start -a "$cid" >&2
  docker commit "$cid" "$img" >/dev/null
  docker rm -f "$cid" >/dev/null
fi
docker run --rm --network none -u 1000:1000 -w /workspace "$img" sh -c \
  'echo "repository: $(git rev-list --count --all) commits, $(git ls-files | wc -l) files, $(du -sh .git | cut -f1) in .git"' >&2
tasks=$(mktemp)
printf '{"id":"sealbench","image":"%s","instruction":"-","hidden_tests":"h","test_command":"true"}\n' "$img" >"$tasks"
mkdir -p "$(dirname "$tasks")/h"
# Remove an earlier sealed image of this source, so the first run seals.
docker images --format '{{.Repository}}:{{.Tag}}' rollcage/sealed | grep "sealbench-${commits}x${files}-" | xargs -r docker rmi -f >/dev/null || true
t0=$(date +%s.%N); cid=$(docker create --network none "$img" true); docker start -a "$cid"; docker commit "$cid" rollcage/sealbench-noop:x >/dev/null
t1=$(date +%s.%N); docker rm -f "$cid" >/dev/null; docker rmi -f rollcage/sealbench-noop:x >/dev/null
echo "baseline: container start and commit changing nothing: $(echo "$t1 - $t0" | bc) s" >&2
"$bin" seal --tasks "$tasks"
"$bin" seal --tasks "$tasks"
rm -rf "$tasks" "$(dirname "$tasks")/h"
