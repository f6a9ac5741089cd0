#!/bin/sh
# rollcage seal: run in a throw-away container of a task image, as root, with
# no network. Usage: seal.sh PROBE WORKDIR BASE [PROBE ARGS...]
#
# 1. Runs PROBE (a shell script) with PROBE ARGS on the unsealed repository;
#    its standard output is the only standard output of this script, and the
#    host keeps it outside the image.
# 2. Seals the repository holding WORKDIR: HEAD and one branch at BASE (or a
#    detached HEAD), no other refs, no remotes or upstream configuration, no
#    reflogs or operation state, no alternates, and only objects reachable
#    from BASE (and the index). Python byte-code caches in the work tree are
#    removed (they may hold a newer version of the code).
# 3. Verifies the result and fails (exit 5) if any object is unreachable.
# Progress and the before/after counts go to standard error.
set -eu
probe=$1 workdir=$2 base_in=$3
shift 3
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
# Replace refs and grafts would make base read as another commit.
export GIT_TERMINAL_PROMPT=0 GIT_NO_REPLACE_OBJECTS=1 LC_ALL=C
log() { echo "rollcage-seal: $*" >&2; }

sh -c "$probe" rollcage-probe "$@" || { log "probe failed (exit $?)"; exit 3; }

cd "$workdir" 2>/dev/null || { log "no directory $workdir: nothing to seal"; exit 0; }
command -v git >/dev/null 2>&1 || { log "no git in the image: nothing to seal"; exit 0; }
[ "$(git rev-parse --is-inside-work-tree 2>/dev/null || true)" = true ] || { log "$workdir is not in a git work tree: nothing to seal"; exit 0; }

gd=$(git rev-parse --absolute-git-dir)
top=$(git rev-parse --show-toplevel)
owner=$(stat -c %u:%g "$gd")
wtowner=$(stat -c %u:%g "$top")
base=$(git rev-parse --verify -q "${base_in:-HEAD}^{commit}") || { log "base commit '${base_in:-HEAD}' not found in $workdir: fix the task's base_commit"; exit 4; }
head=$(git rev-parse -q --verify HEAD 2>/dev/null || true)
branch=$(git symbolic-ref -q --short HEAD 2>/dev/null || true)
log "before: $(git count-objects -v | tr '\n' ' ')refs $(git for-each-ref | wc -l)"

# The work tree and index at base, when HEAD was elsewhere.
if [ "$head" != "$base" ]; then
  git reset -q --hard "$base"
  chown -R "$wtowner" "$top"
fi

# Operation state, pseudo-refs, messages of earlier commands, caches that
# name commits, linked work trees and rerere's recorded resolutions.
find "$gd" -maxdepth 1 -type f \( -name '*_HEAD' -o -name '*_MSG' -o -name '*EDITMSG' -o -name 'BISECT_*' \
  -o -name MERGE_MODE -o -name MERGE_RR -o -name AUTO_MERGE -o -name packed-refs -o -name gitk.cache \
  -o -name FETCH_HEAD -o -name ORIG_HEAD \) -delete
rm -rf "$gd/rebase-merge" "$gd/rebase-apply" "$gd/sequencer" "$gd/logs" "$gd/rr-cache" "$gd/worktrees" \
  "$gd/refs/original" "$gd/info/refs" "$gd/info/grafts" \
  "$gd/objects/info/commit-graph" "$gd/objects/info/commit-graphs" "$gd/objects/info/packs"
rm -f "$gd"/objects/pack/multi-pack-index* "$gd"/objects/pack/*.bitmap "$gd"/objects/pack/*.keep

# Every ref goes (branches, tags, remote-tracking, stash, notes, replace),
# then one branch (or a detached HEAD) at base.
git for-each-ref --format='delete %(refname)' | git update-ref --no-deref --stdin
rm -rf "$gd/refs"
mkdir -p "$gd/refs/heads" "$gd/refs/tags"
if [ -n "$branch" ]; then
  git update-ref "refs/heads/$branch" "$base"
  git symbolic-ref HEAD "refs/heads/$branch"
else
  git update-ref --no-deref HEAD "$base"
fi
rm -rf "$gd/logs"

# Configuration that names an upstream or pulls other files in.
for sec in $(git config --file "$gd/config" --name-only --list 2>/dev/null |
    grep -iE '^(remote|branch|include|includeif|url|submodule|lfs)\.' | sed 's/\.[^.]*$//' | sort -u); do
  git config --file "$gd/config" --remove-section "$sec" 2>/dev/null || true
done
for key in core.alternateRefsCommand core.alternateRefsPrefixes core.hooksPath core.fsmonitor; do
  git config --file "$gd/config" --unset-all "$key" 2>/dev/null || true
done

# Objects: everything reachable is packed into one pack (borrowed objects of
# alternates included), then the alternates and everything else go.
git reflog expire --expire=now --all 2>/dev/null || true
git -c pack.writeBitmapIndex=false -c repack.writeBitmaps=false repack -a -d -q
rm -f "$gd/objects/info/alternates" "$gd/objects/info/http-alternates"
git prune --expire=now
find "$gd/objects" -mindepth 1 -maxdepth 1 ! -name pack ! -name info -exec rm -rf {} +
find "$gd/objects/pack" -type f ! -name 'pack-*.pack' ! -name 'pack-*.idx' ! -name 'pack-*.rev' -delete
find "$gd/objects/info" -mindepth 1 -delete 2>/dev/null || true

# Byte-code and test caches in the work tree may come from another version.
find "$top" -path "$gd" -prune -o \( -name __pycache__ -o -name .pytest_cache \) -type d -prune -exec rm -rf {} + 2>/dev/null || true

chown -R "$owner" "$gd"

# Verify: every stored object is reachable from HEAD or the index, every ref
# is at base, and nothing loose or garbage is left.
stored=$(mktemp) reach=$(mktemp)
git cat-file --batch-all-objects --batch-check='%(objectname)' | sort -u >"$stored"
git rev-list --objects --all --indexed-objects | cut -d' ' -f1 | sort -u >"$reach"
extra=$(comm -23 "$stored" "$reach" | wc -l)
rm -f "$stored" "$reach"
[ "$extra" -eq 0 ] || { log "verify: $extra objects are not reachable from base"; exit 5; }
bad=$(git for-each-ref --format='%(objectname)' | grep -vc "^$base\$" || true)
[ "$bad" -eq 0 ] || { log "verify: $bad refs are not at base"; exit 5; }
[ "$(git rev-parse HEAD)" = "$base" ] || { log "verify: HEAD is not base"; exit 5; }
counts=$(git count-objects -v)
echo "$counts" | grep -qE '^(count|garbage|size-garbage): [1-9]' && { log "verify: loose objects or garbage left: $counts"; exit 5; }
[ -z "$(git remote)" ] || { log "verify: remotes left"; exit 5; }
log "after: $(echo "$counts" | tr '\n' ' ')refs $(git for-each-ref | wc -l) base $base"
