#!/bin/bash
# Builds the task repository's git history in $DEST (default /workspace) from
# $SRC (default /tmp/src), the way SWE-bench images look: a few earlier
# commits, the base commit checked out on main, and the upstream fix commit
# on top of it, still reachable as origin/main and a release tag.
# Names and dates are fixed so commit ids are the same on every build.
set -euo pipefail
SRC=${SRC:-/tmp/src}
DEST=${DEST:-/workspace}
. "$SRC/meta.env"

export GIT_AUTHOR_NAME="$AUTHOR_NAME" GIT_AUTHOR_EMAIL="$AUTHOR_EMAIL"
export GIT_COMMITTER_NAME="$AUTHOR_NAME" GIT_COMMITTER_EMAIL="$AUTHOR_EMAIL"
commit() { # commit DATE MESSAGE
  GIT_AUTHOR_DATE="$1" GIT_COMMITTER_DATE="$1" git commit -q --no-gpg-sign --no-verify -m "$2"
}

cd "$DEST"
git init -q -b main .
git remote add origin "https://github.com/$ORG/$NAME.git"
cp -a "$SRC/repo/." .

git add README.md LICENSE .gitignore pyproject.toml
commit "$DATE1" "Initial commit"
git add "$PKG"
commit "$DATE2" "Add $PKG package"
git add tests pytest.ini
commit "$DATE3" "Add test suite"
git add -A
commit "$DATE4" "Release $VERSION"
base=$(git rev-parse HEAD)

# The upstream fix, by a contributor, on top of the base.
git checkout -q --detach
cp -a "$SRC/fix/." .
# Re-hash everything: a copied file of the same size and mtime looks
# unchanged to the index.
git rm -r -q --cached .
git add -A
GIT_AUTHOR_NAME="$FIX_AUTHOR_NAME" GIT_AUTHOR_EMAIL="$FIX_AUTHOR_EMAIL" commit "$DATE5" "$FIX_SUBJECT

$FIX_BODY"
fix=$(git rev-parse HEAD)
git update-ref refs/remotes/origin/main "$fix"
git update-ref refs/remotes/origin/HEAD "$fix"
git tag "v$FIXVERSION" "$fix"
git checkout -q main
git branch -q --set-upstream-to=origin/main main 2>/dev/null || true
echo "base $base"
echo "fix $fix"
