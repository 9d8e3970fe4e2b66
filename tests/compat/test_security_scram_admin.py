"""SCRAM users through the admin APIs (KIP-554), with confluent-kafka's AdminClient: created
with AlterUserScramCredentials, listed by DescribeUserScramCredentials, used to authenticate,
kept across a restart with a data directory, and deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from trikafka.security.sasl.credentials import CREDENTIALS_FILE
from trikafka.testing import ThreadedBroker

from .support import TIMEOUT

pytestmark = pytest.mark.compat


def _config(data_dir: Path) -> dict[str, str]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(data_dir),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }


def _admin(broker: ThreadedBroker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.broker.endpoints['PLAINTEXT'].port}"})


def _authenticates(broker: ThreadedBroker, user: str, password: str) -> bool:
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    producer = Producer({
        "bootstrap.servers": f"127.0.0.1:{broker.broker.endpoints['SASL_PLAINTEXT'].port}",
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user, "sasl.password": password, "error_cb": errors.append,
    })
    try:
        producer.list_topics(timeout=10)
        return True
    except Exception:  # noqa: BLE001 - librdkafka's KafkaException
        for _ in range(40):  # the reason comes through error_cb, on poll
            if errors:
                break
            producer.poll(0.25)
        assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
        return False


def test_scram_users_from_the_admin_api_survive_a_restart(tmp_path):
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    with ThreadedBroker(_config(tmp_path)) as broker:
        admin = _admin(broker)
        assert not _authenticates(broker, "bob", "bob-secret")
        futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("bob", info, b"bob-secret")])
        futures["bob"].result(TIMEOUT)
        described = admin.describe_user_scram_credentials(["bob"])["bob"].result(TIMEOUT)
        assert [(c.mechanism, c.iterations) for c in described.scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_512, 8192)
        ]
        assert _authenticates(broker, "bob", "bob-secret")
        assert not _authenticates(broker, "bob", "wrong")
    stored = (tmp_path / CREDENTIALS_FILE).read_text()
    assert "bob" in stored and "bob-secret" not in stored  # salted credentials only
    with ThreadedBroker(_config(tmp_path)) as broker:
        assert _authenticates(broker, "bob", "bob-secret")
        admin = _admin(broker)
        deletion = UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)
        admin.alter_user_scram_credentials([deletion])["bob"].result(TIMEOUT)
        with pytest.raises(Exception, match="does not exist"):  # noqa: PT011 - KafkaException
            admin.describe_user_scram_credentials(["bob"])["bob"].result(TIMEOUT)
        assert not _authenticates(broker, "bob", "bob-secret")


def test_too_few_iterations_is_unacceptable(tmp_path):
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    with ThreadedBroker(_config(tmp_path)) as broker:
        upsertion = UserScramCredentialUpsertion("eve", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"x")
        with pytest.raises(Exception, match="Too few iterations"):  # noqa: PT011 - KafkaException
            admin = _admin(broker)  # kept: a collected client destroys its futures
            admin.alter_user_scram_credentials([upsertion])["eve"].result(TIMEOUT)


def test_describing_every_user_and_an_unknown_one(tmp_path):
    """No user list describes every user (Kafka's ScramImage.describe); a user that has no
    credential is RESOURCE_NOT_FOUND on its own, beside the ones found."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    with ThreadedBroker(_config(tmp_path)) as broker:
        admin = _admin(broker)
        upsertions = [
            UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"a"),
            UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"b"),
        ]
        for future in admin.alter_user_scram_credentials(upsertions).values():
            future.result(TIMEOUT)
        every = admin.describe_user_scram_credentials().result(TIMEOUT)
        assert {user: [(c.mechanism, c.iterations) for c in d.scram_credential_infos] for user, d in every.items()} == {
            "alice": [(ScramMechanism.SCRAM_SHA_256, 4096)],
            "bob": [(ScramMechanism.SCRAM_SHA_512, 8192)],
        }
        futures = admin.describe_user_scram_credentials(["bob", "nobody"])
        assert futures["bob"].result(TIMEOUT).user == "bob"
        with pytest.raises(KafkaException) as caught:
            futures["nobody"].result(TIMEOUT)
        assert caught.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
        assert "does not exist: nobody" in caught.value.args[0].str()
