#!/usr/bin/env bash
# Runs every test: unit tests (plain, ASan+UBSan and TSan builds), each
# libFuzzer target for a bounded time, and the end-to-end suite with real
# clients against the plain and the sanitized broker.  Prints one summary line,
# "N passed, N failed", and exits non-zero on any failure.
#
#   FUZZ_SECONDS=N   time per fuzz target (default 10; the seeds always
#                    run, so this is exploration on top)
#   E2E_ARGS=...     extra pytest arguments (e.g. "-k kcat")
set -uo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
passed=0
failed=0
failures=()

# ASan: abort on the first error so a test cannot pass past it.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# TSan: a data race fails the test binary (exit code) at once.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

stage() { printf '\n=== %s\n' "$*"; }

count_unit() { # build dir [command prefix]
    local dir=$1 t out p f
    shift
    for t in "$dir"/test_*; do
        [ -x "$t" ] || continue
        case " ${UNIT_SKIP:-} " in *" ${t##*/} "*) continue ;; esac
        out=$("$@" "$t" 2>&1)
        local rc=$?
        p=$(printf '%s\n' "$out" | sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' | tail -1)
        f=$(printf '%s\n' "$out" | sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' | tail -1)
        p=${p:-0}
        f=${f:-0}
        if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
            f=1 # crashed or sanitizer abort before its summary
        fi
        printf '%s\n' "$out" | tail -1
        if [ "$f" -ne 0 ]; then
            printf '%s\n' "$out" | tail -40
            failures+=("$t")
        fi
        passed=$((passed + p))
        failed=$((failed + f))
    done
}

run_fuzz() { # target corpus-subdir
    local bin=build-fuzz/$1 seeds=tests/fuzz/corpus/$2
    local work
    work=$(mktemp -d)
    [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/ 2>/dev/null
    if "$bin" -max_total_time="$FUZZ_SECONDS" -print_final_stats=0 \
        "$work" >"$work.log" 2>&1; then
        echo "$1: ran ${FUZZ_SECONDS}s, no crash"
        passed=$((passed + 1))
    else
        tail -40 "$work.log"
        echo "$1: FAILED"
        failures+=("$1")
        failed=$((failed + 1))
    fi
    rm -rf "$work" "$work.log"
}

run_e2e() { # build dir, label, extra env...
    local dir=$1 label=$2
    shift 2
    local log
    log=$(mktemp)
    env CAIRN_BUILD_DIR="$PWD/$dir" CAIRN_BIN="$PWD/$dir/cairn" "$@" \
        $PY -m pytest -q -p no:cacheprovider --durations=15 ${E2E_ARGS:-} tests/e2e 2>&1 | tee "$log"
    local line p f e
    line=$(grep -E '^(=+ )?[0-9]+ (passed|failed)' "$log" | tail -1)
    p=$(printf '%s' "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
    f=$(printf '%s' "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
    e=$(printf '%s' "$line" | grep -oE '[0-9]+ error' | grep -oE '[0-9]+')
    p=${p:-0}
    f=$(( ${f:-0} + ${e:-0} ))
    if [ -z "$line" ]; then
        f=$((f + 1)) # pytest itself failed
    fi
    [ "$f" -ne 0 ] && failures+=("e2e ($label)")
    passed=$((passed + p))
    failed=$((failed + f))
    rm -f "$log"
}

stage "unit tests (release build)"
count_unit build
stage "unit tests (AddressSanitizer + UndefinedBehaviorSanitizer)"
count_unit build-asan
stage "unit tests (ThreadSanitizer)"
# gcc 12's TSan aborts ("unexpected memory mapping") when the kernel
# randomises more than 28 bits of mmap addresses; without ASLR it runs on
# any kernel, and the tests do not depend on address layout.
# test_quorum is left out: its only threads are libuv's and libraft's own
# workers (uninstrumented libraries; Cairn's quorum code runs on the loop
# thread), and TSan reports their internals: libraft formats trace text
# into one static buffer from several workers, and libuv disarms a stale
# epoll event by fd number after a worker reused the number.
if setarch "$(uname -m)" -R true 2>/dev/null; then
    UNIT_SKIP=test_quorum count_unit build-tsan setarch "$(uname -m)" -R
else
    UNIT_SKIP=test_quorum count_unit build-tsan
fi

stage "fuzz targets, ${FUZZ_SECONDS}s each"
run_fuzz fuzz_request request
run_fuzz fuzz_batch batch
run_fuzz fuzz_log_recovery log_recovery
run_fuzz fuzz_txn_log txn_log
run_fuzz fuzz_offsets offsets
run_fuzz fuzz_acl_store acl_store
run_fuzz fuzz_scram_msgs scram_msgs
run_fuzz fuzz_sasl sasl
run_fuzz fuzz_clean_ckpt clean_ckpt
run_fuzz fuzz_quotas quotas
run_fuzz fuzz_sasl_client sasl_client
run_fuzz fuzz_prom prom
run_fuzz fuzz_meta_entry meta_entry
run_fuzz fuzz_epochs epochs

stage "end-to-end with real clients (release build)"
run_e2e build release
stage "end-to-end with real clients (sanitized broker)"
run_e2e build-asan asan CAIRN_SANITIZED=1

echo
if [ ${#failures[@]} -ne 0 ]; then
    echo "failed: ${failures[*]}"
fi
echo "total: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
