"""The API registry: api key → the versions trikafka implements → kio entity classes.

``ApiVersions`` advertises exactly this table, so an API appears here only once KafkaApis
implements every version listed. Readers and writers are resolved once per (api, version), on
first use, never per request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
from kio.index import load_payload_module
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

__all__ = ["ApiRegistry", "ApiVersionSpec", "IMPLEMENTED_APIS", "api_name", "kio_versions"]

#: What KafkaApis implements: api key → (min version, max version). Grows with each API.
IMPLEMENTED_APIS: dict[int, tuple[int, int]] = {
    0: (3, 13),  # Produce
    1: (4, 18),  # Fetch
    2: (1, 11),  # ListOffsets
    3: (0, 13),  # Metadata
    8: (2, 10),  # OffsetCommit
    9: (1, 10),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 6),  # DescribeGroups
    16: (0, 5),  # ListGroups
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 6),  # InitProducerId
    24: (0, 3),  # AddPartitionsToTxn
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 4),  # EndTxn
    28: (0, 4),  # TxnOffsetCommit
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    44: (0, 1),  # IncrementalAlterConfigs
    47: (0, 0),  # OffsetDelete
    60: (0, 2),  # DescribeCluster
    65: (0, 0),  # DescribeTransactions
    66: (0, 1),  # ListTransactions
}


def api_name(api_key: int) -> str:
    """Kafka's CamelCase name for an api key (``ApiVersions``), or ``Unknown(99)``."""
    snake = api_key_map.get(api_key)
    if snake is None:
        return f"Unknown({api_key})"
    return "".join(part.capitalize() for part in snake.split("_"))


def kio_versions(api_key: int) -> list[int]:
    """Versions of this API that kio has schemas for."""
    return sorted(schema_name_map[api_key_map[api_key]])


def _payload_class(api_key: int, version: int, entity_type: EntityType) -> type:
    module = load_payload_module(api_key, version, entity_type)
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and getattr(value, "__type__", None) is entity_type
            and getattr(value, "__api_key__", None) == api_key
        ):
            return value
    raise LookupError(f"kio has no {entity_type.name} class for api {api_key} v{version}")


@attrs.frozen
class ApiVersionSpec:
    """Everything needed to read and write one version of one API."""

    api_key: int
    version: int
    name: str
    request_type: type
    response_type: type
    request_header_type: type
    response_header_type: type
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
        req_header = request_type.__header_schema__
        resp_header = response_type.__header_schema__
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

    def __init__(self, supported: Mapping[int, tuple[int, int]] | None = None) -> None:
        self.supported: dict[int, tuple[int, int]] = dict(
            IMPLEMENTED_APIS if supported is None else supported
        )
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

    def is_supported(self, api_key: int, version: int) -> bool:
        return (api_key, version) in self._known

    def ranges(self) -> Iterable[tuple[int, int, int]]:
        """(api key, min, max) for ApiVersions, sorted by api key."""
        for api_key in sorted(self.supported):
            lo, hi = self.supported[api_key]
            yield api_key, lo, hi
