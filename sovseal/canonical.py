"""RFC 8785 (JCS) canonical JSON: the exact bytes sovseal hashes and seals.

Snapshot ids are ``sha256(canonical(entry) || parent_id)``, so two devices (or a replay of the same
operations) must produce byte-equal output for equal values. ``json.dumps(sort_keys=True)`` is not
enough: it sorts keys by code point instead of UTF-16 code unit and writes ``56.0`` where JCS writes
``56``. Values with no JSON meaning (NaN, infinities, bytes, sets, non-string keys, lone surrogates,
arbitrary objects) are rejected, never coerced, so a hash can never silently depend on a coercion.

Why hand-written rather than the ``rfc8785`` package: that package passes every vector, but it takes
about 40 us for a small entry (this runs on every store; the budget is 20 us), raises its own
exception types without saying *where* in the value the problem is, and has no guard against cyclic
values. This module walks the value once on the fast path (C-accelerated string escaping from the
standard library) and only on failure walks it a second time to name the offending path.

Integers: JCS serializes every number as an IEEE-754 double, so an integer whose magnitude exceeds
2**53 - 1 (the I-JSON safe range, RFC 7493 section 2.2) would change value or become ambiguous on the
way through any JCS/ECMAScript reader. Such integers are rejected; store them as strings.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from json.encoder import encode_basestring as _quote  # C-accelerated; JCS escaping rules (below)
from typing import Any

from sovseal.errors import CanonicalizationError

__all__ = ["MAX_SAFE_INTEGER", "canonicalize", "loads"]

#: Largest integer magnitude accepted (I-JSON / ECMAScript ``Number.MAX_SAFE_INTEGER``).
MAX_SAFE_INTEGER = 2**53 - 1

# ``json.encoder.encode_basestring`` (the ensure_ascii=False escaper) emits exactly what RFC 8785
# section 3.2.2.2 requires: \" \\ \b \t \n \f \r, other C0 controls as lowercase \u00hh, and every other
# character (including U+007F and non-ASCII) as itself. Lone surrogates pass through it and are
# caught by the final strict UTF-8 encode.


_Out = Callable[[str], None]  # list.append of the output parts


class _Reject(Exception):
    """Internal signal from the fast path: the value is not canonicalizable; locate the problem."""


def canonicalize(value: object, *, root: str = "value") -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of ``value``.

    Accepts ``dict`` (``str`` keys), ``list``/``tuple``, ``str``, ``int``, ``float``, ``bool`` and
    ``None``. Anything else raises :class:`~sovseal.errors.CanonicalizationError` whose message names
    the offending location, written from ``root`` (for example ``payload["a"][2]``), and what to do.
    """
    try:
        parts: list[str] = []
        _emit(value, parts.append)
        return "".join(parts).encode("utf-8")
    except (_Reject, UnicodeEncodeError, RecursionError):
        pass
    # Slow path, only taken for bad input: walk again with paths to produce a helpful message.
    raise _locate(value, root)


def loads(data: bytes | str) -> object:
    """Parse JSON (e.g. canonical bytes read back) the way a JCS reader does: numbers are doubles.

    Integers within ±(2**53 - 1) stay ``int``; longer integer literals become ``float``. A double such
    as ``1e17`` canonicalizes to ``100000000000000000``, which ``json.loads`` would turn into an
    out-of-range ``int``; with this parser ``canonicalize(loads(canonicalize(x))) == canonicalize(x)``
    for every accepted ``x``, so re-deriving an id from stored bytes always works.
    """
    if not isinstance(data, str):
        data = bytes(data).decode("utf-8", "surrogatepass")  # what json.loads does with UTF-8 bytes
    return _DECODER.decode(data)


def _parse_int(text: str) -> int | float:
    """Integer literal -> int when exactly representable as a safe integer, else the double it denotes."""
    value = int(text)
    return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else float(text)


_DECODER = json.JSONDecoder(parse_int=_parse_int)  # one decoder: json.loads(parse_int=) builds one per call


def _emit(value: Any, out: _Out) -> None:
    """Append the canonical text of ``value`` via ``out`` (``list.append``); raise _Reject on bad input."""
    t = type(value)
    if t is str:
        out(_quote(value))
    elif t is dict:
        _emit_dict(value, out)
    elif t is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            out(int.__repr__(value))
        else:
            raise _Reject
    elif t is list or t is tuple:
        out("[")
        first = True
        for item in value:
            if not first:
                out(",")
            first = False
            _emit(item, out)
        out("]")
    elif value is None:
        out("null")
    elif value is True:
        out("true")
    elif value is False:
        out("false")
    elif t is float:
        out(_format_float(value))
    else:
        _emit_subclass(value, out)


