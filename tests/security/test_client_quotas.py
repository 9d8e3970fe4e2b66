"""Client quotas: Kafka's rate and throttle arithmetic, its precedence, its validation, and
KIP-219 throttling through the broker — in virtual time over the in-memory transport.

Every expected throttle time below is worked out by hand from Kafka's formula
``(observed - quota) / quota * window``, where the window of a rate that has seen fewer than
``quota.window.num - 1`` full samples is padded up to that many (10 s with the defaults).
"""

from __future__ import annotations

import pytest
import trio

from tests.server.test_topics_and_data import fetch_request
from trikafka.errors import ErrorCode
from trikafka.network.connection_state import MuteState
from trikafka.protocol.entities import build
from trikafka.protocol.headers import encode_request
from trikafka.protocol.records import build_batch
from trikafka.protocol.registry import ApiRegistry
from trikafka.security.client_quotas import ClientQuotaManager
from trikafka.security.quota_rate import SampledRate
from trikafka.security.quota_store import ClientQuotas, QuotaOp
from trikafka.testing import open_test_broker

REGISTRY = ApiRegistry()


def request(api_key: int, version: int, **fields):
    return build(REGISTRY.get(api_key, version).request_type, **fields)


# -- the arithmetic ---------------------------------------------------------------------------


def test_a_first_burst_is_measured_over_ten_padded_windows():
    rate = SampledRate(11, 1000)
    rate.record(5000, 0)
    assert rate.window_size(0) == 10_000
    assert rate.measure(0) == 500.0
    rate.record(2000, 3500)
    assert rate.window_size(3500) == 3500 + 7000  # three full windows passed: seven padded
    assert rate.measure(3500) == pytest.approx(7000 / 10.5)


def test_obsolete_samples_are_forgotten():
    rate = SampledRate(11, 1000)
    rate.record(5000, 0)
    assert rate.measure(11_000) == 0.0  # no event for samples * window: reset


def test_throttle_time_is_kafkas_formula():
    produce = ClientQuotaManager("producer_byte_rate")
    produce.update_quota((("client-id", "p"),), 1000)
    assert produce.record_and_get_throttle_time_ms("ANONYMOUS", "p", 5000, 0) == 0  # 500 B/s
    # 12000 B over 10 s = 1200 B/s: (1200 - 1000) / 1000 * 10000 ms
    assert produce.record_and_get_throttle_time_ms("ANONYMOUS", "p", 7000, 0) == 2000
    assert produce.record_and_get_throttle_time_ms("ANONYMOUS", "other", 7000, 0) == 0  # no quota


def test_the_request_quota_caps_a_throttle_at_one_window():
    quotas = ClientQuotas()
    quotas.alter([([("user", None)], [QuotaOp("request_percentage", 1.0, False)])], False)
    # 500 ms of handler time = 50 % over 10 s = 5 %/s: (5 - 1) / 1 * 10000 ms, capped at 1000
    assert quotas.request.record_and_get_throttle_time_ms("alice", "c", 50.0, 0) == 1000


def test_kafkas_precedence_and_shared_rates():
    manager = ClientQuotaManager("producer_byte_rate")
    levels = {
        (("client-id", None),): 1,
        (("client-id", "c1"),): 2,
        (("user", None),): 3,
        (("client-id", None), ("user", None)): 4,
        (("client-id", "c1"), ("user", None)): 5,
        (("user", "alice"),): 6,
        (("client-id", None), ("user", "alice")): 7,
        (("client-id", "c1"), ("user", "alice")): 8,
    }
    for entity, bound in levels.items():
        manager.update_quota(entity, bound)
    assert manager.quota("alice", "c1") == 8
    manager.update_quota((("client-id", "c1"), ("user", "alice")), None)
    assert manager.quota("alice", "c1") == 7
    manager.update_quota((("client-id", None), ("user", "alice")), None)
    assert manager.quota("alice", "c1") == 6
    assert manager.metric_tags("alice", "c1") == ("alice", "")  # one rate for all her clients
    manager.update_quota((("user", "alice"),), None)
    assert manager.quota("alice", "c1") == 5
    assert manager.quota("bob", "c2") == 4
    manager.update_quota((("client-id", "c1"), ("user", None)), None)
    manager.update_quota((("client-id", None), ("user", None)), None)
    assert manager.quota("alice", "c1") == 3
    manager.update_quota((("user", None),), None)
    assert manager.quota("alice", "c1") == 2
    assert manager.metric_tags("alice", "c1") == ("", "c1")
    assert manager.quota("alice", "c9") == 1


