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
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import threading
import typing
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from trikafka.protocol.entities import _convert, entity_fields

__all__ = ["encode", "encode_entity", "encoder_for", "entity_encoder", "uvarint"]

#: ``(parts, values) -> None``: appends the encoding of ``values`` to ``parts``.
PartsWriter = Callable[[list, Any], None]

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
    return round(value.total_seconds() * 1000)


def _dt(value: Any) -> int:
    return round(value.timestamp() * 1000)


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
    return value.encode()


def _nbytes(chunk: Any) -> int:
    return chunk.nbytes if isinstance(chunk, memoryview) else len(chunk)


def _bytes_slow(out: list, value: Any, compact: bool) -> None:
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


def _as_tuple(value: Any) -> tuple:
    return tuple(value)


_I32 = struct.Struct(">i").pack
_I16 = struct.Struct(">h").pack
_NULL_UV = b"\x00"
_NULL_I16 = b"\xff\xff"
_NULL_I32 = b"\xff\xff\xff\xff"
_Z16 = bytes(16)

# kafka_type → struct code for values of fixed width.
_FIXED = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float64": "d",
    "bool": "?",
    "error_code": "h",
    "timedelta_i32": "i",
    "timedelta_i64": "q",
    "datetime_i64": "q",
    "uuid": "16s",
}
# Array items that need no conversion: packed in one call.
_PLAIN_ARRAY = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float64"}
_INJECTIVE = {
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "error_code",
}


# -- field plans ----------------------------------------------------------------------------------


class _Keep:
    """Marks fields whose ``None`` build() leaves alone."""


_KEEP = _Keep()


@dataclasses.dataclass
class _Plan:
    field: dataclasses.Field
    name: str
    kind: str  # "prim", "prim_array", "entity", "entity_array"
    ktype: str | None
    nullable: bool  # as kio's writer sees it (tagged fields never are)
    tag: int | None
    default: Any  # dataclass default or _MISSING
    none_to: Any  # what build() turns None into, or _KEEP
    nested: type | None
    hint: Any
    is_tuple: bool
    legacy_client_id: bool


def _plans(cls: type) -> list[_Plan]:
    hints = entity_fields(cls)
    out = []
    for field in dataclasses.fields(cls):
        _, hint, nested, is_tuple = hints[field.name]
        fc = classify_field(field)
        kind = {
            PrimitiveField: "prim",
            PrimitiveTupleField: "prim_array",
            EntityField: "entity",
            EntityTupleField: "entity_array",
        }[type(fc)]
        ktype = field.metadata.get("kafka_type")
        tag = get_field_tag(field)
        none_to: Any = _KEEP
        if type(None) not in typing.get_args(hint):
            if ktype == "string":
                none_to = ""
            elif ktype in ("bytes", "records"):
                none_to = b""
        out.append(
            _Plan(
                field=field,
                name=field.name,
                kind=kind,
                ktype=ktype,
                nullable=False if tag is not None else is_optional(field),
                tag=None if tag is None else int(tag),
                default=field.default,
                none_to=none_to,
                nested=nested if kind in ("entity", "entity_array") else None,
                hint=hint,
                is_tuple=is_tuple,
                legacy_client_id=cls.__name__ == "RequestHeader" and field.name == "client_id",
            )
        )
    return out


# -- code generation ------------------------------------------------------------------------------

_G: dict[str, Any] = {
    "__builtins__": __builtins__,
    "_UV1": _UV1,
    "_uv": uvarint,
    "_td": _td,
    "_dt": _dt,
    "_ECM": _ECM,
    "_EC": ErrorCode,
    "_bad_ec": _bad_error_code,
    "_sc": _str_compact,
    "_sl": _str_legacy,
    "_bslow": _bytes_slow,
    "_I32": _I32,
    "_I16": _I16,
    "_Z16": _Z16,
    "_pack": struct.pack,
    "_tuple": _as_tuple,
    "_Mapping": Mapping,
    "_TDL": _TD_EXACT,
}
_lock = threading.RLock()
_dict_writers: dict[type, PartsWriter] = {}
_obj_writers: dict[type, PartsWriter] = {}
_names: dict[type, int] = {}
_counter = [0]


def _const(value: Any) -> str:
    _counter[0] += 1
    name = f"_k{_counter[0]}"
    _G[name] = value
    return name


def _struct(fmt: str) -> str:
    key = f"_S_{fmt.replace('?', 'Z')}"
    if key not in _G:
        _G[key] = struct.Struct(">" + fmt).pack
    return key


class _Src:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0

    def var(self) -> str:
        self.n += 1
        return f"x{self.n}"

    def add(self, ind: int, text: str) -> None:
        self.lines.append("    " * ind + text)


