"""Tampering and downgrade: every kind of edit an attacker (or a bad disk) can make, each detected.

tests/core/test_tamper.py flips chosen ciphertext bytes and swaps two equal-size ciphertexts in
place. This scenario widens it: flips at random positions anywhere in the journal (headers,
MACs, clear fields, sealed ids; a record's path hash in particular), truncations, frames cut out
of the middle, moved or copied inside the journal, ciphertexts swapped through the replication
path (where no frame MAC stands in the way, only the AEAD), old frames replayed to roll a branch or
a reinforcement back, records moved between branches and between two stores that share a key (any
frame, and a journal header), and a wrong key. The rule checked every time: the edit is detected (a typed error on open or on
read, or ``verify()`` lists it) and no read returns anything but the original data.

One edit is undetectable by design and is checked for what it does do: cutting the *end* of the
journal is indistinguishable from a crash during the last append (docs/design.md), so it must
leave an earlier consistent state, never partial data, and say so in ``status().recovery`` when
a partial frame was cut.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sovseal import Sovseal
from sovseal.errors import IntegrityError, KeyUnavailableError, UnknownBranchError
from sovseal.storage.journal import HEADER, JOURNAL_HEADER
from sovseal.storage.wire import WireItem
from tests.fakes import fake_embed
from tests.reliability._soak import scale

TYPED = (IntegrityError, KeyUnavailableError)


@dataclass
class Original:
    """What the untouched store shows: per branch its HEAD and state; the main states over time."""

    heads: dict[str, str | None]
    states: dict[str, dict[str, Any]]
    frames: list[tuple[int, int]]  # (offset, total size) of every frame, in order
    main_history: list[dict[str, Any]] = field(default_factory=list)


def build(store: Path, key: bytes) -> Original:
    history: list[dict[str, Any]] = [{}]
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        for i in range(6):
            mem.store(f"user.fact{i}", {"v": i, "secret": f"s{i}" * (i + 1)})
            history.append(mem.state())
        mem.store("user.fact1", {"v": 1, "secret": "s1" * 2})  # a reinforcement
        mem.delete("user.fact2")
        history.append(mem.state())
        mem.fork(mem.log()[2].snapshot_id, branch="side")
        mem.store("side.only", "on the side branch")
        mem.checkout("main")
        mem.store("user.fact9", "late")
        history.append(mem.state())
        heads, states = mem.heads(), {}
        for branch in heads:
            mem.checkout(branch)
            states[branch] = mem.state()
        scan = mem._store._journal.scan(0)  # white-box: where each frame sits
        frames = [(f.offset, HEADER.size + len(f.body)) for f in scan.frames]
    return Original(heads, states, frames, history)


@dataclass
class Seen:
    outcome: str  # refused | flagged | older | intact
    detail: str = ""


def observe(store: Path, key: bytes, original: Original) -> Seen:
    """Open and read every branch. Fails the test if a store that verify() flags returns anything
    but the original data, or if any read raises an untyped error.

    ``older``: verify() passes but some branch shows an earlier state of its history (or does not
    exist yet): what a cut at the end of the journal leaves, exactly like a crash.
    """
    try:
        mem = Sovseal(store, key=key, embedder=fake_embed)
    except TYPED as exc:
        return Seen("refused", type(exc).__name__)
    with mem:
        report = mem.verify()
        recovery = list(mem._store.repairs)  # status() itself fails closed on a damaged HEAD
        older = False
        for branch, state in original.states.items():
            try:
                mem.checkout(branch)
                seen = mem.state()
                for path in seen:
                    mem.get(path)
            except IntegrityError:
                assert not report.ok, "a read failed authentication but verify() passed"
                continue
            except UnknownBranchError:
                assert report.ok, f"branch {branch} vanished from a store verify() flags"
                older = True
                continue
            except Exception as exc:  # an untyped error is a finding
                raise AssertionError(f"untyped {type(exc).__name__}: {exc}") from exc
            if seen != state:
                assert report.ok, f"a flagged store returned other data for {branch}: {report.problems}"
                assert branch != "main" or seen in original.main_history
                older = True
        if not report.ok:
            return Seen("flagged", report.problems[0])
        torn = any("torn tail" in r for r in recovery)
        if older:
            return Seen("older", "torn tail cut" if torn else "cut at a frame boundary")
        assert mem.heads() == original.heads
        return Seen("intact", "torn tail cut" if torn else "")


def fresh_copy(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("index"))
    return dst


@pytest.fixture
def pristine(tmp_path: Path, key: bytes) -> tuple[Path, Original]:
    store = tmp_path / "pristine"
    return store, build(store, key)


def test_random_bit_flips_anywhere_in_the_journal_are_detected(
    tmp_path: Path, key: bytes, pristine: tuple[Path, Original], figures: dict[str, Any]
) -> None:
    """Proves: a single flipped bit at any position of the journal is refused at open, flagged by
    verify() with reads failing closed, or (only in the last frame's length) cut as a torn tail;
    never read back as data."""
    src, original = pristine
    size = (src / "journal.log").stat().st_size
    last_header = range(original.frames[-1][0], original.frames[-1][0] + 4)
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    for _ in range(scale(60, 3000)):
        store = fresh_copy(src, tmp_path / "flip")
        data = bytearray((store / "journal.log").read_bytes())
        position = rng.randrange(size)
        data[position] ^= 1 << rng.randrange(8)
        (store / "journal.log").write_bytes(bytes(data))
        seen = observe(store, key, original)
        assert seen.outcome != "intact", f"flip at byte {position} went unnoticed (seed {seed})"
        if seen.outcome == "older":  # the last frame's length now runs past the end: cut as a torn write
            assert position in last_header and seen.detail == "torn tail cut", (position, seen, seed)
        counts[seen.outcome] = counts.get(seen.outcome, 0) + 1
    figures.update(seed=seed, journal_bytes=size, **counts)


def test_truncations(tmp_path: Path, key: bytes, pristine: tuple[Path, Original], figures: dict[str, Any]) -> None:
    """Proves: a ciphertext shortened inside its frame, or bytes cut out of the middle of the journal,
    are detected; cutting the end at any byte leaves an earlier consistent state (a crash looks the
    same), reports a cut partial frame, and never returns partial data."""
    src, original = pristine
    journal = (src / "journal.log").read_bytes()
    outcomes: dict[str, int] = {}
    # A sealed entry shortened inside its frame (the length field adjusted to match).
    for offset, total in original.frames[1:4]:
        data = bytearray(journal)
        length = total - HEADER.size
        data[offset : offset + 4] = (length - 7).to_bytes(4, "big")
        del data[offset + total - 7 : offset + total]
        store = fresh_copy(src, tmp_path / "short")
        (store / "journal.log").write_bytes(bytes(data))
        assert observe(store, key, original).outcome in ("refused", "flagged")
    # A run of bytes cut out of the middle (one whole frame, or part of one).
    for start, cut in [(original.frames[3][0], original.frames[3][1]), (original.frames[5][0] + 9, 40)]:
        store = fresh_copy(src, tmp_path / "hole")
        (store / "journal.log").write_bytes(journal[:start] + journal[start + cut :])
        seen = observe(store, key, original)
        assert seen.outcome in ("refused", "flagged"), seen
    # The end cut at each frame boundary and inside the last frames (every byte of the last three in soak mode).
    inside = range(original.frames[-3][0], len(journal))
    cuts = sorted({o for o, _ in original.frames} | set(random.sample(inside, min(len(inside), scale(40, len(inside))))))
    for cut in cuts:
        store = fresh_copy(src, tmp_path / "tail")
        (store / "journal.log").write_bytes(journal[:cut])
        seen = observe(store, key, original)
        assert seen.outcome == "older", (cut, seen)
        outcomes[seen.detail] = outcomes.get(seen.detail, 0) + 1
    figures.update(tail_cuts=len(cuts), **outcomes)


def build_events(store: Path, key: bytes) -> Original:
    """A store whose state hangs on branch events in the middle of the journal: main is rolled
    back (undoing a stored and reinforced value), then only another branch is written."""
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        mem.store("user.plan", "keep")
        keep = mem.snapshot()
        assert keep is not None
        mem.store("user.plan", "undone by the rollback")
        mem.store("user.plan", "undone by the rollback")  # a reinforcement
        mem.fork(branch="side")
        mem.store("side.note", "on the side branch")
        mem.checkout("main")
        mem.rollback(keep)
        mem.checkout("side")
        mem.store("side.later", "written after main's rollback")
        mem.checkout("main")
        heads, states = mem.heads(), {}
        for branch in heads:
            mem.checkout(branch)
            states[branch] = mem.state()
        frames = [(f.offset, HEADER.size + len(f.body)) for f in mem._store._journal.scan(0).frames]
    return Original(heads, states, frames, [states["main"]])


def test_frames_cut_out_of_the_middle_moved_or_copied_inside_the_journal_are_detected(
    tmp_path: Path, key: bytes, figures: dict[str, Any]
) -> None:
    """Proves: frames are numbered, so any one frame cut out of the middle (a rollback, a
    reinforcement, a record), moved to the end, or copied into the middle is detected: a gap in
    the numbering fails every branch closed (whatever was cut may have moved any HEAD, so no branch
    silently shows main's state from before its rollback), a number seen again is flagged and not
    applied. Cutting the last frame is a torn write, covered by test_truncations."""
    src = tmp_path / "events"
    original = build_events(src, key)
    journal = (src / "journal.log").read_bytes()
    counts: dict[str, int] = {}
    for index, (offset, total) in enumerate(original.frames[:-1]):
        frame, after = journal[offset : offset + total], original.frames[index + 1]
        edits = {
            "cut out": journal[:offset] + journal[offset + total :],
            "moved to the end": journal[:offset] + journal[offset + total :] + frame,
            "copied further on": journal[: after[0] + after[1]] + frame + journal[after[0] + after[1] :],
        }
        for name, data in edits.items():
            store = fresh_copy(src, tmp_path / "edited")
            (store / "journal.log").write_bytes(data)
            seen = observe(store, key, original)
            assert seen.outcome in ("refused", "flagged"), (index, name, seen)
            counts[name] = counts.get(name, 0) + 1
    figures.update(**counts)


def append_frames(store: Path, frames: list[bytes]) -> None:
    with open(store / "journal.log", "ab") as f:
        f.write(b"".join(frames))


def frame_bytes(store: Path, original: Original, index: int) -> bytes:
    offset, total = original.frames[index]
    return (store / "journal.log").read_bytes()[offset : offset + total]


def kinds(store: Path, key: bytes) -> list[str]:
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        return [type(f).__name__ for f in map(_decode, mem._store._journal.scan(0).frames)]


def _decode(frame: Any) -> Any:
    from sovseal.storage.frames import decode

    return decode(frame.body)


@pytest.mark.parametrize("kind", ["RecordFrame", "BranchFrame", "ReinforceFrame"])
def test_replayed_old_frames_are_detected_and_change_nothing(
    tmp_path: Path, key: bytes, pristine: tuple[Path, Original], kind: str, figures: dict[str, Any]
) -> None:
    """Proves: an older frame appended again verbatim (its MAC is valid: it is a real frame) to roll
    a HEAD back, re-play a record or inflate a reinforcement is flagged by verify() and changes no
    HEAD, no state and no reinforcement count."""
    src, original = pristine
    frame_kinds = kinds(src, key)
    replayed = 0
    for index, name in enumerate(frame_kinds):
        if name != kind:
            continue
        store = fresh_copy(src, tmp_path / "replay")
        append_frames(store, [frame_bytes(src, original, index)])
        seen = observe(store, key, original)
        assert seen.outcome == "flagged", (index, seen)
        with Sovseal(store, key=key, embedder=fake_embed) as mem:
            assert mem.heads() == original.heads
            assert mem.get("user.fact1").reinforce_count == 1
        replayed += 1
    figures.update(replayed=replayed)
    assert replayed


def test_records_moved_between_branches_or_swapped_on_the_wire_are_refused(
    tmp_path: Path, key: bytes, pristine: tuple[Path, Original]
) -> None:
    """Proves, on the replication path where no frame MAC helps: a record whose branch, path, parent
    or ciphertext was changed, two records' ciphertexts or two events swapped, or a ciphertext
    truncated, is refused by import with IntegrityError; the forged item and everything after it
    stay out, and the store verifies."""
    src, _ = pristine
    with Sovseal(src, key=key, embedder=fake_embed) as mem:
        items = mem.export_items()
    records = [i for i, item in enumerate(items) if item.kind == "record"]
    main = items[0].branch  # the first item creates main
    a, b = records[2], records[3]
    side = next(i for i in records if items[i].branch != main)
    forgeries = {
        "moved to another branch": {side: dataclasses.replace(items[side], branch=main)},
        "moved to another path": {a: dataclasses.replace(items[a], path_hash=items[b].path_hash)},
        "given another parent": {b: dataclasses.replace(items[b], parent=items[records[0]].id)},
        "ciphertexts swapped": {
            a: dataclasses.replace(items[a], sealed=items[b].sealed),
            b: dataclasses.replace(items[b], sealed=items[a].sealed),
        },
        "ciphertext truncated": {a: dataclasses.replace(items[a], sealed=items[a].sealed[:-5])},
        "ciphertext bit flipped": {a: dataclasses.replace(items[a], sealed=_flip(items[a].sealed))},
        "event swapped": _swap_events(items),
    }
    for name, changes in forgeries.items():
        forged = [changes.get(i, item) for i, item in enumerate(items)]
        first = min(changes)
        target = tmp_path / name.replace(" ", "-")
        with Sovseal(target, key=key, embedder=fake_embed) as mem:
            with pytest.raises(IntegrityError):
                mem.import_items(forged)
            # The genuine items before the forgery are kept; the forgery and all after it are not.
            assert mem.status().records == sum(1 for i in records if i < first), name
            assert mem.verify().ok


def _flip(data: bytes) -> bytes:
    out = bytearray(data)
    out[len(out) // 2] ^= 0x10
    return bytes(out)


def _swap_events(items: list[WireItem]) -> dict[int, WireItem]:
    """Two branch events with their sealed bytes swapped (ids recomputed to match, as a forger would)."""
    import hashlib

    events = [i for i, item in enumerate(items) if item.kind == "branch"]
    x, y = events[0], events[1]
    fx = dataclasses.replace(items[x], sealed=items[y].sealed, id=hashlib.sha256(items[y].sealed).hexdigest())
    fy = dataclasses.replace(items[y], sealed=items[x].sealed, id=hashlib.sha256(items[x].sealed).hexdigest())
    return {x: fx, y: fy}


def transplant(tmp_path: Path, key: bytes) -> tuple[Path, Path, list[tuple[str, bytes]]]:
    """Project a and project b share one key; returns a's frames as (kind, bytes)."""
    first, second = tmp_path / "project-a", tmp_path / "project-b"
    with Sovseal(first, key=key, embedder=fake_embed) as a:
        a.store("a.genesis", "written in project a")
        a.store("a.second", "also a's")
        a.store("a.genesis", "written in project a")  # a reinforcement
        a.fork(branch="a-only")
        a.store("a.side", "on a's own branch")
        a._store.create_branch("a-empty", None)  # white-box: a new branch with no snapshot (builds on nothing of a's)
        scanned = a._store._journal.scan(0).frames
    journal = (first / "journal.log").read_bytes()
    frames = [(type(_decode(f)).__name__, journal[f.offset : f.offset + HEADER.size + len(f.body)]) for f in scanned]
    return first, second, frames


def test_every_frame_moved_from_another_store_with_the_same_key_is_detected(tmp_path: Path, key: bytes, figures: dict[str, Any]) -> None:
    """Proves: of two stores (projects) sharing one key, any frame copied from one journal into the
    other is flagged by verify() and every read it could affect fails closed: frames that build on
    their own store's history (a parent, a branch, a target), and also those that build on nothing
    (main's creation, a genesis record, a new empty branch), which name only ids that are equal in
    every store with that key. Each journal has its own random id in its header, and frame MACs
    are keyed by it, so a copied frame fails authentication in any other journal."""
    _, second, frames = transplant(tmp_path, key)
    b_original = build(second, key)
    checked: dict[str, int] = {}
    for index, (kind, frame) in enumerate(frames):
        store = fresh_copy(second, tmp_path / "transplant")
        append_frames(store, [frame])
        seen = observe(store, key, b_original)
        assert seen.outcome in ("refused", "flagged"), (index, kind, seen)
        checked[kind] = checked.get(kind, 0) + 1
    assert {"RecordFrame", "BranchFrame", "ReinforceFrame"} <= set(checked)
    figures.update(frames_transplanted=sum(checked.values()), **checked)


def test_a_genesis_record_or_an_empty_branch_moved_from_another_store_with_the_same_key_is_detected(tmp_path: Path, key: bytes) -> None:
    """Proves the formerly known gap closed: a *genesis* record of project a (no parent; the keyed id
    of "main" is the same in b) appended to project b's journal no longer becomes b's HEAD, and a
    new empty branch's creation no longer appears in b: the copied frame fails b's MAC, the record's
    head fails b's head tag, so b's branches fail closed (IntegrityError) instead of showing a's data
    or hiding b's."""
    _, second, frames = transplant(tmp_path, key)
    b_original = build(second, key)
    genesis = frames[1][1]
    empty_branch = frames[-1][1]
    for moved in (genesis, empty_branch):
        store = fresh_copy(second, tmp_path / "transplant")
        append_frames(store, [moved])
        with Sovseal(store, key=key, embedder=fake_embed) as mem:
            report = mem.verify()
            assert not report.ok and any("failed authentication" in p for p in report.problems)
            assert "a-empty" not in mem.branches()
            with pytest.raises(IntegrityError):
                mem.get("a.genesis")
            with pytest.raises(IntegrityError):
                mem.get("user.fact1")
            with pytest.raises(IntegrityError):
                mem.recall("written in project a", k=3)
        assert observe(store, key, b_original).outcome == "flagged"


def test_a_journal_header_swapped_for_another_stores_is_detected(tmp_path: Path, key: bytes) -> None:
    """Proves: putting project a's journal header (a valid header: same key) in front of project b's
    frames makes every one of b's frames fail authentication: the store is refused or flagged with
    every read failing closed, never read as data."""
    first, second, _ = transplant(tmp_path, key)
    b_original = build(second, key)
    store = fresh_copy(second, tmp_path / "swapped-header")
    a_header = (first / "journal.log").read_bytes()[: JOURNAL_HEADER.size]
    b_journal = (store / "journal.log").read_bytes()
    assert a_header != b_journal[: JOURNAL_HEADER.size]
    (store / "journal.log").write_bytes(a_header + b_journal[JOURNAL_HEADER.size :])
    assert observe(store, key, b_original).outcome in ("refused", "flagged")


def _record_frames(store: Path, key: bytes) -> list[tuple[int, str, str]]:
    """(frame offset, path, branch) of every record frame, read from an intact store."""
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        names = {mem._store.branch_id(b): b for b in mem.branches()}
        return [(n.offset, mem._store.open(n.idx).entry.path, names[n.branch_id]) for n in mem._store._lineage.nodes]


#: Where a record frame's path hash sits: after the frame header and kind, op, time, wire id, parent, branch.
PATH_HASH_AT = HEADER.size + 1 + 1 + 8 + 32 + 32 + 16


def test_a_flipped_path_hash_fails_reads_of_the_records_real_path_closed(
    tmp_path: Path, key: bytes, pristine: tuple[Path, Original], figures: dict[str, Any]
) -> None:
    """Proves the formerly known gap closed: a bit flipped in a record's path hash made the record
    claim another path, so get() of its real path returned the previous value (or None). Now the
    record's head fails its tag, nothing about where the record belongs is trusted, and every branch
    it could be on fails closed: get() of the real path raises IntegrityError, recall never returns
    the record, verify() lists it. Tried for every record frame, with a random bit of the hash."""
    src, original = pristine
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    records = _record_frames(src, key)
    journal = (src / "journal.log").read_bytes()
    for offset, path, branch in records:
        store = fresh_copy(src, tmp_path / "path-hash")
        data = bytearray(journal)
        data[offset + PATH_HASH_AT + rng.randrange(32)] ^= 1 << rng.randrange(8)
        (store / "journal.log").write_bytes(bytes(data))
        with Sovseal(store, key=key, embedder=fake_embed, branch=branch) as mem:
            assert not mem.verify().ok
            with pytest.raises(IntegrityError):
                mem.get(path)
            with pytest.raises(IntegrityError):
                mem.recall(path, k=10)
        assert observe(store, key, original).outcome == "flagged"
    figures.update(records_with_a_flipped_path_hash=len(records))


def test_a_flipped_branch_id_in_a_rollback_fails_that_branch_closed(tmp_path: Path, key: bytes) -> None:
    """Proves: a bit flipped in the branch id of a rollback frame (which would make it move a branch
    that does not exist, and leave the real branch at its pre-rollback state) makes every branch fail
    closed: no branch shows the state the rollback undid."""
    store = tmp_path / "rolled"
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        mem.store("user.plan", "keep")
        keep = mem.snapshot()
        mem.store("user.plan", "undone by the rollback")
        assert keep is not None
        mem.rollback(keep)
        rollback = mem._store._journal.scan(0).frames[-1].offset  # white-box: the rollback's frame
    data = bytearray((store / "journal.log").read_bytes())
    data[rollback + HEADER.size + 1 + 1 + 8] ^= 0x04  # inside its branch id
    (store / "journal.log").write_bytes(bytes(data))
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        assert not mem.verify().ok
        with pytest.raises(IntegrityError):
            mem.get("user.plan")
        with pytest.raises(IntegrityError):
            mem.state()


def test_a_wrong_key_reads_nothing(tmp_path: Path, pristine: tuple[Path, Original]) -> None:
    """Proves: another key (even with store.json removed, so the key id check cannot help) is
    refused with KeyUnavailableError before anything is returned or written."""
    src, _ = pristine
    store = fresh_copy(src, tmp_path / "wrong")
    (store / "store.json").unlink()
    before = (store / "journal.log").read_bytes()
    with pytest.raises(KeyUnavailableError):
        Sovseal(store, key=os.urandom(32), embedder=fake_embed)
    assert (store / "journal.log").read_bytes() == before
