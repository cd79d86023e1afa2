"""The write-behind worker: a thread that drains the outbox to the server, never on the store's path.

``store`` only appends to the journal (the outbox *is* the journal's unacknowledged frames), so
the worker has nothing to hand over and no queue to lose in a crash: on every open it simply
finds what is still unacknowledged and sends it, oldest first, with the bytes first sealed.

Pacing (docs/replication.md, "The worker"): a push carries up to ``batch_items`` items; a partial batch waits until its
oldest item is ``linger`` old, unless someone is waiting (``flush``, ``close``, a blocked
``store``). Batches go one at a time, in journal order, each naming the item sent before it, so
the server can keep the sender's order however the network delivers them.

Failures (see :mod:`.http` for the table): transient ones back off exponentially with jitter and
retry forever; a 4xx that concerns the whole request (401, 403, 404, a bad project id) *pauses*
the worker with the items still in the outbox; a 4xx about particular items *quarantines* them
(found by bisecting the batch when the server does not name them) so the rest keeps flowing.
Both are reported through ``on("replication-error")`` and wait for ``retry()``.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from sovseal.storage.store import LocalStore
from sovseal.storage.wire import WireItem

from ..errors import BackpressureTimeoutError, ReplicationError, ServerMisbehaviourError, SovsealError
from .config import ReplicationConfig, Target
from .http import MISBEHAVIOUR_CODES, Outcome, Transport
from .protocol import encode_push
from .quarantine import Quarantine
from .restore import PullResult, SetAsideFile, pull_into
from .status import Rejected, ReplicationStatus

log = logging.getLogger("sovseal.replication")
#: 4xx answers about the request as a whole: sending other items would fail the same way.
_PAUSING = frozenset({401, 403, 404, 405, 407})
_PAUSING_CODES = frozenset({"bad_project", "unauthorized", "forbidden"})
#: A batch's JSON costs about 4/3 of its sealed bytes plus the clear fields.
_ITEM_OVERHEAD = 400
#: Events kept per kind for a listener that registers late (per handle, oldest dropped first).
_MAX_HELD_EVENTS = 1000
#: How long close() lets a push already under way finish before cancelling it (after the drain).
_CLOSE_GRACE = 0.5


def _now() -> datetime:
    return datetime.now(UTC)


class Replicator:
    """Replication for one open store: the worker thread, its state, and the user's controls."""

    def __init__(
        self,
        store: LocalStore,
        target: Target,
        project_blind: str,
        emit: Callable[..., None],
        *,
        has_listener: Callable[[str], bool] | None = None,
        config: ReplicationConfig | None = None,
        max_outbox_bytes: int,
        backpressure_timeout: float | None = None,
    ) -> None:
        self.config = config or ReplicationConfig()
        self.target = target
        self.project_blind = project_blind
        self.max_outbox_bytes = max_outbox_bytes
        self.backpressure_timeout = backpressure_timeout
        self._store = store
        self._emit = emit
        self._has_listener = has_listener
        self._held_events: dict[str, list[tuple[object, ...]]] = {}  # raised before anyone listened
        self._transport = Transport(target, project_blind, self.config)
        self._quarantine = Quarantine(store.directory)
        self._after = ""  # the last item the server acknowledged from this handle
        self._cap = self.config.batch_items  # shrinks while a refused batch is bisected
        self._state = "idle"
        self._paused: ReplicationError | None = None
        self._failures = 0  # consecutive transient failures
        self._retry_at: float | None = None
        self._last_error: str | None = None
        self._last_error_at: datetime | None = None
        self._last_success_at: datetime | None = None
        self._replicated = 0
        self._pull_lock = threading.Lock()
        self._pull_waiting = 0  # what the last pull left waiting for a parent
        self._pull_error: str | None = None
        self._set_aside = len(SetAsideFile(store.directory).load())  # items set aside by pulls, kept on disk
        # Acks are journaled by a second thread so the next push overlaps the ack's fsync, and
        # acks that queue up meanwhile share one fsync. Ids wait in ``_acking`` until journaled.
        self._acking: set[str] = set()
        self._ack_queue: list[str] = []
        self._ack_cond = threading.Condition()
        self._ack_stop = False
        self._hurry = 0  # callers waiting for the outbox to drain: do not linger
        self._lock = threading.Lock()
        self._drained = threading.Condition()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="sovseal-replication", daemon=True)
        self._acker = threading.Thread(target=self._ack_loop, name="sovseal-replication-ack", daemon=True)
        self._thread.start()
        self._acker.start()

    # -- the loop ------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                delay = self._step()
            except Exception as exc:  # the worker must outlive any one failure
                if self._stop.is_set() or self._store.closed:
                    break
                log.exception("replication step failed")
                delay = self._transient(f"{type(exc).__name__}: {exc}", None, "local")
            if delay > 0 and not self._stop.is_set():
                self._wake.wait(delay)
                self._wake.clear()
        self._state = "stopped"

    def _step(self) -> float:
        """One round: returns how long to wait before the next."""
        self._deliver_held_events()
        if self._paused is not None:
            self._state = "paused"
            return self.config.poll_interval
        items = self._next_batch()
        if not items:
            if self._state != "backoff" or self._retry_at is None:
                self._state = "idle"
            return self.config.poll_interval
        if len(items) < self._cap and not self._hurry and not self._stop.is_set():
            age = time.time() - items[0].created_at
            if 0 <= age < self.config.linger:
                return min(self.config.linger - age, self.config.poll_interval)
        return self._send(items)

    def _next_batch(self) -> list[WireItem]:
        with self._store.reading() as lineage:
            pending = len(lineage.pending)
        with self._lock:
            skip = self._quarantine.ids() | self._acking
        if pending <= len(skip) and (pending == 0 or self._pending_ids() <= skip):
            return []
        candidates = [i for i in self._store.outbox(self._cap + len(skip)) if i.id not in skip][: self._cap]
        batch: list[WireItem] = []
        size = 0
        for item in candidates:
            cost = len(item.sealed) * 4 // 3 + _ITEM_OVERHEAD
            if batch and size + cost > self.config.max_batch_bytes:
                break
            batch.append(item)
            size += cost
        return batch

    def _pending_ids(self) -> set[str]:
        with self._store.reading() as lineage:
            return {k.hex() for k in lineage.pending}

    def _send(self, items: list[WireItem]) -> float:
        self._state = "sending"
        ids = [i.id for i in items]
        outcome = self._transport.push(encode_push(items, self._after))
        if outcome.verdict == "ok":
            self._after = ids[-1]
            self._ack(ids)
            with self._lock:
                self._cap = min(self.config.batch_items, self._cap * 2)
                self._failures = 0
                self._retry_at = None
                self._replicated += len(ids)
                self._last_success_at = _now()
            self._state = "idle"
            self._safe_emit("replicated", ids)
            return 0.0
        if outcome.verdict == "retry":
            if outcome.code == "closed":  # close() cancelled it: the batch stays in the outbox for the next open
                return 0.0
            if outcome.code == "deadline" and len(items) > 1:
                with self._lock:  # a slow link: a smaller push may fit in the deadline (grows back on success)
                    self._cap = max(1, len(items) // 2)
            what = f"HTTP {outcome.status}" if outcome.status is not None else "network error"
            return self._transient(f"{what} ({outcome.code}): {outcome.message}", outcome.status, outcome.code, ids)
        return self._refused(items, outcome)

    def _ack(self, ids: list[str]) -> None:
        """Hand acknowledged ids to the ack thread; until journaled they are not sent again."""
        with self._lock:
            self._acking.update(ids)
        with self._ack_cond:
            self._ack_queue.extend(ids)
            self._ack_cond.notify()

    def _ack_loop(self) -> None:
        while True:
            with self._ack_cond:
                while not self._ack_queue and not self._ack_stop:
                    self._ack_cond.wait()
                if not self._ack_queue:
                    return
                ids, self._ack_queue = self._ack_queue, []
            try:
                self._store.ack(ids)
            except Exception as exc:  # noqa: BLE001 - e.g. LockTimeoutError: the server has them, ack later
                if self._store.closed:
                    return
                log.warning("could not record %d acknowledgements yet (%s); retrying", len(ids), exc)
                with self._ack_cond:
                    self._ack_queue[:0] = ids
                time.sleep(0.1)
                continue
            with self._lock:
                self._acking.difference_update(ids)
            with self._drained:
                self._drained.notify_all()

    def _transient(self, message: str, status: int | None, code: str, ids: list[str] | None = None) -> float:
        """Record a 5xx/network/local failure and return the backoff delay (exponential, jittered)."""
        with self._lock:
            self._failures += 1
            ceiling = min(self.config.backoff_max, self.config.backoff_base * 2 ** min(self._failures - 1, 30))
            delay = random.uniform(ceiling / 2, ceiling)  # nosec B311 -- retry jitter ("equal jitter"), not a secret
            self._retry_at = time.monotonic() + delay
            self._record(message)
            attempt = self._failures
        self._state = "backoff"
        # One event per failed attempt: the backoff bounds their rate (at most one per backoff_max
        # in a long outage), and a listener registered after the first failure still hears of it.
        # An answer no sovseal server sends (too large, compressed, not JSON) is a ServerMisbehaviourError.
        kind = ServerMisbehaviourError if code in MISBEHAVIOUR_CODES else ReplicationError
        error = kind(
            f"replication to {self.target.endpoint} failed ({attempt} attempt(s) in a row): {message}; "
            f"retrying in {delay:.1f} s",
            status=status,
            code=code,
            ids=ids,
            retryable=True,
        )
        self._safe_emit("replication-error", error)
        return delay

    def _refused(self, items: list[WireItem], outcome: Outcome) -> float:
        """A 4xx: pause for request-wide problems, otherwise isolate and quarantine the bad items."""
        status = outcome.status or 0
        detail = f"HTTP {status} ({outcome.code}): {outcome.message}"
        if status in _PAUSING or outcome.code in _PAUSING_CODES:
            error = ReplicationError(
                f"{self.target.endpoint} refused replication with {detail}. Local writes continue and stay in the outbox",
                advice="fix the API key, project or endpoint, then call replication.retry().",
                cli_advice=(
                    "fix the API key, project or endpoint (SOVSEAL_API_KEY, SOVSEAL_PROJECT, SOVSEAL_ENDPOINT), then run `sovseal sync`"
                ),
                status=status,
                code=outcome.code,
                ids=[i.id for i in items],
            )
            with self._lock:
                self._paused = error
                self._record(detail)
            self._state = "paused"
            self._safe_emit("replication-error", error)
            with self._drained:
                self._drained.notify_all()
            return 0.0
        sent = {i.id: i for i in items}
        named = [i for i in outcome.ids if i in sent]
        if not named and len(items) > 1:
            with self._lock:
                self._cap = max(1, len(items) // 2)  # bisect: the bad item is in one half
                self._record(detail)
            return 0.0
        bad = named or [items[0].id]
        at = _now()
        self._quarantine.add([Rejected(i, sent[i].kind, status, outcome.code, outcome.message, at) for i in bad])
        with self._lock:
            self._record(detail)
        error = ReplicationError(
            f"{self.target.endpoint} refused {len(bad)} item(s) with {detail}.",
            advice="They stay in the outbox and are not sent again until you call replication.retry() (see replication.rejected()).",
            cli_advice="they stay in the outbox and are not sent again until replication is retried",
            status=status,
            code=outcome.code,
            ids=bad,
        )
        self._safe_emit("replication-error", error)
        with self._drained:
            self._drained.notify_all()
        return 0.0

    def _record(self, message: str) -> None:
        self._last_error = message
        self._last_error_at = _now()

    def _safe_emit(self, event: str, *args: object) -> None:
        """Call the listeners; with none yet, hold the event (the worker starts inside the constructor,
        before the caller can register, and a 401 on the first push must not go unheard)."""
        if self._has_listener is not None and not self._has_listener(event):
            with self._lock:
                held = self._held_events.setdefault(event, [])
                held.append(args)
                del held[:-_MAX_HELD_EVENTS]
            return
        try:
            self._emit(event, *args)
        except Exception:  # a user's callback must not kill the worker
            log.exception("a %r callback raised", event)

    def _deliver_held_events(self) -> None:
        if not self._held_events or self._has_listener is None:
            return
        with self._lock:
            ready = [(event, self._held_events.pop(event)) for event in list(self._held_events) if self._has_listener(event)]
        for event, held in ready:
            for args in held:
                self._safe_emit(event, *args)

    # -- what the client and the user call ------------------------------------------------

    def outbox_bytes(self) -> int:
        with self._store.reading() as lineage:
            return lineage.outbox_bytes

    def wait_for_room(self) -> None:
        """Backpressure: block while the outbox is over ``max_outbox_bytes``; raise after the timeout."""
        if threading.current_thread() is self._thread or self.outbox_bytes() <= self.max_outbox_bytes:
            return
        timeout = self.backpressure_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._hurry += 1
        try:
            while (size := self.outbox_bytes()) > self.max_outbox_bytes:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise BackpressureTimeoutError(
                        f"the replication outbox holds {size} bytes, over max_outbox_bytes={self.max_outbox_bytes}, and "
                        f"did not drain within {timeout} s (replication is {self._state}; last error: "
                        f"{self._last_error or 'none'}).",
                        advice=(
                            f"Check that {self.target.endpoint} is reachable, or raise max_outbox_bytes or "
                            "backpressure_timeout. Nothing was written."
                        ),
                        cli_advice=(
                            f"check that {self.target.endpoint} is reachable (`sovseal status` shows why replication "
                            "is failing), then retry; nothing was written"
                        ),
                    )
                with self._drained:
                    self._drained.wait(0.1 if remaining is None else min(0.1, remaining))
        finally:
            with self._lock:
                self._hurry -= 1

    def _waiting_items(self) -> int:
        skip = self._quarantine.ids()
        with self._store.reading() as lineage:
            if not skip:
                return len(lineage.pending)
            return sum(1 for k in lineage.pending if k.hex() not in skip)

    def flush(self, timeout: float | None = None, *, stop_on_failure: bool = False) -> bool:
        """Send now and wait until everything sendable is acknowledged.

        Returns False on timeout, when paused, or (``stop_on_failure``) at the first failed attempt.
        """
        if threading.current_thread() is self._thread:
            return False  # called from a callback on the worker itself: it cannot wait for itself
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._hurry += 1
        self._wake.set()
        try:
            while self._waiting_items():
                if self._paused is not None or (stop_on_failure and self._failures) or self._stop.is_set():
                    return False
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                with self._drained:
                    self._drained.wait(0.05 if remaining is None else min(0.05, remaining))
            return True
        finally:
            with self._lock:
                self._hurry -= 1

    def rejected(self) -> list[Rejected]:
        """Items the server refused, still in the outbox, oldest refusal first."""
        pending = self._pending_ids()
        gone = {r.id for r in self._quarantine.items()} - pending
        if gone:  # acknowledged meanwhile (another device, a pull): nothing to retry
            self._quarantine.remove(gone)
        return sorted(self._quarantine.items(), key=lambda r: r.at)

    def retry(self, ids: list[str] | None = None) -> int:
        """Send refused items again (all, or ``ids``) and resume a paused worker; returns how many were re-queued."""
        requeued = self._quarantine.remove(None if ids is None else set(ids))
        with self._lock:
            self._paused = None
            self._failures = 0
            self._retry_at = None
            self._cap = self.config.batch_items
        self._wake.set()
        return len(requeued)

    def pull(self, progress: Callable[[int, int], None] | None = None) -> PullResult:
        """Fetch and import everything the server accepted for this project (see :func:`.restore.pull_into`).

        Pulls run one at a time (they share the cursor); the outcome shows in ``status()``.
        """
        with self._pull_lock:
            try:
                result = pull_into(self._store, self._transport, self.config, progress)
            except SovsealError as exc:  # the server's refusal, a bound, a forged item (IntegrityError), ...
                with self._lock:
                    self._pull_error = str(exc)
                raise
            with self._lock:
                self._pull_error = None
                self._pull_waiting = result.waiting
                self._set_aside = len(SetAsideFile(self._store.directory).load())
            if result.set_aside:
                self._safe_emit("set-aside", list(result.set_aside))
            return result

    def status(self) -> ReplicationStatus:
        with self._lock:
            retry_in = None
            if self._state == "backoff" and self._retry_at is not None:
                retry_in = max(0.0, self._retry_at - time.monotonic())
            return ReplicationStatus(
                endpoint=self.target.endpoint,
                project=self.project_blind,
                state=self._state,
                last_error=self._last_error,
                last_error_at=self._last_error_at,
                last_success_at=self._last_success_at,
                replicated=self._replicated,
                rejected=len(self._quarantine),
                retry_in=retry_in,
                pull_waiting=self._pull_waiting,
                pull_error=self._pull_error,
                set_aside=self._set_aside + self._store.versions_set_aside,
            )

    def close(self) -> None:
        """Stop the worker. A healthy worker first gets ``drain_on_close`` seconds to empty the outbox;
        whatever is left is sent on the next open.

        A push still under way after the drain (a hung or dripping server) gets ``_CLOSE_GRACE`` more,
        then is cancelled: close never waits on the network longer than that. Its batch stays in the
        outbox (the server may have it too: it deduplicates the resend).
        """
        if self._closed:
            return
        self._closed = True
        if self.config.drain_on_close > 0 and self._paused is None and self._failures == 0:
            self.flush(self.config.drain_on_close, stop_on_failure=True)
        self._stop.set()
        self._wake.set()
        self._thread.join(_CLOSE_GRACE)
        self._transport.close()  # cancels a push in flight; the worker sees the stop and ends
        self._thread.join(5)
        with self._ack_cond:  # journal the acks already received, then stop
            self._ack_stop = True
            self._ack_cond.notify()
        self._acker.join(self._store.lock_timeout + 5)
        self._transport.close()
