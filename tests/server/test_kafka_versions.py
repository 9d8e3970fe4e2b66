"""Version profiles (``kafka.version``): a broker advertises what that Kafka release served.

The known ranges below are written by hand from Kafka's protocol pages and release notes
(kafka.apache.org/{28..42}/protocol, the KIPs named; for 4.3 and 4.4 the request versions
apache/kafka-site's 43/ and 44/generated/protocol_messages.html document), independently of the
generated table, so a wrong table or a wrong cut fails here.
"""

from __future__ import annotations

import datetime
import struct

import pytest
import trio
from kio.schema.api_versions.v4.request import ApiVersionsRequest as ApiVersionsV4
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12

from trikafka.config import BrokerConfig
from trikafka.config.kafka_versions import KAFKA_VERSIONS, parse_kafka_version
from trikafka.config.kafka_versions_data import RELEASES
from trikafka.errors import ConfigError, ErrorCode
from trikafka.protocol.headers import decode_response, encode_request
from trikafka.protocol.registry import IMPLEMENTED_APIS, ApiKey, ApiVersionSpec
from trikafka.server.api_table import kafka_profile, supported_apis
from trikafka.testing import open_test_broker
from trikafka.testing.frames import REGISTRY, api_versions_frame, api_versions_response, read_frames

#: release → {api key: Kafka's max version}, with the feature that moved it.
KNOWN_MAX = {
    "2.8": {ApiKey.PRODUCE: 9, ApiKey.FETCH: 12, ApiKey.METADATA: 11, ApiKey.API_VERSIONS: 3,
            ApiKey.JOIN_GROUP: 7, ApiKey.OFFSET_COMMIT: 8},
    "3.0": {ApiKey.FETCH: 12, ApiKey.METADATA: 11, ApiKey.LIST_OFFSETS: 7, ApiKey.FIND_COORDINATOR: 4},
    "3.1": {ApiKey.FETCH: 13, ApiKey.METADATA: 12},  # KIP-516 topic ids in Fetch
    "3.2": {ApiKey.JOIN_GROUP: 9, ApiKey.LEAVE_GROUP: 5, ApiKey.DESCRIBE_LOG_DIRS: 3},
    "3.3": {ApiKey.DESCRIBE_ACLS: 3, ApiKey.DESCRIBE_LOG_DIRS: 4},
    "3.4": {ApiKey.FETCH: 13, ApiKey.LIST_OFFSETS: 7},
    "3.5": {ApiKey.FETCH: 15, ApiKey.LIST_OFFSETS: 8},  # KIP-903, KIP-405
    "3.6": {ApiKey.ADD_PARTITIONS_TO_TXN: 4},  # KIP-890 part 1
    "3.7": {ApiKey.PRODUCE: 10, ApiKey.FETCH: 16, ApiKey.DESCRIBE_CLUSTER: 1},  # KIP-951, KIP-919
    "3.8": {ApiKey.PRODUCE: 11, ApiKey.INIT_PRODUCER_ID: 5, ApiKey.CONSUMER_GROUP_DESCRIBE: 0},
    "3.9": {ApiKey.FETCH: 17, ApiKey.LIST_OFFSETS: 9, ApiKey.API_VERSIONS: 4, ApiKey.FIND_COORDINATOR: 6},
    "4.0": {ApiKey.PRODUCE: 12, ApiKey.METADATA: 13, ApiKey.END_TXN: 5, ApiKey.LIST_OFFSETS: 10},
    "4.1": {ApiKey.PRODUCE: 13, ApiKey.FETCH: 18, ApiKey.SHARE_FETCH: 1},  # KIP-516, KIP-1166, KIP-932
    "4.2": {ApiKey.LIST_OFFSETS: 11, ApiKey.OFFSET_COMMIT: 10, ApiKey.SHARE_FETCH: 2},
    "4.3": {ApiKey.API_VERSIONS: 4, ApiKey.TXN_OFFSET_COMMIT: 5, ApiKey.DESCRIBE_LOG_DIRS: 5,  # 4.3 page
            ApiKey.DELETE_GROUPS: 2, ApiKey.INIT_PRODUCER_ID: 5, ApiKey.SHARE_FETCH: 2, ApiKey.FETCH: 18},
    "4.4": {ApiKey.API_VERSIONS: 5, ApiKey.TXN_OFFSET_COMMIT: 6, ApiKey.DESCRIBE_LOG_DIRS: 5,  # 4.4 page
            ApiKey.DELETE_GROUPS: 3, ApiKey.INIT_PRODUCER_ID: 5, ApiKey.SHARE_FETCH: 2, ApiKey.PRODUCE: 13},
}
#: APIs a release did not serve at all (so a profile must not advertise them).
KNOWN_ABSENT = {
    "2.8": (ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.DESCRIBE_TOPIC_PARTITIONS),
    "3.7": (ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.DESCRIBE_TOPIC_PARTITIONS),
    "3.9": (ApiKey.SHARE_GROUP_HEARTBEAT,),
    "4.0": (ApiKey.SHARE_FETCH,),  # KIP-932 was early access: not advertised
    "4.3": (93, 94, 71, 72),  # StreamsGroupTopologyDescriptionUpdate, UnregisterController came in 4.4; telemetry
    "4.4": (71, 72),  # telemetry: advertised only with a client-telemetry reporter
}
#: 4.0 removed old versions (KIP-896): the minimums it served.
KNOWN_MIN = {
    "4.0": {ApiKey.FETCH: 4, ApiKey.LIST_OFFSETS: 1, ApiKey.OFFSET_COMMIT: 2},
    "4.2": {ApiKey.SHARE_GROUP_HEARTBEAT: 1, ApiKey.SHARE_FETCH: 1},  # 4.2 page: share groups from v1
    # share groups' v0 is gone (the pages document v1 on); Produce still advertised from 0 (KAFKA-18659)
    "4.3": {ApiKey.SHARE_GROUP_HEARTBEAT: 1, ApiKey.SHARE_FETCH: 1, ApiKey.PRODUCE: 0, ApiKey.FETCH: 4},
    "4.4": {ApiKey.SHARE_GROUP_DESCRIBE: 1, ApiKey.SHARE_ACKNOWLEDGE: 1, ApiKey.PRODUCE: 0, ApiKey.FETCH: 4},
}
#: APIs 4.4 has that 4.3 has not (request versions on the two pages): key → (lowest, highest).
NEW_IN_4_4 = {93: (0, 0), 94: (0, 0)}

