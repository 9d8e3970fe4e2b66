"""The API registry: api key → the versions trikafka implements → kio entity classes.

``ApiVersions`` advertises exactly this table, so an API appears here only once KafkaApis
implements every version listed. Readers and writers are resolved once per (api, version), on
first use, never per request. :class:`ApiKey` names the implemented APIs: it is the one place
an api-key number is written (handlers register with ``@handles(ApiKey.FETCH)``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

import attrs
from kio.index import load_payload_module
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

if TYPE_CHECKING:
    from kio.static.protocol import Payload

__all__ = ["ApiKey", "ApiRegistry", "ApiVersionSpec", "IMPLEMENTED_APIS", "api_name", "kio_versions"]

class ApiKey(enum.IntEnum):
    """The APIs trikafka implements, by Kafka's names (``ApiKeys`` in Kafka).

    The one source of api-key numbers: ``IMPLEMENTED_APIS`` below is keyed by it, and request
    handlers register with ``@handles(ApiKey.FETCH)`` (``server/kafka_apis.py``).
    """

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    SASL_AUTHENTICATE = 36
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


#: What KafkaApis implements: api key → (min version, max version). Grows with each API.
IMPLEMENTED_APIS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 13),
    ApiKey.FETCH: (4, 18),
    ApiKey.LIST_OFFSETS: (1, 11),
    ApiKey.METADATA: (0, 13),
    ApiKey.OFFSET_COMMIT: (2, 10),
    ApiKey.OFFSET_FETCH: (1, 10),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 6),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 5),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.UPDATE_FEATURES: (0, 2),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    ApiKey.PUSH_TELEMETRY: (0, 0),
    ApiKey.LIST_CONFIG_RESOURCES: (0, 1),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
}


#: Keys newer than kio's schemas (Kafka 4.4's protocol docs, apache/kafka-site 44/generated).
_LATER_NAMES = {93: "StreamsGroupTopologyDescriptionUpdate", 94: "UnregisterController"}


def api_name(api_key: int) -> str:
    """Kafka's CamelCase name for an api key (``ApiVersions``), or ``Unknown(99)``."""
    snake = api_key_map.get(api_key)
    if snake is None:
        return _LATER_NAMES.get(api_key, f"Unknown({api_key})")
    return "".join(part.capitalize() for part in snake.split("_"))


def kio_versions(api_key: int) -> list[int]:
    """Versions of this API that kio has schemas for."""
    return sorted(schema_name_map[api_key_map[api_key]])


def _payload_class(
    api_key: int, version: int, entity_type: Literal[EntityType.request, EntityType.response]
) -> type[Payload]:
    module = load_payload_module(api_key, version, entity_type)
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and getattr(value, "__type__", None) is entity_type
            and getattr(value, "__api_key__", None) == api_key
        ):
            return cast("type[Payload]", value)
    raise LookupError(f"kio has no {entity_type.name} class for api {api_key} v{version}")


@attrs.frozen
class ApiVersionSpec:
    """Everything needed to read and write one version of one API."""

    api_key: int
    version: int
    name: str
    request_type: type[Payload]
    response_type: type[Payload]
    request_header_type: type[Any]  # kio's RequestHeader v1/v2 or ResponseHeader v0/v1
    response_header_type: type[Any]
    read_request: Callable[[Any, int], tuple[Any, int]]
    write_request: Callable[[Any, Any], None]
    read_response: Callable[[Any, int], tuple[Any, int]]
    write_response: Callable[[Any, Any], None]
    read_request_header: Callable[[Any, int], tuple[Any, int]]
    write_request_header: Callable[[Any, Any], None]
    read_response_header: Callable[[Any, int], tuple[Any, int]]
    write_response_header: Callable[[Any, Any], None]

    @classmethod
    def resolve(cls, api_key: int, version: int) -> ApiVersionSpec:
        request_type = _payload_class(api_key, version, EntityType.request)
        response_type = _payload_class(api_key, version, EntityType.response)
        # kio declares __header_schema__ a property (for LSP); read on the class it is the class.
        req_header = cast("type[Any]", request_type.__header_schema__)
        resp_header = cast("type[Any]", response_type.__header_schema__)
        return cls(
            api_key=api_key,
            version=version,
            name=api_name(api_key),
            request_type=request_type,
            response_type=response_type,
            request_header_type=req_header,
            response_header_type=resp_header,
            read_request=entity_reader(request_type),
            write_request=entity_writer(request_type),
            read_response=entity_reader(response_type),
            write_response=entity_writer(response_type),
            read_request_header=entity_reader(req_header),
            write_request_header=entity_writer(req_header),
            read_response_header=entity_reader(resp_header),
            write_response_header=entity_writer(resp_header),
        )


class ApiRegistry:
    """The table of supported (api key, version) pairs, each resolved to kio on first use.

    Resolving every version of every API up front took ~1 s at start-up (kio imports a module
    per version and builds its readers and writers); a broker that is only ever asked
    ApiVersions, Metadata and Produce should not pay for the other 250. The table itself is
    checked against kio's schema index at construction, so a version kio lacks still fails
    at start, not on the first request.
    """

    def __init__(
        self, supported: Mapping[int, tuple[int, int]] | None = None, listed_min: Mapping[int, int] | None = None
    ) -> None:
        self.supported: dict[int, tuple[int, int]] = dict(
            IMPLEMENTED_APIS if supported is None else supported
        )
        #: api key → the min version ApiVersions lists, below the min this registry accepts
        #: (Kafka 4 lists Produce from v0 and refuses v0-2: KAFKA-18659).
        self.listed_min: dict[int, int] = dict(listed_min or {})
        self._specs: dict[tuple[int, int], ApiVersionSpec] = {}
        self._known: set[tuple[int, int]] = set()
        for api_key, (lo, hi) in self.supported.items():
            available = set(kio_versions(api_key))
            for version in range(lo, hi + 1):
                if version not in available:
                    raise ValueError(f"kio has no schema for {api_name(api_key)} v{version}")
                self._known.add((api_key, version))

    def get(self, api_key: int, version: int) -> ApiVersionSpec | None:
        spec = self._specs.get((api_key, version))
        if spec is None and (api_key, version) in self._known:
            spec = self._specs[api_key, version] = ApiVersionSpec.resolve(api_key, version)
        return spec

    def require(self, api_key: int, version: int) -> ApiVersionSpec:
        """:meth:`get` of a version the caller knows is supported (a LookupError if not)."""
        spec = self.get(api_key, version)
        if spec is None:
            raise LookupError(f"{api_name(api_key)} v{version} is not supported")
        return spec

    def is_supported(self, api_key: int, version: int) -> bool:
        return (api_key, version) in self._known

    def ranges(self) -> Iterable[tuple[int, int, int]]:
        """(api key, min, max) for ApiVersions, sorted by api key."""
        for api_key in sorted(self.supported):
            lo, hi = self.supported[api_key]
            yield api_key, min(lo, self.listed_min.get(api_key, lo)), hi
