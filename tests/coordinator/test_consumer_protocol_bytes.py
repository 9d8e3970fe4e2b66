"""The coordinator's reading of the embedded consumer protocol agrees with the client codec
(kio's schemas, the bytes Java and librdkafka write), at every version."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trikafka.client.cluster import TopicPartition
from trikafka.client.consumer_protocol import (
    Subscription,
    decode_assignment,
    encode_subscription,
)
from trikafka.coordinator.classic.consumer_protocol_bytes import (
    decode_assignment as coordinator_decode_assignment,
)
from trikafka.coordinator.classic.consumer_protocol_bytes import (
    decode_subscription,
    encode_assignment,
    protocol_version,
)

topics = st.lists(st.text(alphabet="abcxyz-._", min_size=1, max_size=8), max_size=4, unique=True)
partitions = st.dictionaries(
    st.text(alphabet="abc", min_size=1, max_size=3), st.frozensets(st.integers(0, 50), min_size=1), max_size=3
)


@given(topics=topics, owned=partitions, version=st.integers(0, 3), rack=st.one_of(st.none(), st.text(max_size=5)),
       user_data=st.one_of(st.none(), st.binary(max_size=20)))
def test_subscriptions_read_as_the_client_wrote_them(topics, owned, version, rack, user_data):
    tps = tuple(TopicPartition(t, p) for t, ps in owned.items() for p in sorted(ps))
    data = encode_subscription(Subscription(tuple(topics), user_data, tps, 7, rack), version)
    read = decode_subscription(data)
    assert protocol_version(data) == version
    assert read.topics == tuple(topics)
    assert read.owned == (owned if version >= 1 else {})
    assert read.rack_id == (rack if version >= 3 else None)


@given(assignment=partitions, version=st.integers(0, 3))
def test_assignments_read_by_the_client(assignment, version):
    data = encode_assignment(assignment, version)
    decoded = decode_assignment(data)
    assert {(tp.topic, tp.partition) for tp in decoded.partitions} == {
        (t, p) for t, ps in assignment.items() for p in ps
    }
    assert coordinator_decode_assignment(data) == assignment
    assert protocol_version(data) == version


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xff", b"\x00\x00\x00\x00\x00\x05\x00\x01a"])
def test_bytes_that_do_not_parse_are_a_value_error(data):
    with pytest.raises(ValueError):
        decode_subscription(data)
