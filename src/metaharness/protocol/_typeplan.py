"""Internal: what msgspec cannot check by itself, and serde-like error wording.

Two gaps in msgspec that the wire rules need closed (docs/reference/wire.md):

* msgspec's integer bounds stop at int64, so a `u64` field would accept
  18446744073709551616; and msgspec's *encoder* writes whatever Python value a
  field holds, so a `bool` or a float in an integer field would go out as
  `true`/`2.0`. `check_struct` walks a struct's typed (never pass-through)
  fields and reports the first such value.
* msgspec's validation messages (``Object missing required field `x` - at `$.y` ``)
  are translated into serde's wording (``missing field `x` ``) where an obvious
  equivalent exists; `translate_error` does that, using the failing value when it
  can find it in the untyped object.

Plans are computed once per struct type from `msgspec.inspect` and cached.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec



class _LazyInspect:
    """`msgspec.inspect`, imported on first use (it pulls in the stdlib `inspect`)."""

    def __getattr__(self, name: str) -> Any:
        import msgspec.inspect as real

        globals()["mi"] = real
        return getattr(real, name)


mi: Any = _LazyInspect()

U64_MAX = 18_446_744_073_709_551_615
_I64_MIN = -9_223_372_036_854_775_808
_I64_MAX = 9_223_372_036_854_775_807

# Friendly names for the tagged unions, keyed by their first member's tag field + tag.
_UNION_NAMES: dict[tuple[str, str], str] = {
    ("decision", "allow"): "Decision",
    ("outcome", "completed"): "StepOutcome",
    ("result", "ok"): "CommandOutcome",
    ("kind", "exited"): "ProcessTermination",
    ("op", "file.read"): "Operation",
    ("handoff", "none"): "Handoff",
    ("event", "session.started"): "Event",
    ("command", "tool.decide"): "Command",
}


class ValueCheckError(ValueError):
    """A typed field holds a value the wire forbids (bool for int, out of range, …)."""

    def __init__(self, message: str, where: str = "$") -> None:
        super().__init__(f"{message} at {where}")
        self.message = message
        self.where = where


# --- integer bounds ----------------------------------------------------------------


def _int_bounds(t: mi.IntType) -> tuple[int, int, str]:
    lo = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else _I64_MIN)
    hi = t.le if t.le is not None else (t.lt - 1 if t.lt is not None else None)
    if hi is None:
        hi = U64_MAX if lo >= 0 else _I64_MAX
    return lo, hi, _int_name(lo, hi)


def _int_name(lo: int, hi: int) -> str:
    if lo >= 0:
        return {4_294_967_295: "u32", U64_MAX: "u64"}.get(hi, "an unsigned integer")
    return {2_147_483_647: "i32", _I64_MAX: "i64"}.get(hi, "an integer")


# --- struct checkers (writer and u64 checks) ----------------------------------------
#
# One Python function per struct type, generated from its msgspec type info on first
# use, so that a check costs a few attribute reads rather than an interpretive walk.
# A checker raises ValueCheckError(message) where message is serde-worded.

_CHECKERS: dict[type, Any] = {}
_TYPE_INFO: dict[Any, Any] = {}


def type_info(cls: Any) -> Any:
    info = _TYPE_INFO.get(cls)
    if info is None:
        info = _TYPE_INFO[cls] = mi.type_info(cls)
    return info


def _bad_int(where: str, value: Any, name: str, lo: int, hi: int) -> ValueCheckError:
    if type(value) is int:
        return ValueCheckError(f"invalid value: integer `{value}`, expected {name}", where)
    return ValueCheckError(f"invalid type: {describe(value)}, expected {name}", where)


def _bad(where: str, value: Any, expected: str) -> ValueCheckError:
    return ValueCheckError(f"invalid type: {describe(value)}, expected {expected}", where)


def _check_any_struct(value: Any, where: str) -> None:
    if not isinstance(value, msgspec.Struct):
        raise ValueCheckError(f"invalid type: {type(value).__name__}, expected a wire struct", where)
    checker = _CHECKERS.get(type(value)) or _build(type(value))
    checker(value, where)


class _Gen:
    def __init__(self, ceiling_only: bool = False) -> None:
        self.ceiling_only = ceiling_only  # decode side: msgspec checked all but the u64 ceiling
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {}
        self.n = 0

    def var(self) -> str:
        self.n += 1
        return f"v{self.n}"

    def const(self, value: Any) -> str:
        name = f"k{len(self.consts)}"
        self.consts[name] = value
        return name

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def value(self, t: Any, v: str, where: str, depth: int) -> bool:
        """Emit checks of variable v (not None) against type t; False when nothing to check."""
        if isinstance(t, mi.IntType):
            lo, hi, name = _int_bounds(t)
            if self.ceiling_only:
                if hi != U64_MAX or t.le is not None:
                    return False
                self.emit(depth, f"if {v} > {hi}: raise _bad_int({where}, {v}, {name!r}, {lo}, {hi})")
                return True
            self.emit(depth, f"if type({v}) is not int or not {lo} <= {v} <= {hi}: raise _bad_int({where}, {v}, {name!r}, {lo}, {hi})")
            return True
        if self.ceiling_only and isinstance(t, (mi.FloatType, mi.BoolType)):
            return False
        if isinstance(t, mi.FloatType):
            self.emit(depth, f"if type({v}) is not float and (type({v}) is not int): raise _bad({where}, {v}, 'f64')")
            return True
        if isinstance(t, mi.BoolType):
            self.emit(depth, f"if type({v}) is not bool: raise _bad({where}, {v}, 'a boolean')")
            return True
        if isinstance(t, mi.StructType):
            if self.ceiling_only:
                if _build(t.cls, True) is None:
                    return False
                self.emit(depth, f"_check_ceiling({v}, {where})")
                return True
            self.emit(depth, f"_check_any_struct({v}, {where})")
            return True
        if isinstance(t, (mi.ListType, mi.TupleType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
            item = self.var()
            mark = len(self.lines)
            self.emit(depth, f"for {item} in {v}:")
            if self._nullable(t.item_type, item, where, depth + 1):
                return True
            del self.lines[mark:]
            return False
        if isinstance(t, mi.DictType):
            item = self.var()
            mark = len(self.lines)
            self.emit(depth, f"for {item} in {v}.values():")
            if self._nullable(t.value_type, item, where, depth + 1):
                return True
            del self.lines[mark:]
            return False
        if isinstance(t, mi.UnionType):
            members = [x for x in t.types if not isinstance(x, (mi.NoneType,))]
            if len(members) == 1:
                return self.value(members[0], v, where, depth)
            if all(isinstance(x, mi.StructType) for x in members):
                if self.ceiling_only:
                    if all(_build(x.cls, True) is None for x in members):
                        return False
                    self.emit(depth, f"_check_ceiling({v}, {where})")
                    return True
                self.emit(depth, f"_check_any_struct({v}, {where})")
                return True
            return False  # mixed unions do not occur in the wire structs outside pass-through
        return False

    def _nullable(self, t: Any, v: str, where: str, depth: int) -> bool:
        mark = len(self.lines)
        self.emit(depth, f"if {v} is not None and {v} is not _UNSET:")
        if self.value(t, v, where, depth + 1):
            return True
        del self.lines[mark:]
        return False


_CEILING: dict[type, Any] = {}
_BUILDING = object()


def _check_ceiling(value: Any, where: str) -> None:
    checker = _CEILING.get(type(value), _BUILDING)
    if checker is _BUILDING:
        checker = _build(type(value), True)
    if checker is not None:
        checker(value, where)


def _build(cls: type, ceiling_only: bool = False) -> Any:
    """Generate the checker of a struct type; in ceiling-only mode None when there is nothing to check."""
    cache = _CEILING if ceiling_only else _CHECKERS
    if cls in cache:
        return cache[cls]
    gen = _Gen(ceiling_only)
    gen.emit(0, "def check(o, where):")
    body_start = len(gen.lines)
    for f in type_info(cls).fields:
        v = gen.var()
        mark = len(gen.lines)
        gen.emit(1, f"{v} = o.{f.name}")
        where = f"where + {'.' + f.name!r}"
        if not gen._nullable(f.type, v, where, 1):
            del gen.lines[mark:]
    if ceiling_only and len(gen.lines) == body_start:
        cache[cls] = None
        return None
    gen.emit(1, "return None")
    namespace: dict[str, Any] = {
        "_bad_int": _bad_int, "_bad": _bad, "_UNSET": msgspec.UNSET,
        "_check_any_struct": _check_any_struct, "_check_ceiling": _check_ceiling, **gen.consts,
    }
    exec("\n".join(gen.lines), namespace)  # generated from msgspec type info only, never from input
    checker = cache[cls] = namespace["check"]
    return checker


def ceiling_checker(cls: type) -> Any:
    """The decode-side checker of a struct type (u64 ceilings only), or None."""
    return _build(cls, True)


def check_struct(obj: Any, where: str = "$") -> None:
    """Raise ValueCheckError at the first typed field msgspec does not police.

    Integers must be ints (never bool) within their wire range (u64's ceiling
    included); floats floats or ints; bools bools. Pass-through (Any) values are
    not checked."""
    checker = _CHECKERS.get(type(obj))
    if checker is None:
        if not isinstance(obj, msgspec.Struct):
            raise ValueCheckError(f"{type(obj).__name__} is not a wire struct", where)
        checker = _build(type(obj))
    checker(obj, where)


# --- serde-like wording for msgspec validation errors -------------------------------

class _Patterns:
    """The message patterns, compiled on first use (only failing lines need them)."""

    def __getattr__(self, name: str) -> Any:
        built = {
            "SEGMENT": re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]"),
            "MISSING": re.compile(r"^Object missing required field `(?P<f>[^`]*)`$"),
            "EXPECTED": re.compile(r"^Expected `(?P<exp>[^`]*)`(?:, got `(?P<got>[^`]*)`)?(?P<rest>.*)$"),
            "INVALID": re.compile(r"^Invalid (?:enum )?value (?P<v>.*)$"),
        }
        self.__dict__.update(built)
        return built[name]


_P = _Patterns()
_MISSING_VALUE = object()
_GOT_WORDS = {"str": "string", "int": "integer", "float": "floating point", "bool": "boolean",
              "array": "sequence", "object": "map", "null": "null"}


def _declared_order(values: tuple[Any, ...]) -> list[Any]:
    """msgspec.inspect sorts Literal values; give them back in the spec's order when known."""
    from typing import get_args

    from . import values as v

    for literal in (v.Seam, v.DecidedBy, v.RefusalCode, v.CloseReason):
        declared = get_args(literal)
        if set(declared) == set(values):
            return list(declared)
    return list(values)


