"""Nothing readable on disk: paths, payloads, metadata, branch names and snapshot ids are sealed or keyed."""

from __future__ import annotations

from pathlib import Path

from sovseal import Sovseal
from tests.fakes import fake_embed

SECRETS = ["strategy.long_btc.v3", "buy the dip at forty two", "desk-alpha", "branch-for-carol", "Ångström-naïve-東京"]


def test_no_secret_reaches_any_file(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        first = mem.store(SECRETS[0], {"note": SECRETS[1]}, metadata={"desk": SECRETS[2]})
        mem.store("unicode", SECRETS[4])
        mem.store(SECRETS[0], {"note": SECRETS[1]}, metadata={"desk": SECRETS[2]})  # reinforcement
        mem.fork(first.snapshot_id, branch=SECRETS[3])
        mem.delete(SECRETS[0])
        ids = [e.snapshot_id for e in mem.log()] + [first.snapshot_id]
        mem.recall("dip", k=2)  # makes the vector index write its files
    files = [p for p in store_dir.rglob("*") if p.is_file()]
    assert any(p.name == "journal.log" for p in files) and any("index" in p.parts for p in files)
    needles = [s.encode() for s in SECRETS] + [s.encode("utf-16-le") for s in SECRETS]
    needles += [i.encode() for i in ids] + [i.removeprefix("snap_").encode() for i in ids]
    needles += [bytes.fromhex(i.removeprefix("snap_")) for i in ids]
    for path in files:
        data = path.read_bytes()
        for needle in needles:
            assert needle not in data, f"{needle!r} found in {path}"
