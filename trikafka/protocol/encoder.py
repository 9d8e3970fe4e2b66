"""Encode a version-independent description straight to Kafka wire bytes.

``encode(cls, **values)`` gives exactly the bytes ``kio.serial.entity_writer(cls)`` writes for
``entities.build(cls, **values)``, without building kio entities. Both steps showed up as the
dominant cost of answering a request: ``build`` walks type hints and constructs frozen
dataclasses, and kio's writer calls one small function per field, each doing a
``struct.pack`` and a ``BytesIO.write``. Here neither happens per request.

Why generated code rather than closures: a closure plan still pays one Python call per field,
which is most of what kio's writer costs. Each entity class is instead compiled once, on first
use, into two plain functions (``exec`` of source built from the class's fields):

* one reading a ``Mapping`` (the ``build`` semantics: missing fields take the dataclass
  default, a missing ``error_code`` means no error, ``None`` for a non-nullable string/bytes
  becomes empty, ints are milliseconds for timedelta fields), and
* one reading an already-built kio entity by attribute (kio's writer semantics), because
  callers may mix prebuilt entities into dicts.

Consecutive fixed-width fields (ints, error codes, timedeltas, bools, uuids, …) are packed by a
single precompiled ``struct.Struct``; the empty tagged-field section of a flexible entity rides
along as a pad byte. Parts are appended to one list and joined once, so the cost per field is
a local load and a tuple slot. The generated functions stay ordinary Python (no trio, no I/O).

Things deliberately matched to kio/``build`` rather than "fixed":

* Integers are packed with the same struct codes, so an out-of-range value raises
  ``struct.error`` instead of writing garbage; an unknown error code raises ``ValueError``.
* Timedeltas are written as ``round(td.total_seconds() * 1000)``; an int (milliseconds) is
  written as-is when that formula provably returns it unchanged (``|ms| < 2**50``) and goes
  through the formula otherwise, so even float rounding at the extremes agrees with kio.
* Tagged fields are written only when the value differs from the field default (or kio's
  implicit default), compared after ``build``'s conversion. For a tagged nested entity given as
  a dict this needs the converted value; when the nested class is all integers its encoding is
  injective, so the encoded bytes are compared with the default's instead of building it.
  Other cases (rare: nested entities with strings or timedeltas in a tag) go through
  ``entities._convert`` and compare like kio does.

Deliberate extension: ``records`` and ``bytes`` fields accept ``bytes``, ``bytearray``,
``memoryview`` (its length is ``nbytes``), or a list/tuple of such chunks. Chunks are appended
to the part list as they are, so a record set read from several segments is copied exactly once,
by the final join (or not at all by a caller using :func:`encoder_for` and writing the parts
itself). kio itself does not accept chunk lists.

Why keep a second codec at all (kio already writes every response): measured with
``python -m benchmarks.codec`` (kio 0.6.5, this machine), kio's ``build`` + ``entity_writer``
against this encoder, µs per response body: Fetch v12 (3 × 16 KiB) 53.6 vs 5.7, Metadata v12
(10 topics × 3 partitions) 402.7 vs 52.2, Produce v9 (1 partition) 20.8 vs 1.7, ApiVersions v3
130.9 vs 7.7 — 8 to 17 times faster, on the path of every response.

**The contract** is ``tests/protocol/test_encoder.py::test_matches_kio_for_every_class``: for
every request, response and header class kio has, hypothesis-generated values encode to exactly
the bytes kio writes. Because the plans read kio's private ``kio.serial._introspect``, kio is
pinned to the exact tested version in ``pyproject.toml``; moving the pin means running that test.

Layout: this module is the public API; ``encoder_plans.py`` reads kio's field metadata,
``encoder_codegen.py`` generates and caches the writers, ``encoder_runtime.py`` holds the
primitives the generated code calls.
"""

from __future__ import annotations

from typing import Any

from trikafka.protocol.encoder_codegen import PartsWriter, _dict_writers, dict_writer, obj_writer
from trikafka.protocol.encoder_runtime import uvarint

__all__ = ["PartsWriter", "encode", "encode_entity", "encoder_for", "entity_encoder", "uvarint"]


def encoder_for(cls: type) -> PartsWriter:
    """``(parts, mapping)`` appending ``cls``'s encoding of ``mapping`` to the list ``parts``.

    For callers that frame the body themselves: prepend the size and header to the same list
    and join (or write) once, so large ``records`` are copied only there.
    """
    return dict_writer(cls)


def entity_encoder(cls: type) -> PartsWriter:
    """``(parts, entity)`` for a built kio entity: kio's writer, without its per-field calls."""
    return obj_writer(cls)


def encode(cls: type, /, **values: Any) -> bytes:
    """The bytes ``entity_writer(cls)`` writes for ``build(cls, **values)``."""
    out: list[Any] = []
    try:
        writer = _dict_writers[cls]
    except KeyError:
        writer = dict_writer(cls)
    writer(out, values)
    return b"".join(out)


def encode_entity(entity: Any) -> bytes:
    """The bytes ``entity_writer(type(entity))`` writes for ``entity``."""
    out: list[Any] = []
    obj_writer(type(entity))(out, entity)
    return b"".join(out)
