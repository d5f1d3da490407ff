# Cairn: the two commands a newcomer needs are `make run` and `make test`.
#
#   make          build build/cairn and build/cairnctl (release, -O2 -g)
#   make run      install missing packages, build, start a broker on
#                 127.0.0.1:9092 with its data in ./data
#   make cluster  build, start three brokers (one metadata quorum) on
#                 127.0.0.1:9092-9094 with their data in ./data/node-N
#   make test     install what tests need, build (plain, ASan+UBSan,
#                 ThreadSanitizer unit tests, libFuzzer builds, the Java
#                 and Go test programs, the Python client venv), run
#                 every test
#   make bench    the report against Apache Kafka 4.4.0 and this
#                 machine's limits, about 20 minutes (bench/run.py)
#   make bench-cluster-kafka  three Cairn and three Kafka brokers:
#                 replication factor 1 and 3, coordinator failover (about
#                 12 minutes; bench/run.py --only cluster)
#   make bench-all  the report with every part, the opt-in ones too
#                 (cluster, cleaner, security, coordinator load, memory,
#                 100,000 partitions, ...), about 45 minutes
#   make bench-failover  transaction coordinator failover, kill -9 to the
#                 next commit, three Cairn and three Kafka brokers
#   make bench-cluster  election, fencing, propagation and 1,000-topic
#                 figures of a three-node quorum (bench/cluster.py)
#   make bench-replication  produce throughput and latency at replication
#                 factor 1 and 3, acks=1 and all, three Cairn and three
#                 Kafka brokers (bench/replication.py)
#   make soak     the long tests `make test` leaves out (CAIRN_SOAK=1)
#   make gen      regenerate src/proto/gen from ../shared/kafka-protocol
#   make lint     clang-tidy and cppcheck over src/ (CI runs it)
#   make format-check / make format   check / fix the layout of the C
#                 lines changed since .clang-format was adopted

MAKEFLAGS += --no-print-directory
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PY := /usr/bin/python3

.PHONY: all build build-asan build-tsan build-fuzz build-java build-go build-py deps test-deps run cluster test soak bench bench-all bench-cluster-kafka bench-failover bench-cluster bench-replication gen check-gen lint format-check format clean

all: build

deps:
	@tools/deps.sh build

test-deps:
	@tools/deps.sh test

build: deps
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build build -j$(JOBS)

build-asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCN_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j$(JOBS)

# ThreadSanitizer: only the unit tests (the sync and cleaner workers are
# threads; tests/unit/test_threads.c drives them), not the broker, and not
# test_quorum (tests/run_all.sh says why).
UNIT_TARGETS := $(basename $(notdir $(wildcard tests/unit/test_*.c)))

build-tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS=-O1 \
		-DCN_TSAN=ON >/dev/null
	@cmake --build build-tsan -j$(JOBS) --target $(filter-out test_quorum,$(UNIT_TARGETS))

# Every tests/fuzz/fuzz_*.c is a target (CMakeLists.txt globs them too).
FUZZ_TARGETS := $(basename $(notdir $(wildcard tests/fuzz/fuzz_*.c)))

build-fuzz: test-deps
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug \
		-DCN_FUZZ=ON -DCN_SANITIZE=ON >/dev/null
	@cmake --build build-fuzz -j$(JOBS) --target $(FUZZ_TARGETS)

# The Java test programs (tests/java: the Apache Kafka client and tools
# against Cairn).  Maven downloads once into build/m2; the stamp keeps an
# unchanged tree from starting Maven at all.
JAVA_SRC := $(shell find tests/java -type f -not -name '*~' 2>/dev/null)

build-java: build/java/classpath.txt

build/java/classpath.txt: $(JAVA_SRC) tools/java-build.sh
	@tools/deps.sh java
	@tools/java-build.sh

# The Go test program (tests/go: franz-go against Cairn); the module and
# build caches are in build/go.
GO_SRC := $(shell find tests/go -type f -not -name '*~' 2>/dev/null)

build-go: build/go/cairn-franz

build/go/cairn-franz: $(GO_SRC) tools/go-build.sh
	@tools/go-build.sh

# Python client libraries from PyPI (tests/py/requirements.txt) in
# build/venv, run by the e2e tests as subprocesses.
build-py: build/venv/requirements.installed

build/venv/requirements.installed: tests/py/requirements.txt tools/py-build.sh
	@tools/deps.sh test
	@tools/py-build.sh

run: build
	./build/cairn

cluster: build
	@tools/cluster.sh

test: test-deps build build-asan build-tsan build-fuzz build-java build-go build-py
	@tests/run_all.sh

soak: test-deps build build-java
	CAIRN_SOAK=1 CAIRN_BUILD_DIR=$(CURDIR)/build CAIRN_BIN=$(CURDIR)/build/cairn \
	    $(PY) -m pytest -q -p no:cacheprovider tests/e2e/test_kafka_ref_cluster.py \
	    tests/e2e/test_kafka_cli.py tests/e2e/test_cairnctl_secured.py \
	    tests/e2e/test_cluster_vs_kafka.py tests/e2e/test_cluster_replication.py \
	    tests/e2e/test_cluster_txn_failover.py tests/e2e/test_verify_cluster.py

bench: build build-java
	@tools/deps.sh bench
	$(PY) bench/run.py

bench-cluster-kafka: build build-java build-py
	@tools/deps.sh bench
	$(PY) bench/run.py --only cluster

bench-all: build build-java build-py
	@tools/deps.sh bench
	$(PY) bench/run.py --only all

bench-failover: build build-java build-py
	@tools/deps.sh bench
	$(PY) bench/failover.py

bench-cluster: build
	$(PY) bench/cluster.py

bench-replication: build build-java
	@tools/deps.sh bench
	$(PY) bench/replication.py

gen:
	$(PY) tools/protogen.py

check-gen:
	@if [ -d ../shared/kafka-protocol ]; then $(PY) tools/protogen.py --check; \
	else echo "check-gen: ../shared/kafka-protocol not present; skipped"; fi

# Not part of `make test`, whose time budget is tight; .ci/run calls both.
lint:
	@tools/lint.sh

format-check:
	@tools/format-check.sh

format:
	@tools/format-check.sh --fix

clean:
	rm -rf build build-asan build-tsan build-fuzz build-lint