def describe(value: Any) -> str:
    """serde's `Unexpected` display for a JSON value."""
    if value is None:
        return "null"
    if type(value) is bool:
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{msgspec.json.encode(value).decode()}`"
    if isinstance(value, str):
        return "string " + msgspec.json.encode(value).decode()
    if isinstance(value, list):
        return "sequence"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


_TAGGED: dict[int, Any] = {}


def _tagged(t: Any) -> tuple[str, list[tuple[str, Any]]] | None:
    """(tag_field, [(tag, StructType)]) for a struct or tagged union of structs (cached)."""
    key = id(t)
    if key not in _TAGGED:
        _TAGGED[key] = (t, _tagged_uncached(t))  # keep t alive so its id stays unique
    return _TAGGED[key][1]


def _tagged_uncached(t: Any) -> tuple[str, list[tuple[str, Any]]] | None:
    members = [x for x in getattr(t, "types", (t,)) if isinstance(x, mi.StructType)]
    if not members or members[0].tag_field is None:
        return None
    return members[0].tag_field, [(m.tag, m) for m in members]


def _walk(root: mi.Type, obj: Any, path: str) -> tuple[Any, Any, Any]:
    """Follow a msgspec error path through the type and the untyped value.

    Returns (type, value, parent_type) at the end of the path; value is
    _MISSING_VALUE when it cannot be located (a `[...]` dict segment)."""
    t: Any = root
    v: Any = obj
    parent: Any = None
    rest = path[1:] if path.startswith("$") else path
    for m in _P.SEGMENT.finditer(rest):
        name, index = m.group(1), m.group(2)
        t = _unwrap(t, v)
        parent = t
        if name is not None:
            tagged = _tagged(t)
            if tagged and name == tagged[0]:
                return ("tag", tagged), (v.get(name, _MISSING_VALUE) if isinstance(v, dict) else _MISSING_VALUE), parent
            field_t = None
            if isinstance(t, mi.StructType):
                for f in t.fields:
                    if f.encode_name == name:
                        field_t = f.type
                        break
            t = field_t
            v = v.get(name, _MISSING_VALUE) if isinstance(v, dict) else _MISSING_VALUE
        else:
            if isinstance(t, mi.DictType):
                t = t.value_type
            elif t is not None and hasattr(t, "item_type"):
                t = t.item_type
            else:
                t = None
            if index == "..." or not isinstance(v, list):
                v = _MISSING_VALUE
            else:
                i = int(index)
                v = v[i] if i < len(v) else _MISSING_VALUE
    return t, v, parent


def _unwrap(t: Any, v: Any) -> Any:
    """Pick the union member the value selects (by tag), dropping null."""
    if isinstance(t, mi.UnionType):
        members = [x for x in t.types if not isinstance(x, mi.NoneType)]
        tagged = _tagged(t)
        if tagged and isinstance(v, dict):
            for tag, m in tagged[1]:
                if v.get(tagged[0]) == tag:
                    return m
        structs = [x for x in members if isinstance(x, mi.StructType)]
        if len(structs) == 1:
            return structs[0]
        if len(members) == 1:
            return members[0]
    return t


def _expected_word(t: Any) -> str | None:
    if isinstance(t, mi.UnionType):
        members = [x for x in t.types if not isinstance(x, mi.NoneType)]
        tagged = _tagged(t)
        if tagged and len(members) > 1:
            first = tagged[1][0]
            return "internally tagged enum " + _UNION_NAMES.get((tagged[0], first[0]), first[1].cls.__name__)
        if len(members) == 1:
            t = members[0]
        else:
            return None
    if isinstance(t, mi.StructType):
        return "struct " + t.cls.__name__
    if isinstance(t, mi.IntType):
        return _int_bounds(t)[2]
    if isinstance(t, mi.StrType):
        return "a string"
    if isinstance(t, mi.BoolType):
        return "a boolean"
    if isinstance(t, mi.FloatType):
        return "f64"
    if isinstance(t, (mi.ListType, mi.TupleType, mi.VarTupleType)):
        return "a sequence"
    if isinstance(t, mi.DictType):
        return "a map"
    if isinstance(t, mi.LiteralType):
        return "one of " + ", ".join(f"`{x}`" for x in _declared_order(t.values))
    return None


_TRANSLATED: dict[tuple[Any, ...], str] = {}


def _value_at(obj: Any, path: str) -> Any:
    """The untyped value a msgspec error path points at (cheap; no types involved)."""
    v = obj
    for part in path[1:].replace("[", ".[").split("."):
        if not part:
            continue
        if part[0] == "[":
            if part == "[...]" or not isinstance(v, list):
                return _MISSING_VALUE
            i = int(part[1:-1])
            v = v[i] if i < len(v) else _MISSING_VALUE
        elif isinstance(v, dict):
            v = v.get(part, _MISSING_VALUE)
        else:
            return _MISSING_VALUE
    return v


def _value_key(v: Any) -> Any:
    if isinstance(v, dict):
        return ("map",)
    if isinstance(v, list):
        return ("seq",)
    return (type(v), v)


def translate_error(message: str, root: type, obj: Any = _MISSING_VALUE) -> str:
    """msgspec's ValidationError text → serde's words where there is an equivalent.

    Memoised on (message, root type, the failing value's description): a stream of
    the same mistake costs one translation."""
    try:
        where = message.partition(" - at ")[2].strip("`")
        key = (message, root, _value_key(_value_at(obj, where)) if where.startswith("$") else None)
        found = _TRANSLATED.get(key)
        if found is None:
            found = _translate(message, root, obj)
            if len(_TRANSLATED) > 4096:
                _TRANSLATED.clear()
            _TRANSLATED[key] = found
        return found
    except Exception:  # the wording is a courtesy; never let it hide the refusal
        return message


