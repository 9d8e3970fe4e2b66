"""Arbitrary JSON bodies and path segments at every route: never a 500, never a crash.

Deterministic (``derandomize``): the same examples every run. The registry keeps its state
across examples, so later requests meet subjects, versions and references earlier ones made.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.registry.conftest import LogHolder, call_app
from trikafka.registry import SchemaRegistry
from trikafka.web import schema_registry_app
from trikafka.web.registry_routes import ROUTES

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
AVRO_TEXT = st.sampled_from(
    [
        '"string"',
        '{"type":"record","name":"R","fields":[]}',
        '{"type":"enum","name":"E","symbols":["A"]}',
        '["null","int"]',
    ]
)
PROTO_TEXT = st.sampled_from(
    [
        'syntax = "proto3"; message M { int32 a = 1; }',
        "message {",
        'syntax = "proto3"; import "x.proto"; message M { X x = 1; }',
    ]
)
SCHEMA_BODY = st.fixed_dictionaries(
    {"schema": AVRO_TEXT | PROTO_TEXT | JSON.map(json.dumps) | st.text(max_size=40)},
    optional={
        "schemaType": st.sampled_from(["AVRO", "JSON", "PROTOBUF"]) | JSON,
        "references": st.lists(
            st.fixed_dictionaries(
                {"name": st.text(max_size=5), "subject": st.sampled_from(["s", "t", ""]), "version": st.integers(-2, 3)}
            ),
            max_size=2,
        )
        | JSON,
        "metadata": JSON,
        "ruleSet": JSON,
        "id": JSON,
        "version": JSON,
        "compatibility": st.sampled_from(["NONE", "FULL", "backward", "x"]) | JSON,
        "mode": st.sampled_from(["READWRITE", "READONLY", "IMPORT", "x"]) | JSON,
    },
)
SEGMENT = st.sampled_from(["s", "t", "latest", "-1", "0", "1", "2", "2147483648", "%", "..", " ", "é/x"]) | st.text(
    max_size=12
)
QUERY = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "deleted",
                "permanent",
                "verbose",
                "force",
                "defaultToGlobal",
                "offset",
                "limit",
                "format",
                "subject",
                "key",
                "value",
                "deleted_only",
                "subjectPrefix",
            ]
        ),
        st.text(max_size=8),
    ),
    max_size=4,
)


@st.composite
def requests(draw):
    method, pattern, _ = draw(st.sampled_from(ROUTES))
    method = draw(st.sampled_from([method, method, "GET", "POST", "PUT", "DELETE", "PATCH"]))
    segments = [quote(draw(SEGMENT), safe="") if part.startswith("{") else part for part in pattern]
    if draw(st.booleans()) and draw(st.booleans()):
        segments.append(quote(draw(SEGMENT), safe=""))
    query = "&".join(f"{k}={quote(v, safe='')}" for k, v in draw(QUERY))
    body = draw(
        st.one_of(
            SCHEMA_BODY.map(lambda b: json.dumps(b).encode()),
            JSON.map(lambda b: json.dumps(b).encode()),
            st.binary(max_size=30),
        )
    )
    return method, "/" + "/".join(segments) + (f"?{query}" if query else ""), body


def test_no_request_gets_a_500(caplog):
    registry = SchemaRegistry(LogHolder(), lambda: 0)
    registry.register("s", {"schema": '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'})
    registry.register(
        "t",
        {
            "schema": '{"type":"record","name":"Q","fields":[{"name":"r","type":"R"}]}',
            "references": [{"name": "R", "subject": "s", "version": 1}],
        },
    )
    app = schema_registry_app(registry)
    statuses: set[int] = set()

    @settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(requests())
    def run(request):
        method, path, body = request
        status, answer = trio.run(lambda: call_app(app, method, path, raw=body))
        statuses.add(status)
        assert status < 500, (method, path, body, answer)
        if status >= 400:
            assert set(answer) == {"error_code", "message"}, answer

    run()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    assert {200, 404, 422} <= statuses  # the examples reach answers and refusals alike
