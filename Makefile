# Cairn: the two commands a newcomer needs are `make run` and `make test`.
#
#   make          build build/cairn and build/cairnctl (release, -O2 -g)
#   make run      install missing packages, build, start a broker on
#                 127.0.0.1:9092 with its data in ./data
#   make test     install what tests need, build (plain, ASan+UBSan, and
#                 libFuzzer builds, the Java test programs), run every test
#   make bench    throughput against this machine's limits
#   make gen      regenerate src/proto/gen from ../shared/kafka-protocol

MAKEFLAGS += --no-print-directory
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PY := /usr/bin/python3

.PHONY: all build build-asan build-fuzz build-java deps test-deps run test bench gen check-gen clean

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

build-fuzz: test-deps
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug \
		-DCN_FUZZ=ON -DCN_SANITIZE=ON >/dev/null
	@cmake --build build-fuzz -j$(JOBS) --target fuzz_request fuzz_batch fuzz_log_recovery fuzz_txn_log fuzz_offsets

# The Java test programs (tests/java: the Apache Kafka client and tools
# against Cairn).  Maven downloads once into build/m2; the stamp keeps an
# unchanged tree from starting Maven at all.
JAVA_SRC := $(shell find tests/java -type f -not -name '*~' 2>/dev/null)

build-java: build/java/classpath.txt

build/java/classpath.txt: $(JAVA_SRC) tools/java-build.sh
	@tools/deps.sh java
	@tools/java-build.sh

run: build
	./build/cairn

test: test-deps build build-asan build-fuzz build-java
	@tests/run_all.sh

bench: build build-java
	@tools/deps.sh bench
	$(PY) bench/run.py

gen:
	$(PY) tools/protogen.py

check-gen:
	@if [ -d ../shared/kafka-protocol ]; then $(PY) tools/protogen.py --check; \
	else echo "check-gen: ../shared/kafka-protocol not present; skipped"; fi

clean:
	rm -rf build build-asan build-fuzz