#: release → feature → ((supported min, max), level a newly formatted cluster finalizes, None: not finalized),
#: typed by hand from Kafka's pull requests and notes (not from the generator's table):
#: metadata.version 4.0-IV3 = 25 (apache/kafka#18902), 4.1-IV1 = 27 (#20948), 4.2-IV1 = 29 (#20972: share and
#: streams groups on by default), 4.3-IV0 = 30 (43/ upgrade notes), 4.4-IV2 = 33 (#23235), all from 3.3-IV3 = 7;
#: share.version 2 in 4.4 (KIP-1191, #22803, #23235); ELR on by default from 4.1 (KIP-966); share.version a
#: preview off by default in 4.1 (#19831).
_COMMON_4X = {"kraft.version": ((0, 1), None), "group.version": ((0, 1), 1), "transaction.version": ((0, 2), 2)}
KNOWN_FEATURES = {
    "3.9": {"metadata.version": ((1, 21), 21), "kraft.version": ((0, 1), None)},
    "4.0": {"metadata.version": ((7, 25), 25), **_COMMON_4X, "eligible.leader.replicas.version": ((0, 1), None)},
    "4.1": {"metadata.version": ((7, 27), 27), **_COMMON_4X, "eligible.leader.replicas.version": ((0, 1), 1),
            "share.version": ((0, 1), None)},  # streams.version: early access behind unstable features (#20241)
    "4.2": {"metadata.version": ((7, 29), 29), **_COMMON_4X, "eligible.leader.replicas.version": ((0, 1), 1),
            "share.version": ((0, 1), 1), "streams.version": ((0, 1), 1)},
    "4.3": {"metadata.version": ((7, 30), 30), **_COMMON_4X, "eligible.leader.replicas.version": ((0, 1), 1),
            "share.version": ((0, 1), 1), "streams.version": ((0, 1), 1)},
    "4.4": {"metadata.version": ((7, 33), 33), **_COMMON_4X, "eligible.leader.replicas.version": ((0, 1), 1),
            "share.version": ((0, 2), 2), "streams.version": ((0, 1), 1)},
}


def test_known_releases_are_all_profiles() -> None:
    assert KAFKA_VERSIONS == tuple(KNOWN_MAX)


