"""The HTTP proxy: Confluent's REST Proxy API (v2 and v3) over trikafka's own Trio client.

Served on ``rest.proxy.port`` (``--rest-proxy-port``) by the broker's HTTP server; see
docs/http-proxy.md for every route, format and limit.
"""

from trikafka.rest.app import RestProxy, serve_rest_proxy

__all__ = ["RestProxy", "serve_rest_proxy"]
