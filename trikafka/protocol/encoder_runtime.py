"""Runtime helpers of the generated encoders (see ``encoder.py``): the primitives every
generated writer calls — varints, timedelta/datetime conversion exactly as kio does it, string
and bytes checks, the chunk-list extension for ``records`` — and nothing that generates code.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import typing
from collections.abc import Mapping
from typing import Any

from trikafka.errors import ErrorCode

__all__ = ["uvarint"]

_MISSING = dataclasses.MISSING

# -- primitives shared by the generated code ------------------------------------------------------

_UV = tuple(bytes([i]) for i in range(128))
#: uvarint(n + 1) for n < 127: compact lengths of short strings and arrays.
_UV1 = _UV[1:]


def uvarint(n: int) -> bytes:
    """Kafka's unsigned varint (7 bits per byte, least significant first)."""
    if n < 0x80:
        if n < 0:
            # kio's writer would loop forever on a negative value; never write one.
            raise ValueError(f"uvarint cannot encode negative {n}")
        return _UV[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_TD_EXACT = 2**50  # below this, round(timedelta(milliseconds=m).total_seconds() * 1000) == m


def _td(value: Any) -> int:
    # Exactly build() then kio's write_timedelta_*: ints become timedelta(milliseconds=...).
    if isinstance(value, int):
        value = datetime.timedelta(milliseconds=value)
    result: int = round(value.total_seconds() * 1000)
    return result


def _dt(value: Any) -> int:
    result: int = round(value.timestamp() * 1000)
    return result


_ECM = ErrorCode._value2member_map_


def _bad_error_code(value: Any) -> typing.NoReturn:
    ErrorCode(value)  # raises the same ValueError build() would
    raise ValueError(f"{value!r} is not a valid ErrorCode")  # pragma: no cover


def _str_compact(value: Any) -> Any:
    # kio's compact string writer takes str (encoded) or anything bytes-like as is.
    if isinstance(value, str):
        return value.encode()
    if value is None:
        raise TypeError("Unexpectedly received None value")
    return value


def _str_legacy(value: Any) -> bytes:
    if value is None:
        raise TypeError("Unexpectedly received None value")
    result: bytes = value.encode()
    return result


def _nbytes(chunk: Any) -> int:
    return chunk.nbytes if isinstance(chunk, memoryview) else len(chunk)


def _bytes_slow(out: list[Any], value: Any, compact: bool) -> None:
    """bytes fields given anything but ``bytes``: bytearray, memoryview, str, chunk lists."""
    if value is None:
        raise TypeError("Unexpectedly received None value")
    if isinstance(value, (list, tuple)):
        chunks = value
        n = 0
        for chunk in chunks:
            n += _nbytes(chunk)
    else:
        if isinstance(value, str):
            if not compact:
                raise TypeError("legacy bytes field given str")
            value = value.encode()
        chunks = (value,)
        n = _nbytes(value)
    out.append(uvarint(n + 1) if compact else _I32(n))
    out.extend(chunks)


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value)


_I32 = struct.Struct(">i").pack
_I16 = struct.Struct(">h").pack
_NULL_UV = b"\x00"
_NULL_I16 = b"\xff\xff"
_NULL_I32 = b"\xff\xff\xff\xff"
_Z16 = bytes(16)


def _missing(cls: type, values: Mapping[str, Any]) -> None:
    """Turn a KeyError for a required field into the TypeError ``cls(**kwargs)`` raises."""
    absent = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is _MISSING
        and f.default_factory is _MISSING
        and f.metadata.get("kafka_type") != "error_code"
        and f.name not in values
    ]
    if absent:
        names = ", ".join(repr(n) for n in absent)
        raise TypeError(
            f"{cls.__qualname__}.__init__() missing {len(absent)} required keyword-only "
            f"argument{'s' if len(absent) > 1 else ''}: {names}"
        ) from None

