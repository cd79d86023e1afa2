"""Child process for the crash tests: consolidate a store and die by SIGKILL at a chosen point.

    python -m tests.consolidate.crash_run STORE KEY_HEX model N   SIGKILL on the model's Nth call (between batches)
    python -m tests.consolidate.crash_run STORE KEY_HEX op N      SIGKILL right after the Nth store/reinforce (inside a step)
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from sovseal import Sovseal
from sovseal.consolidate import consolidate
from tests.consolidate.models import RuleChatModel
from tests.fakes import fake_embed


class Dying(Sovseal):
    """A store handle whose process is killed right after its Nth write returns (durable on disk)."""

    kill_at: int | None = None
    ops = 0

    def _count(self) -> None:
        self.ops += 1
        if self.ops == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def store(self, *args: Any, **kwargs: Any) -> Any:
        result = super().store(*args, **kwargs)
        self._count()
        return result

    def reinforce(self, path: str) -> Any:
        result = super().reinforce(path)
        self._count()
        return result


def main() -> None:
    store, key_hex, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with Dying(store, key=bytes.fromhex(key_hex), embedder=fake_embed) as mem:
        model = RuleChatModel(kill_on=n if mode == "model" else None)
        mem.kill_at = n if mode == "op" else None
        consolidate(mem, model, batch_size=2)
    sys.exit("the run finished: the kill point was never reached")


if __name__ == "__main__":
    main()
