"""CRC-32C (Castagnoli) of record batches: the ``crc32c`` package's C function, loaded on the
first checksum.

The package's ``__init__`` reads its own version through ``importlib.metadata`` and imports its
command line (argparse, the email parser): 6–50 ms, more on a busy machine, that a broker would
pay at start — or, deferred, inside its first Produce or Fetch of a record batch. So the
package's compiled module (``crc32c/_crc32c``) is loaded on its own, from the package's
directory, without running that ``__init__``: well under a millisecond. Where that fails (a
different layout of the package) the package is imported as before. Only the first call goes
through the load; each later one costs one Python call more than calling the package directly.
"""

from __future__ import annotations

from collections.abc import Callable

Buffer = bytes | bytearray | memoryview

__all__ = ["Buffer", "crc32c", "implementation"]

_impl: Callable[..., int] | None = None


def crc32c(data: Buffer, value: int = 0) -> int:
    """The CRC-32C of ``data`` (bytes, bytearray or a memoryview); with ``value``, the CRC of
    some earlier bytes followed by ``data`` (a checksum over parts, without joining them)."""
    impl = _impl
    if impl is None:
        impl = _load()
    return impl(data, value) if value else impl(data)


def implementation() -> Callable[..., int]:
    """The package's ``crc32c(data, value=0)`` itself (loaded now if it was not): for callers
    that call it many times, such as the C record walk."""
    impl = _impl
    return impl if impl is not None else _load()


def _load() -> Callable[..., int]:
    global _impl
    impl = _compiled()
    if impl is None:
        from crc32c import crc32c as package_impl

        impl = package_impl
    _impl = impl
    return impl


def _compiled() -> Callable[..., int] | None:
    """``crc32c._crc32c.crc32c`` loaded from its file, without the package's ``__init__``;
    None when the package is not laid out that way."""
    import importlib.machinery
    import importlib.util
    import os

    try:
        package = importlib.util.find_spec("crc32c")  # finds, does not run, the package
        if package is None or not package.submodule_search_locations:
            return None
        for directory in package.submodule_search_locations:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(directory, "_crc32c" + suffix)
                if not os.path.exists(path):
                    continue
                spec = importlib.util.spec_from_file_location("crc32c._crc32c", path)
                if spec is None or spec.loader is None:
                    return None
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                impl: Callable[..., int] = module.crc32c
                return impl
    except (ImportError, OSError, AttributeError):
        return None
    return None
