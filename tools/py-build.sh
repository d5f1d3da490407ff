#!/usr/bin/env bash
# Makes build/venv, a virtualenv of Debian's /usr/bin/python3 with the
# Python client libraries the e2e tests run as subprocesses (pinned in
# tests/py/requirements.txt: confluent-kafka from PyPI with its bundled,
# current librdkafka; kafka-python, pure Python).  The e2e tests themselves
# run under /usr/bin/python3 with Debian's confluent_kafka.  The venv is
# the cache: `make build-py` runs this again only when the requirements
# changed, so only the first build of a fresh clone touches the network.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$PWD/build/venv
req=tests/py/requirements.txt
start=$(date +%s)
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check \
    -r "$req"
cp "$req" "$venv/requirements.installed"
echo "py: client libraries installed in $(( $(date +%s) - start ))s (build/venv)"