def _prep_fixed(src: _Src, ind: int, p: _Plan, x: str, nullable: bool) -> None:
    """Turn the value in ``x`` into what its struct code packs."""
    kt = p.ktype
    if kt == "error_code":
        src.add(ind, f"{x} = _ECM.get({x}, {x})")
        src.add(ind, f"if {x}.__class__ is not _EC: _bad_ec({x})")
    elif kt in ("timedelta_i32", "timedelta_i64"):
        src.add(ind, f"if {x}.__class__ is not int or not -_TDL < {x} < _TDL: {x} = _td({x})")
    elif kt == "datetime_i64":
        if nullable:
            src.add(ind, f"{x} = -1 if {x} is None else _dt({x})")
        else:
            src.add(ind, f"{x} = _dt({x})")
    elif kt == "uuid":
        src.add(ind, f"{x} = _Z16 if {x} is None else {x}.bytes")


def _emit_count(src: _Src, ind: int, n: str, flexible: bool) -> None:
    if flexible:
        src.add(ind, f"ap(_UV1[{n}] if {n} < 127 else _uv({n} + 1))")
    else:
        src.add(ind, f"ap(_I32({n}))")


def _emit_string(src: _Src, ind: int, x: str, compact: bool, nullable: bool) -> None:
    if nullable:
        src.add(ind, f"if {x} is None: ap({_NULL_UV if compact else _NULL_I16!r})")
        src.add(ind, "else:")
        ind += 1
    conv = "_sc" if compact else "_sl"
    src.add(ind, f"b = {x}.encode() if {x}.__class__ is str else {conv}({x})")
    if compact:
        src.add(ind, "n = len(b)")
        src.add(ind, "ap(_UV1[n] if n < 127 else _uv(n + 1))")
    else:
        src.add(ind, "ap(_I16(len(b)))")
    src.add(ind, "ap(b)")


def _emit_bytes(src: _Src, ind: int, x: str, compact: bool, nullable: bool) -> None:
    if nullable:
        src.add(ind, f"if {x} is None: ap({_NULL_UV if compact else _NULL_I32!r})")
        src.add(ind, f"elif {x}.__class__ is bytes:")
    else:
        src.add(ind, f"if {x}.__class__ is bytes:")
    if compact:
        src.add(ind + 1, f"n = len({x})")
        src.add(ind + 1, "ap(_UV1[n] if n < 127 else _uv(n + 1))")
    else:
        src.add(ind + 1, f"ap(_I32(len({x})))")
    src.add(ind + 1, f"ap({x})")
    src.add(ind, f"else: _bslow(out, {x}, {compact})")


def _emit_entity(src: _Src, ind: int, x: str, nested: type, mode: str) -> None:
    i = _names[nested]
    if mode == "o":
        src.add(ind, f"o{i}(out, {x})")
    else:
        src.add(ind, f"if {x}.__class__ is dict: d{i}(out, {x})")
        src.add(ind, f"elif isinstance({x}, _Mapping): d{i}(out, {x})")
        src.add(ind, f"else: o{i}(out, {x})")


def _emit_value(
    src: _Src, ind: int, p: _Plan, x: str, mode: str, flexible: bool, nullable: bool
) -> None:
    """Code appending the encoding of the value in ``x`` (not a fixed-width run member)."""
    kt = p.ktype
    if p.kind == "prim":
        if kt in _FIXED:
            _prep_fixed(src, ind, p, x, nullable)
            src.add(ind, f"ap({_struct(_FIXED[kt])}({x}))")
        elif kt == "string":
            if p.legacy_client_id:
                _emit_string(src, ind, x, compact=False, nullable=True)
            else:
                _emit_string(src, ind, x, compact=flexible, nullable=nullable)
        elif kt in ("bytes", "records"):
            _emit_bytes(src, ind, x, compact=flexible, nullable=nullable)
        else:
            raise NotImplementedError(f"kafka_type {kt!r} of {p.name}")
        return
    # Arrays: kio writes None as the null array whatever the schema says.
    if p.kind in ("prim_array", "entity_array"):
        src.add(ind, f"if {x} is None: ap({_NULL_UV if flexible else _NULL_I32!r})")
        src.add(ind, "else:")
        ind += 1
        src.add(
            ind, f"if {x}.__class__ is not tuple and {x}.__class__ is not list: {x} = _tuple({x})"
        )
        src.add(ind, f"n = len({x})")
        _emit_count(src, ind, "n", flexible)
        if p.kind == "entity_array":
            src.add(ind, f"for it in {x}:")
            _emit_entity(src, ind + 1, "it", p.nested, mode)
        elif kt in _PLAIN_ARRAY:
            code = _FIXED[kt]
            src.add(ind, f"if n: ap(_pack('>%d{code}' % n, *{x}))")
        elif kt == "string":
            src.add(ind, f"for it in {x}:")
            _emit_string(src, ind + 1, "it", compact=flexible, nullable=False)
        elif kt in ("bytes", "records"):
            src.add(ind, f"for it in {x}:")
            _emit_bytes(src, ind + 1, "it", compact=flexible, nullable=False)
        elif kt in _FIXED:
            src.add(ind, f"for it in {x}:")
            _prep_fixed(src, ind + 1, p, "it", nullable=False)
            src.add(ind + 1, f"ap({_struct(_FIXED[kt])}(it))")
        else:
            raise NotImplementedError(f"array of {kt!r} in {p.name}")
        return
    # A nested entity; nullable ones carry KIP-893's int8 marker.
    if nullable:
        src.add(ind, f"if {x} is None: ap(b'\\xff')")
        src.add(ind, "else:")
        ind += 1
        src.add(ind, "ap(b'\\x01')")
    _emit_entity(src, ind, x, p.nested, mode)


