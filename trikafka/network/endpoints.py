"""Endpoints and the addresses of accepted streams.

A stream accepted from TCP has a socket to ask; the in-memory transport used by
deterministic tests carries ``local_address`` / ``remote_address`` attributes instead. TLS
wraps either, so we unwrap ``transport_stream`` first.
"""

from __future__ import annotations

import socket

import trio

from trikafka.config import ListenerSpec

__all__ = ["BoundEndpoint", "endpoint_address", "stream_addresses", "apply_socket_options"]

Address = tuple[str, int]


#: A listener as bound: the name from ``listeners`` with the real host and port (port 0
#: becomes the port the OS chose). The same value type as a ``listeners`` entry.
BoundEndpoint = ListenerSpec


def endpoint_address(endpoint: BoundEndpoint) -> str:
    """``host:port`` as ``bootstrap.servers`` takes it (``[host]:port`` for an IPv6 host)."""
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{host}:{endpoint.port}"


def _innermost(stream: trio.abc.Stream) -> object:
    while hasattr(stream, "transport_stream"):
        stream = stream.transport_stream
    return stream


def stream_addresses(stream: trio.abc.Stream) -> tuple[Address, Address]:
    inner = _innermost(stream)
    if isinstance(inner, trio.SocketStream):
        local = inner.socket.getsockname()
        try:
            remote = inner.socket.getpeername()
        except OSError:  # the peer already went away
            remote = ("0.0.0.0", 0)
        return (local[0], local[1]), (remote[0], remote[1])
    local = getattr(inner, "local_address", ("memory", 0))
    remote = getattr(inner, "remote_address", ("memory", 0))
    return tuple(local), tuple(remote)


def apply_socket_options(stream: trio.abc.Stream, send_buffer: int, receive_buffer: int) -> None:
    """Kafka's socket.send/receive.buffer.bytes; -1 leaves the OS's autotuning alone.

    trio's SocketStream already sets TCP_NODELAY on every stream (a test checks it).
    """
    inner = _innermost(stream)
    if not isinstance(inner, trio.SocketStream):
        return
    if send_buffer != -1:
        inner.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    if receive_buffer != -1:
        inner.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
