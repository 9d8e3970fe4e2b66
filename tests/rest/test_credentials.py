"""The seam for HTTP authentication: ``scope["trikafka.credentials"]`` picks the Kafka identity.

The authentication in front of the proxy (HTTP Basic, checked against the broker's SASL
users) puts ``(mechanism, username, password)`` in the ASGI scope; the proxy then opens —
once, and reuses — a client set with those SASL credentials, so the broker's ACLs decide
for that user. Here a stand-in middleware sets the scope from a test header, against a broker
with a SASL_PLAINTEXT listener, PLAIN users and the StandardAuthorizer.
"""

from __future__ import annotations

import httpx
import trio

from trikafka.broker import open_broker
from trikafka.rest import RestProxy
from trikafka.security.authorizer import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from trikafka.testing.thread import test_broker_config

USERS = {"alice": "alice-secret", "admin": "admin-secret"}
CONFIG = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";"
    ),
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
}
ADMIN_CLIENT = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
    'username="admin" password="admin-secret";',
}
JSON = {"Content-Type": "application/vnd.kafka.json.v2+json"}


def as_user(app):
    """What the HTTP authentication will do, from a test header instead of Basic auth."""

    async def wrapped(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            user = headers.get(b"x-test-user")
            if user is not None:
                name = user.decode()
                scope = {**scope, "trikafka.credentials": ("PLAIN", name, USERS.get(name, "wrong"))}
        await app(scope, receive, send)

    return wrapped


def grant(broker, topic: str, *operations: AclOperation) -> None:
    broker.core.acls.create(
        AclBinding(ResourceType.TOPIC, topic, PatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW)
        for op in operations
    )


async def test_each_user_is_its_own_principal_and_acls_decide():
    with trio.fail_after(60):
        async with open_broker(test_broker_config(CONFIG)) as broker, trio.open_nursery() as nursery:
            proxy = RestProxy(broker.bootstrap_servers, client_config=ADMIN_CLIENT)
            await nursery.start(proxy.run)
            transport = httpx.ASGITransport(app=as_user(proxy.app))
            async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as http:
                # No credentials: the proxy's own identity (a super user here).
                created = await http.post("/topics/secret", headers=JSON, json={"records": [{"value": 1}]})
                assert created.status_code == 200, created.text

                alice = {**JSON, "X-Test-User": "alice"}
                refused = await http.post("/topics/secret", headers=alice, json={"records": [{"value": 2}]})
                assert (refused.status_code, refused.json()["error_code"]) == (403, 40301), refused.text
                assert "not authorized" in refused.json()["message"].lower()

                grant(broker, "secret", AclOperation.DESCRIBE, AclOperation.WRITE)
                written = await http.post("/topics/secret", headers=alice, json={"records": [{"value": 3}]})
                assert written.status_code == 200, written.text
                assert written.json()["offsets"][0]["offset"] == 1

                mallory = await http.post(
                    "/topics/secret", headers={**JSON, "X-Test-User": "mallory"}, json={"records": [{"value": 4}]}
                )
                assert (mallory.status_code, mallory.json()["error_code"]) == (401, 40101), mallory.text
                assert "user 'mallory'" in mallory.json()["message"]

                v2 = {"Content-Type": "application/vnd.kafka.v2+json"}
                mine = await http.post("/consumers/ga", headers={**v2, "X-Test-User": "alice"}, json={"name": "a"})
                assert mine.status_code == 200, mine.text
                theirs = await http.get("/consumers/ga/instances/a/subscription")  # no credentials
                assert (theirs.status_code, theirs.json()["error_code"]) == (404, 40403)
                assert (await http.delete("/consumers/ga/instances/a", headers=v2)).status_code == 404
                own = await http.get("/consumers/ga/instances/a/subscription", headers={"X-Test-User": "alice"})
                assert own.status_code == 200
                bad = await http.post(
                    "/consumers/g", headers={"Content-Type": "application/vnd.kafka.v2+json", "X-Test-User": "mallory"},
                    json={"name": "m"},
                )
                assert (bad.status_code, bad.json()["error_code"]) == (401, 40101), bad.text
                assert ("g", "m") not in proxy.consumers.instances

            sets = proxy._clients._sets  # one client set per identity, reused
            assert set(sets) == {None, ("PLAIN", "alice", "alice-secret")}
            nursery.cancel_scope.cancel()