def _emit_subclass(value: object, out: _Out) -> None:
    """Handle subclasses of the JSON types (IntEnum, str enums, OrderedDict, ...) by their base type.

    The base type's own representation is used, never ``str(value)``: an enum's ``__str__`` may print
    its name rather than its value, which would change the hash.
    """
    if isinstance(value, bool):  # before int: bool is an int subclass
        _emit(bool(value), out)
    elif isinstance(value, str):
        _emit(str.__str__(value), out)
    elif isinstance(value, int):
        _emit(int(value), out)
    elif isinstance(value, float):
        _emit(float(value), out)
    elif isinstance(value, dict):
        _emit_dict(value, out)
    elif isinstance(value, (list, tuple)):
        _emit(list(value), out)
    else:
        raise _Reject


#: Object keys already quoted, with their colon: records repeat the same few keys ("op", "path",
#: "payload", and each application's own), and a lookup costs less than quoting. Bounded: short keys
#: only, and no new ones once full.
_QUOTED_KEYS: dict[str, str] = {}
_QUOTED_KEYS_MAX = 4096
_QUOTED_KEY_CHARS = 64

#: Object shapes already laid out: the tuple of an object's keys, in the object's own order, to the
#: keys in canonical order and each one's member prefix (``{"key":`` for the first, ``,"key":`` after).
#: Records of one application repeat a few shapes (an entry's, its payload's), and one lookup replaces
#: the key check, the sort and a lookup per key. Only objects whose keys are all plain ``str`` (short
#: ones, few of them) are remembered, and no new shape once full. A lookup can only match keys equal to
#: the remembered ones, which are emitted from their value as a miss would emit them.
_SHAPES: dict[tuple[str, ...], tuple[tuple[str, ...], tuple[str, ...]]] = {}
_SHAPES_MAX = 512
_SHAPE_KEYS = 32


def _emit_dict(value: dict[Any, Any], out: _Out) -> None:
    """Emit an object with members sorted by the UTF-16 code units of their keys (RFC 8785 3.2.3)."""
    shape = tuple(value)
    laid_out = _SHAPES.get(shape)
    if laid_out is None:
        laid_out = _layout(value, shape)
        if laid_out is None:  # keys that are not all plain short str: laid out on every call
            _emit_members(value, out)
            return
    keys, prefixes = laid_out
    for key, prefix in zip(keys, prefixes, strict=True):
        out(prefix)
        item = value[key]
        t = type(item)
        if t is str:  # the common member, emitted without a call
            out(_quote(item))
        elif t is dict:
            _emit_dict(item, out)
        else:
            _emit(item, out)
    out("}" if keys else "{}")


