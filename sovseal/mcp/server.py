"""The sovseal MCP server: an agent's direct way into its encrypted memory, over stdio.

Built on the official ``mcp`` SDK (FastMCP). One process serves one store through one
:class:`~sovseal.Sovseal` handle, whose current branch is the session's branch (``fork`` and
``switch_branch`` change it). Every tool answers ``{success, data, timestamp}`` (docs/mcp.md) as
structured content and as JSON text. A :class:`~sovseal.errors.SovsealError` (or any other
failure) comes back as an MCP tool error (``isError: true``) carrying the typed error's name and
message; the server itself keeps running. The embedding model is warmed before the first request.

Run it with ``sovseal mcp`` (``--path``/``SOVSEAL_HOME``, ``--branch``/``SOVSEAL_BRANCH``); client
configuration snippets are in docs/mcp.md.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from sovseal.errors import InvalidInputError, SovsealError
from sovseal.mcp.envelope import envelope, error_envelope
from sovseal.paths import store_dir, store_exists
from sovseal.sdk.client import EmbedFn, Sovseal
from sovseal.sdk.opening import open_store
from sovseal.sdk.views import branch_heads, branch_table, jsonable, require_memory, resolve_snapshot, snapshot_graph

if TYPE_CHECKING:
    from sovseal.anonymize import Anonymizer

__all__ = ["INSTRUCTIONS", "TOOLS", "build_server", "serve_stdio"]

log = logging.getLogger("sovseal.mcp")

TOOLS = (
    "store_memory",
    "recall_memory",
    "get_memory",
    "delete_memory",
    "purge",
    "snapshot",
    "fork",
    "rollback",
    "list_branches",
    "switch_branch",
    "memory_log",
    "verify",
    "message_anonymize",
    "message_deanonymize",
)

INSTRUCTIONS = """\
sovseal is your long-term memory: local, encrypted, and versioned like git.
- store_memory saves a fact under a dotted path (e.g. "user.preferences.editor"); storing a path \
again replaces what it shows, and storing the same value again reinforces it (reinforced memories \
rank higher). Use type "semantic" for facts, "procedural" for how-tos, "episodic" for events.
- recall_memory finds memories by meaning; get_memory reads one path exactly.
- delete_memory hides a path but keeps its history (rollback brings it back). purge erases every \
version of a path (or of every path under a prefix) on every branch for good, irreversibly: use it \
only when the user asks to forget something for real (a secret stored by mistake, an erasure request).
- Every write creates a snapshot. snapshot tells the current one; rollback moves back to an \
earlier one without deleting anything; fork starts a branch to try something without touching the \
main line; switch_branch and list_branches move between branches.
- message_anonymize replaces names, contacts, secrets and the user's identity facts (memories under \
"identity.") in a message with placeholders like <PERSON_1> before you send it to another model; \
message_deanonymize puts the originals back into that model's answer (same session_id).
- Results are {"success", "data", "timestamp"}; errors say what to do next.
"""

#: Payload: a JSON object or a string (docs/mcp.md); arrays, numbers and booleans are accepted too.
JsonPayload = dict[str, Any] | list[Any] | str | int | float | bool | None
MemoryType = Literal["semantic", "episodic", "procedural"]
Provenance = Literal["explicit", "observed"]

_WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)
_READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)


def _ok(data: Any) -> CallToolResult:
    result = envelope(data)
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
        structuredContent=result,
    )


def _error(exc: BaseException) -> CallToolResult:
    result = error_envelope(exc)
    return CallToolResult(
        content=[TextContent(type="text", text=f"{type(exc).__name__}: {exc}")],
        structuredContent=result,
        isError=True,
    )


#: How many of an invalid call's argument errors its message lists.
_ARGUMENT_ERRORS = 3


class _Server(FastMCP):
    """FastMCP whose argument validation fails like every other call: arguments that do not match a
    tool's input schema come back as an ``InvalidInputError`` envelope, not the SDK's plain text."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            return await super().call_tool(name, arguments)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            return _error(InvalidInputError(_invalid_arguments(name, exc.__cause__)))


