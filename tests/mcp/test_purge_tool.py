"""The MCP `purge` tool (issue #23) as an agent uses it: `sovseal mcp` started as a process and driven
over stdio by the official MCP client. What it erases is gone on every branch, the lineage still
verifies and lists the erased snapshots, bad calls are tool errors that change nothing, and a
restarted server finds the store as the purge left it.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.mcp.test_mcp_server import Agent, run

SECRET = "The user's card number is 4111 1111 1111 1111."


def test_purge_over_stdio(tmp_path: Path) -> None:
    home = tmp_path / "home"

    async def session(agent: Agent) -> int:
        tools = {t.name: t for t in (await agent.session.list_tools()).tools}
        tool = tools["purge"]
        assert tool.description is not None and "IRREVERSIBLE" in tool.description
        assert tool.annotations is not None and tool.annotations.destructiveHint is True
        assert tool.annotations.readOnlyHint is False
        assert set(tool.inputSchema["properties"]) == {"path", "prefix", "reason"}
        assert not tool.inputSchema.get("required")

        await agent.ok("store_memory", path="user.name", payload="Ada")
        await agent.ok("store_memory", path="user.card", payload=SECRET)
        await agent.ok("fork", branch="experiment")
        await agent.ok("store_memory", path="user.card", payload=SECRET + " (experiment)")
        await agent.ok("switch_branch", branch="main")
        await agent.ok("store_memory", path="user.card", payload=SECRET + " (v2)")
        await agent.ok("store_memory", path="customer.42.name", payload="Grace")
        await agent.ok("store_memory", path="customer.42.email", payload="grace@example.org")
        await agent.ok("store_memory", path="customer.43.name", payload="Linus")
        head = (await agent.ok("snapshot"))["snapshot_id"]

        # Bad calls: tool errors, and nothing changes.
        assert "UnknownPathError" in await agent.error("purge", path="never.written")
        assert "UnknownPathError" in await agent.error("purge", prefix="nobody.")
        assert "InvalidInputError" in await agent.error("purge")
        assert "InvalidInputError" in await agent.error("purge", path="user.card", prefix="user.")
        assert (await agent.ok("snapshot"))["snapshot_id"] == head
        assert (await agent.ok("get_memory", path="user.card"))["payload"] == SECRET + " (v2)"

        purged = await agent.ok("purge", path="user.card", reason="the user asked to forget it")
        assert purged["path"] == "user.card" and purged["prefix"] is None and purged["reason"] == "the user asked to forget it"
        assert len(purged["erased"]) == 3 and all(re.fullmatch(r"snap_[0-9a-f]{64}", s) for s in purged["erased"])
        assert purged["compacted"] is True and isinstance(purged["bytes_reclaimed"], int)
        assert purged["replication"] is False

        for branch in ("main", "experiment"):
            await agent.ok("switch_branch", branch=branch)
            assert "no memory at path 'user.card'" in await agent.error("get_memory", path="user.card")
            assert (await agent.ok("get_memory", path="user.name"))["payload"] == "Ada"
            recalled = await agent.ok("recall_memory", query="credit card number", k=10)
            assert all(m["path"] != "user.card" for m in recalled["memories"])
        await agent.ok("switch_branch", branch="main")

        log = (await agent.ok("memory_log", limit=50))["entries"]
        erased = [e for e in log if e["op"] == "erased"]
        assert len(erased) == 2 and all(e["path"] == "" for e in erased)  # main's two versions
        assert {e["snapshot_id"] for e in erased} < set(purged["erased"])
        graph = await agent.ok("memory_log", all_branches=True, limit=50)
        assert sum(s["op"] == "erased" for s in graph["snapshots"]) == 3

        by_prefix = await agent.ok("purge", prefix="customer.42.")
        assert by_prefix["prefix"] == "customer.42." and by_prefix["path"] is None and len(by_prefix["erased"]) == 2
        assert "no memory" in await agent.error("get_memory", path="customer.42.email")
        assert (await agent.ok("get_memory", path="customer.43.name"))["payload"] == "Linus"

        assert (await agent.ok("purge", path="user.card"))["erased"] == []  # already erased: no error, nothing new

        report = await agent.ok("verify")
        assert report["ok"] is True and report["problems"] == [] and report["erased"] == 5

        # A new write of the path is a new memory, and stays.
        await agent.ok("store_memory", path="user.card", payload="No card on file.")
        assert (await agent.ok("get_memory", path="user.card"))["payload"] == "No card on file."
        return int(report["records"])

    records = run(home, session)

    async def after_restart(agent: Agent) -> None:
        report = await agent.ok("verify")
        assert report["ok"] is True and report["erased"] == 5 and report["records"] == records + 1
        assert (await agent.ok("get_memory", path="user.card"))["payload"] == "No card on file."
        await agent.ok("switch_branch", branch="experiment")
        assert "no memory" in await agent.error("get_memory", path="user.card")

    run(home, after_restart)