def _translate(message: str, root: type, obj: Any) -> str:
    body, _, where = message.partition(" - at ")
    is_key = where.startswith("`key` in ")
    if is_key:
        where = where[len("`key` in "):]
    path = where.strip("`") or None
    if mm := _P.MISSING.match(body):
        return f"missing field `{mm.group('f')}`"
    root_t = type_info(root)
    t, v, _parent = _walk(root_t, obj, path or "$")
    if is_key and isinstance(t, mi.DictType):
        t = t.key_type
    if mm := _P.INVALID.match(body):
        word = mm.group("v")
        if word.startswith("'") and word.endswith("'"):
            word = word[1:-1]
        if isinstance(t, tuple) and t[0] == "tag":
            variants = [tag for tag, _ in t[1][1]]
        elif isinstance(t, mi.LiteralType):
            variants = _declared_order(t.values)
        else:
            return message
        return f"unknown variant `{word}`, expected one of " + ", ".join(f"`{x}`" for x in variants)
    if mm := _P.EXPECTED.match(body):
        exp, got, rest = mm.group("exp"), mm.group("got"), mm.group("rest").strip()
        target = t
        if isinstance(t, tuple):
            return message
        if rest.startswith((">", "<")) and isinstance(_unwrap(target, v), mi.IntType):
            it = _unwrap(target, v)
            value = v if v is not _MISSING_VALUE else None
            shown = f"integer `{value}`" if value is not None else "integer"
            return f"invalid value: {shown}, expected {_int_bounds(it)[2]}"
        if got is None:
            return message
        expected = _expected_word(target)
        if expected is None:
            expected = exp
        found = describe(v) if v is not _MISSING_VALUE else _GOT_WORDS.get(got, got)
        return f"invalid type: {found}, expected {expected}"
    return message
