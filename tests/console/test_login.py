"""The console behind HTTP Basic, in a real headless Chromium, when the broker has SASL users.

The broker is ``python -m trikafka --ui`` with a SASL_PLAINTEXT listener (a PLAIN user
``admin`` and a SCRAM user ``alice``) and a PLAINTEXT listener (what the console reads the
cluster through), the StandardAuthorizer, the schema registry. Without credentials the
console answers 401 with ``WWW-Authenticate: Basic`` (what makes a browser ask for a login);
with them, Chromium reads the pages, and the schema pages read the registry as that user —
so alice sees only the subjects the ACLs let her read (a PREFIXED READ on the topic ``orders``).
"""

from __future__ import annotations

import json
import shutil

import httpx
import pytest

from trikafka.testing.process import BrokerProcess

from .support import _chromium

pytestmark = pytest.mark.compat

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
SCHEMA = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    assert not missing, f"{missing} not found: apt-get install chromium chromium-driver (make system-deps)"
    overrides = {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": f'{PLAIN} required user_admin="admin-secret";',
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f'{SCRAM} required user_alice="alice-secret";',
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "metrics.port": "0",
        "schema.registry.port": "0",
    }
    args = ["--in-memory", "--ui", "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"]
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    broker = BrokerProcess(*args, cwd=tmp_path_factory.mktemp("login"))
    try:
        broker.wait_ready()
        base = broker.wait_for_output("  ui on ").split("ui on", 1)[1].strip()
        registry = broker.wait_for_output("  schema registry on ").split(" on ", 1)[1].strip()
        for subject in ("orders-value", "payments-value"):
            registered = httpx.post(
                f"{registry}/subjects/{subject}/versions", json={"schema": SCHEMA}, auth=("admin", "admin-secret")
            )
            assert registered.status_code == 200, registered.text
        sasl = broker.wait_for_output("listening on SASL_PLAINTEXT://").split("SASL_PLAINTEXT://", 1)[1].strip()
        _allow_alice_to_read_orders(sasl)
        driver = _chromium()
        try:
            yield base, driver
        finally:
            driver.quit()
    finally:
        assert broker.stop() == 0, broker.output


def _allow_alice_to_read_orders(bootstrap: str) -> None:
    """A PREFIXED READ ACL on the topic resource ``orders``, created over the Kafka protocol
    (confluent-kafka's admin client, as the super user): it covers the subject ``orders-value``."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({
        "bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "admin", "sasl.password": "admin-secret",
    })
    acl = AclBinding(
        ResourceType.TOPIC, "orders", ResourcePatternType.PREFIXED, "User:alice", "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([acl]).values():
        future.result(30)


def test_the_console_asks_for_a_login(secured):
    base, _ = secured
    refused = httpx.get(base)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Basic ")
    assert refused.json()["error_code"] == 40101
    assert httpx.get(base, auth=("admin", "wrong")).status_code == 401


def test_chromium_logs_in_and_reads_the_schemas_as_that_user(secured):
    base, driver = secured
    host = base.removeprefix("http://")
    driver.get(f"http://admin:admin-secret@{host}/schemas")
    text = driver.find_element("tag name", "body").text
    assert "orders-value" in text and "payments-value" in text, text
    # A new browser session for alice: the registry answers the console as alice.
    driver.delete_all_cookies()
    driver.execute_cdp_cmd("Network.clearBrowserCache", {})
    driver.get(f"http://alice:alice-secret@{host}/schemas")
    text = driver.find_element("tag name", "body").text
    assert "orders-value" in text and "payments-value" not in text, text
