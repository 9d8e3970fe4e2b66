"""ConsumerProtocol bytes: the same as other clients write and read, every version."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trikafka.client.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    TopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

SUBSCRIPTION = Subscription(
    topics=("a", "b"),
    user_data=b"ud",
    owned_partitions=(TopicPartition("a", 1), TopicPartition("a", 0)),
    generation_id=5,
    rack_id="r",
)


def test_v0_bytes_are_what_aiokafka_writes():
    from aiokafka.coordinator.protocol import (
        ConsumerProtocolMemberAssignment,
        ConsumerProtocolMemberMetadata,
    )

    ours = encode_subscription(Subscription(topics=("a", "b"), user_data=b""), version=0)
    assert ours == ConsumerProtocolMemberMetadata(0, ["a", "b"], b"").encode()
    assignment = encode_assignment(Assignment((TopicPartition("a", 0), TopicPartition("a", 2)), b""), 0)
    assert assignment == ConsumerProtocolMemberAssignment(0, [("a", [0, 2])], b"").encode()


def test_v3_bytes_are_what_kafka_python_writes_and_reads():
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as Theirs

    theirs = Theirs(
        version=3, topics=["a"], user_data=b"", generation_id=4, rack_id=None,
        owned_partitions=[Theirs.TopicPartition(topic="a", partitions=[1])],
    ).encode()
    ours = Subscription(("a",), b"", (TopicPartition("a", 1),), 4)
    assert encode_subscription(ours, 3) == theirs
    assert decode_subscription(theirs) == ours
    for version in range(4):
        decoded = Theirs.decode(encode_subscription(SUBSCRIPTION, version))
        assert decoded.version == version and list(decoded.topics) == ["a", "b"]


def test_known_v3_layout():
    assert encode_subscription(SUBSCRIPTION, 3).hex() == (
        "0003"  # version
        "00000002" "000161" "000162"  # topics
        "00000002" "7564"  # user data
        "00000001" "000161" "00000002" "00000001" "00000000"  # owned: a [1, 0]
        "00000005"  # generation
        "000172"  # rack
    )


@pytest.mark.parametrize("version", range(4))
def test_each_version_keeps_its_fields(version):
    decoded = decode_subscription(encode_subscription(SUBSCRIPTION, version), "static-1")
    assert decoded.topics == ("a", "b") and decoded.user_data == b"ud"
    assert decoded.group_instance_id == "static-1"
    assert decoded.owned_partitions == (SUBSCRIPTION.owned_partitions if version >= 1 else ())
    assert decoded.generation_id == (5 if version >= 2 else -1)
    assert decoded.rack_id == ("r" if version >= 3 else None)


def test_newer_version_is_read_with_our_newest_schema():
    data = bytearray(encode_subscription(SUBSCRIPTION, 3))
    data[0:2] = (7).to_bytes(2, "big")
    data += b"\x00\x00\x00\x09"  # a field a future version appended
    assert decode_subscription(bytes(data)).rack_id == "r"


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xff\x00\x00", b"\x00\x00\x00\x00\x00\x05"])
def test_garbage_is_a_protocol_error(data):
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)


def test_empty_assignment_means_nothing():
    assert decode_assignment(b"") == Assignment(())


partitions = st.lists(
    st.builds(TopicPartition, st.sampled_from(["x", "y", "zz"]), st.integers(0, 50)), unique=True, max_size=12
)


@given(partitions, st.one_of(st.none(), st.binary(max_size=8)), st.integers(0, 3))
def test_assignment_round_trip(parts, user_data, version):
    grouped = tuple(sorted(parts))
    decoded = decode_assignment(encode_assignment(Assignment(grouped, user_data), version))
    assert sorted(decoded.partitions) == list(grouped)
    assert decoded.user_data == user_data


@given(st.binary(max_size=40))
def test_any_bytes_decode_or_raise_the_protocol_error(data):
    for decode in (decode_subscription, decode_assignment):
        try:
            decode(data)
        except ConsumerProtocolError:
            pass
