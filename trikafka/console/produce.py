"""The topic page's one write: a JSON record produced through the HTTP proxy.

The form posts ``key``, ``value`` (JSON text) and ``partition`` to the console, which sends
them to the proxy's ``POST /topics/{topic}`` as ``application/vnd.kafka.json.v2+json`` — so
the record takes the proxy's path (its client, the broker's ACLs and validation) rather
than a side door of the console's own. The console's reads stay reads: this is the only
route that is not GET or HEAD, and it refuses a POST whose ``Origin`` is another site's.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import trio

__all__ = ["PRODUCE_TIMEOUT_S", "ProduceProblem", "parse_produce_form", "produce_through_proxy"]

#: How long the proxy may take to answer before the page says it did not.
PRODUCE_TIMEOUT_S = 15.0


class ProduceProblem(Exception):
    """The form or the proxy refused; ``status`` is what the console's page answers."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def parse_produce_form(body: bytes) -> dict[str, Any]:
    """``key``/``value`` parsed as JSON (an empty key: none), ``partition`` an int or None."""
    parsed = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    fields = {k: v[-1] for k, v in parsed.items()}
    record: dict[str, Any] = {}
    for name in ("key", "value"):
        text = fields.get(name, "").strip()
        if not text:
            if name == "value":
                raise ProduceProblem("value: a JSON value is required (e.g. {\"id\": 1})")
            continue
        try:
            record[name] = json.loads(text)
        except ValueError as exc:
            raise ProduceProblem(f"{name}: not JSON: {exc}") from None
    partition = fields.get("partition", "").strip()
    if partition:
        if not partition.isdigit():
            raise ProduceProblem(f"partition {partition!r}: a partition number, or empty for the partitioner's choice")
        record["partition"] = int(partition)
    return record


def _post(url: str, record: dict[str, Any], authorization: str | None) -> dict[str, Any]:
    data = json.dumps({"records": [record]}).encode()
    headers = {"Content-Type": "application/vnd.kafka.json.v2+json", "Accept": "application/vnd.kafka.v2+json"}
    if authorization:
        headers["Authorization"] = authorization
    request = urllib.request.Request(url, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=PRODUCE_TIMEOUT_S) as response:  # noqa: S310 - our proxy
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read())
            message = f"{detail['message']} (error {detail['error_code']})"
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {exc.code} {exc.reason}"
        raise ProduceProblem(f"the HTTP proxy refused: {message}", 400 if exc.code < 500 else 503) from None
    except (urllib.error.URLError, OSError) as exc:
        raise ProduceProblem(f"cannot reach the HTTP proxy at {url}: {getattr(exc, 'reason', exc)}", 503) from None


async def produce_through_proxy(
    proxy_url: str, topic: str, record: dict[str, Any], *, authorization: str | None = None
) -> str:
    """Send ``record`` to ``topic`` through the proxy (as the console's caller: their
    ``authorization`` header, HTTP Basic, passed on); a sentence saying where it was written."""
    url = f"{proxy_url.rstrip('/')}/topics/{urllib.parse.quote(topic, safe='')}"
    answer = await trio.to_thread.run_sync(_post, url, record, authorization)
    offsets = answer.get("offsets") or [{}]
    first = offsets[0]
    if first.get("error_code") is not None:
        raise ProduceProblem(f"the HTTP proxy could not write it: {first.get('error')} (error {first['error_code']})")
    return f"Produced to partition {first.get('partition')} at offset {first.get('offset')} through the HTTP proxy."