def _invalid_arguments(tool: str, error: ValidationError) -> str:
    problems = [f"{'.'.join(str(part) for part in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors(include_url=False)]
    more = f" (and {len(problems) - _ARGUMENT_ERRORS} more)" if len(problems) > _ARGUMENT_ERRORS else ""
    listed = "; ".join(problems[:_ARGUMENT_ERRORS])
    return f"{tool} got arguments that do not match its input schema: {listed}{more}; see the tool's inputSchema"


#: How often, at most, the MCP server pulls before answering a call (with continuous sync on).
_PULL_EVERY = 1.0


class _Session:
    """The store handle plus a lock: tools run one at a time in a worker thread, so the event loop
    never blocks and the handle's current branch is never changed under a running call."""

    def __init__(self, mem: Sovseal) -> None:
        self.mem = mem
        self._lock = threading.Lock()
        self._pulled = 0.0

    def _catch_up(self) -> None:
        """With continuous sync on (``SOVSEAL_SYNC_INTERVAL``), pull before answering: an agent asking
        now sees what another device wrote a moment ago. At most once a second; a failed pull is
        logged and the call answers from what is here."""
        if self.mem.syncing is None or time.monotonic() - self._pulled < _PULL_EVERY:
            return
        try:
            self.mem.pull()
        except SovsealError as exc:
            log.warning("pull before answering failed (answering from this device): %s", exc)
        self._pulled = time.monotonic()

    async def run(self, work: Callable[[Sovseal], Any]) -> CallToolResult:
        def locked() -> Any:
            with self._lock:
                self._catch_up()
                return work(self.mem)

        try:
            return _ok(await anyio.to_thread.run_sync(locked))
        except SovsealError as exc:
            return _error(exc)
        except Exception as exc:  # a bug in one call must not take the server down
            log.exception("tool call failed")
            return _error(exc)


def _anonymizer_of(holder: list[Anonymizer]) -> Anonymizer:
    """The server's one anonymizer, built on the first anonymizer call (Presidio is an extra)."""
    if not holder:
        from sovseal.anonymize import Anonymizer

        holder.append(Anonymizer())
    return holder[0]


def build_server(mem: Sovseal) -> FastMCP:
    """A FastMCP server whose tools act on ``mem`` (the caller owns and closes ``mem``)."""
    server = _Server("sovseal", instructions=INSTRUCTIONS, log_level="WARNING")
    session = _Session(mem)
    anonymizers: list[Anonymizer] = []

    @server.tool(title="Store a memory", annotations=_WRITE)
    async def store_memory(
        path: Annotated[
            str, Field(description='Dotted logical key, e.g. "user.preferences.testing". Storing it again replaces the value.')
        ],
        payload: Annotated[JsonPayload, Field(description="The memory: a JSON object or a string (any JSON value works).")],
        metadata: Annotated[
            dict[str, Any] | None, Field(description='Optional JSON object stored (encrypted) with it, e.g. {"source": "chat"}.')
        ] = None,
        type: Annotated[
            MemoryType, Field(description="semantic: a fact; procedural: how to do something; episodic: an event (decays fastest).")
        ] = "semantic",
        provenance: Annotated[
            Provenance, Field(description="explicit: the user asked to remember it; observed: you inferred it.")
        ] = "explicit",
        parent: Annotated[
            str | None, Field(description="Optional snapshot id to use as parent instead of the current HEAD (advanced).")
        ] = None,
    ) -> CallToolResult:
        """Save a memory durably on this device (encrypted, versioned). Returns its snapshot_id; replicated is
        false because replication happens in the background. Storing the exact value a path already holds
        reinforces that memory instead (reinforced: true)."""

        def work(m: Sovseal) -> dict[str, Any]:
            parent_id = resolve_snapshot(m, parent) if parent is not None else None
            result = m.store(path, payload, metadata=metadata, type=type, provenance=provenance, parent=parent_id)
            return {**jsonable(result), "path": path, "branch": m.branch}

        return await session.run(work)

    @server.tool(title="Recall memories", annotations=_READ)
    async def recall_memory(
        query: Annotated[str, Field(description="What you want to remember, in natural language.")],
        k: Annotated[int, Field(description="How many memories to return.", ge=1, le=100)] = 5,
        filter: Annotated[
            dict[str, Any] | None,
            Field(description="Optional filter on path prefix, type, provenance or metadata (see docs/mcp.md)."),
        ] = None,
    ) -> CallToolResult:
        """Find the memories on the current branch that best match a query, by meaning (on-device search,
        no network). Each result has path, payload, metadata, type, score, snapshot_id and reinforce_count."""

        def work(m: Sovseal) -> dict[str, Any]:
            return {"branch": m.branch, "memories": m.recall(query, k=k, filter=filter)}

        return await session.run(work)

    @server.tool(title="Get a memory", annotations=_READ)
    async def get_memory(
        path: Annotated[str, Field(description="The exact path the memory was stored under.")],
    ) -> CallToolResult:
        """Read the memory stored at an exact path on the current branch. An error if nothing is stored there
        (use recall_memory to search)."""
        return await session.run(lambda m: require_memory(m, path))

    @server.tool(
        title="Delete a memory",
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False),
    )
    async def delete_memory(
        path: Annotated[str, Field(description="The path to delete.")],
    ) -> CallToolResult:
        """Delete the memory at a path on the current branch: it stops appearing in recall. History is kept, so
        rollback can bring it back. Deleting a path that holds nothing changes nothing (deleted: false)."""

        def work(m: Sovseal) -> dict[str, Any]:
            result = m.delete(path)
            return {"path": path, "branch": m.branch, "deleted": result is not None, "snapshot_id": result and result.snapshot_id}

        return await session.run(work)

    @server.tool(
        title="Purge a memory for good (irreversible)",
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False),
    )
    async def purge(
        path: Annotated[str | None, Field(description="Erase every version of this exact path. Give path or prefix, not both.")] = None,
        prefix: Annotated[
            str | None,
            Field(description='Erase every path that starts with this string, e.g. "customer.42." (end it with the dot).'),
        ] = None,
        reason: Annotated[str, Field(description="Why, kept (encrypted) in the redaction record, e.g. \"the user asked\".")] = "",
    ) -> CallToolResult:
        """IRREVERSIBLE. Erase every version of a memory path (or of every path under a prefix) on every branch,
        for good: unlike delete_memory, nothing can bring it back, not rollback, not the key holder. Only when
        the user asks to forget something for real. The lineage stays verifiable (erased snapshots show as op
        "erased" in memory_log); the journal is compacted at once. With replication on, the server and the
        other devices erase it too. Returns the erased snapshot ids; an error if nothing was ever stored there."""

        def work(m: Sovseal) -> dict[str, Any]:
            if path is not None and prefix is not None:  # an agent's irreversible call names one target, never two
                raise InvalidInputError("give path or prefix, not both: purge one target per call")
            result = m.purge(path, prefix=prefix, reason=reason, compact=True)
            return {
                "path": path,
                "prefix": prefix,
                "reason": reason,
                "erased": result.erased,
                "compacted": result.compacted,
                "bytes_reclaimed": result.bytes_reclaimed,
                "replication": m.replication is not None,
            }

        return await session.run(work)

    @server.tool(title="Current snapshot", annotations=_READ)
    async def snapshot() -> CallToolResult:
        """The current branch and its HEAD snapshot id: remember it to come back later with rollback or fork."""
        return await session.run(lambda m: {"branch": m.branch, "snapshot_id": m.snapshot()})

    @server.tool(title="Fork a branch", annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False))
    async def fork(
        snapshot_id: Annotated[
            str | None, Field(description="Snapshot to branch from (full id or unique prefix); default the current HEAD.")
        ] = None,
        branch: Annotated[str | None, Field(description="Name of the new branch; default a generated fork-<hex> name.")] = None,
    ) -> CallToolResult:
        """Create a new branch at a snapshot and switch to it, to explore without changing the branch you were
        on. Switch back with switch_branch."""

        def work(m: Sovseal) -> dict[str, Any]:
            previous = m.branch
            at = resolve_snapshot(m, snapshot_id) if snapshot_id is not None else m.snapshot()
            if at is None:
                raise InvalidInputError(f"branch {previous!r} has no snapshot yet; store a memory first")
            name = m.fork(at, branch=branch)
            return {"branch": name, "snapshot_id": at, "previous_branch": previous}

        return await session.run(work)

    @server.tool(title="Roll back", annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False))
    async def rollback(
        snapshot_id: Annotated[str, Field(description="The snapshot to move HEAD to (full id or unique prefix).")],
    ) -> CallToolResult:
        """Move the current branch's HEAD back (or forward) to a snapshot: memories look exactly as they did
        then. Nothing is deleted; rolling back to previous_head undoes it."""

        def work(m: Sovseal) -> dict[str, Any]:
            target = resolve_snapshot(m, snapshot_id)
            previous = m.snapshot()
            m.rollback(target)
            return {"branch": m.branch, "head": target, "previous_head": previous}

        return await session.run(work)

    @server.tool(title="List branches", annotations=_READ)
    async def list_branches() -> CallToolResult:
        """Every branch with its HEAD snapshot and how many memories it shows; current marks this session's."""
        return await session.run(lambda m: {"current": m.branch, "branches": branch_table(m)})

    @server.tool(title="Switch branch", annotations=_WRITE)
    async def switch_branch(
        branch: Annotated[str, Field(description="An existing branch name (see list_branches).")],
    ) -> CallToolResult:
        """Make another existing branch the current one for the following calls."""

        def work(m: Sovseal) -> dict[str, Any]:
            m.checkout(branch)
            return {"branch": m.branch, "head": m.snapshot()}

        return await session.run(work)

    @server.tool(title="Memory log", annotations=_READ)
    async def memory_log(
        limit: Annotated[int, Field(description="At most this many snapshots, newest first.", ge=1, le=1000)] = 20,
        all_branches: Annotated[
            bool, Field(description="true: the snapshot graph of every branch (with parent ids and branch heads).")
        ] = False,
    ) -> CallToolResult:
        """The history of the current branch, newest first: each snapshot's id, parent, operation (store,
        delete, or erased: purged, with an empty path), path and time. Use the ids with rollback or fork."""

        def work(m: Sovseal) -> dict[str, Any]:
            if all_branches:
                return {"current": m.branch, "branches": branch_heads(m), "snapshots": snapshot_graph(m)[:limit]}
            return {"branch": m.branch, "entries": m.log(limit=limit)}

        return await session.run(work)

    @server.tool(title="Verify the store", annotations=_READ)
    async def verify() -> CallToolResult:
        """Decrypt every record and re-derive every snapshot id on every branch; records erased by purge are
        checked as skeletons and counted in erased. ok: false lists the damaged records (restore them from a
        backup or a replica)."""
        return await session.run(lambda m: m.verify())

    @server.tool(title="Anonymize a message", annotations=_READ)
    async def message_anonymize(
        text: Annotated[str, Field(description="The message to anonymize before it goes to another model.")],
        session_id: Annotated[
            str | None,
            Field(description="Continue this session (same entity, same placeholder across turns); default a new session."),
        ] = None,
    ) -> CallToolResult:
        """Replace e-mails, phone numbers, IBANs, card numbers, IPs, URLs, API keys, names (when an NER model
        is installed), the user's identity facts (memories under "identity.") and CamelCase identifiers with
        placeholders such as <PERSON_1>. The placeholder map stays in this process's memory only; pass the
        returned session_id to message_deanonymize. A session expires after ttl_seconds unused."""

        def work(m: Sovseal) -> dict[str, Any]:
            anonymizer = _anonymizer_of(anonymizers)
            result = anonymizer.anonymize(text, memory=m, session_id=session_id)
            return {"text": result.text, "session_id": result.session_id, "ttl_seconds": anonymizer.sessions.ttl}

        return await session.run(work)

    @server.tool(
        title="Deanonymize a message",
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False),
    )
    async def message_deanonymize(
        text: Annotated[str, Field(description="Text with placeholders, e.g. another model's answer to the anonymized message.")],
        session_id: Annotated[str, Field(description="The session_id message_anonymize returned.")],
        keep: Annotated[
            bool, Field(description="true: keep the session for the next turn; default: discard its map after this call.")
        ] = False,
    ) -> CallToolResult:
        """Put the original values back in place of the placeholders a message_anonymize session issued. The
        session's map is then discarded (unless keep is true): a second call with the same session_id fails."""

        def work(_: Sovseal) -> dict[str, Any]:
            restored = _anonymizer_of(anonymizers).deanonymize(text, session_id, keep=keep)
            return {"text": restored, "session_id": session_id, "discarded": not keep}

        return await session.run(work)

    return server


def serve_stdio(
    path: str | os.PathLike[str] | None = None,
    *,
    branch: str | None = None,
    key_text: str | None = None,
    embedder: EmbedFn | None = None,
) -> None:
    """Open (or create) the store, warm the embedding model, and serve MCP on stdin/stdout until stdin closes.

    stdout carries the protocol only; notes and warnings go to stderr.
    """
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="sovseal mcp: %(levelname)s %(message)s")
    directory = store_dir(path)
    created = not store_exists(directory)
    mem, backend = open_store(directory, branch=branch, key_text=key_text, create=True, embedder=embedder)
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        mem.ready()  # load and warm the model now, so the agent's first call is fast
        status = mem.status()
        print(
            f"sovseal mcp: {'created' if created else 'serving'} {directory} "
            f"(branch {mem.branch}, {status.visible} memories, key {backend})",
            file=sys.stderr,
            flush=True,
        )
        build_server(mem).run("stdio")
    finally:
        signal.signal(signal.SIGTERM, previous)
        mem.close()


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)  # unwinds through serve_stdio's finally: the store and index close cleanly
