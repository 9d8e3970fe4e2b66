"""Malformed requests at every route: each answers 4xx with Confluent's ``error_code``, never a 500.

Each example takes one route of the proxy, fills its path parameters with arbitrary text,
and breaks the request in one way: a method the path does not serve, an Accept the route
cannot answer, a path below the route that no route serves, a Content-Type the route does
not take, or a body that is not JSON or not a JSON object. Deterministic (derandomized,
bounded examples) against a real broker and proxy over a socket.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

G = "/consumers/{group}/instances/{instance}"
C = "/v3/clusters/{cluster_id}"
T = C + "/topics/{topic}"
GR = C + "/consumer-groups/{group}"

#: (method, path, reads a body, checks the Content-Type): every route the proxy serves.
ROUTES = [
    ("GET", "/topics", False, False),
    ("GET", "/topics/{topic}", False, False),
    ("POST", "/topics/{topic}", True, True),
    ("GET", "/topics/{topic}/partitions", False, False),
    ("GET", "/topics/{topic}/partitions/{partition}", False, False),
    ("POST", "/topics/{topic}/partitions/{partition}", True, True),
    ("GET", "/topics/{topic}/partitions/{partition}/offsets", False, False),
    ("GET", "/brokers", False, False),
    ("POST", "/consumers/{group}", True, True),
    ("DELETE", G, False, False),
    ("POST", G + "/subscription", True, True),
    ("GET", G + "/subscription", False, False),
    ("DELETE", G + "/subscription", False, False),
    ("POST", G + "/assignments", True, True),
    ("GET", G + "/assignments", False, False),
    ("POST", G + "/positions", True, True),
    ("POST", G + "/positions/beginning", True, True),
    ("POST", G + "/positions/end", True, True),
    ("POST", G + "/offsets", True, True),
    ("GET", G + "/offsets", True, False),
    ("GET", G + "/records", False, False),
    ("GET", "/v3/clusters", False, False),
    ("GET", C, False, False),
    ("GET", C + "/brokers", False, False),
    ("GET", C + "/brokers/{broker_id}", False, False),
    ("GET", C + "/topics", False, False),
    ("POST", C + "/topics", True, True),
    ("GET", T, False, False),
    ("DELETE", T, False, False),
    ("GET", T + "/configs", False, False),
    ("POST", T + "/configs:alter", True, True),
    ("GET", T + "/configs/{name}", False, False),
    ("PUT", T + "/configs/{name}", True, True),
    ("DELETE", T + "/configs/{name}", False, False),
    ("GET", T + "/partitions", False, False),
    ("GET", T + "/partitions/{partition_id}", False, False),
    ("POST", T + "/records", True, True),
    ("GET", C + "/consumer-groups", False, False),
    ("GET", GR, False, False),
    ("GET", GR + "/consumers", False, False),
    ("GET", GR + "/lags", False, False),
    ("GET", GR + "/lag-summary", False, False),
]
METHODS = {path: {m for m, p, _, _ in ROUTES if p == path} for _, path, _, _ in ROUTES}
ALL_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
BAD_ACCEPT = ["text/html", "image/png", "application/xml", "text/plain; q=1", "application/vnd.kafka.v9+xml"]
BAD_CONTENT_TYPE = ["text/plain", "application/xml", "multipart/form-data", "application/x-www-form-urlencoded",
                    "application/vnd.kafka.nope.v2+json", "application/vnd.kafka.json.v9+json"]
JSON_SCALARS = st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=20), st.booleans())
NOT_AN_OBJECT = st.one_of(JSON_SCALARS, st.lists(JSON_SCALARS, max_size=4))
NOT_JSON = st.one_of(
    st.binary(min_size=1, max_size=40).filter(lambda b: _not_json(b)),
    st.just(b"{"), st.just(b'{"records": [}'), st.just(b"\xff\xfe"), st.just(b"[" * 5000),
)


def _not_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        return bool(data.strip())
    return False


def _fill(path: str, values: list[str]) -> str:
    out = path
    for i, name in enumerate(("{topic}", "{partition}", "{group}", "{instance}", "{cluster_id}", "{broker_id}",
                              "{name}", "{partition_id}")):
        out = out.replace(name, quote(values[i % len(values)], safe="") or "x")
    return out


@st.composite
def malformed_requests(draw):
    method, path, takes_body, checks_type = draw(st.sampled_from(ROUTES))
    values = draw(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=4))
    faults = ["method", "accept", "path"]
    if takes_body:
        faults.append("body")
    if checks_type:
        faults.append("content-type")
    fault = draw(st.sampled_from(faults))
    url = _fill(path, values)
    headers = {"Content-Type": "application/vnd.kafka.json.v2+json" if path.startswith("/topics")
               else "application/json"}
    body = b""
    if fault == "method":
        method = draw(st.sampled_from([m for m in ALL_METHODS if m not in METHODS[path]]))
    elif fault == "accept":
        headers["Accept"] = draw(st.sampled_from(BAD_ACCEPT))
    elif fault == "path":
        url += "/zz-" + quote(draw(st.text(max_size=8)), safe="")
    elif fault == "content-type":
        headers["Content-Type"] = draw(st.sampled_from(BAD_CONTENT_TYPE))
        body = b'{"records": [{"value": 1}]}'
    else:
        body = draw(st.one_of(NOT_JSON, NOT_AN_OBJECT.map(lambda v: json.dumps(v).encode())))
    return fault, method, url, headers, body


@settings(derandomize=True, max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(request=malformed_requests())
def test_every_malformed_request_is_a_4xx_with_an_error_code(proxy_server, request):
    fault, method, url, headers, body = request
    answer = httpx.request(method, proxy_server.url + url, headers=headers, content=body, timeout=30)
    assert 400 <= answer.status_code < 500, (fault, method, url, headers, body, answer.status_code, answer.text)
    document = answer.json()
    assert isinstance(document["error_code"], int) and document["message"], (fault, url, answer.text)


def test_the_table_above_is_every_route_the_proxy_serves():
    from trikafka.rest import RestProxy

    served = {(method, route.path) for route in RestProxy("127.0.0.1:9").app.routes for method in route.methods}
    assert served - {(m, p) for m, p in served if m == "HEAD"} == {(m, p) for m, p, _, _ in ROUTES}
