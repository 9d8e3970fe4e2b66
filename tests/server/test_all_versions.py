"""Every advertised (api key, version) is answered, not dropped or crashed on.

A minimal request (empty lists, zero values) exercises each handler's field names for that
version; the response must decode as that version's response and carry no
UNKNOWN_SERVER_ERROR, which is what a handler bug turns into.
"""

from __future__ import annotations

import dataclasses

import pytest

from trikafka.errors import ErrorCode
from trikafka.protocol.entities import error_response
from trikafka.protocol.registry import IMPLEMENTED_APIS, ApiRegistry
from trikafka.testing import open_test_broker

REGISTRY = ApiRegistry()
CASES = [
    pytest.param(key, version, id=f"{REGISTRY.get(key, version).name}-v{version}")
    for key, (lo, hi) in sorted(IMPLEMENTED_APIS.items())
    for version in range(lo, hi + 1)
]


def _error_codes(entity) -> list[ErrorCode]:
    found = []
    if dataclasses.is_dataclass(entity):
        for field in dataclasses.fields(entity):
            value = getattr(entity, field.name)
            if isinstance(value, ErrorCode):
                found.append(value)
            elif isinstance(value, tuple):
                for item in value:
                    found.extend(_error_codes(item))
            elif dataclasses.is_dataclass(value):
                found.extend(_error_codes(value))
    return found


async def test_every_version_is_answered(autojump_clock, caplog):
    # Client telemetry on: its APIs (71, 72) are advertised only then, as Kafka's are.
    async with open_test_broker(client_telemetry=True) as tb, tb.client() as client:
        for key, (lo, hi) in sorted(IMPLEMENTED_APIS.items()):
            for version in range(lo, hi + 1):
                spec = REGISTRY.get(key, version)
                request = error_response(spec.request_type, ErrorCode.none)
                if key == 18 and version >= 3:
                    request = spec.request_type(client_software_name="t", client_software_version="1")
                response = await client.request(request)
                assert isinstance(response, spec.response_type), (spec.name, version)
                assert ErrorCode.unknown_server_error not in _error_codes(response), (
                    spec.name,
                    version,
                    caplog.text,
                )
    assert "Traceback" not in caplog.text
