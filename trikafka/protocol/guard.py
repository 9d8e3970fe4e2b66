"""A bounds check that runs before kio reads a request body.

Why: kio 0.6.5's native reader reserves memory for an array from the count on the wire before
reading its elements, so a four-byte lie ("2**32 topics follow") asks for tens of GiB and the
allocation failure aborts the whole process — every client's broker, not just the sender's
connection. This module walks the body's structure, as kio's own field metadata describes it,
and checks that every array count, string and bytes length fits in the bytes that remain.
It builds nothing; a body that passes is then decoded by kio as usual. Anything that fails is
an :class:`InvalidRequestError`, which closes only that connection.

The same walk makes unknown tagged fields harmless. Kafka (KIP-482) skips a tag it does not
know by its size, which is what lets newer clients add tags; kio 0.6.5 refuses them. Tag
sections holding unknown tags are rewritten without them (rare: the frame is copied only
then), for the request header's tags and the body's alike.

The walk is compiled once per entity class into one Python function (about 2 µs for a
typical request; see "generated walkers" below); record batches and other byte fields are
skipped by length, never scanned.

The same walk lifts a Produce request's record batches out of the frame (``lift``): kio
copies every ``records`` field into fresh ``bytes``, and for a produce of large batches that
copy (the kernel zeroing fresh pages for it) was as much of the broker's CPU as the log's own
copy. A ``records`` field of :data:`LIFT_RECORDS_MIN` bytes or more is rewritten as null in
the frame kio reads (a few bytes of framing copied, the batches not), and its span is handed
back, so the decoder can set a view of the frame in its place (``headers.decode_request``).
"""

from __future__ import annotations

import functools
import struct
import typing
from typing import TYPE_CHECKING, Any

from trikafka.errors import InvalidRequestError
from trikafka.protocol.entities import entity_fields

if TYPE_CHECKING:
    from kio.static.protocol import Entity

__all__ = ["LIFT_RECORDS_MIN", "check_request", "put_back_records"]

#: A ``records`` field at least this long is lifted out as a view (smaller ones: kio's copy
#: costs less than the rewrite).
LIFT_RECORDS_MIN = 8 * 1024

_FIXED = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# A plan step: (kind, detail, is_array, nullable)
#   kind "fixed": detail = size; "string"/"bytes": detail = None; "struct": detail = the class
#   nullable: the schema allows null here (a -1 length or count; a 0xFF marker for a struct)
Step = tuple[str, Any, bool, bool, str]  # ..., the field's name (for errors)


class _Bad(Exception):
    pass


@functools.cache
def _plan(cls: type) -> tuple[tuple[Step, ...], dict[int, Step], bool]:
    """(steps for the untagged fields in order, tag → step, flexible)."""
    flexible = bool(getattr(cls, "__flexible__", False))
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    for name, (field, hint, nested, is_tuple) in entity_fields(cls).items():
        kafka_type = field.metadata.get("kafka_type")
        nullable = type(None) in typing.get_args(hint)
        if nested is not None:
            step: Step = ("struct", nested, is_tuple, nullable, name)
        elif kafka_type in _FIXED:
            step = ("fixed", _FIXED[kafka_type], is_tuple, nullable, name)
        elif kafka_type == "string":
            step = ("string", None, is_tuple, nullable, name)
        elif kafka_type == "bytes":
            step = ("bytes", None, is_tuple, nullable, name)
        elif kafka_type == "records":
            step = ("records", None, is_tuple, nullable, name)
        else:
            raise LookupError(f"no bounds rule for {cls.__name__}.{field.name} ({kafka_type})")
        tag = field.metadata.get("tag")
        if tag is not None:
            tagged[tag] = step
        elif steps and _is_scalar(step) and _is_scalar(steps[-1]):
            # Consecutive scalars are one step: nothing is checked between them, only the
            # end after the walk (a Fetch partition's six ints were six loop turns).
            steps[-1] = ("fixed", steps[-1][1] + step[1], False, False, f"{steps[-1][4]}..{name}")
        else:
            steps.append(step)
    return tuple(steps), tagged, flexible


def _is_scalar(step: Step) -> bool:
    return step[0] == "fixed" and not step[2]


def _element_size(kind: str, detail: Any, flexible: bool) -> int:
    """The fewest bytes one array element of this kind can take on the wire."""
    if kind == "fixed":
        result: int = detail
        return result
    if kind == "struct":
        return _min_size(detail)
    if flexible:
        return 1  # a compact length
    return 2 if kind == "string" else 4


