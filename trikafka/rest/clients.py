"""The proxy's Kafka clients: one producer and admin client per caller, kept open and reused.

Every Kafka call the proxy makes goes through trikafka's own Trio client, so the broker
treats it as it treats any client: ACLs, quotas, record validation and transactions apply
unchanged. A request carrying credentials (``scope["trikafka.credentials"]``, a
``(mechanism, username, password)`` tuple set by the HTTP authentication in front of the
proxy) gets that user's client set, opened on first use with those SASL credentials and
reused after; a request without gets the proxy's own set. Each set lives in a task of the
proxy's nursery and closes when the proxy stops.

A new set is checked before it is kept: one Metadata round trip, bounded. Credentials the
broker refuses are a 401 (40101) and the set is closed at once — a client left retrying a
wrong password would knock on the broker forever; an unreachable broker is a 50003.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import trio

from trikafka.client import Admin, KafkaError, Producer, open_admin, open_producer
from trikafka.errors import ErrorCode
from trikafka.rest import errors

__all__ = ["ClientSet", "Clients", "Credentials", "credentials_config"]

#: (SASL mechanism, username, password) as the authentication layer found them.
Credentials = tuple[str, str, str]

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def credentials_config(base: Mapping[str, Any], credentials: Credentials | None) -> dict[str, Any]:
    """Client keys for a caller: ``base``, with SASL for ``credentials`` when there are some."""
    config = dict(base)
    if credentials is None:
        return config
    mechanism, username, password = credentials
    module = _LOGIN_MODULES.get(mechanism.upper(), _LOGIN_MODULES["PLAIN"])
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    config["security.protocol"] = "SASL_SSL" if protocol in ("SSL", "SASL_SSL") else "SASL_PLAINTEXT"
    config["sasl.mechanism"] = mechanism.upper()
    quoted_user, quoted_password = (_jaas_quote(username), _jaas_quote(password))
    config["sasl.jaas.config"] = f"{module} required username={quoted_user} password={quoted_password};"
    return config


def _jaas_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@attrs.define
class ClientSet:
    producer: Producer
    admin: Admin
    config: dict[str, Any]
    #: Set to close the set (its task leaves the clients' context managers).
    closing: trio.Event = attrs.field(factory=trio.Event)


class Clients:
    """Client sets by credentials, opened in ``nursery`` (the proxy's) on first use."""

    def __init__(
        self, bootstrap: Any, base_config: Mapping[str, Any], nursery: trio.Nursery, *, check_timeout_s: float = 10.0
    ) -> None:
        self.bootstrap = bootstrap
        self.check_timeout_s = check_timeout_s
        self.base_config = dict(base_config)
        self.nursery = nursery
        self._sets: dict[Credentials | None, ClientSet] = {}
        self._locks: dict[Credentials | None, trio.Lock] = {}

    async def get(self, credentials: Credentials | None) -> ClientSet:
        found = self._sets.get(credentials)
        if found is not None:
            return found
        lock = self._locks.setdefault(credentials, trio.Lock())
        async with lock:
            found = self._sets.get(credentials)
            if found is None:
                config = credentials_config(self.base_config, credentials)
                found = await self.nursery.start(self._serve, config, name="rest-proxy-clients")
                who = f"user {credentials[1]!r}" if credentials else "the proxy's own client"
                await check_credentials(found.admin.client, self.check_timeout_s, who, found.closing)
                self._sets[credentials] = found
            return found

    async def _serve(self, config: dict[str, Any], *, task_status: trio.TaskStatus[ClientSet]) -> None:
        producer_config = {"linger.ms": 0, **config}
        async with (
            open_producer(self.bootstrap, **producer_config) as producer,
            open_admin(self.bootstrap, **config) as admin,
        ):
            found = ClientSet(producer, admin, config)
            task_status.started(found)
            await found.closing.wait()


async def check_credentials(client: Any, timeout_s: float, who: str, failed: trio.Event) -> None:
    """One bounded Metadata round trip on a new client (set, or consumer instance): refused
    credentials are a 401 (40101) and ``failed`` is set, so nothing is left retrying."""
    try:
        with trio.fail_after(timeout_s):
            await client.refresh_metadata()
    except KafkaError as exc:
        failed.set()
        if exc.error_code == ErrorCode.sasl_authentication_failed:
            raise errors.RestError(401, 40101, f"Authentication failed for {who}: {exc}") from None
        raise
    except trio.TooSlowError:
        failed.set()
        raise errors.RestError(
            500, errors.KAFKA_RETRIABLE_ERROR,
            f"Retriable Kafka error: no answer from the cluster within {timeout_s:g} s for {who}",
        ) from None
