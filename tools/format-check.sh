#!/usr/bin/env bash
# Checks that the C lines changed since a base commit are laid out as
# .clang-format says; lines nobody touched are left as they are, so the
# tree is never reformatted wholesale.
#   tools/format-check.sh         print the diff clang-format wants; exit 1 if any
#   tools/format-check.sh --fix   apply it to the work tree instead
#
# The base.  CI runs in a fresh clone of main, so no branch or pull request
# is there to diff against, and "the previous commit" would miss all but the
# last commit of a branch that lands by fast-forward.  The base is instead
# the parent of the commit that added .clang-format: every line written or
# changed since the format was adopted must follow it.  It is found in the
# history rather than recorded as a hash, so it survives rebases.  A shallow
# clone that lacks that commit falls back to HEAD~1.  FORMAT_BASE=<commit>
# overrides it (e.g. FORMAT_BASE=main before you push a branch).
#
# src/proto/gen and tests/unit/gen are protogen's output: `make check-gen`
# owns their bytes.
set -euo pipefail
cd "$(dirname "$0")/.."

fix=false
[ "${1:-}" = --fix ] && fix=true

command -v git-clang-format >/dev/null || tools/deps.sh lint

base=${FORMAT_BASE:-}
if [ -z "$base" ]; then
    added=$(git log --diff-filter=A --format=%H -- .clang-format | tail -n 1)
    if [ -n "$added" ] && git rev-parse -q --verify "$added^" >/dev/null; then
        base="$added^"
    elif git rev-parse -q --verify HEAD~1 >/dev/null; then
        base=HEAD~1
    else
        echo "format-check: no base commit to compare with; skipped"
        exit 0
    fi
fi

paths=(-- 'src' 'tests' 'bench' ':(exclude)src/proto/gen' ':(exclude)tests/unit/gen')
if $fix; then
    git clang-format --force --extensions c,h "$base" "${paths[@]}"
    exit 0
fi
out=$(git clang-format --diff --extensions c,h "$base" "${paths[@]}")
case "$out" in
    "diff --git"*)
        printf '%s\n' "$out"
        echo "format-check: lines changed since $(git rev-parse --short "$base")" \
             "differ from .clang-format; run \`make format\` (tools/format-check.sh --fix)" >&2
        exit 1 ;;
    *) echo "format-check: clean (base $(git rev-parse --short "$base"))" ;;
esac
