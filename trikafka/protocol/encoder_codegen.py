"""Code generation for the encoders (see ``encoder.py``): each kio entity class compiled once,
on first use, into two plain Python functions by ``exec`` of source built from its field
plans — one reading a mapping (``build`` semantics), one reading a built entity.
"""

from __future__ import annotations

import dataclasses
import struct
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from kio.serial._implicit_defaults import get_tagged_field_default

from trikafka.errors import ErrorCode
from trikafka.protocol.encoder_plans import (
    _FIXED,
    _INJECTIVE,
    _KEEP,
    _PLAIN_ARRAY,
    _Plan,
    _plans,
)
from trikafka.protocol.encoder_runtime import (
    _ECM,
    _I16,
    _I32,
    _MISSING,
    _NULL_I16,
    _NULL_I32,
    _NULL_UV,
    _TD_EXACT,
    _UV1,
    _Z16,
    _as_tuple,
    _bad_error_code,
    _bytes_slow,
    _dt,
    _missing,
    _str_compact,
    _str_legacy,
    _td,
    uvarint,
)
from trikafka.protocol.entities import _convert

if TYPE_CHECKING:
    from kio.static.protocol import Entity

__all__ = ["PartsWriter", "dict_writer", "obj_writer"]

#: ``(parts, values) -> None``: appends the encoding of ``values`` to ``parts``.
PartsWriter = Callable[[list[Any], Any], None]

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


def _nested_of(p: _Plan) -> type:
    """The entity class of an entity or entity-array field."""
    if p.nested is None:
        raise TypeError(f"{p.name} is not an entity field")
    return p.nested


def _tag_of(p: _Plan) -> int:
    """The tag of a tagged field."""
    if p.tag is None:
        raise TypeError(f"{p.name} is not a tagged field")
    return p.tag


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
            _emit_entity(src, ind + 1, "it", _nested_of(p), mode)
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
    _emit_entity(src, ind, x, _nested_of(p), mode)


def _class_source(cls: type[Entity], plans: list[_Plan], mode: str) -> str:
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

    tagged = sorted((p for p in plans if p.tag is not None), key=_tag_of)
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



_G["_missing"] = _missing
_G["_MISS"] = _MISSING


def _default_of(p: _Plan) -> Any:
    return p.default if p.default is not _MISSING else get_tagged_field_default(p.field)


def _tag_default(p: _Plan) -> str:
    return _const(_default_of(p))


def _value_writer(cls: type[Entity], p: _Plan, mode: str) -> PartsWriter:
    """A function writing one (already converted, for mode "o") value of a tagged field."""
    src = _Src()
    _counter[0] += 1
    name = f"_w{_counter[0]}"
    src.add(0, f"def {name}(out, x):")
    src.add(1, "ap = out.append")
    _emit_value(src, 1, p, "x", mode, bool(cls.__flexible__), nullable=False)
    exec("\n".join(src.lines) + "\n", _G)
    result: Callable[[list[Any], Any], None] = _G[name]
    return result


def _is_injective(cls: type) -> bool:
    """Whether equal encodings imply equal values, so bytes can stand in for ``==``."""
    for p in _plans(cls):
        if p.tag is not None or p.kind != "prim" or p.ktype not in _INJECTIVE:
            return False
    return True


def _tag_writer(cls: type, p: _Plan, mode: str) -> str:
    """A function ``(value, tags) -> tags`` adding the field's tag unless it is the default."""
    default = _default_of(p)
    head = uvarint(_tag_of(p))
    write_o = _value_writer(cls, p, "o")

    def add(payload_parts: list[Any], tags: list[Any] | None) -> list[Any]:
        payload = b"".join(payload_parts)
        if tags is None:
            tags = []
        tags.append(head + uvarint(len(payload)) + payload)
        return tags

    if mode == "o":

        def tag_o(value: Any, tags: list[Any] | None) -> list[Any] | None:
            parts: list[Any] = []
            write_o(parts, value)
            return add(parts, tags)

        return _const(tag_o)

    write_d = _value_writer(cls, p, "d")
    field, hint, nested, is_tuple = p.field, p.hint, p.nested, p.is_tuple
    if p.kind == "entity_array" and (default == () or default is None):
        # A non-empty array never equals () or None, so only emptiness matters.
        def tag_d_array(value: Any, tags: list[Any] | None) -> list[Any] | None:
            if value is not None and value.__class__ is not tuple and value.__class__ is not list:
                value = tuple(value)
            if value is None:
                if default is None:
                    return tags
            elif default == () and not value:
                return tags
            parts: list[Any] = []
            write_d(parts, value)
            return add(parts, tags)

        return _const(tag_d_array)

    if p.kind == "entity" and nested is not None and _is_injective(nested):
        default_parts: list[Any] = []
        _obj_writers_for(nested)(default_parts, default)
        default_bytes = b"".join(default_parts)

        def tag_d_entity(value: Any, tags: list[Any] | None) -> list[Any] | None:
            if isinstance(value, Mapping):
                parts: list[Any] = []
                dict_writer(nested)(parts, value)
                if b"".join(parts) == default_bytes:
                    return tags
                return add(parts, tags)
            if value == default:
                return tags
            parts = []
            write_o(parts, value)
            return add(parts, tags)

        return _const(tag_d_entity)

    def tag_d(value: Any, tags: list[Any] | None) -> list[Any] | None:
        value = _convert(field, nested, is_tuple, value, hint)
        if value == default:
            return tags
        parts: list[Any] = []
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
        entity = cast("type[Entity]", cls)  # checked above: a kio dataclass with __flexible__
        for mode in ("o", "d"):
            exec(_class_source(entity, plans, mode), _G)
        _obj_writers[cls] = _G[f"o{i}"]
        _dict_writers[cls] = _G[f"d{i}"]


def _obj_writers_for(cls: type) -> PartsWriter:
    try:
        return _obj_writers[cls]
    except KeyError:
        _compile(cls)
        return _obj_writers[cls]



def dict_writer(cls: type) -> PartsWriter:
    """The generated writer of ``cls`` reading a mapping, compiled on first use."""
    try:
        return _dict_writers[cls]
    except KeyError:
        _compile(cls)
        return _dict_writers[cls]


def obj_writer(cls: type) -> PartsWriter:
    """The generated writer of ``cls`` reading a built entity, compiled on first use."""
    try:
        return _obj_writers[cls]
    except KeyError:
        _compile(cls)
        return _obj_writers[cls]
