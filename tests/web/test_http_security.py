"""The HTTP side secured like the broker: HTTP Basic with the broker's SASL users, ACLs, TLS.

One broker with a SASL_PLAINTEXT listener (SCRAM-SHA-256 and PLAIN), the StandardAuthorizer
and ``super.users=User:admin``; its schema registry, HTTP proxy and ``/metrics`` are served,
and every HTTP caller is a real client over a real socket (httpx, and confluent-kafka's
SchemaRegistryClient). ``alice`` is a SCRAM user from the listener's JAAS entry, ``carol`` a
SCRAM user created at run time by AlterUserScramCredentials (confluent-kafka's admin client),
``admin`` a PLAIN user.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl

import httpx
import pytest
import trio
import trustme

from trikafka.broker import Broker, open_broker
from trikafka.errors import ConfigError
from trikafka.rest import serve_rest_proxy
from trikafka.security.authorizer import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from trikafka.testing.thread import test_broker_config

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
CONFIG = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f'{SCRAM} required user_alice="alice-secret";',
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": f'{PLAIN} required user_admin="admin-secret";',
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "schema.registry.port": 0,
    "rest.proxy.port": 0,
    "metrics.port": 0,
}
ALICE = ("alice", "alice-secret")
ADMIN = ("admin", "admin-secret")
SR = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
AVRO = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
V2_JSON = {"Content-Type": "application/vnd.kafka.json.v2+json"}


def allow(broker, name: str, *operations: AclOperation, user: str = "alice", prefixed: bool = False) -> None:
    pattern = PatternType.PREFIXED if prefixed else PatternType.LITERAL
    broker.core.acls.create(
        AclBinding(ResourceType.TOPIC, name, pattern, f"User:{user}", "*", op, AclPermissionType.ALLOW)
        for op in operations
    )


def assert_unauthorized(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Basic ")
    assert response.json()["error_code"] == 40101
    assert response.json()["message"]


async def test_registry_takes_the_brokers_users_and_applies_their_acls(caplog):
    caplog.set_level(logging.INFO, "trikafka.web.auth")
    with trio.fail_after(60):
        async with open_broker(test_broker_config(CONFIG)) as broker, httpx.AsyncClient() as http:
            url = broker.schema_registry_url
            body = {"schema": AVRO}

            # No credentials, a wrong password, an unknown user: 401 with Basic and 40101.
            assert_unauthorized(await http.get(f"{url}/subjects"))
            assert_unauthorized(await http.get(f"{url}/subjects", auth=("alice", "nope")))
            assert_unauthorized(await http.get(f"{url}/subjects", auth=("mallory", "alice-secret")))
            refusals = [r for r in caplog.records if r.name == "trikafka.web.auth"]
            assert len(refusals) == 3 and "mallory" in refusals[-1].getMessage()

            # alice is who she says, but no ACL lets her register: 403 with 40301.
            denied = await http.post(f"{url}/subjects/orders-value/versions", json=body, headers=SR, auth=ALICE)
            assert (denied.status_code, denied.json()["error_code"]) == (403, 40301), denied.text

            # A PREFIXED ACL on the topic "orders" covers the subject "orders-value".
            allow(broker, "orders", AclOperation.WRITE, AclOperation.READ, prefixed=True)
            ok = await http.post(f"{url}/subjects/orders-value/versions", json=body, headers=SR, auth=ALICE)
            assert ok.status_code == 200, ok.text
            schema_id = ok.json()["id"]

            # The admin (a PLAIN user, super user) registers where alice may not look.
            other = await http.post(f"{url}/subjects/payments-value/versions", json=body, headers=SR, auth=ADMIN)
            assert other.status_code == 200, other.text
            assert (await http.get(f"{url}/subjects", auth=ALICE)).json() == ["orders-value"]
            assert sorted((await http.get(f"{url}/subjects", auth=ADMIN)).json()) == [
                "orders-value", "payments-value"
            ]
            hidden = await http.get(f"{url}/subjects/payments-value/versions", auth=ALICE)
            assert (hidden.status_code, hidden.json()["error_code"]) == (403, 40301)
            # The schema id is readable through a subject alice may read.
            assert (await http.get(f"{url}/schemas/ids/{schema_id}", auth=ALICE)).status_code == 200

            # The global compatibility level is the cluster's config: alice may read it only
            # with DESCRIBE_CONFIGS on the cluster, and may not change it.
            assert (await http.get(f"{url}/config", auth=ALICE)).status_code == 403
            changed = await http.put(f"{url}/config", json={"compatibility": "NONE"}, headers=SR, auth=ALICE)
            assert (changed.status_code, changed.json()["error_code"]) == (403, 40301)
            assert (await http.put(f"{url}/config", json={"compatibility": "NONE"}, headers=SR, auth=ADMIN)).is_success

            # /metrics is a test tool on loopback: no login asked.
            metrics = await http.get(f"{broker.http_server.url}/metrics")
            assert metrics.status_code == 200


async def test_confluent_schema_registry_client_with_basic_auth_and_a_user_created_at_run_time():
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    with trio.fail_after(90):
        async with open_broker(test_broker_config(CONFIG)) as broker:
            admin = AdminClient({
                "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret",
            })

            def create_carol() -> None:
                info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
                futures = admin.alter_user_scram_credentials(
                    [UserScramCredentialUpsertion("carol", info, b"carol-secret")]
                )
                for future in futures.values():
                    future.result(30)

            await trio.to_thread.run_sync(create_carol)
            allow(broker, "invoices", AclOperation.WRITE, AclOperation.READ, user="carol", prefixed=True)

            def as_carol(password: str, subject: str) -> int:
                client = SchemaRegistryClient(
                    {"url": broker.schema_registry_url, "basic.auth.user.info": f"carol:{password}"}
                )
                return client.register_schema(subject, Schema(AVRO, "AVRO"))

            schema_id = await trio.to_thread.run_sync(as_carol, "carol-secret", "invoices-value")
            assert schema_id >= 1
            with pytest.raises(SchemaRegistryError) as wrong:
                await trio.to_thread.run_sync(as_carol, "guess", "invoices-value")
            assert (wrong.value.http_status_code, wrong.value.error_code) == (401, 40101)
            with pytest.raises(SchemaRegistryError) as denied:
                await trio.to_thread.run_sync(as_carol, "carol-secret", "orders-value")
            assert (denied.value.http_status_code, denied.value.error_code) == (403, 40301)


async def test_proxy_connects_as_the_basic_user():
    with trio.fail_after(90):
        async with open_broker(test_broker_config(CONFIG)) as broker, trio.open_nursery() as nursery:
            await nursery.start(serve_rest_proxy(broker).run)
            url = broker.rest_proxy_url
            async with httpx.AsyncClient(base_url=url) as http:
                record = {"records": [{"value": {"n": 1}}]}
                assert_unauthorized(await http.post("/topics/orders", json=record, headers=V2_JSON))
                assert_unauthorized(await http.get("/topics", auth=("alice", "wrong")))

                created = await http.post("/topics/orders", json=record, headers=V2_JSON, auth=ADMIN)
                assert created.status_code == 200, created.text
                denied = await http.post("/topics/orders", json=record, headers=V2_JSON, auth=ALICE)
                assert (denied.status_code, denied.json()["error_code"]) == (403, 40301), denied.text

                allow(broker, "orders", AclOperation.DESCRIBE, AclOperation.WRITE)
                written = await http.post("/topics/orders", json=record, headers=V2_JSON, auth=ALICE)
                assert written.status_code == 200, written.text
                assert written.json()["offsets"][0]["offset"] == 1
            nursery.cancel_scope.cancel()


async def test_https_from_the_keystore_keys(tmp_path):
    ca = trustme.CA()
    keystore = tmp_path / "http.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(keystore)
    config = {
        **CONFIG,
        "http.ssl.keystore.type": "PEM",
        "http.ssl.keystore.location": str(keystore),
    }
    trusted = ssl.create_default_context()
    ca.configure_trust(trusted)
    with trio.fail_after(60):
        async with open_broker(test_broker_config(config)) as broker:
            url = broker.schema_registry_url
            assert url.startswith("https://127.0.0.1:")
            async with httpx.AsyncClient(verify=trusted) as http:
                assert_unauthorized(await http.get(f"{url}/subjects"))
                assert (await http.get(f"{url}/subjects", auth=ADMIN)).json() == []
            async with httpx.AsyncClient(verify=ssl.create_default_context()) as untrusting:
                with pytest.raises(httpx.ConnectError):
                    await untrusting.get(f"{url}/subjects", auth=ADMIN)
            # Plain HTTP to an HTTPS port is not served.
            plain = url.replace("https://", "http://")
            async with httpx.AsyncClient() as http:
                with pytest.raises(httpx.HTTPError):
                    await http.get(f"{plain}/subjects", auth=ADMIN)


async def test_without_sasl_the_http_ports_stay_open_and_basic_can_be_forced():
    with trio.fail_after(60):
        async with open_broker(test_broker_config({"schema.registry.port": 0})) as broker:
            async with httpx.AsyncClient() as http:
                assert (await http.get(f"{broker.schema_registry_url}/subjects")).json() == []
        forced = {"schema.registry.port": 0, "http.authentication.method": "BASIC"}
        async with open_broker(test_broker_config(forced)) as broker:
            async with httpx.AsyncClient() as http:
                assert_unauthorized(await http.get(f"{broker.schema_registry_url}/subjects"))
        off = {**CONFIG, "http.authentication.method": "NONE", "authorizer.class.name": ""}
        async with open_broker(test_broker_config(off)) as broker:
            async with httpx.AsyncClient() as http:
                assert (await http.get(f"{broker.schema_registry_url}/subjects")).json() == []


def test_metrics_stay_on_loopback_unless_a_key_says_otherwise():
    with pytest.raises(ConfigError) as refused:
        Broker(test_broker_config({"metrics.port": 0, "metrics.host": "0.0.0.0"}))
    assert refused.value.key == "metrics.host" and refused.value.value == "0.0.0.0"
    assert "metrics.allow.remote" in str(refused.value)
    Broker(test_broker_config({"metrics.port": 0, "metrics.host": "0.0.0.0", "metrics.allow.remote": True}))
    # Off (-1), the host does not matter: the registry and the proxy may be served elsewhere.
    Broker(test_broker_config({"metrics.host": "0.0.0.0"}))


def test_a_basic_header_that_is_not_base64_is_a_401():
    from trikafka.web.http_auth import _basic

    assert _basic({"headers": [(b"authorization", b"Basic !!!")]}) == (
        "the Basic credentials are not base64 of UTF-8 user:password"
    )
    token = base64.b64encode(b"alice:pa:ss").decode()
    assert _basic({"headers": [(b"authorization", f"Basic {token}".encode())]}) == ("alice", "pa:ss")


def test_the_control_interface_stays_on_loopback_unless_a_flag_says_otherwise(capsys):
    from trikafka.cli import main, parse_control_listener

    assert main(["--control-listener", "0.0.0.0:0"]) == 2
    error = capsys.readouterr().err
    assert "--control-listener='0.0.0.0:0'" in error and "--control-allow-remote" in error
    assert parse_control_listener("0.0.0.0:0", allow_remote=True) == ("0.0.0.0", 0)
    assert parse_control_listener("[::1]:9000") == ("[::1]", 9000)


def test_a_new_scram_password_takes_effect_at_once_and_plain_users_count():
    from trikafka.security.config import SecurityConfig
    from trikafka.security.http_users import HttpUsers
    from trikafka.security.sasl.credentials import ScramCredentials
    from trikafka.security.sasl.scram import scram_credential

    security = SecurityConfig.from_properties({
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": f'{PLAIN} required user_admin="admin-secret";',
    })
    store = ScramCredentials()
    users = HttpUsers(security, ["SASL_PLAINTEXT"], store)
    store.set("carol", "SCRAM-SHA-256", scram_credential("SCRAM-SHA-256", "first", iterations=4096))
    assert users.verify("carol", "first") == ("SCRAM-SHA-256", "carol", "first")
    assert users.verify("carol", "first") is not None  # remembered: no second PBKDF2
    store.set("carol", "SCRAM-SHA-256", scram_credential("SCRAM-SHA-256", "second", iterations=4096))
    assert users.verify("carol", "first") is None
    assert users.verify("carol", "second") is not None
    store.delete("carol", "SCRAM-SHA-256")
    assert users.verify("carol", "second") is None
    assert users.verify("admin", "admin-secret") == ("PLAIN", "admin", "admin-secret")
    assert users.verify("admin", "admin-secre") is None


def test_a_missing_http_keystore_is_refused_at_start_naming_its_key(tmp_path):
    missing = tmp_path / "nope.pem"
    config = {"schema.registry.port": 0, "http.ssl.keystore.type": "PEM", "http.ssl.keystore.location": str(missing)}
    with pytest.raises(ConfigError) as refused:
        Broker(test_broker_config(config))
    assert refused.value.key == "http.ssl.keystore.location" and str(missing) in str(refused.value)