def test_a_user_quota_is_one_rate_for_all_of_its_client_ids():
    manager = ClientQuotaManager("producer_byte_rate")
    manager.update_quota((("user", "alice"),), 1000)
    assert manager.record_and_get_throttle_time_ms("alice", "a", 6000, 0) == 0
    assert manager.record_and_get_throttle_time_ms("alice", "b", 6000, 0) == 2000


# -- the store: AlterClientQuotas / DescribeClientQuotas semantics ------------------------------


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ([], [QuotaOp("producer_byte_rate", 1, False)], "Invalid empty client quota entity"),
        ([("group", "g")], [QuotaOp("producer_byte_rate", 1, False)], "Unhandled client quota entity type: group"),
        ([("user", "")], [QuotaOp("producer_byte_rate", 1, False)], "Empty user not supported"),
        ([("user", "a")], [QuotaOp("bogus", 1, False)], "Invalid configuration key bogus"),
        ([("user", "a")], [QuotaOp("producer_byte_rate", 1.5, False)], "producer_byte_rate must be a Long value"),
        ([("user", "a")], [QuotaOp("consumer_byte_rate", 0, False)], "must be greater than 0"),
        ([("user", "a")], [QuotaOp("producer_byte_rate", 1, False), QuotaOp("producer_byte_rate", 2, False)],
         "Duplicate quota key producer_byte_rate"),
        ([("ip", "127.0.0.1")], [QuotaOp("connection_creation_rate", 1, False)], "ip quota entities"),
        ([("user", "a")], [QuotaOp("controller_mutation_rate", 1, False)], "not supported by this broker"),
    ],
)
def test_bad_alterations_are_refused_with_kafkas_message(entity, ops, message):
    quotas = ClientQuotas()
    [error] = quotas.alter([(entity, ops)], False)
    assert error is not None and error.error == "invalid_request"
    assert message in str(error)
    assert quotas.describe([], False) == []


def test_validate_only_changes_nothing_and_a_bad_entity_spares_the_others():
    quotas = ClientQuotas()
    good = ([("user", "a")], [QuotaOp("producer_byte_rate", 1024, False)])
    bad = ([("user", "b")], [QuotaOp("nope", 1, False)])
    assert [e is None for e in quotas.alter([good, bad], True)] == [True, False]
    assert quotas.describe([], False) == []
    assert not quotas.enabled
    quotas.alter([good, bad], False)
    assert quotas.describe([], False) == [((("user", "a"),), {"producer_byte_rate": 1024.0})]
    assert quotas.produce.quota("a", "x") == 1024


class Component:
    def __init__(self, entity_type, match_type, match=None):
        self.entity_type, self.match_type, self.match = entity_type, match_type, match


def test_describe_filters_as_kafka():
    quotas = ClientQuotas()
    quotas.alter([
        ([("user", "a")], [QuotaOp("producer_byte_rate", 1, False)]),
        ([("user", None)], [QuotaOp("producer_byte_rate", 2, False)]),
        ([("user", "a"), ("client-id", "c")], [QuotaOp("request_percentage", 3.5, False)]),
        ([("client-id", "c")], [QuotaOp("consumer_byte_rate", 4, False)]),
    ], False)

    def names(components, strict=False):
        return sorted(repr(entity) for entity, _ in quotas.describe(components, strict))

    assert len(names([])) == 4 and names([], strict=True) == []
    assert names([Component("user", 0, "a")]) == sorted(
        [repr((("user", "a"),)), repr((("client-id", "c"), ("user", "a")))])
    assert names([Component("user", 0, "a")], strict=True) == [repr((("user", "a"),))]
    assert names([Component("user", 1)]) == [repr((("user", None),))]
    assert len(names([Component("user", 2)], strict=True)) == 2
    assert names([Component("client-id", 2), Component("user", 0, "a")]) == [repr((("client-id", "c"), ("user", "a")))]
    for bad, message in [
        ([Component("user", 0)], "MATCH_TYPE_EXACT, but set match string to null"),
        ([Component("user", 1, "x")], "MATCH_TYPE_DEFAULT, but also specified a match string"),
        ([Component("user", 2), Component("user", 1)], "cannot appear more than once"),
        ([Component("ip", 2), Component("user", 2)], "IP filter component should not be used"),
    ]:
        with pytest.raises(Exception, match=message):
            quotas.describe(bad, False)


