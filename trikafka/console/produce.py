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
from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

__all__ = ["PRODUCE_TIMEOUT_S", "ProduceForm", "ProduceProblem", "parse_produce_form", "produce_through_proxy"]

#: How long the proxy may take to answer before the page says it did not.
PRODUCE_TIMEOUT_S = 15.0


class ProduceProblem(Exception):
    """The form or the proxy refused; ``status`` is what the console's page answers."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class ProduceForm(BaseModel):
    """The form's fields: ``key``/``value`` JSON text (an empty key: none), ``partition`` a
    number or empty (the partitioner's choice). Other fields are ignored."""

    model_config = ConfigDict(extra="ignore", validate_default=True)

    key: Any = ""
    value: Any = ""
    partition: int | None = None

    @field_validator("key", "value", mode="before")
    @classmethod
    def _json(cls, text: Any, info: ValidationInfo) -> Any:
        text = str(text).strip()
        if not text:
            if info.field_name == "value":
                raise ValueError('a JSON value is required (e.g. {"id": 1})')
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ValueError(f"not JSON: {exc}") from None

    @field_validator("partition", mode="before")
    @classmethod
    def _partition(cls, text: Any) -> int | None:
        text = str(text or "").strip()
        if not text:
            return None
        if not text.isdigit():
            raise ValueError(f"{text!r}: a partition number, or empty for the partitioner's choice")
        return int(text)


def parse_produce_form(body: bytes) -> dict[str, Any]:
    """The form validated by :class:`ProduceForm`: the record for the proxy, or a
    :class:`ProduceProblem` (400) naming the field."""
    parsed = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    try:
        form = ProduceForm.model_validate({k: v[-1] for k, v in parsed.items()})
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error.get("loc", ())) or "the form"
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        raise ProduceProblem(f"{field}{' ' if message.startswith(chr(39)) else ': '}{message}") from None
    record: dict[str, Any] = {"value": form.value}
    if form.key is not None:
        record = {"key": form.key, **record}
    if form.partition is not None:
        record["partition"] = form.partition
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
