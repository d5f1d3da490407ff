#!/usr/bin/env bash
# Installs the Debian packages Cairn needs, when they are missing.
#   tools/deps.sh build   what `make` needs
#   tools/deps.sh test    plus the real clients and fuzzing runtime for tests
#   tools/deps.sh java    a JDK (17) and Maven, for tests/java
#   tools/deps.sh bench   what `make bench` adds: the admin client (topic
#                         create/delete with configs) and matplotlib (chart)
#   tools/deps.sh lint    what `make lint` and `make format-check` need
# Safe to run again: installed packages are skipped without touching apt.
set -euo pipefail

build_pkgs=(build-essential cmake pkg-config libuv1-dev zlib1g-dev
            liblz4-dev libzstd-dev libsnappy-dev librdkafka-dev
            libssl-dev)
# iproute2: cairnctl verify --cluster's network partitions (ip netns).
test_pkgs=(clang libclang-rt-14-dev kcat openssl python3 python3-pytest
           python3-confluent-kafka python3-venv iproute2)
# pytest: bench/peers.py imports the e2e harness (tests/e2e/kafka_ref.py).
bench_pkgs=(python3-confluent-kafka python3-matplotlib python3-pytest)
# The unversioned names (14 on Debian 12) bring git-clang-format and
# run-clang-tidy on PATH.
lint_pkgs=(clang-format clang-tidy cppcheck)

want=()
case "${1:-build}" in
    build) want=("${build_pkgs[@]}") ;;
    test) want=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
    java) ;;
    bench) want=("${build_pkgs[@]}" "${bench_pkgs[@]}") ;;
    lint) want=("${build_pkgs[@]}" "${lint_pkgs[@]}") ;;
    *) echo "usage: tools/deps.sh build|test|java|bench|lint" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing+=("$p")
    fi
done
# kafkajs, the second client library, runs on node; a machine may already
# have node and npm from elsewhere (NodeSource), so look for the commands.
if [ "${1:-build}" = test ]; then
    command -v node >/dev/null 2>&1 || missing+=(nodejs)
    command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
# The Java test programs need javac and mvn; a JDK may come from elsewhere.
if [ "${1:-build}" = java ] || [ "${1:-build}" = test ]; then
    command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
    command -v mvn >/dev/null 2>&1 || missing+=(maven)
fi
# libraft (the metadata quorum, src/meta): 0.22.1 or newer, which has the
# fixes for the log-truncation and snapshot bugs Jepsen found after 0.15.0.
# Debian 12 has it only in bookworm-backports; main's 0.15.0 is pinned higher,
# so a plain install would pick the old one: it needs -t.
raft_ok() {
    local v
    v=$(dpkg-query -W -f='${Version}' libraft-dev 2>/dev/null) &&
        dpkg --compare-versions "$v" ge 0.22.1
}
need_raft=0
[ "${1:-build}" != java ] && ! raft_ok && need_raft=1

[ ${#missing[@]} -eq 0 ] && [ $need_raft -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}$([ $need_raft -eq 1 ] && echo ' libraft-dev (bookworm-backports)')"
if [ "$(id -u)" -ne 0 ]; then
    echo "deps: not root; install these packages first: ${missing[*]}$([ $need_raft -eq 1 ] && echo ' libraft-dev>=0.22.1 (bookworm-backports)')" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if [ $need_raft -eq 1 ]; then
    backports=/etc/apt/sources.list.d/cairn-bookworm-backports.sources
    if [ ! -f "$backports" ] && ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d; then
        printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' \
            'Suites: bookworm-backports' 'Components: main' \
            'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' >"$backports"
    fi
fi
apt-get update -qq
[ ${#missing[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${missing[@]}"
if [ $need_raft -eq 1 ]; then
    apt-get install -y -qq --no-install-recommends -t bookworm-backports libraft-dev
    raft_ok || { echo "deps: libraft-dev >= 0.22.1 could not be installed" >&2; exit 1; }
fi