def test_quotas_survive_a_restart(tmp_path):
    path = tmp_path / "quotas.json"
    ClientQuotas(path).alter([([("client-id", None)], [QuotaOp("consumer_byte_rate", 2048, False)])], False)
    again = ClientQuotas(path)
    assert again.fetch.quota("u", "any") == 2048
    again.alter([([("client-id", None)], [QuotaOp("consumer_byte_rate", 0, True)])], False)
    assert ClientQuotas(path).describe([], False) == []


# -- through the broker, in virtual time --------------------------------------------------------


async def alter(client, entity, ops, validate_only=False):
    response = await client.request(request(
        49, 1, validate_only=validate_only,
        entries=[{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                  "ops": [{"key": k, "value": v, "remove": r} for k, v, r in ops]}],
    ))
    return response.entries[0]


async def create_topic(client, name):
    response = await client.request(request(
        19, 7, timeout=1000, validate_only=False,
        topics=[{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
    ))
    assert response.topics[0].error_code == ErrorCode.none


def produce_request(topic, payload: bytes, acks=-1):
    batch = build_batch([(None, payload, (), 1_700_000_000_000)])
    return request(0, 9, transactional_id=None, acks=acks, timeout=1000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}])


def frame_size(body, client_id) -> int:
    """What the broker counts against producer_byte_rate: the request without its size prefix."""
    spec = REGISTRY.get(int(body.__api_key__), int(body.__version__))
    return len(encode_request(spec, 1, body, client_id)) - 4


def connections(tb):
    for processors in tb.broker.path.socket_server.processors.values():
        for processor in processors:
            yield from processor.connections.values()


async def test_alter_and_describe_over_the_wire(autojump_clock, tmp_path):
    async with open_test_broker(log_dirs=str(tmp_path)) as tb, tb.client() as client:
        bad = await alter(client, [("user", "alice")], [("producer_byte_rate", 10.5, False)])
        assert bad.error_code == ErrorCode.invalid_request
        assert bad.error_message == "Configuration producer_byte_rate must be a Long value"
        checked = await alter(client, [("user", "alice")], [("producer_byte_rate", 10, False)], validate_only=True)
        assert checked.error_code == ErrorCode.none
        ok = await alter(client, [("user", "alice"), ("client-id", None)], [("request_percentage", 12.5, False)])
        assert ok.error_code == ErrorCode.none
        described = await client.request(request(48, 1, strict=False, components=[
            {"entity_type": "user", "match_type": 0, "match": "alice"}]))
        assert described.error_code == ErrorCode.none
        [entry] = described.entries
        assert {(e.entity_type, e.entity_name) for e in entry.entity} == {("user", "alice"), ("client-id", None)}
        assert [(v.key, v.value) for v in entry.values] == [("request_percentage", 12.5)]
        refused = await client.request(request(48, 1, strict=False, components=[
            {"entity_type": "user", "match_type": 0, "match": None}]))
        assert refused.error_code == ErrorCode.invalid_request and refused.entries is None
    async with open_test_broker(log_dirs=str(tmp_path)) as tb, tb.client() as client:  # restarted
        described = await client.request(request(48, 0, strict=False, components=[]))
        assert len(described.entries) == 1


