"""How API families are wired into KafkaApis: one family per advertised api key, declared in
server/api_table.py and answered by the family's ``@handles`` methods; a family built when one
of its APIs is first asked for; its own whole-request error answer used when a handler fails."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

import attrs
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
from trikafka.testing import open_test_broker
from trikafka.testing.frames import api_versions_frame, read_frames


def _broker() -> Broker:
    return Broker(BrokerConfig(listeners="PLAINTEXT://127.0.0.1:0"))


def test_every_advertised_api_has_exactly_one_family() -> None:
    apis = _broker().path.apis
    assert set(apis.families) == set(IMPLEMENTED_APIS)
    apis.build_all()
    assert set(apis.handlers) == set(IMPLEMENTED_APIS)
    assert all(isinstance(key, ApiKey) for key in apis.handlers)


def _handled_keys(family: type[ApiFamily]) -> set[ApiKey]:
    return {
        value.__api_key__
        for cls in family.__mro__
        for value in vars(cls).values()
        if getattr(value, "__api_key__", None) is not None
    }


def test_the_api_table_is_the_handlers_own_keys() -> None:
    """server/api_table.py is the one declaration of which family serves which API: each
    family's ``@handles`` methods answer exactly the keys it is listed with, and no key twice."""
    for lazy in API_FAMILIES:
        assert _handled_keys(lazy.load()) == set(lazy.api_keys), lazy.load.__name__
    listed = [key for lazy in API_FAMILIES for key in lazy.api_keys]
    assert len(listed) == len(set(listed))


def test_every_family_is_imported_by_name_in_the_api_table() -> None:
    """Each API family class in server/apis/ is imported, by an import statement that tools
    and readers see, in server/api_table.py — no ``"module:Class"`` strings."""
    import trikafka.server.api_table as table

    imported = {
        (node.module, alias.name)
        for node in ast.walk(ast.parse(Path(table.__file__).read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trikafka.server.apis.")
        for alias in node.names
    }
    families = set()
    for path in sorted((Path(table.__file__).parent / "apis").glob("*.py")):
        module = importlib.import_module(f"trikafka.server.apis.{path.stem}")
        families |= {
            (module.__name__, name)
            for name, value in vars(module).items()
            if isinstance(value, type) and issubclass(value, ApiFamily) and value is not ApiFamily
            and value.__module__ == module.__name__
        }
    assert families and imported == families
    assert {(lazy.load().__module__, lazy.load().__name__) for lazy in API_FAMILIES} == families


def test_a_family_is_built_on_a_miss_in_the_handler_table() -> None:
    """A fresh broker has built no family and holds no handler; looking one up builds its
    family alone, whose handlers join the table."""
    apis = _broker().path.apis
    assert dict(apis.handlers) == {}
    handler = apis.handlers[ApiKey.OFFSET_FOR_LEADER_EPOCH]
    family = handler.__self__  # type: ignore[attr-defined]  # a bound method of the family
    assert type(family).__name__ == "PartitionStateApis"
    assert set(apis.handlers) == {
        ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.DESCRIBE_LOG_DIRS, ApiKey.DESCRIBE_PRODUCERS,
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
    }
    assert all(h.__self__ is family for h in apis.handlers.values())  # type: ignore[attr-defined]  # bound
    apis.build_all()
    for key, handler in apis.handlers.items():
        assert handler.__self__ is apis.families[key]  # type: ignore[attr-defined]  # bound methods
    assert {key for lazy in API_FAMILIES for key in lazy.api_keys} == set(apis.handlers)


async def test_the_first_request_builds_only_its_family() -> None:
    """Dispatch builds a family on its first request: after one ApiVersions, the handler table
    holds ApiVersions alone."""
    async with open_test_broker() as tb:
        stream = await tb.connect()
        await stream.send_all(api_versions_frame(1))
        await read_frames(stream, 1)
        assert set(tb.broker.path.apis.handlers) == {ApiKey.API_VERSIONS}


def test_a_family_listed_with_a_key_it_does_not_handle_is_refused_on_its_first_use() -> None:
    broker = _broker()
    produce = next(lazy for lazy in API_FAMILIES if ApiKey.PRODUCE in lazy.api_keys)
    wrong = LazyFamily(produce.load, (ApiKey.PRODUCE, ApiKey.FETCH))
    others = [f for f in API_FAMILIES if not {ApiKey.PRODUCE, ApiKey.FETCH} & set(f.api_keys)]
    apis = KafkaApis(broker.path.context, [wrong, *others])
    with pytest.raises(RuntimeError, match=r"ProduceApis has no @handles\(FETCH\)"):
        apis.handlers[ApiKey.FETCH]


def test_a_handler_put_in_place_before_its_family_is_built_stays() -> None:
    """A handler put in the table before first use (a test's hook, a gate) stays: building
    the family adds only the handlers not yet in place."""
    broker = _broker()
    apis = broker.path.apis

    async def noted(request: Request) -> Any:
        return None

    apis.handlers[ApiKey.API_VERSIONS] = noted
    apis.build_all()
    assert apis.handlers[ApiKey.API_VERSIONS] is noted
    assert apis.handlers[ApiKey.METADATA].__self__ is apis.families[ApiKey.METADATA]  # type: ignore[attr-defined]


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


def test_each_coordinator_gets_a_settings_record_built_from_the_config() -> None:
    """Below the wiring no coordinator holds the whole BrokerConfig: each gets its own frozen
    record, filled from the config keys of the same names."""
    broker = Broker(BrokerConfig(listeners="PLAINTEXT://127.0.0.1:0", group_max_size=7, transaction_max_timeout_ms=1234,
                                 group_share_max_size=11, group_share_record_lock_duration_ms=20000))
    groups, transactions, shares = broker.core.groups, broker.core.transactions, broker.core.shares
    assert groups.settings.group_max_size == 7 and groups.membership.settings is groups.settings
    assert transactions.settings.transaction_max_timeout_ms == 1234
    assert transactions.machine.settings is transactions.settings
    assert shares.settings.group_share_max_size == 11
    assert shares.configs("g")["share.record.lock.duration.ms"] == 20000  # the GROUP configs' defaults
    for record in (groups.settings, transactions.settings, shares.settings):
        assert not isinstance(record, BrokerConfig)
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            record.group_max_size = 1  # type: ignore[misc]  # frozen: the assignment is the point