@pytest.mark.parametrize("release", KAFKA_VERSIONS)
def test_table_matches_the_known_ranges(release: str) -> None:
    apis = RELEASES[release]["apis"]
    for key, top in KNOWN_MAX[release].items():
        assert apis[key][1] == top, (release, key.name)
    for key in KNOWN_ABSENT.get(release, ()):
        assert key not in apis, (release, key)
    for key, low in KNOWN_MIN.get(release, {}).items():
        assert apis[key][0] == low, (release, key.name)


@pytest.mark.parametrize("release", KAFKA_VERSIONS)
async def test_profile_advertises_the_release_cut_to_what_trikafka_serves(release: str) -> None:
    config = BrokerConfig(kafka_version=release, group_coordinator_rebalance_protocols="classic,consumer")
    expected = {}
    for key, (lo, hi) in RELEASES[release]["apis"].items():
        if key in IMPLEMENTED_APIS and max(lo, IMPLEMENTED_APIS[key][0]) <= min(hi, IMPLEMENTED_APIS[key][1]):
            expected[key] = (max(lo, IMPLEMENTED_APIS[key][0]), min(hi, IMPLEMENTED_APIS[key][1]))
    assert supported_apis(config) == expected
    for key, top in KNOWN_MAX[release].items():  # every API named above is one trikafka serves
        assert expected[key][1] == min(top, IMPLEMENTED_APIS[key][1])
    profile = kafka_profile(config)
    assert profile is not None
    lacking = [k for k in RELEASES[release]["apis"] if k not in expected]
    assert len([g for g in profile.gaps if " served as " not in g and not g.startswith("feature")]) == len(lacking)

    async with open_test_broker(kafka_version=release) as tb:
        stream = await tb.connect()
        await stream.send_all(api_versions_frame(1))
        _, body = api_versions_response((await read_frames(stream, 1))[0])
        assert body.error_code == ErrorCode.none
        advertised = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        listed = dict(supported_apis(tb.broker.config))
        if release.startswith("4."):  # Produce listed from v0, served from v3 (KAFKA-18659)
            listed[ApiKey.PRODUCE] = (0, listed[ApiKey.PRODUCE][1])
        assert advertised == listed
        features = {f.name: (f.min_version, f.max_version) for f in body.supported_features}
        known = {n: r for n, (r, _) in RELEASES[release]["features"].items() if r[1] >= 0 and r[0] > 0}
        assert features == known  # ApiVersions v3 omits minimums of 0 (KAFKA-17011)
        finalized = {f.name: f.max_version_level for f in body.finalized_features}
        assert finalized == {n: lv for n, (r, lv) in RELEASES[release]["features"].items()
                             if lv is not None and r[1] >= 0}


async def test_api_versions_above_the_profile_falls_back_to_v0() -> None:
    """Kafka 2.8 served ApiVersions v0-3: a v4 request gets a v0 answer with
    UNSUPPORTED_VERSION and the range it does serve (KIP-511)."""
    async with open_test_broker(kafka_version="2.8") as tb:
        stream = await tb.connect()
        request = ApiVersionsV4(client_software_name="test", client_software_version="1")
        await stream.send_all(encode_request(REGISTRY.get(ApiKey.API_VERSIONS, 4), 7, request, "raw"))
        correlation_id, body = decode_response(REGISTRY.get(ApiKey.API_VERSIONS, 0), (await read_frames(stream, 1))[0])
        assert correlation_id == 7
        assert body.error_code == ErrorCode.unsupported_version
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(ApiKey.API_VERSIONS, 0, 3)]


async def test_a_version_above_the_profile_is_refused_and_the_connection_closed() -> None:
    """Kafka 2.8 served Metadata up to v11: v12 is UNSUPPORTED_VERSION, connection closed."""
    async with open_test_broker(kafka_version="2.8") as tb:
        stream = await tb.connect()
        body = MetadataV12(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        await stream.send_all(encode_request(REGISTRY.get(ApiKey.METADATA, 12), 1, body, "raw"))
        with trio.fail_after(5):
            assert await stream.receive_some(65536) == b""


@pytest.mark.parametrize("release", ["4.0", "4.4"])
async def test_kafka_4_lists_produce_from_v0_and_closes_a_connection_that_uses_v0_to_v2(release: str) -> None:
    """Kafka 4 removed Produce v0-2 (KIP-896) but lists Produce from v0, for librdkafka's sake
    (KAFKA-18659): a v2 request closes the connection, a v3 request is served."""
    async with open_test_broker(kafka_version=release) as tb:
        stream = await tb.connect()
        await stream.send_all(api_versions_frame(3))
        _, body = api_versions_response((await read_frames(stream, 1))[0])
        advertised = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        assert advertised[ApiKey.PRODUCE][0] == 0
        assert not [g for g in kafka_profile(tb.broker.config).gaps if g.startswith("Produce")]
        # Produce v2, by hand (kio reads v3 on): header v1 (key, version, correlation id,
        # client id), then acks, timeout and an empty topic array.
        payload = struct.pack(">hhih3shii", ApiKey.PRODUCE, 2, 5, 3, b"raw", 1, 1000, 0)
        await stream.send_all(struct.pack(">i", len(payload)) + payload)
        with trio.fail_after(5):
            assert await stream.receive_some(65536) == b""
        stream = await tb.connect()
        v3 = ApiVersionSpec.resolve(ApiKey.PRODUCE, 3)
        request = v3.request_type(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=1), topic_data=())
        await stream.send_all(encode_request(v3, 6, request, "raw"))
        correlation_id, answer = decode_response(v3, (await read_frames(stream, 1))[0])
        assert correlation_id == 6 and list(answer.responses) == []