def _layout(value: dict[Any, Any], shape: tuple[Any, ...]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The sorted keys and member prefixes of an object whose keys are all plain short str (remembered
    while there is room); None for any other object."""
    if len(shape) > _SHAPE_KEYS or any(type(key) is not str or len(key) > _QUOTED_KEY_CHARS for key in shape):
        return None
    try:
        keys = tuple(sorted(shape) if "".join(shape).isascii() else sorted(shape, key=_utf16_key))
    except UnicodeEncodeError:  # a lone surrogate in a key: the slow path names it
        raise _Reject from None
    prefixes = tuple(("{" if i == 0 else ",") + _quote(key) + ":" for i, key in enumerate(keys))
    laid_out = (keys, prefixes)
    if len(_SHAPES) < _SHAPES_MAX:
        _SHAPES[shape] = laid_out
    return laid_out


def _emit_members(value: dict[Any, Any], out: _Out) -> None:
    """:func:`_emit_dict` for an object whose shape is not remembered (any keys; non-str ones rejected)."""
    try:
        ascii_only = "".join(value).isascii()  # one pass in C; a key that is not a str raises TypeError
    except TypeError:
        raise _Reject from None
    # Code point order equals UTF-16 order except between astral characters and U+E000..U+FFFF,
    # so the cheap sort is exact for ASCII keys; otherwise sort on the UTF-16-BE encoding.
    # (A lone surrogate in a key makes the encode fail, which is caught as bad input.)
    if ascii_only:
        keys = sorted(value)
    else:
        keys = sorted(value, key=_utf16_key)
    quoted = _QUOTED_KEYS
    separator = "{"
    for key in keys:
        out(separator)
        separator = ","
        if type(key) is str:  # a subclass may compare equal to a cached key yet differ: never cached
            prefix = quoted.get(key)
            if prefix is None:
                prefix = _quote(key) + ":"
                if len(key) <= _QUOTED_KEY_CHARS and len(quoted) < _QUOTED_KEYS_MAX:
                    quoted[key] = prefix
            out(prefix)
        else:
            out(_quote(str.__str__(key)) + ":")
        item = value[key]
        if type(item) is str:  # the common member, emitted without a call
            out(_quote(item))
        else:
            _emit(item, out)
    out("}" if separator == "," else "{}")


def _utf16_key(key: str) -> bytes:
    """Sort key: the UTF-16-BE code units of ``key`` (big-endian bytes compare like code units)."""
    return key.encode("utf-16-be")


def _format_float(x: float) -> str:
    """Serialize a finite double as ECMAScript ``Number.prototype.toString`` does (RFC 8785 3.2.2.3).

    Python's ``repr`` already yields the shortest round-tripping digits (the same digits ECMAScript
    picks); only the layout differs: ECMAScript uses plain notation for 1e-6 <= |x| < 1e21 and
    writes exponents as ``e+21`` / ``e-7``.
    """
    if x != x or x in (math.inf, -math.inf):
        raise _Reject
    if x == 0.0:
        return "0"  # also -0.0, which ECMAScript prints as "0"
    if -MAX_SAFE_INTEGER <= x <= MAX_SAFE_INTEGER and x.is_integer():
        return int.__repr__(int(x))  # exact: every such integer is representable
    r = float.__repr__(x)
    if "e" not in r:
        # repr uses plain notation for 1e-4 <= |x| < 1e16, a sub-range of ECMAScript's.
        return r[:-2] if r.endswith(".0") else r
    mantissa, _, exp_text = r.partition("e")
    sign = ""
    if mantissa[0] == "-":
        sign, mantissa = "-", mantissa[1:]
    digits = mantissa.replace(".", "")
    k = len(digits)
    n = int(exp_text) + 1  # x = 0.digits * 10**n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        frac = "." + digits[1:] if k > 1 else ""
        text = f"{digits[0]}{frac}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + text


# --- slow path: find and describe the first problem ------------------------------------------------


class _NotUnicode(str):
    """The problem found for a lone surrogate: the one whose advice differs between Python and the CLI
    (where such text comes from a JSON escape), so :func:`_locate` gives it as fields."""


#: What to do about a lone surrogate, in Python words and in command-line words.
_NOT_UNICODE_ADVICE = "fix the text (e.g. decode it with errors='replace')"
_NOT_UNICODE_CLI_ADVICE = "fix the text: give valid UTF-8, and use a JSON \\uD800-\\uDFFF escape only as one half of a surrogate pair"


def _locate(value: object, root: str) -> CanonicalizationError:
    """Walk ``value`` with paths and build the error for its first non-canonicalizable part."""
    try:
        problem = _find(value, root, set())
    except RecursionError:
        problem = f"{root} is nested too deeply to canonicalize; flatten the structure"
    if problem is None:  # pragma: no cover - the fast path and this walk accept the same values
        problem = f"{root} could not be canonicalized"
    if isinstance(problem, _NotUnicode):
        return CanonicalizationError(problem, advice=_NOT_UNICODE_ADVICE, cli_advice=_NOT_UNICODE_CLI_ADVICE)
    return CanonicalizationError(problem)


def _find(value: object, path: str, active: set[int]) -> str | None:
    """Return a message for the first problem under ``value`` (at ``path``), or None if it is valid."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        return _check_str(value, path)
    if isinstance(value, int):
        if abs(int(value)) > MAX_SAFE_INTEGER:
            return (
                f"{path} is the integer {int(value)}, outside the JSON-safe range "
                f"±{MAX_SAFE_INTEGER} (canonical JSON numbers are IEEE doubles and it would change "
                "value); store it as a string instead"
            )
        return None
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return (
                f"{path} is {value!r}, which JSON cannot represent; use null or a string "
                'such as "NaN" / "Infinity" instead'
            )
        return None
    if isinstance(value, (dict, list, tuple)):
        if id(value) in active:
            return f"{path} refers back to a container enclosing it (a cycle); JSON values must be trees"
        active.add(id(value))
        try:
            if isinstance(value, dict):
                return _find_in_dict(value, path, active)
            for index, item in enumerate(value):
                found = _find(item, f"{path}[{index}]", active)
                if found is not None:
                    return found
            return None
        finally:
            active.discard(id(value))
    kind = type(value).__name__
    hint = {
        "bytes": "decode it to str or encode it as base64 text",
        "bytearray": "decode it to str or encode it as base64 text",
        "set": "convert it to a sorted list",
        "frozenset": "convert it to a sorted list",
    }.get(kind, "convert it to a JSON type (dict, list, str, int, float, bool or None)")
    return f"{path} is of type {kind}, which has no JSON form; {hint}"


def _find_in_dict(value: dict[object, object], path: str, active: set[int]) -> str | None:
    """Check keys (strings, no lone surrogates) and then each member's value."""
    for key, item in value.items():
        if not isinstance(key, str):
            return (
                f"{path} has the key {key!r} of type {type(key).__name__}; JSON object keys must be "
                "str, so convert the key to a string yourself (sovseal never coerces)"
            )
        key_path = f"{path}[{json.dumps(key)}]"
        bad_key = _check_str(key, f"the key {key_path}")
        if bad_key is not None:
            return bad_key
        found = _find(item, key_path, active)
        if found is not None:
            return found
    return None


def _check_str(value: str, path: str) -> str | None:
    """Reject lone surrogates: they have no UTF-8 form, so the canonical bytes would not exist."""
    for offset, char in enumerate(value):
        if "\ud800" <= char <= "\udfff":
            return _NotUnicode(f"{path} contains a lone surrogate U+{ord(char):04X} at offset {offset}, which is not valid Unicode")
    return None
