#!/usr/bin/env bash
# Builds the Java test programs (tests/java) into build/java:
#   build/java/classes        the compiled programs
#   build/java/classpath.txt  classes dir + every dependency jar, for java -cp
# Maven's downloads (Kafka 4.4.0 and its dependencies, the build plugins)
# are cached in build/m2 (CAIRN_M2 overrides), so only the first build of
# a fresh clone touches the network.  `make build-java` runs this when a
# file under tests/java changed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=${CAIRN_M2:-$PWD/build/m2}
out=$PWD/build/java
mkdir -p "$out"
start=$(date +%s)
# -q -B: no progress bars or per-download lines, only errors (Debian's
# Maven 3.8.7 still writes colour resets even in batch mode: dropped).
mvn -q -B -Dstyle.color=never -f tests/java/pom.xml -Dmaven.repo.local="$repo" \
    compile dependency:build-classpath \
    -Dmdep.outputFile="$out/deps.txt" -Dmdep.includeScope=runtime 2>&1 |
    sed -u 's/\x1b\[[0-9;]*m//g'
printf '%s:%s\n' "$out/classes" "$(cat "$out/deps.txt")" >"$out/classpath.tmp"
mv "$out/classpath.tmp" "$out/classpath.txt"
echo "java: test programs built in $(( $(date +%s) - start ))s (build/java)"
