"""Fuzzing the decoders a device runs on bytes it did not write: canonical JSON, wire items, frames, the journal.

What it proves: each decoder either returns a value or raises its one documented error type,
for any input (no other exception, no hang), and what it accepts round-trips exactly:

- ``canonicalize`` raises only ``CanonicalizationError``; its output re-canonicalizes to itself;
- ``WireItem.from_json`` (what a pull hands a device) raises only ``InvalidInputError``, and an
  accepted item survives ``to_json``/``from_json`` unchanged;
- ``frames.decode`` raises only ``ValueError``, and an accepted body re-encodes to the same bytes;
- the journal reader, on a real journal with bytes flipped, cut or appended, raises only
  ``IntegrityError``, and every frame it calls authentic is byte-equal to one that was written
  there (a flipped bit is never returned as data).

How: Hypothesis (no coverage-guided fuzzer: atheris is not installed, and these decoders are
small enough that structured generation reaches their branches). ``SOVSEAL_SOAK=1`` multiplies
the examples. Why not schemathesis: it drives HTTP APIs from an OpenAPI schema; see
test_fuzz_server.py for the endpoints.
"""

from __future__ import annotations

import base64
import math
import os
import struct
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sovseal.canonical import canonicalize, loads
from sovseal.errors import CanonicalizationError, IntegrityError, InvalidInputError
from sovseal.storage import frames as fr
from sovseal.storage.journal import Journal
from sovseal.storage.wire import WireItem
from tests.reliability._net import memory_dir, size

FUZZ = settings(max_examples=size(120, 20_000), deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)

json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**53 - 1), 2**53 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text()
)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5), max_leaves=12
)
#: Everything canonicalize must refuse, mixed into otherwise valid values.
non_json = (
    st.sampled_from([math.nan, math.inf, -math.inf, 2**53, -(2**53), b"x", {1, 2}, frozenset(), object(), 1j, "\ud800"])
    | st.binary(max_size=4)
    | st.builds(dict, st.dictionaries(st.integers(), st.none(), min_size=1, max_size=2))
)
any_values = st.recursive(
    json_scalars | non_json,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=10,
)


@FUZZ
@given(any_values)
def test_canonicalize_accepts_json_and_refuses_the_rest_with_one_error_type(value: Any) -> None:
    try:
        out = canonicalize(value)
    except CanonicalizationError as exc:
        assert str(exc)  # the message says where and what to do
        return
    assert canonicalize(loads(out)) == out  # idempotent through a JCS reader
    out.decode("utf-8")


@FUZZ
@given(json_values)
def test_every_json_value_canonicalizes_and_round_trips(value: Any) -> None:
    out = canonicalize(value)
    assert canonicalize(loads(out)) == out


@FUZZ
@given(st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_canonical_loads_of_arbitrary_text_raises_only_value_errors(text: str) -> None:
    try:
        value = loads(text)
    except ValueError:
        return
    try:
        canonicalize(value)
    except CanonicalizationError:
        pass  # e.g. a lone surrogate escape ("\ud800") parses but is not canonicalizable


hexes = st.sampled_from(["", "0" * 64, "ab" * 16, "xyz", "0" * 63, "A" * 64]) | st.text("0123456789abcdef", max_size=70)
wire_like = st.fixed_dictionaries(
    {},
    optional={
        "kind": st.sampled_from(["record", "branch", "reinforce", "", "RECORD"]) | json_values,
        "id": hexes | json_values,
        "parent": hexes | json_values,
        "branch": hexes | json_values,
        "path_hash": hexes | json_values,
        "sealed": st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode()) | st.text(max_size=20) | json_values,
        "created_at": st.floats() | st.integers() | st.text(max_size=5) | st.none(),
        "reason": st.sampled_from(["", "CREATE", "ROLLBACK"]) | json_values,
        "seq": st.integers() | json_values,
    },
)


@FUZZ
@given(wire_like | json_values)
def test_wire_items_from_a_server_decode_or_raise_invalid_input(data: Any) -> None:
    try:
        item = WireItem.from_json(data)
    except InvalidInputError:
        return
    again = WireItem.from_json(item.to_json())
    assert again == item or (math.isnan(item.created_at) and math.isnan(again.created_at))