@pytest.mark.parametrize("acks", [-1, 0])
async def test_a_producer_over_its_quota_is_throttled_exactly_and_only_its_connection_waits(autojump_clock, acks):
    quota = 1000  # bytes per second
    payload = b"x" * 12_000
    async with open_test_broker() as tb, tb.client(client_id="admin") as admin:
        await create_topic(admin, "t")
        assert (await alter(admin, [("client-id", "heavy")], [("producer_byte_rate", quota, False)])).error_code == 0
        async with tb.client(client_id="heavy") as heavy, tb.client(client_id="light") as light:
            body = produce_request("t", payload, acks)
            size = frame_size(body, "heavy")
            observed = size / 10  # the first sample, over ten padded one-second windows
            expected = int((observed - quota) / quota * 10_000 + 0.5)
            assert expected > 1000
            start = trio.current_time()
            if acks:
                response = await heavy.request(body)
                assert response.throttle_time.total_seconds() * 1000 == expected
                assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
            else:
                await heavy.send_no_response(body)
            assert trio.current_time() == start  # answered at once (KIP-219)

            async def heavy_again_into(done):
                await heavy.request(request(18, 3, client_software_name="t", client_software_version="1"))
                done.append(trio.current_time())

            done = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: heavy_again_into(done))
                await trio.testing.wait_all_tasks_blocked()
                assert MuteState.MUTED_AND_THROTTLED in {c.state for c in connections(tb)}
                # Another client is served at once, while the heavy connection is muted.
                await light.request(request(18, 3, client_software_name="t", client_software_version="1"))
                assert trio.current_time() == start
                assert not done
            assert done[-1] - start == pytest.approx(expected / 1000, abs=1e-9)


async def test_a_fetch_over_its_quota_is_answered_empty_and_its_bytes_not_counted(autojump_clock):
    quota = 1500
    async with open_test_broker() as tb, tb.client(client_id="admin") as admin:
        await create_topic(admin, "t")
        await admin.request(produce_request("t", b"y" * 20_000))
        await alter(admin, [("client-id", "reader")], [("consumer_byte_rate", quota, False)])
        metadata = await admin.request(request(3, 12, topics=[{"name": "t", "topic_id": None}],
                                               allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False,
                                               include_cluster_authorized_operations=False))
        fetch = fetch_request(13, "t", metadata.topics[0].topic_id, 0, 0)
        async with tb.client(client_id="reader") as reader:
            first = await reader.request(fetch)
            throttle = round(first.throttle_time.total_seconds() * 1000)
            assert 0 < throttle < 9000
            assert first.responses == ()  # throttled: no records this time
            assert tb.broker.path.context.client_quotas.fetch.statistics().throttled == 1
            # Served when the throttle ends, ``throttle`` ms later. Had the empty answer's
            # bytes been counted, the rate would now hold twice the response; it holds it
            # once, over a window now ``throttle`` ms old and padded to whole seconds.
            second = await reader.request(fetch)
            window = throttle + (10 - throttle // 1000) * 1000
            expected = throttle + 10_000 - window
            assert abs(round(second.throttle_time.total_seconds() * 1000) - expected) <= 1  # ms rounding of trio time


async def test_max_connection_creation_rate_makes_the_acceptor_wait(autojump_clock):
    """2 per second over ten padded windows: the 21st connection at once is 2.1/s, so it is
    handed on (2.1 - 2) / 2 * 10000 = 500 ms later; the twenty before it are served at once."""
    async with open_test_broker(max_connection_creation_rate=2) as tb:
        start = trio.current_time()
        served: dict[int, float] = {}

        async def one(index):
            async with tb.client(client_id=f"c{index}") as client:
                await client.request(request(18, 3, client_software_name="t", client_software_version="1"))
                served[index] = trio.current_time() - start

        async with trio.open_nursery() as nursery:
            for index in range(21):
                nursery.start_soon(one, index)
                await trio.testing.wait_all_tasks_blocked()
        assert sorted(served.values())[:20] == [0.0] * 20
        assert max(served.values()) == pytest.approx(0.5, abs=1e-9)
        assert tb.broker.path.socket_server.acceptors["PLAINTEXT"].statistics().blocked_seconds == pytest.approx(0.5)
