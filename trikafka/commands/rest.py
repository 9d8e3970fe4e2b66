"""``rest``: where the HTTP proxy is, and a curl line that produces through it.

``--url`` (default ``http://127.0.0.1:8082``, where ``make run`` serves it) is asked for its
cluster (``GET /v3/clusters``); the answer is the proxy's address, the cluster id, and a
curl command producing a JSON record to ``--topic`` — ready to paste. An address that does
not answer is exit 1 with one line naming it and ``rest.proxy.port``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import urllib.error
import urllib.request
from typing import Any

import trio

from trikafka.commands.common import EXIT_OK, Output, fail

__all__ = ["DEFAULT_REST_PROXY", "curl_line", "register"]

DEFAULT_REST_PROXY = "http://127.0.0.1:8082"


def curl_line(url: str, topic: str) -> str:
    body = json.dumps({"records": [{"value": {"hello": "world"}}]}, separators=(",", ":"))
    return (
        'curl -X POST -H "Content-Type: application/vnd.kafka.json.v2+json" '
        f"--data {shlex.quote(body)} {shlex.quote(url.rstrip('/') + '/topics/' + topic)}"
    )


def _clusters(url: str, timeout: float) -> Any:
    request = urllib.request.Request(url.rstrip("/") + "/v3/clusters", headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the user's URL
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise fail(f"the HTTP proxy at {url} answered HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise fail(
            f"no HTTP proxy answers at {url}: {reason} (start the broker with --rest-proxy-port or rest.proxy.port)"
        ) from None


async def _show(args: argparse.Namespace, out: Output) -> int:
    answer = await trio.to_thread.run_sync(_clusters, args.url, args.timeout)
    cluster_id = answer["data"][0]["cluster_id"] if answer.get("data") else None
    curl = curl_line(args.url, args.topic)
    if out.as_json:
        out.json({"url": args.url.rstrip("/"), "cluster_id": cluster_id, "curl": curl})
        return EXIT_OK
    out.line(f"HTTP proxy (Confluent REST Proxy API v2 and v3) at {args.url.rstrip('/')}, cluster {cluster_id}")
    out.line(f"produce a JSON record to {args.topic}:")
    out.line(f"  {curl}")
    return EXIT_OK


def register(commands: Any) -> None:
    parser = commands.add_parser("rest", help="the HTTP proxy's address and a curl line that produces through it")
    parser.add_argument(
        "--url", default=DEFAULT_REST_PROXY, metavar="URL", help=f"the HTTP proxy (default {DEFAULT_REST_PROXY})"
    )
    parser.add_argument("--topic", default="test", help="the topic in the curl line (default test)")
    parser.add_argument("--json", action="store_true", help="JSON on stdout, for scripts")
    parser.add_argument(
        "--timeout", type=float, default=10.0, metavar="SECONDS", help="give up on the proxy after this long"
    )
    parser.set_defaults(run=_show)
