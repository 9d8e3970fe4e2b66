"""How API families are wired into KafkaApis: one handler per advertised api key, registered
with ``@handles``; a family's own whole-request error answer used when a handler fails."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trikafka import Broker, BrokerConfig
from trikafka.clock import now_ms
from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import Request
from trikafka.protocol.entities import build
from trikafka.protocol.headers import decode_request, encode_request
from trikafka.protocol.records import build_batch
from trikafka.protocol.registry import IMPLEMENTED_APIS, ApiKey
from trikafka.server.api_table import API_FAMILIES
from trikafka.server.apis.produce import ProduceApis
from trikafka.server.kafka_apis import ApiFamily, KafkaApis, LazyFamily, handles


def _broker() -> Broker:
    return Broker(BrokerConfig(listeners="PLAINTEXT://127.0.0.1:0"))


def test_every_advertised_api_has_exactly_one_handler() -> None:
    broker = _broker()
    assert set(broker.path.apis.handlers) == set(IMPLEMENTED_APIS)
    assert all(isinstance(key, ApiKey) for key in broker.path.apis.handlers)


def test_each_family_is_built_on_first_use_and_handles_its_declared_apis() -> None:
    """A fresh broker has built no family (a stub stands for each handler); building every
    lazy family holds it to the api keys it is declared with in server/api_table.py."""
    apis = _broker().path.apis
    assert apis._built == {}
    apis.build_all()
    assert {lazy.path for lazy in API_FAMILIES} == set(apis._built)
    for key, handler in apis.handlers.items():
        family = apis.families[key]
        assert isinstance(family, ApiFamily)
        assert handler.__self__ is family  # the family's own method, no stub left
    assert {key for lazy in API_FAMILIES for key in lazy.api_keys} == set(apis.handlers)


def test_a_family_declared_with_other_api_keys_is_refused_when_built() -> None:
    broker = _broker()
    wrong = LazyFamily("trikafka.server.apis.produce:ProduceApis", (ApiKey.PRODUCE, ApiKey.FETCH))
    others = [f for f in API_FAMILIES if not {ApiKey.PRODUCE, ApiKey.FETCH} & set(f.api_keys)]
    apis = KafkaApis(broker.path.context, [wrong, *others])
    with pytest.raises(RuntimeError, match="declared"):
        apis.families[ApiKey.PRODUCE]


def test_a_handler_wrapped_before_its_family_is_built_keeps_its_wrapper() -> None:
    """A stub wrapped (a test's hook, a gate) before first use stays wrapped: building the
    family replaces only the stubs still in place."""
    broker = _broker()
    apis = broker.path.apis
    seen: list[int] = []
    stub = apis.handlers[ApiKey.API_VERSIONS]

    async def noted(request: Request) -> Any:
        seen.append(request.api_key)
        return await stub(request)

    apis.handlers[ApiKey.API_VERSIONS] = noted
    apis.build_all()
    assert apis.handlers[ApiKey.API_VERSIONS] is noted
    assert apis.handlers[ApiKey.METADATA].__self__ is apis.families[ApiKey.METADATA]


def test_an_advertised_api_without_a_handler_is_refused_at_start() -> None:
    broker = _broker()
    with pytest.raises(RuntimeError, match="PRODUCE"):
        KafkaApis(broker.path.context, [])


def test_two_families_claiming_one_api_are_refused() -> None:
    broker = _broker()

    class Other(ProduceApis):
        pass

    with pytest.raises(RuntimeError, match="PRODUCE is handled by both"):
        KafkaApis(broker.path.context, [ProduceApis(broker.path.context), Other(broker.path.context)])


def test_a_failing_handler_gets_its_family_error_answer() -> None:
    """Produce's whole-request error fills in every partition, as Kafka's getErrorResponse
    does, instead of an empty response the client cannot match to what it sent."""
    broker = _broker()

    class Refusing(ProduceApis):
        @handles(ApiKey.PRODUCE)
        async def handle_produce_request(self, request: Request) -> Any:
            raise KafkaProtocolError("not today", ErrorCode.not_leader_or_follower)

    others = [f for f in API_FAMILIES if ApiKey.PRODUCE not in f.api_keys]
    apis = KafkaApis(broker.path.context, [Refusing(broker.path.context), *others])
    spec = broker.path.registry.get(ApiKey.PRODUCE, 9)
    body = build(
        spec.request_type,
        transactional_id=None,
        acks=1,
        timeout=1000,
        topic_data=[{"name": "t", "partition_data": [
            {"index": 0, "records": build_batch([(None, b"v", [], 0)])},
            {"index": 1, "records": build_batch([(None, b"w", [], 0)])},
        ]}],
    )
    decoded = decode_request(encode_request(spec, 7, body, "c")[4:], broker.path.registry)
    request = Request(0, "c", "PLAINTEXT", "127.0.0.1", decoded.header, decoded.body, decoded.spec, 0, None)
    answer = apis._error_response(request, ErrorCode.not_leader_or_follower)
    (topic,) = answer.values["responses"]
    assert [(p["index"], p["error_code"]) for p in topic["partition_responses"]] == [
        (0, ErrorCode.not_leader_or_follower),
        (1, ErrorCode.not_leader_or_follower),
    ]


async def test_one_wall_clock_follows_trio(autojump_clock) -> None:
    """Epoch milliseconds that a MockClock moves: the broker, its APIs and its logs share it."""
    broker = _broker()
    assert broker.now_ms is now_ms and broker.path.context.now_ms is now_ms
    assert broker.log_manager.clock is now_ms
    before = now_ms()
    await trio.sleep(3600)
    assert now_ms() - before == pytest.approx(3_600_000)