async def test_kafka_3_profiles_list_produce_from_what_trikafka_serves() -> None:
    """Kafka 3.x served Produce v0-2; trikafka does not, so a 3.x profile lists Produce from v3
    and names the gap."""
    async with open_test_broker(kafka_version="3.9") as tb:
        stream = await tb.connect()
        await stream.send_all(api_versions_frame(3))
        _, body = api_versions_response((await read_frames(stream, 1))[0])
        advertised = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        assert advertised[ApiKey.PRODUCE][0] == 3
        assert [g for g in kafka_profile(tb.broker.config).gaps if g.startswith("Produce")]


def test_profile_logs_one_info_line(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from trikafka.server.api_table import log_kafka_profile

    with caplog.at_level(logging.INFO):
        log_kafka_profile(BrokerConfig(kafka_version="3.9"), logging.getLogger("test"))
        log_kafka_profile(BrokerConfig(), logging.getLogger("test"))
    assert len(caplog.records) == 1
    line = caplog.records[0].getMessage()
    assert line.startswith("kafka.version 3.9: advertising")
    assert "AlterReplicaLogDirs v0-2" in line and "Produce v0-11 served as v3-11" in line


@pytest.mark.parametrize("value", ["2.7", "4.5", "3", "3.9.x", "latest"])
def test_a_bad_kafka_version_names_the_value_and_the_allowed_ones(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_mapping({"kafka.version": value})
    text = str(info.value)
    assert "kafka.version" in text and repr(value) in text and "2.8, 3.0" in text and "4.2, 4.3, 4.4" in text


def test_a_patch_level_is_the_minor_release() -> None:
    assert parse_kafka_version("3.9.1") == "3.9"
    assert parse_kafka_version("4.4.0") == "4.4" and BrokerConfig(kafka_version="4.3").kafka_version == "4.3"
    assert BrokerConfig(kafka_version=3.9).kafka_version == "3.9"
    assert BrokerConfig().kafka_version is None


async def test_every_broker_of_a_cluster_speaks_as_the_release(autojump_clock) -> None:
    from tests.cluster.support import connected, request
    from trikafka import open_cluster

    async with open_cluster(brokers=2, transport="memory", kafka_version="3.0") as cluster:
        for node_id in cluster.broker_ids():
            async with connected(cluster, node_id) as client:
                answer = await client.request(request(18, 3, client_software_name="t", client_software_version="1"))
                advertised = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
                assert advertised[ApiKey.FETCH] == (4, 12) and advertised[ApiKey.METADATA] == (0, 11)
                assert ApiKey.DESCRIBE_TOPIC_PARTITIONS not in advertised


@pytest.mark.parametrize("release", sorted(KNOWN_FEATURES))
def test_features_match_the_known_levels(release: str) -> None:
    assert RELEASES[release]["features"] == KNOWN_FEATURES[release]
    profile = kafka_profile(BrokerConfig(kafka_version=release))
    assert profile is not None and not [g for g in profile.gaps if g.startswith("feature")]
    assert profile.finalized_features == {n: lv for n, (_, lv) in KNOWN_FEATURES[release].items() if lv is not None}


@pytest.mark.parametrize("release", ["4.2", "4.3", "4.4"])
async def test_kafka_4_x_features_over_api_versions_v4(release: str) -> None:
    """ApiVersions v4 carries every supported range (minimum 0 too) and the levels a new cluster of
    the release finalizes; from 4.2 share groups are on by default, so the share-group gate opens."""
    async with open_test_broker(kafka_version=release) as tb:
        stream = await tb.connect()
        request = ApiVersionsV4(client_software_name="test", client_software_version="1")
        await stream.send_all(encode_request(REGISTRY.get(ApiKey.API_VERSIONS, 4), 5, request, "raw"))
        _, body = decode_response(REGISTRY.get(ApiKey.API_VERSIONS, 4), (await read_frames(stream, 1))[0])
        assert body.error_code == ErrorCode.none
        supported = {f.name: (f.min_version, f.max_version) for f in body.supported_features}
        assert supported == {n: r for n, (r, _) in KNOWN_FEATURES[release].items()}
        finalized = {f.name: (f.min_version_level, f.max_version_level) for f in body.finalized_features}
        assert finalized == {n: (lv, lv) for n, (_, lv) in KNOWN_FEATURES[release].items() if lv is not None}
        assert tb.broker.core.features.share_groups_enabled


def test_4_4_adds_two_apis_to_4_3() -> None:
    assert {k: RELEASES["4.4"]["apis"][k] for k in NEW_IN_4_4} == NEW_IN_4_4
    assert not set(NEW_IN_4_4) & set(RELEASES["4.3"]["apis"])


async def test_kafka_4_4_over_the_wire() -> None:
    """ApiVersions v3 from a 4.4 profile, typed from the 4.4 page and cut to trikafka: ApiVersions 0-5
    served as 0-4, TxnOffsetCommit 0-6 as 0-5, DeleteGroups 0-3 as 0-2; share groups from v1; v3 carries
    only the features whose minimum is above 0 (metadata.version 7-33), all finalized levels; the two new
    APIs are gaps, named."""
    async with open_test_broker(kafka_version="4.4") as tb:
        stream = await tb.connect()
        await stream.send_all(api_versions_frame(3))
        correlation_id, body = api_versions_response((await read_frames(stream, 1))[0])
        assert correlation_id == 3 and body.error_code == ErrorCode.none
        advertised = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        assert advertised[ApiKey.API_VERSIONS] == (0, 4)
        assert advertised[ApiKey.TXN_OFFSET_COMMIT] == (0, 5)
        assert advertised[ApiKey.DELETE_GROUPS] == (0, 2)
        assert advertised[ApiKey.DESCRIBE_LOG_DIRS] == (1, 5)
        assert advertised[ApiKey.INIT_PRODUCER_ID] == (0, 5)  # v6 is unstable on the 4.4 page
        assert advertised[ApiKey.SHARE_GROUP_HEARTBEAT] == (1, 1) and advertised[ApiKey.SHARE_FETCH] == (1, 2)
        assert advertised[ApiKey.PRODUCE] == (0, 13) and advertised[ApiKey.FETCH] == (4, 18)
        assert not {93, 94, 71, 72} & set(advertised)
        supported = [(f.name, f.min_version, f.max_version) for f in body.supported_features]
        assert supported == [("metadata.version", 7, 33)]
        finalized = {f.name: f.max_version_level for f in body.finalized_features}
        assert finalized == {"metadata.version": 33, "group.version": 1, "transaction.version": 2,
                             "eligible.leader.replicas.version": 1, "share.version": 2, "streams.version": 1}
        gaps = kafka_profile(tb.broker.config).gaps
        assert "StreamsGroupTopologyDescriptionUpdate v0-0" in gaps and "UnregisterController v0-0" in gaps
        assert "ApiVersions v0-5 served as v0-4" in gaps and not [g for g in gaps if g.startswith("feature")]


def test_the_docs_table_of_profiles_is_built_from_the_profiles():
    """docs/version-profiles.md's per-release table is generated (docs/hooks/generated.py): an
    API trikafka comes to serve leaves its gaps, as UpdateFeatures and ListConfigResources did."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).parents[2]
    spec = importlib.util.spec_from_file_location("generated", root / "docs" / "hooks" / "generated.py")
    generated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generated)
    page = generated.expand((root / "docs" / "version-profiles.md").read_text())
    rows = {line.split(" | ")[0].lstrip("| "): line for line in page.splitlines() if line.startswith("| 4.4 ")}
    assert "StreamsGroupHeartbeat v0-1" in rows["4.4"]  # a gap the profile reports
    assert "UpdateFeatures" not in rows["4.4"] and "ListConfigResources" not in rows["4.4"]  # served now
    assert "<!-- generated" not in page
