#!/usr/bin/env bash
# Builds the Go test program (tests/go: franz-go against Cairn) into
# build/go/cairn-franz.  The module cache, build cache and GOPATH live in
# build/go (so a fresh clone downloads franz-go there once, and nothing
# outside the build directory is touched); tests/go/go.sum pins what is
# downloaded.  `make build-go` runs this when a file under tests/go
# changed.
#
# franz-go v1.22 needs Go 1.26 (tests/go/go.mod).  Machines of this kind
# ship it in /usr/local/go; Debian 12's golang-go is 1.19, too old, so a
# machine without a Go that new cannot build it: say so and stop.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/build/go
mkdir -p "$out"
export GOMODCACHE=$out/mod GOCACHE=$out/cache GOPATH=$out/path
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
PATH=$PATH:/usr/local/go/bin
if ! command -v go >/dev/null 2>&1; then
    echo "go-build: no go command (install Go >= 1.26 or put it on PATH)" >&2
    exit 1
fi
want=$(sed -n 's/^go \([0-9.]*\).*/\1/p' tests/go/go.mod)
have=$(go env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" != "$want" ]; then
    echo "go-build: tests/go needs Go >= $want, $(command -v go) is $have" >&2
    exit 1
fi
start=$(date +%s)
(cd tests/go && go build -o "$out/cairn-franz.tmp" .)
mv "$out/cairn-franz.tmp" "$out/cairn-franz"
echo "go: test program built in $(( $(date +%s) - start ))s (build/go)"
