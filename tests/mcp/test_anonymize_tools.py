"""message_anonymize / message_deanonymize as an agent uses them: `sovseal mcp` started as a process and
driven over stdio by the official MCP client, with the round trip across the two tools in one server
process, the user's identity facts stored through store_memory, and the map gone after use."""

from __future__ import annotations

from pathlib import Path

from tests.mcp.test_mcp_server import Agent, run

MESSAGE = "I'm Jane Doe, mail jane.doe@acme-corp.com or call +44 20 7946 0958 about ProjectNightingale."


def test_anonymize_then_deanonymize_across_the_tools(tmp_path: Path) -> None:
    async def session(agent: Agent) -> None:
        tools = {t.name: t for t in (await agent.session.list_tools()).tools}
        assert set(tools["message_anonymize"].inputSchema["required"]) == {"text"}
        assert set(tools["message_deanonymize"].inputSchema["required"]) == {"text", "session_id"}
        await agent.ok("store_memory", path="identity.name", payload=["Jane Doe", "Jane"])

        first = await agent.ok("message_anonymize", text=MESSAGE)
        assert first["text"] == "I'm <NAME_1>, mail <EMAIL_ADDRESS_1> or call <PHONE_NUMBER_1> about <IDENTIFIER_1>."
        assert first["session_id"].startswith("anon_") and first["ttl_seconds"] > 0

        # The next turn of the same conversation: Jane keeps her token.
        turn = await agent.ok("message_anonymize", text="Jane again, now at jane@example.org", session_id=first["session_id"])
        assert turn == {**first, "text": "<NAME_2> again, now at <EMAIL_ADDRESS_2>"}

        answer = "Hello <NAME_1>! I'll write to <EMAIL_ADDRESS_1> and <EMAIL_ADDRESS_2> about <IDENTIFIER_1>."
        kept = await agent.ok("message_deanonymize", text=answer, session_id=first["session_id"], keep=True)
        assert kept["text"] == (
            "Hello Jane Doe! I'll write to jane.doe@acme-corp.com and jane@example.org about ProjectNightingale."
        )
        assert kept["discarded"] is False
        done = await agent.ok("message_deanonymize", text="<PHONE_NUMBER_1>", session_id=first["session_id"])
        assert done["text"] == "+44 20 7946 0958" and done["discarded"] is True

        # The map is gone: the same session id is now a typed tool error, and the server keeps serving.
        gone = await agent.error("message_deanonymize", text=answer, session_id=first["session_id"])
        assert gone.startswith("UnknownSessionError") and "jane" not in gone.lower()
        assert "UnknownSessionError" in await agent.error("message_anonymize", text="x", session_id="anon_forged")
        await agent.error("message_deanonymize", text="x")  # no session_id: rejected by the schema
        await agent.error("message_anonymize", text=42)
        # Two sessions are independent.
        a = await agent.ok("message_anonymize", text="bob@example.org")
        b = await agent.ok("message_anonymize", text="carol@example.org")
        assert a["text"] == b["text"] == "<EMAIL_ADDRESS_1>" and a["session_id"] != b["session_id"]
        assert (await agent.ok("message_deanonymize", text=a["text"], session_id=b["session_id"]))["text"] == "carol@example.org"
        assert (await agent.ok("verify"))["ok"] is True

    run(tmp_path / "home", session)