def _class_source(cls: type, plans: list[_Plan], mode: str) -> str:
    i = _names[cls]
    flexible = bool(cls.__flexible__)
    src = _Src()
    arg = "v" if mode == "d" else "o"
    src.add(0, f"def {mode}{i}(out, {arg}):")
    src.add(1, "ap = out.append")
    ind = 1
    if mode == "d":
        src.add(1, "try:")
        src.add(2, "pass")  # entities without fields (ListGroupsRequest v0)
        ind = 2
    run_codes: list[str] = []
    run_args: list[str] = []

    def flush(pad: bool = False) -> None:
        if pad and not run_codes:
            src.add(ind, "ap(b'\\x00')")
        elif run_codes:
            fmt = "".join(run_codes) + ("x" if pad else "")
            src.add(ind, f"ap({_struct(fmt)}({', '.join(run_args)}))")
            run_codes.clear()
            run_args.clear()

    for p in plans:
        if p.tag is not None:
            continue
        x = src.var()
        if mode == "o":
            src.add(ind, f"{x} = o.{p.name}")
        elif p.default is not _MISSING:
            default = p.default
            if p.ktype in ("timedelta_i32", "timedelta_i64") and default is not None:
                default = _td(default)
            src.add(ind, f"{x} = v.get({p.name!r}, {_const(default)})")
        elif p.ktype == "error_code":
            src.add(ind, f"{x} = v.get({p.name!r}, 0)")
        else:
            src.add(ind, f"{x} = v[{p.name!r}]")
        if mode == "d" and p.none_to is not _KEEP:
            src.add(ind, f"if {x} is None: {x} = {p.none_to!r}")
        if p.kind == "prim" and p.ktype in _FIXED:
            _prep_fixed(src, ind, p, x, p.nullable)
            run_codes.append(_FIXED[p.ktype])
            run_args.append(x)
        else:
            flush()
            _emit_value(src, ind, p, x, mode, flexible, p.nullable)

    tagged = sorted((p for p in plans if p.tag is not None), key=lambda p: p.tag)
    if not flexible:
        if tagged:
            raise ValueError(f"{cls.__name__}: tagged fields on a non-flexible entity")
        flush()
    elif not tagged:
        flush(pad=True)  # the empty tagged-field section is one zero byte
    else:
        flush()
        src.add(ind, "t = None")
        for p in tagged:
            x = src.var()
            if mode == "o":
                src.add(ind, f"{x} = o.{p.name}")
                src.add(ind, f"if {x} != {_tag_default(p)}: t = {_tag_writer(cls, p, 'o')}({x}, t)")
            else:
                src.add(ind, f"{x} = v.get({p.name!r}, _MISS)")
                src.add(ind, f"if {x} is not _MISS: t = {_tag_writer(cls, p, 'd')}({x}, t)")
        src.add(ind, "if t is None: ap(b'\\x00')")
        src.add(ind, "else:")
        src.add(ind + 1, "ap(_uv(len(t)))")
        src.add(ind + 1, "out.extend(t)")
    if mode == "d":
        src.add(1, "except KeyError:")
        src.add(2, f"_missing({_const(cls)}, v)")
        src.add(2, "raise")
    return "\n".join(src.lines) + "\n"


def _missing(cls: type, values: Mapping) -> None:
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


_G["_missing"] = _missing
_G["_MISS"] = _MISSING


def _default_of(p: _Plan) -> Any:
    return p.default if p.default is not _MISSING else get_tagged_field_default(p.field)


def _tag_default(p: _Plan) -> str:
    return _const(_default_of(p))


