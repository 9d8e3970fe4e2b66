"""A plain HTTP/1.1 GET over a trio stream, for tests of the broker's HTTP server."""

from __future__ import annotations

import attrs
import trio

__all__ = ["Reply", "http_get"]


@attrs.frozen
class Reply:
    status: int
    headers: dict[str, str]
    body: str


async def http_get(host: str, port: int, path: str, headers: dict[str, str] | None = None) -> Reply:
    """One request with ``Connection: close``; the body is de-chunked."""
    stream = await trio.open_tcp_stream(host, port)
    async with stream:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        await stream.send_all(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n".encode())
        data = bytearray()
        while chunk := await stream.receive_some(65536):
            data += chunk
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if fields.get("transfer-encoding") == "chunked":
        out = bytearray()
        while True:
            size_line, _, body = body.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                break
            out += body[:size]
            body = body[size + 2 :]
        body = bytes(out)
    return Reply(status, fields, body.decode())
