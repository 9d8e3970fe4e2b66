"""CRC-32C (Castagnoli) of record batches: the ``crc32c`` package's C function, imported on the
first checksum.

The package's ``__init__`` reads its own version through ``importlib.metadata`` and imports its
command line (argparse, the email parser): ~10–15 ms that a broker would otherwise pay at start,
before its first ApiVersions, for a checksum it first needs at the first Produce or Fetch of a
record batch. Only the first call goes through the import; each later one costs one Python call
more than calling the package directly.
"""

from __future__ import annotations

from collections.abc import Callable

Buffer = bytes | bytearray | memoryview

__all__ = ["Buffer", "crc32c"]

_impl: Callable[..., int] | None = None


def crc32c(data: Buffer, value: int = 0) -> int:
    """The CRC-32C of ``data`` (bytes, bytearray or a memoryview); with ``value``, the CRC of
    some earlier bytes followed by ``data`` (a checksum over parts, without joining them)."""
    impl = _impl
    if impl is None:
        impl = _load()
    return impl(data, value) if value else impl(data)


def _load() -> Callable[..., int]:
    global _impl
    from crc32c import crc32c as impl

    _impl = impl
    return impl
