"""KafkaJS and the Java client against kaflet's secured listeners (issue 27): each SASL mechanism
over SASL_PLAINTEXT and SASL_SSL, configured as their users write it (KafkaJS's `sasl` and `ssl`
options; the Java client's sasl.jaas.config lines and a PEM truststore)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.clients.test_security_clients import MECHANISMS, USERS, Secured, secured  # noqa: F401  (the module's broker)
from tests.support import sasl
from tests.support.jvm import JvmUnavailable, classpath, java_binary

JAAS = {
    "PLAIN": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";',
    "SCRAM-SHA-256": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";',
    "SCRAM-SHA-512": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";',
    # The Java client's unsecured OAUTHBEARER login, for development (its tokens are unsigned JWS).
    "OAUTHBEARER": 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";',
}


def test_java_client_with_jaas_configs(secured: Secured, tmp_path: Path) -> None:  # noqa: F811
    try:
        cp = classpath("security-clients")
        java = java_binary()
    except JvmUnavailable as exc:
        pytest.fail(f"the Java client cannot run: {exc}", pytrace=False)
    scenarios = []
    for protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        for mechanism in MECHANISMS:
            lines = {
                "bootstrap.servers": secured.address(protocol),
                "security.protocol": protocol,
                "sasl.mechanism": mechanism,
                "sasl.jaas.config": JAAS[mechanism],
            }
            if protocol == "SASL_SSL":
                lines.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(secured.certs / "ca.pem")})
            path = tmp_path / f"{protocol}-{mechanism}.properties"
            path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
            scenarios.append(f"{protocol}-{mechanism}={path}")
    ssl_props = tmp_path / "ssl.properties"
    ssl_props.write_text(
        f"bootstrap.servers={secured.address('SSL')}\nsecurity.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={secured.certs / 'ca.pem'}\n"
    )
    scenarios.append(f"SSL={ssl_props}")
    done = subprocess.run(
        [java, "-Xmx256m", "-cp", cp, "dev.kaflet.tests.SecureClients", *scenarios], capture_output=True, text=True, timeout=300
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert done.returncode == 0 and len(lines) == len(scenarios), done.stdout + done.stderr[-3000:]
    assert all(line.endswith(" OK") for line in lines), lines


@pytest.fixture(scope="module")
def kafkajs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("node and npm are needed: `make test` (apt-deps) installs nodejs and npm")
    root = tmp_path_factory.mktemp("kafkajs-security")
    done = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--silent", "kafkajs@2"], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return root


SCRIPT = """
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');
const scenarios = JSON.parse(process.argv[2]);
(async () => {
  let failed = 0;
  for (const s of scenarios) {
    const options = { clientId: 'kafkajs-security', brokers: [s.broker], logLevel: logLevel.NOTHING };
    if (s.ca) options.ssl = { ca: [fs.readFileSync(s.ca, 'utf-8')] };
    if (s.mechanism === 'oauthbearer') options.sasl = { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: s.token }) };
    else options.sasl = { mechanism: s.mechanism, username: 'alice', password: 'alice-secret' };
    const kafka = new Kafka(options);
    const topic = 'kafkajs-' + s.name.toLowerCase();
    try {
      const producer = kafka.producer();
      await producer.connect();
      await producer.send({ topic, messages: [{ value: s.name }] });
      await producer.disconnect();
      const consumer = kafka.consumer({ groupId: 'g-' + topic });
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      const got = await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('nothing consumed')), 30000);
        consumer.run({ eachMessage: async ({ message }) => { clearTimeout(timer); resolve(message.value.toString()); } });
      });
      await consumer.disconnect();
      if (got !== s.name) throw new Error('consumed ' + got);
      console.log(s.name + ' OK');
    } catch (e) {
      failed++;
      console.log(s.name + ' FAIL ' + e.message);
    }
  }
  process.exit(failed ? 1 : 0);
})();
"""


def test_kafkajs(secured: Secured, kafkajs: Path) -> None:  # noqa: F811
    scenarios = []
    for protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        for mechanism in MECHANISMS:
            s = {"name": f"{protocol}-{mechanism}".replace("_", "-"), "broker": secured.address(protocol), "mechanism": mechanism.lower()}
            if mechanism == "OAUTHBEARER":
                s["token"] = sasl.unsecured_jwt("alice")
            if protocol == "SASL_SSL":
                s["ca"] = str(secured.certs / "ca.pem")
            scenarios.append(s)
    script = kafkajs / "secure.js"
    script.write_text(SCRIPT)
    done = subprocess.run(["node", str(script), json.dumps(scenarios)], cwd=kafkajs, capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert done.returncode == 0 and len(lines) == len(scenarios), done.stdout + done.stderr[-3000:]
    assert USERS  # the users the module's broker was made with