def _valid_bodies() -> st.SearchStrategy[bytes]:
    ids = st.binary(min_size=32, max_size=32)
    links = st.lists(ids, max_size=3).map(tuple)
    clocks = st.integers(0, 2**64 - 1)
    flags = st.sampled_from([fr.Flag.NONE, fr.Flag.LEGACY])
    records = st.builds(
        lambda op, hlc, wire, parents, branch, path, sid, entry, flag, after: fr.RecordFrame(
            op, hlc, wire, parents, branch, path, sid, entry, flag | (fr.Flag.EXPLICIT_AFTER if after else fr.Flag.NONE), after
        ),
        st.sampled_from(list(fr.Op)),
        clocks,
        ids,
        links,
        st.binary(min_size=16, max_size=16),
        ids,
        st.binary(max_size=40),
        st.binary(max_size=80),
        flags,
        links,
    )
    branches = st.builds(
        fr.BranchFrame,
        st.sampled_from(list(fr.BranchReason)),
        clocks,
        st.binary(min_size=16, max_size=16),
        ids,
        st.binary(max_size=60),
        flags,
        links,
    )
    reinforces = st.builds(fr.ReinforceFrame, clocks, ids, st.binary(max_size=60), flags)
    acks = st.builds(fr.AckFrame, st.lists(ids, max_size=4).map(tuple))
    return (records | branches | reinforces | acks).map(lambda f: f.encode())


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    body = bytearray(draw(_valid_bodies()))
    for _ in range(draw(st.integers(0, 3))):
        choice = draw(st.integers(0, 3))
        if choice == 0 and body:
            i = draw(st.integers(0, len(body) - 1))
            body[i] ^= 1 << draw(st.integers(0, 7))
        elif choice == 1:
            body = body[: draw(st.integers(0, len(body)))]
        elif choice == 2:
            body += draw(st.binary(min_size=1, max_size=8))
        else:
            body[:1] = bytes([draw(st.integers(0, 255))])
    return bytes(body)


@FUZZ
@given(mutated() | st.binary(max_size=300))
def test_frame_decoding_raises_only_value_error_and_round_trips_what_it_accepts(body: bytes) -> None:
    try:
        frame = fr.decode(body)
    except ValueError:
        return
    assert frame.encode() == body


@st.composite
def damaged(draw: st.DrawFn, clean: bytes) -> bytes:
    """1 to 4 of: a flipped bit, a cut, appended garbage, a forged length field, inserted bytes."""
    data = bytearray(clean)
    for _ in range(draw(st.integers(1, 4))):
        choice = draw(st.integers(0, 4))
        if choice == 0 and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif choice == 1:
            data = data[: draw(st.integers(0, len(data)))]
        elif choice == 2:
            data += draw(st.binary(min_size=1, max_size=64))
        elif choice == 3 and len(data) >= 4:
            i = draw(st.integers(0, len(data) - 4))
            data[i : i + 4] = struct.pack(">I", draw(st.integers(0, 2**32 - 1)))
        else:
            i = draw(st.integers(0, len(data)))
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


@settings(FUZZ, max_examples=size(120, 10_000), suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_the_journal_reader_never_returns_a_damaged_frame_as_authentic(tmp_path: Path, data: st.DataObject) -> None:
    bodies = data.draw(st.lists(_valid_bodies(), min_size=1, max_size=6), label="bodies")
    key = os.urandom(32)
    with memory_dir(tmp_path) as scratch:  # a real file; in RAM when possible, since each open fsyncs
        path = scratch / f"journal-{os.urandom(4).hex()}"
        journal = Journal(path, key)
        journal.append(bodies, sync=False)
        journal.close()
        path.write_bytes(data.draw(damaged(path.read_bytes()), label="damaged"))
        size_on_disk = path.stat().st_size
        journal = Journal(path, key)
        try:
            scan = journal.scan(0)
        except IntegrityError as exc:
            assert "damaged" in str(exc)  # raised, nothing returned
            return
        finally:
            journal.close()
            path.unlink()
    for frame in scan.frames:
        if frame.authentic:
            assert frame.body in bodies  # never a forged or flipped body passed off as written
    assert scan.end + scan.torn_tail == size_on_disk
