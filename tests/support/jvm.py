"""The JVM pieces of the test suite, as `make jvm` left them in the cache (tests/jvm/pom.xml).

Each Maven module under tests/jvm writes its runtime classpath to
`$KAFLET_CACHE/jvm/ARTIFACT.classpath` and, where it has code, its classes to
`$KAFLET_CACHE/jvm/ARTIFACT/classes`. A test that needs one and cannot have it fails with the
reason (Maven's own error when it could not resolve, or a Java older than 17), never skips.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

MIN_JAVA = 17


class JvmUnavailable(RuntimeError):
    """A JVM piece of the suite cannot run here; the message says why and what to do."""


def cache_dir() -> Path:
    """Where the build keeps what it downloads and compiles: outside the source tree."""
    return Path(os.environ.get("KAFLET_CACHE") or Path.home() / ".cache" / "kaflet")


def jvm_dir() -> Path:
    return cache_dir() / "jvm"


@cache
def java_binary() -> str:
    """The `java` to run, checked to be 17 or newer (Kafka 4's broker needs 17)."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise JvmUnavailable("no `java` found: install a JDK 17 or newer (make test installs openjdk-17-jdk-headless)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        raise JvmUnavailable(f"cannot read the version of {java}: {out.strip()[:200]}")
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_..."
        major = int(m.group(2))
    if major < MIN_JAVA:
        raise JvmUnavailable(f"{java} is Java {major}; Kafka 4.4 and the suite's JVM pieces need Java {MIN_JAVA} or newer")
    return java


def _maven_failure() -> str:
    error = jvm_dir() / "maven.error"
    if error.exists():
        return "Maven could not build the suite's JVM pieces (is Maven Central reachable?):\n" + error.read_text()[-3000:]
    return "run `make jvm` (part of `make test`), which fetches them with Maven into " + str(jvm_dir())


def classpath(artifact: str) -> str:
    """The runtime classpath of module `artifact`, with its own classes first where it has any."""
    java_binary()
    path = jvm_dir() / f"{artifact}.classpath"
    if not path.exists():
        raise JvmUnavailable(f"no classpath for {artifact}: {_maven_failure()}")
    entries = [e for e in path.read_text().strip().split(os.pathsep) if e]
    missing = [e for e in entries if not Path(e).exists()]
    if missing:
        raise JvmUnavailable(f"{artifact}'s classpath names {len(missing)} missing jar(s), e.g. {missing[0]}: {_maven_failure()}")
    classes = jvm_dir() / artifact / "classes"
    if classes.is_dir():
        entries.insert(0, str(classes))
    return os.pathsep.join(entries)