def _value_writer(cls: type, p: _Plan, mode: str) -> PartsWriter:
    """A function writing one (already converted, for mode "o") value of a tagged field."""
    src = _Src()
    _counter[0] += 1
    name = f"_w{_counter[0]}"
    src.add(0, f"def {name}(out, x):")
    src.add(1, "ap = out.append")
    _emit_value(src, 1, p, "x", mode, bool(cls.__flexible__), nullable=False)
    exec("\n".join(src.lines) + "\n", _G)
    return _G[name]


def _is_injective(cls: type) -> bool:
    """Whether equal encodings imply equal values, so bytes can stand in for ``==``."""
    for p in _plans(cls):
        if p.tag is not None or p.kind != "prim" or p.ktype not in _INJECTIVE:
            return False
    return True


def _tag_writer(cls: type, p: _Plan, mode: str) -> str:
    """A function ``(value, tags) -> tags`` adding the field's tag unless it is the default."""
    default = _default_of(p)
    head = uvarint(p.tag)
    write_o = _value_writer(cls, p, "o")

    def add(payload_parts: list, tags: list | None) -> list:
        payload = b"".join(payload_parts)
        if tags is None:
            tags = []
        tags.append(head + uvarint(len(payload)) + payload)
        return tags

    if mode == "o":

        def tag_o(value: Any, tags: list | None) -> list | None:
            parts: list = []
            write_o(parts, value)
            return add(parts, tags)

        return _const(tag_o)

    write_d = _value_writer(cls, p, "d")
    field, hint, nested, is_tuple = p.field, p.hint, p.nested, p.is_tuple
    if p.kind == "entity_array" and (default == () or default is None):
        # A non-empty array never equals () or None, so only emptiness matters.
        def tag_d(value: Any, tags: list | None) -> list | None:
            if value is not None and value.__class__ is not tuple and value.__class__ is not list:
                value = tuple(value)
            if value is None:
                if default is None:
                    return tags
            elif default == () and not value:
                return tags
            parts: list = []
            write_d(parts, value)
            return add(parts, tags)

        return _const(tag_d)

    if p.kind == "entity" and _is_injective(nested):
        default_parts: list = []
        _obj_writers_for(nested)(default_parts, default)
        default_bytes = b"".join(default_parts)

        def tag_d(value: Any, tags: list | None) -> list | None:
            if isinstance(value, Mapping):
                parts: list = []
                dict_writer = encoder_for(nested)
                dict_writer(parts, value)
                if b"".join(parts) == default_bytes:
                    return tags
                return add(parts, tags)
            if value == default:
                return tags
            parts = []
            write_o(parts, value)
            return add(parts, tags)

        return _const(tag_d)

    def tag_d(value: Any, tags: list | None) -> list | None:
        value = _convert(field, nested, is_tuple, value, hint)
        if value == default:
            return tags
        parts: list = []
        write_o(parts, value)
        return add(parts, tags)

    return _const(tag_d)


def _compile(cls: type) -> None:
    with _lock:
        if cls in _dict_writers:
            return
        if not (dataclasses.is_dataclass(cls) and hasattr(cls, "__flexible__")):
            raise TypeError(f"{cls!r} is not a kio entity class")
        plans = _plans(cls)
        _counter[0] += 1
        _names[cls] = _counter[0]
        for p in plans:
            if p.nested is not None:
                _compile(p.nested)
        i = _names[cls]
        for mode in ("o", "d"):
            exec(_class_source(cls, plans, mode), _G)
        _obj_writers[cls] = _G[f"o{i}"]
        _dict_writers[cls] = _G[f"d{i}"]


def _obj_writers_for(cls: type) -> PartsWriter:
    try:
        return _obj_writers[cls]
    except KeyError:
        _compile(cls)
        return _obj_writers[cls]


# -- public API -----------------------------------------------------------------------------------


def encoder_for(cls: type) -> PartsWriter:
    """``(parts, mapping)`` appending ``cls``'s encoding of ``mapping`` to the list ``parts``.

    For callers that frame the body themselves: prepend the size and header to the same list
    and join (or write) once, so large ``records`` are copied only there.
    """
    try:
        return _dict_writers[cls]
    except KeyError:
        _compile(cls)
        return _dict_writers[cls]


def entity_encoder(cls: type) -> PartsWriter:
    """``(parts, entity)`` for a built kio entity: kio's writer, without its per-field calls."""
    return _obj_writers_for(cls)


def encode(cls: type, /, **values: Any) -> bytes:
    """The bytes ``entity_writer(cls)`` writes for ``build(cls, **values)``."""
    out: list = []
    try:
        writer = _dict_writers[cls]
    except KeyError:
        writer = encoder_for(cls)
    writer(out, values)
    return b"".join(out)


def encode_entity(entity: Any) -> bytes:
    """The bytes ``entity_writer(type(entity))`` writes for ``entity``."""
    out: list = []
    _obj_writers_for(type(entity))(out, entity)
    return b"".join(out)
