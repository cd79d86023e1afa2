"""The MCP server as an agent sees it: `sovseal mcp` started as a process, driven over stdio by the
official `mcp` client. Lists the tools, calls each one, feeds it bad arguments (each must come back as
a tool error while the server keeps serving), then restarts it and finds the memories still there.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from sovseal.mcp.server import TOOLS
from tests.cli.support import clean_env


def _script() -> str:
    found = shutil.which("sovseal") or str(Path(sys.executable).with_name("sovseal"))
    assert Path(found).exists(), "the `sovseal` console script is not installed (pip install -e .)"
    return found


class Agent:
    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def ok(self, tool: str, **arguments: Any) -> Any:
        result = await self.session.call_tool(tool, arguments)
        assert not result.isError, f"{tool}({arguments}): {result.content}"
        body = result.structuredContent
        assert body is not None and body["success"] is True and isinstance(body["timestamp"], int)
        assert json.loads(result.content[0].text) == body  # the same envelope as text, for any client
        return body["data"]

    async def error(self, tool: str, *, envelope: bool = True, **arguments: Any) -> str:
        """The error text of a call that must fail; with ``envelope``, the documented error shape
        (docs/mcp.md, Errors), arguments that do not match the input schema included."""
        result = await self.session.call_tool(tool, arguments)
        assert result.isError, f"{tool}({arguments}) should have failed: {result.content}"
        text = result.content[0].text
        assert "Traceback" not in text
        if envelope:
            body = result.structuredContent
            assert body is not None and body["success"] is False and isinstance(body["timestamp"], int), text
            assert text == f"{body['error']['type']}: {body['error']['message']}"
        return text


async def _serve(home: Path, work: Any, *args: str) -> Any:
    params = StdioServerParameters(command=_script(), args=["mcp", *args], env=clean_env(home))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await work(Agent(session))


def run(home: Path, work: Any, *args: str) -> Any:
    return asyncio.run(asyncio.wait_for(_serve(home, work, *args), timeout=120))


def test_an_agent_session_then_a_restart(tmp_path: Path) -> None:
    home = tmp_path / "home"

    async def first_session(agent: Agent) -> dict[str, Any]:
        listed = (await agent.session.list_tools()).tools
        assert {t.name for t in listed} == set(TOOLS)
        for tool in listed:
            assert tool.description and len(tool.description) > 40 and tool.inputSchema["type"] == "object"
        store_schema = next(t for t in listed if t.name == "store_memory").inputSchema
        assert set(store_schema["required"]) == {"path", "payload"}
        assert {"metadata", "parent", "type", "provenance"} <= set(store_schema["properties"])

        # docs/mcp.md's example payload, and its response shape.
        stored = await agent.ok(
            "store_memory",
            path="user.preferences.testing",
            payload={"framework": "vitest", "reason": "ESM-native; faster cold start than Jest"},
        )
        assert stored["snapshot_id"].startswith("snap_") and stored["replicated"] is False
        genesis = stored["snapshot_id"]
        await agent.ok("store_memory", path="user.editor", payload="The user edits code in neovim.", metadata={"source": "chat"})
        await agent.ok("store_memory", path="chat.today", payload="We planned a trip to Lisbon.", type="episodic", provenance="observed")
        again = await agent.ok("store_memory", path="user.editor", payload="The user edits code in neovim.", metadata={"source": "chat"})
        assert again["reinforced"] is True

        recalled = await agent.ok("recall_memory", query="which text editor does the user prefer?", k=2)
        assert recalled["memories"][0]["path"] == "user.editor" and len(recalled["memories"]) == 2
        got = await agent.ok("get_memory", path="user.preferences.testing")
        assert got["payload"]["framework"] == "vitest" and got["type"] == "semantic"
        head = (await agent.ok("snapshot"))["snapshot_id"]

        deleted = await agent.ok("delete_memory", path="chat.today")
        assert deleted["deleted"] is True
        assert (await agent.ok("delete_memory", path="chat.today"))["deleted"] is False  # idempotent
        assert "no memory at path" in await agent.error("get_memory", path="chat.today")

        forked = await agent.ok("fork", snapshot_id=genesis, branch="experiment")
        assert forked == {"branch": "experiment", "snapshot_id": genesis, "previous_branch": "main"}
        await agent.ok("store_memory", path="user.editor", payload="Trying helix.")
        branches = await agent.ok("list_branches")
        assert branches["current"] == "experiment" and {b["name"] for b in branches["branches"]} == {"main", "experiment"}
        assert (await agent.ok("switch_branch", branch="main"))["branch"] == "main"
        assert (await agent.ok("get_memory", path="user.editor"))["payload"] == "The user edits code in neovim."

        rolled = await agent.ok("rollback", snapshot_id=head[:14])
        assert rolled["head"] == head
        assert (await agent.ok("get_memory", path="chat.today"))["payload"] == "We planned a trip to Lisbon."
        log = await agent.ok("memory_log", limit=10)
        assert log["entries"][0]["snapshot_id"] == head and log["entries"][-1]["parent_id"] is None
        graph = await agent.ok("memory_log", all_branches=True)
        assert set(graph["branches"]) == {"main", "experiment"} and len(graph["snapshots"]) == 4  # the rolled-back delete is unreachable
        report = await agent.ok("verify")
        assert report["ok"] is True and report["problems"] == []

        # Bad arguments: each one a tool error, and the server keeps serving.
        assert "InvalidInputError: store_memory got arguments that do not match its input schema: path" in await agent.error(
            "store_memory", payload="no path"
        )
        assert "InvalidInputError" in await agent.error("store_memory", path="", payload="x")
        await agent.error("store_memory", path="a", payload="x", type="bogus")
        assert "PayloadTooLargeError" in await agent.error("store_memory", path="a", payload="x" * 300_000)
        await agent.error("store_memory", path="a", payload="x", metadata="not an object")
        assert "k: Input should be greater than or equal to 1" in await agent.error("recall_memory", query="q", k=0)
        await agent.error("recall_memory", query="q", k="many")
        assert "UnknownSnapshotError" in await agent.error("rollback", snapshot_id="snap_" + "0" * 64)
        await agent.error("rollback", snapshot_id="not a snapshot")
        assert "UnknownBranchError" in await agent.error("switch_branch", branch="ghost")
        assert "already exists" in await agent.error("fork", branch="experiment")
        assert "Unknown tool" in await agent.error("no_such_tool", envelope=False)  # the SDK's own: no tool to answer
        return await agent.ok("snapshot")

    before = run(home, first_session)

    async def after_restart(agent: Agent) -> None:
        # Restarted on the experiment branch (--branch): its memory is there...
        assert (await agent.ok("snapshot"))["branch"] == "experiment"
        assert (await agent.ok("get_memory", path="user.editor"))["payload"] == "Trying helix."
        # ...and main is exactly as the first session left it.
        assert await agent.ok("switch_branch", branch="main") == {"branch": "main", "head": before["snapshot_id"]}
        assert (await agent.ok("get_memory", path="user.editor"))["reinforce_count"] == 1
        recalled = await agent.ok("recall_memory", query="trip to Portugal", k=1)
        assert recalled["memories"][0]["path"] == "chat.today"
        assert (await agent.ok("verify"))["ok"] is True
        await agent.ok("store_memory", path="user.nothing", payload=None)  # any JSON value, null too
        assert (await agent.ok("get_memory", path="user.nothing"))["payload"] is None

    run(home, after_restart, "--branch", "experiment")


def test_a_store_that_cannot_be_opened_exits_with_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = clean_env(home)
    subprocess.run([_script(), "init"], env=env, check=True, capture_output=True)
    del env["SOVSEAL_KEY_FALLBACK"]
    proc = subprocess.run([_script(), "mcp"], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, check=False)
    assert proc.returncode == 4 and proc.stdout == ""
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