@functools.cache
def _min_size(cls: type) -> int:
    """The fewest bytes an instance of ``cls`` can take: an array count claiming more
    elements than fit at this size is refused before kio reserves memory for them."""
    steps, _tagged, flexible = _plan(cls)
    total = 1 if flexible else 0  # the tag section's count
    for kind, detail, is_array, nullable, _name in steps:
        if is_array:
            total += 1 if flexible else 4
        elif kind == "struct":
            total += 1 if nullable else _min_size(detail)
        else:
            total += _element_size(kind, detail, flexible)
    return max(total, 1)


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 35:
            raise _Bad("truncated or overlong varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _length(buf: bytes, pos: int, end: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """A string/bytes/array length (-1 for null) and the position after it."""
    if flexible:
        raw, pos = _uvarint(buf, pos, end)
        return raw - 1, pos
    size = 4 if wide else 2
    if pos + size > end:
        raise _Bad("truncated length")
    value = (_I32 if wide else _I16).unpack_from(buf, pos)[0]
    return value, pos + size


def _null(size: int, nullable: bool, what: str) -> int:
    """0 for a null the schema allows; :class:`_Bad` for any other negative length (Kafka's
    "non-nullable field was serialized as null"), so no handler ever meets a None it was
    promised would not come."""
    if size == -1 and nullable:
        return 0
    if size == -1:
        raise _Bad(f"null {what} where the schema forbids null")
    raise _Bad(f"{what} length {size}")


def _skip_one(
    buf: bytes, pos: int, end: int, kind: str, detail: Any, flexible: bool, optional: bool, name: str
) -> int:
    if kind == "fixed":
        pos += detail
    elif kind == "string":
        size, pos = _length(buf, pos, end, flexible, wide=False)
        pos += size if size >= 0 else _null(size, optional, f"string {name}")
    elif kind == "bytes":
        size, pos = _length(buf, pos, end, flexible, wide=True)
        pos += size if size >= 0 else _null(size, optional, f"bytes {name}")
    elif kind == "records":
        start = pos
        size, pos = _length(buf, pos, end, flexible, wide=True)
        if size < 0:
            _null(size, optional, f"records {name}")
        if _lift is not None:
            if size >= LIFT_RECORDS_MIN and pos + size <= end:
                _lift.append((pos, pos + size))
                _edits.append((start, pos + size, _NULL_COMPACT if flexible else _NULL_LEGACY))
            else:
                _lift.append(None)
        pos += max(size, 0)
    else:
        if optional:
            if pos >= end:
                raise _Bad("truncated struct marker")
            marker = buf[pos]
            pos += 1
            if marker == 0xFF:
                return pos
        pos = _walk(buf, pos, end, detail)
    if pos > end:
        raise _Bad("field runs past the end of the request")
    return pos


def _skip_step(buf: bytes, pos: int, end: int, step: Step, flexible: bool) -> int:
    kind, detail, is_array, nullable, name = step
    if not is_array:
        return _skip_one(buf, pos, end, kind, detail, flexible, nullable, name)
    count, pos = _length(buf, pos, end, flexible, wide=True)
    if count < 0:
        _null(count, nullable, f"array {name}")
        return pos
    smallest = _element_size(kind, detail, flexible)
    if count * smallest > end - pos:
        raise _Bad(f"array {name} of {count} elements cannot fit in {end - pos} bytes")
    for _ in range(count):
        pos = _skip_one(buf, pos, end, kind, detail, flexible, False, name)
    return pos


# Edits collected by a walk: (start, end, replacement) — tag sections rewritten without
# their unknown tags, lifted records. Module-level to keep the hot path free of an extra
# argument.
_edits: list[tuple[int, int, bytes]] = []
# While a walk lifts records: per ``records`` field in walk order, the span lifted, or None.
_lift: list[tuple[int, int] | None] | None = None
_NULL_COMPACT = b"\x00"  # a compact nullable length: null
_NULL_LEGACY = b"\xff\xff\xff\xff"  # an int32 length: null


def _tag_section(buf: bytes, pos: int, end: int, tagged: dict[int, Step], flexible: bool) -> int:
    start = pos
    count, pos = _uvarint(buf, pos, end)
    if count > end - pos:
        raise _Bad(f"{count} tagged fields cannot fit in {end - pos} bytes")
    kept: list[tuple[int, int]] = []  # byte ranges of known tag entries
    unknown = False
    for _ in range(count):
        entry = pos
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        if size > end - pos:
            raise _Bad(f"tagged field {tag} of {size} bytes runs past the end")
        step = tagged.get(tag)
        if step is not None:
            _skip_step(buf, pos, pos + size, step, flexible)
            kept.append((entry, pos + size))
        else:
            unknown = True
        pos += size
    if unknown:
        section = bytearray(_encode_uvarint(len(kept)))
        for a, b in kept:
            section += buf[a:b]
        _edits.append((start, pos, bytes(section)))
    return pos


def _encode_uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _walk(buf: bytes, pos: int, end: int, cls: type) -> int:
    try:
        walker = _walkers[cls]
    except KeyError:
        walker = _compile_walker(cls, set())
    result: int = walker(buf, pos, end)
    return result


# --- generated walkers -----------------------------------------------------------------------
# The walk below (``_interpret``) is the reference: it reads a class's plan step by step, ~37
# Python calls for a one-partition Produce (4.8 µs). Each class is instead compiled once into
# one function doing the same checks in the same order, with the common cases of flexible
# versions (compact lengths under 128, arrays of structs, strings) written out inline and
# every other step (legacy lengths, records, bytes, nullable structs, tags) handed to the
# same helpers. tests/protocol/test_guard_walkers.py holds both to the same answers.

_walkers: dict[type, Any] = {}


def _fits(name: str, count: int, room: int) -> _Bad:
    return _Bad(f"array {name} of {count} elements cannot fit in {room} bytes")


_HELPERS = {"_Bad": _Bad, "_length": _length, "_null": _null, "_skip_step": _skip_step,
            "_tag_section": _tag_section, "_fits": _fits}


def _compile_walker(cls: type, compiling: set[type]) -> Any:
    steps, tagged, flexible = _plan(cls)
    compiling.add(cls)
    names = dict(_HELPERS, _walk=_walk)
    lines = ["def walk(buf, pos, end):"]
    compact = "pos < end and buf[pos] < 0x80"

    def const(value: Any) -> str:
        names[f"c{len(names)}"] = value
        return f"c{len(names) - 1}"

    def compact_length(target: str, wide: bool) -> None:
        lines.extend([f"    if {compact}:", f"        {target} = buf[pos] - 1", "        pos += 1",
                      "    else:", f"        {target}, pos = _length(buf, pos, end, True, {wide})"])

    for step in steps:
        kind, detail, is_array, nullable, name = step
        if kind == "fixed" and not is_array:
            lines.append(f"    pos += {detail}")
        elif flexible and is_array and kind in ("struct", "fixed"):
            compact_length("count", True)
            lines.extend(["    if count < 0:", f"        _null(count, {nullable}, {const('array ' + name)})",
                          f"    elif count * {_element_size(kind, detail, True)} > end - pos:",
                          f"        raise _fits({const(name)}, count, end - pos)"])
            if kind == "fixed":
                lines.extend(["    else:", f"        pos += count * {detail}"])
            else:
                if detail in compiling:  # a class inside itself (none in Kafka's schemas)
                    call = f"_walk(buf, pos, end, {const(detail)})"
                else:
                    walker = _walkers.get(detail) or _compile_walker(detail, compiling)
                    call = f"{const(walker)}(buf, pos, end)"
                lines.extend(["    else:", "        for _ in range(count):", f"            pos = {call}",
                              "            if pos > end:",
                              "                raise _Bad('field runs past the end of the request')"])
        elif flexible and kind == "string" and not is_array:
            compact_length("size", False)
            lines.extend([f"    pos += size if size >= 0 else _null(size, {nullable}, {const('string ' + name)})",
                          "    if pos > end:", "        raise _Bad('field runs past the end of the request')"])
        else:
            lines.append(f"    pos = _skip_step(buf, pos, end, {const(step)}, {flexible})")
    lines.extend(["    if pos > end:", "        raise _Bad('field runs past the end of the request')"])
    if flexible:
        lines.extend(["    if pos < end and buf[pos] == 0:", "        pos += 1", "    else:",
                      f"        pos = _tag_section(buf, pos, end, {const(tagged)}, True)"])
    lines.append("    return pos")
    exec("\n".join(lines), names)  # noqa: S102 - source built here from kio's field metadata
    compiling.discard(cls)
    _walkers[cls] = names["walk"]
    return names["walk"]


def _interpret(buf: bytes, pos: int, end: int, cls: type) -> int:
    """The reference walk of ``cls``: its plan, step by step."""
    steps, tagged, flexible = _plan(cls)
    for step in steps:
        if step[0] == "fixed" and not step[2]:  # a scalar: nothing to check but the end
            pos += step[1]
        else:
            pos = _skip_step(buf, pos, end, step, flexible)
    if pos > end:
        raise _Bad("field runs past the end of the request")
    if flexible:
        if pos < end and buf[pos] == 0:  # no tagged fields: the usual case
            pos += 1
        else:
            pos = _tag_section(buf, pos, end, tagged, flexible)
    return pos


def _apply(frame: bytes) -> bytes:
    if not _edits:
        return frame
    out = bytearray()
    last = 0
    with memoryview(frame) as view:  # slices of a view: the lifted batches are never copied
        for start, stop, replacement in sorted(_edits):
            out += view[last:start]
            out += replacement
            last = stop
        out += view[last:]
    return bytes(out)


def check_request(
    header_flexible: bool,
    cls: type[Entity],
    frame: bytes,
    lift: list[tuple[int, int] | None] | None = None,
) -> tuple[bytes, int]:
    """Check a whole request frame (header and body) before kio reads it.

    Returns the frame to decode — the same object unless unknown tagged fields were dropped
    or records lifted — and where its body starts. Raises InvalidRequestError when a length
    does not fit. With ``lift`` (a list, filled here), ``records`` fields of
    :data:`LIFT_RECORDS_MIN` bytes or more are nulled in the returned frame and their spans
    in ``frame`` appended in walk order (None for each field left in place); when none was
    lifted the list ends up without spans and the frame is returned as it came.
    """
    global _lift
    _edits.clear()
    _lift = lift
    try:
        end = len(frame)
        # Request header: api key, version, correlation id, client id (always a legacy
        # nullable string), then — in header v2 — a tag section with no known tags.
        size, pos = _length(frame, 8, end, False, wide=False)
        pos += max(size, 0)
        if pos > end:
            raise _Bad("client id runs past the end")
        if header_flexible:
            if pos < end and frame[pos] == 0:  # no tagged fields: the usual case
                pos += 1
            else:
                pos = _tag_section(frame, pos, end, {}, True)
        body_start = pos
        _walk(frame, pos, end, cls)
        if not _edits:
            return frame, body_start
        header_edits = [e for e in _edits if e[0] < body_start]
        shift = sum(len(r) - (b - a) for a, b, r in header_edits)
        return _apply(frame), body_start + shift
    except _Bad as exc:
        raise InvalidRequestError(f"malformed {cls.__name__} v{cls.__version__}: {exc}") from None
    finally:
        _edits.clear()
        _lift = None


def put_back_records(
    body: Any, cls: type, lift: list[tuple[int, int] | None], frame: bytes | memoryview
) -> None:
    """Set each lifted ``records`` field of ``body`` (decoded from the frame
    :func:`check_request` returned) to a read-only view of ``frame`` (the frame checked),
    in the walk order the spans were collected in.

    In place: the tree kio just built is ours alone until the request is handed on, so its
    entities are set through ``object.__setattr__`` (as a frozen dataclass's own
    ``__post_init__`` would) rather than rebuilt — rebuilding three levels of frozen
    dataclasses cost more than the copy it saves for a mid-sized batch.
    """
    with memoryview(frame) as whole:
        view = whole.toreadonly()
    _put_back(body, cls, iter(lift), view)


def _put_back(obj: Any, cls: type, spans: Any, view: memoryview) -> None:
    steps, _tagged, _flexible = _plan(cls)
    for kind, detail, is_array, _nullable, name in steps:
        if kind == "records":
            # A records field is never an array (Kafka's schemas have none).
            span = next(spans)
            if span is not None:
                object.__setattr__(obj, name, view[span[0] : span[1]])
        elif kind == "struct":
            value = getattr(obj, name)
            if value is None:
                continue
            if is_array:
                for item in value:
                    _put_back(item, detail, spans, view)
            else:
                _put_back(value, detail, spans, view)
