"""What a fresh machine needs for the pipeline: the extra, the package, and a Java runtime from make test."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_pipeline_extra_and_package_are_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extra = " ".join(project["project"]["optional-dependencies"]["pipeline"])
    for dep in ("pyspark>=4", "pyarrow", "confluent-kafka", "matplotlib"):
        assert dep in extra
    assert "pipeline*" in project["tool"]["setuptools"]["packages"]["find"]["include"]


def test_make_test_installs_a_jdk_and_maven_only_when_none_is_there() -> None:
    """Spark (and Kafka 4.4, and tests/jvm) need Java 17+: `make test` -> `jvm` -> `java`, which
    installs a JDK and Maven only where `javac` or `mvn` is missing."""
    recipe = subprocess.run(["make", "-n", "java"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "javac -version" in recipe and "command -v mvn" in recipe
    assert "--no-install-recommends $missing" in recipe and 'missing="openjdk-17-jdk-headless"' in recipe
    assert 'missing="$missing maven"' in recipe
    rules = subprocess.run(["make", "-n", "-p", "test"], cwd=ROOT, capture_output=True, text=True).stdout.splitlines()
    assert any(line.startswith("test:") and "jvm" in line.split() for line in rules)
    assert any(line.startswith("jvm:") and "java" in line.split() for line in rules)
    installed = subprocess.run(["make", "-n", "-B", ".venv/.installed-test"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "pipeline]" in installed


def test_import_pipeline_needs_no_spark() -> None:
    code = "import sys, pipeline; assert 'pyspark' not in sys.modules; print(pipeline.FORMAT)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "kaflet", done.stderr


def test_make_jvm_fetches_the_kafka_connector_of_the_installed_pyspark() -> None:
    import pyspark

    recipe = subprocess.run(["make", "-n", "jvm"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert f"-Dspark.version={pyspark.__version__}" in recipe
    pom = (ROOT / "tests" / "jvm" / "spark-kafka" / "pom.xml").read_text()
    assert "<artifactId>spark-sql-kafka-0-10_2.13</artifactId>" in pom and "${spark.version}" in pom
    assert "<module>spark-kafka</module>" in (ROOT / "tests" / "jvm" / "pom.xml").read_text()
