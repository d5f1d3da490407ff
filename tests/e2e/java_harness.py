"""The Java test programs (tests/java) for the e2e tests: building them
and running one as a subprocess.

`make build-java` (a dependency of `make test`) builds them into
build/java; classpath() runs it again (a no-op when nothing changed, and
it repairs a classpath whose jars were deleted) so a single test file can
be run on its own.
"""

import subprocess
from pathlib import Path

import pytest

from conftest import REPO

CLASSPATH_FILE = REPO / "build" / "java" / "classpath.txt"
_cached = []

# For a program started several times in one test: the client compiler
# only and the serial collector start the JVM markedly sooner on two busy
# cores (a Kafka Streams program reached RUNNING in ~6 s instead of ~12 s).
FAST_START = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]


def classpath():
    """The classpath of the programs and Kafka 4.4.0's jars."""
    if _cached:
        return _cached[0]
    cmd = ["make", "-s", "build-java"]
    if CLASSPATH_FILE.exists() and not all(
            Path(p).exists() for p in
            CLASSPATH_FILE.read_text().strip().split(":")):
        cmd = [str(REPO / "tools" / "java-build.sh")]
    try:
        res = subprocess.run(cmd, cwd=str(REPO), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.fail("%s: %s" % (" ".join(cmd), e))
    if res.returncode != 0:
        pytest.fail("%s failed:\n%s" % (" ".join(cmd), res.stdout[-3000:]))
    _cached.append(CLASSPATH_FILE.read_text().strip())
    return _cached[0]


def run_java(cp, main, args, timeout, stderr_path, jvm_args=()):
    """java JVM_ARGS -cp CP MAIN ARGS...: the CompletedProcess (stdout
    text), its stderr in stderr_path; fails the test on a timeout."""
    with open(stderr_path, "w") as err:
        try:
            return subprocess.run(
                ["java"] + list(jvm_args) + ["-cp", cp, main]
                + [str(a) for a in args],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=err, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    pytest.fail("%s timed out after %ss; stderr:\n%s"
                % (main, timeout, Path(stderr_path).read_text()[-4000:]))
