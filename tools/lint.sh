#!/usr/bin/env bash
# `make lint`: clang-tidy (checks in .clang-tidy) and cppcheck over the
# hand-written sources in src/, two jobs at a time; fails on any finding.
# A false positive is suppressed where it occurs, with the reason:
#   /* NOLINT(check): why */  or  /* cppcheck-suppress id: why */
# src/proto/gen is protogen's output and is left out (its generator is
# tested by round trips and fuzzing instead).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh lint

jobs=${LINT_JOBS:-2}
bdir=build-lint
# Only configure: clang-tidy needs compile_commands.json, not objects.
cmake -S . -B "$bdir" -DCMAKE_BUILD_TYPE=Debug >/dev/null

mapfile -t files < <(find src -name '*.c' -not -path 'src/proto/gen/*' | sort)
rc=0

echo "lint: clang-tidy on ${#files[@]} files"
# xargs -P rather than run-clang-tidy: it streams each file's findings
# and its exit status survives.
printf '%s\n' "${files[@]}" |
    xargs -P "$jobs" -n 4 clang-tidy -p "$bdir" --quiet 2> "$bdir/clang-tidy.err" ||
    { rc=1; grep -v '^[0-9]* warnings\? generated' "$bdir/clang-tidy.err" | \
        grep -v 'warnings\? treated as errors\|Suppressed [0-9]* warnings\|Use -header-filter\|^$' >&2 || true; }

echo "lint: cppcheck"
mkdir -p "$bdir/cppcheck"
# warning: bugs (bad pointer arithmetic, addresses of locals escaping,
# uninitialised use); portability: behaviour the C standard leaves open.
# style and performance are opinions; missingIncludeSystem: libc headers
# are not given to it.
cppcheck -I src -D_GNU_SOURCE --std=c11 --platform=unix64 \
    --enable=warning,portability --inline-suppr --quiet -j "$jobs" \
    --suppress=missingIncludeSystem --cppcheck-build-dir="$bdir/cppcheck" \
    --error-exitcode=1 --template='{file}:{line}: {severity} [{id}] {message}' \
    "${files[@]}" || rc=1

[ $rc -eq 0 ] && echo "lint: clean"
exit $rc
