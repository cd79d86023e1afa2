"""Fork server for the crash storm: imports sovseal and LanceDB once, then forks writers on demand.

Importing LanceDB takes seconds on a loaded machine; a fresh interpreter per writer per round
would spend the whole budget importing. So one process imports everything (without opening a
database: no LanceDB thread exists yet when it forks) and forks a writer for each line it reads
on stdin: ``<store> <key hex> <prefix> <ack file>``; it answers with the writer's pid. The
parent test SIGKILLs writers by pid. Children are reaped automatically (SIGCHLD ignored).

A writer stores, deletes and reinforces paths under its own prefix, forever, and appends one
line per operation to its ack file with a single ``os.write`` *after* the call returned, so an
ack line exists only for an acknowledged operation (a SIGKILL cannot tear a line: it either was
written by the kernel or not at all).
"""

from __future__ import annotations

import os
import signal
import sys

import lancedb  # noqa: F401 - preloaded so forked writers do not import it

from sovseal import Sovseal
from tests.fakes import fake_embed

#: A writer that was never killed stops here, so a round's store stays small.
MAX_OPS = 400


def write_forever(store: str, key: bytes, prefix: str, acks: str) -> None:
    fd = os.open(acks, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        for i in range(MAX_OPS):
            if i % 5 == 4:
                path = f"{prefix}.{i - 3}"
                result = mem.delete(path)  # None when that path was never stored: nothing to ack
                kind = "delete"
            else:
                # Every 7th operation stores the previous value again: a reinforcement, no new snapshot.
                j = i - 1 if i % 7 == 6 else i
                path = f"{prefix}.{j}"
                result = mem.store(path, {"i": j, "w": prefix})
                kind = "reinforce" if result.reinforced else "store"
            if result is not None:
                os.write(fd, f"{kind} {result.snapshot_id} {path}\n".encode())


def main() -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    print("ready", flush=True)
    for line in sys.stdin:
        store, key, prefix, acks = line.split()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                write_forever(store, bytes.fromhex(key), prefix, acks)
            except BaseException:  # noqa: BLE001 - a child must never return into the server loop
                code = 1
            finally:
                os._exit(code)
        print(pid, flush=True)


if __name__ == "__main__":
    main()
