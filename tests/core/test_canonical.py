"""RFC 8785 (JCS) canonicalization: reference vectors, ECMAScript numbers, and typed rejections.

The reference vectors are in ``tests/vectors/json-canonicalization`` (Apache-2.0, source in its README).
"""

from __future__ import annotations

import enum
import json
import random
import shutil
import struct
import subprocess
from collections import OrderedDict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sovseal import canonical as canonical_module
from sovseal.canonical import MAX_SAFE_INTEGER, canonicalize, loads
from sovseal.errors import CanonicalizationError, InvalidInputError

JCS_DIR = Path(__file__).resolve().parents[1] / "vectors" / "json-canonicalization"
VECTOR_NAMES = sorted(p.name for p in (JCS_DIR / "input").glob("*.json")) if JCS_DIR.is_dir() else []


def test_vector_directory_present() -> None:
    """The vectors are a hard requirement: their absence must fail, not silently skip."""
    assert JCS_DIR.is_dir(), f"missing {JCS_DIR}"
    assert len(VECTOR_NAMES) == 6


@pytest.mark.parametrize("name", VECTOR_NAMES)
def test_rfc8785_vectors(name: str) -> None:
    value = json.loads((JCS_DIR / "input" / name).read_text(encoding="utf-8"))
    expected = (JCS_DIR / "output" / name).read_bytes()
    assert canonicalize(value) == expected
    hex_text = (JCS_DIR / "outhex" / name.replace(".json", ".txt")).read_text()
    assert canonicalize(value) == bytes.fromhex(hex_text.replace(" ", "").replace("\n", ""))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (56.0, "56"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e16, "10000000000000000"),
        (-0.0, "0"),
        (0.0, "0"),
        (0.1, "0.1"),
        (-1.5, "-1.5"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (123e-20, "1.23e-18"),
        (1e300, "1e+300"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (333333333.33333329, "333333333.3333333"),
        (float(2**60), "1152921504606847000"),
        (MAX_SAFE_INTEGER, "9007199254740991"),
        (-MAX_SAFE_INTEGER, "-9007199254740991"),
        (0, "0"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
    ],
)
def test_numbers_and_literals(value: object, expected: str) -> None:
    assert canonicalize(value) == expected.encode()


@pytest.mark.parametrize(
    ("ieee_hex", "expected"),
    [  # the samples listed in the upstream testdata README (es6testfile format)
        ("4340000000000001", "9007199254740994"),
        ("444b1ae4d6e2ef50", "1e+21"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
        ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("8000000000000000", "0"),
    ],
)
def test_upstream_ieee_samples(ieee_hex: str, expected: str) -> None:
    (value,) = struct.unpack(">d", bytes.fromhex(ieee_hex))
    assert canonicalize(value) == expected.encode()


def test_keys_sort_by_utf16_code_units() -> None:
    # U+1F602 is the surrogate pair D83D DE02, which sorts *before* U+FB33 in UTF-16 although its
    # code point is larger: code point order would put it last.
    value = {"\ufb33": 1, "\U0001f602": 2, "a": 3, "\u00f6": 4}
    assert canonicalize(value).decode() == '{"a":3,"\u00f6":4,"\U0001f602":2,"\ufb33":1}'


def test_string_escaping() -> None:
    text = '\x00\x01\x08\t\n\x0b\x0c\r\x1f"\\/\x7f\u2028\u00e9\U0001f600'
    expected = '"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f\\"\\\\/\x7f\u2028\u00e9\U0001f600"'
    assert canonicalize(text) == expected.encode("utf-8")


def test_nested_containers_and_tuples() -> None:
    value = {"b": [1, (2, 3), {"z": [], "y": {}}], "a": ""}
    assert canonicalize(value) == b'{"a":"","b":[1,[2,3],{"y":{},"z":[]}]}'


class _Color(enum.IntEnum):
    RED = 7


class _Kind(str, enum.Enum):  # noqa: UP042 - the str mixin (str() is "_Kind.EPISODIC", not the value) is the case under test
    EPISODIC = "episodic"


def test_subclasses_serialize_by_value_not_str() -> None:
    value = OrderedDict([("k", _Kind.EPISODIC), ("n", _Color.RED)])
    assert canonicalize(value) == b'{"k":"episodic","n":7}'


class _EqualsEverything(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


def test_quoted_keys_are_remembered_for_plain_str_keys_only() -> None:
    """Keys are quoted once and remembered; a str subclass (which may claim to equal a remembered
    key) is always quoted from its own value, and the memory stays bounded."""
    assert canonicalize({"payload": 1, "a\n": 2}) == b'{"a\\n":2,"payload":1}'
    assert canonicalize({"payload": 1, "a\n": 2}) == b'{"a\\n":2,"payload":1}'  # from memory: the same bytes
    assert canonicalize({_EqualsEverything("zz"): 1}) == b'{"zz":1}'
    assert canonicalize({}) == b"{}" and canonicalize({"e": {}}) == b'{"e":{}}'
    for i in range(canonical_module._QUOTED_KEYS_MAX + 10):
        canonicalize({f"key-{i}": i, "x" * 100: 0})
    assert len(canonical_module._QUOTED_KEYS) <= canonical_module._QUOTED_KEYS_MAX
    assert "x" * 100 not in canonical_module._QUOTED_KEYS


def test_object_shapes_are_remembered_without_changing_bytes() -> None:
    """An object's shape (its keys, in its own order) is laid out once: the same keys in another
    order, a str subclass equal to a remembered key, keys that are not ASCII and keys with a lone
    surrogate give the bytes the first call gives, and the memory stays bounded."""
    shape = {"b": 1, "a": "x", "\ue000": None, "\U0001f600": [True]}
    expected = '{"a":"x","b":1,"\U0001f600":[true],"\ue000":null}'.encode()
    for _ in range(2):  # laid out, then from memory
        assert canonicalize(shape) == expected
        assert canonicalize(dict(reversed(shape.items()))) == expected
    assert canonicalize({"zz": 1}) == canonicalize({_EqualsEverything("zz"): 1}) == b'{"zz":1}'
    assert canonicalize({_EqualsEverything("zz"): 1, "a": 2}) == b'{"a":2,"zz":1}'
    for _ in range(2):
        with pytest.raises(CanonicalizationError, match="surrogate"):
            canonicalize({"ok": 1, "bad\udc00": 2})
        with pytest.raises(CanonicalizationError, match="key"):
            canonicalize({"ok": 1, 2: 2})
    for i in range(canonical_module._SHAPES_MAX + 10):
        assert canonicalize({f"shape-{i}": i}) == f'{{"shape-{i}":{i}}}'.encode()
    assert len(canonical_module._SHAPES) <= canonical_module._SHAPES_MAX
    wide = {f"k{i:02}": i for i in range(canonical_module._SHAPE_KEYS + 1)}
    assert canonicalize(wide) == json.dumps(wide, sort_keys=True, separators=(",", ":")).encode()
    assert tuple(wide) not in canonical_module._SHAPES


@pytest.mark.parametrize(
    ("value", "path_fragment", "advice"),
    [
        ({"a": [1, 2, float("nan")]}, 'payload["a"][2]', "null"),
        ({"a": float("inf")}, 'payload["a"]', "null"),
        ([float("-inf")], "payload[0]", "null"),
        ({"a": {1: "x"}}, 'payload["a"]', "key"),
        ({"b": b"raw"}, 'payload["b"]', "base64"),
        ({"b": bytearray(b"raw")}, 'payload["b"]', "base64"),
        ({"s": {1, 2}}, 'payload["s"]', "list"),
        ({"s": frozenset()}, 'payload["s"]', "list"),
        ({"o": object()}, 'payload["o"]', "JSON type"),
        ({"t": "ok\ud800"}, 'payload["t"]', "surrogate"),
        ({"bad\udc00key": 1}, "payload[", "surrogate"),
        ({"big": 2**53}, 'payload["big"]', "string"),
        ({"big": -(2**64)}, 'payload["big"]', "string"),
    ],
)
def test_rejections_name_the_path(value: object, path_fragment: str, advice: str) -> None:
    with pytest.raises(CanonicalizationError) as info:
        canonicalize(value, root="payload")
    message = str(info.value)
    assert path_fragment in message
    assert advice in message
    assert isinstance(info.value, InvalidInputError)


def test_default_root_name() -> None:
    with pytest.raises(CanonicalizationError, match=r'value\["x"\]'):
        canonicalize({"x": float("nan")})


def test_cycles_are_rejected() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(CanonicalizationError, match="cycle"):
        canonicalize({"x": loop})


def test_rejects_bool_key_and_none_key() -> None:
    for key in (True, None, 1.5, ("a",)):
        with pytest.raises(CanonicalizationError, match="key"):
            canonicalize({key: 1})


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_roundtrip_and_idempotence(value: object) -> None:
    """Parsing the canonical bytes gives back an equal value, and re-canonicalizing is a fixed point."""
    data = canonicalize(value)
    parsed = loads(data)
    assert _same_json(parsed, value)
    assert canonicalize(parsed) == data


def _same_json(a: object, b: object) -> bool:
    """Equality in JSON's data model: one number type (doubles), tuples are arrays."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return a == b


def test_loads_reads_long_integer_literals_as_doubles() -> None:
    assert loads(b"[100000000000000000,9007199254740991,1.5]") == [1e17, 9007199254740991, 1.5]
    assert type(loads(b"9007199254740991")) is int
    assert canonicalize(loads(canonicalize(1e17))) == b"100000000000000000"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is the ECMAScript oracle; not installed")
def test_numbers_match_ecmascript_json_stringify() -> None:
    """Cross-check number serialization against a real ECMAScript engine on 5,000 random doubles."""
    rng = random.Random(8785)
    values: list[float] = []
    while len(values) < 5000:
        bits = rng.getrandbits(64)
        if rng.random() < 0.3:  # also plenty of ordinary magnitudes, not only extreme exponents
            bits = struct.unpack(">Q", struct.pack(">d", rng.uniform(-1e22, 1e22) * 10 ** rng.randint(-28, 0)))[0]
        (x,) = struct.unpack(">d", bits.to_bytes(8, "big"))
        if x == x and x not in (float("inf"), float("-inf")):
            values.append(x)
    script = (
        "const b=Buffer.alloc(8);"
        "const lines=require('fs').readFileSync(0,'utf8').trim().split('\\n');"
        "console.log(lines.map(h=>{b.write(h,'hex');return JSON.stringify(b.readDoubleBE(0));}).join('\\n'));"
    )
    hexes = "\n".join(struct.pack(">d", x).hex() for x in values)
    result = subprocess.run(["node", "-e", script], input=hexes, capture_output=True, text=True, check=True)
    expected = result.stdout.split()
    assert len(expected) == len(values)
    mismatches = [
        (x, canonicalize(x).decode(), e) for x, e in zip(values, expected, strict=True) if canonicalize(x).decode() != e
    ]
    assert mismatches == []
