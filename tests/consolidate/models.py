"""Deterministic chat models for the consolidation tests.

``RuleChatModel`` is a real LangChain chat model (a ``BaseChatModel`` subclass, so ``invoke``
returns an ``AIMessage`` exactly as ChatOpenAI or ChatOllama would); instead of a network call it
answers each pass from the JSON in the prompt by fixed rules, so its answers depend on the batch,
not on the order of calls (which a resumed run changes):

- promotion: an episode containing ``fact:PATH=TEXT;`` yields that fact; if a KNOWN fact has
  PATH and the same TEXT it is reinforced instead;
- graph: facts whose paths share their first segment are linked ``same_subject`` (new → other);
- digest: the summary is "Digest: " and the episodes' texts joined by " | ".
"""

from __future__ import annotations

import json
import os
import re
import signal
from typing import Any

from langchain_core.language_models import FakeListChatModel
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

FACT = re.compile(r"fact:([\w.]+)=([^;]+);")


def _input(prompt: str) -> Any:
    return json.loads(prompt.split("INPUT:\n", 1)[1])


def answer(prompt: str) -> str:
    """The rule-based answer to one consolidation prompt."""
    data = _input(prompt)
    if prompt.startswith("You consolidate"):
        known = {k["path"]: k for k in data["known"]}
        memories, reinforce = [], []
        for ep in data["episodes"]:
            for path, text in FACT.findall(ep["text"]):
                if path in known and known[path]["text"] == text:
                    reinforce.append({"candidate": known[path]["n"], "sources": [ep["n"]]})
                else:
                    memories.append({"path": path, "text": text, "sources": [ep["n"]]})
        return json.dumps({"memories": memories, "reinforce": reinforce})
    if prompt.startswith("You link"):
        new = int(re.search(r"The first (\d+) are new", prompt).group(1))
        edges = [
            {"source": a["n"], "target": b["n"], "relation": "same_subject"}
            for a in data[:new]
            for b in data
            if b["n"] != a["n"] and b["path"].split(".")[0] == a["path"].split(".")[0] and not (b["n"] < new and b["n"] < a["n"])
        ]
        return json.dumps({"edges": edges})
    if prompt.startswith("Summarise"):
        return json.dumps({"summary": "Digest: " + " | ".join(e["text"] for e in data)})
    raise AssertionError(f"unexpected prompt: {prompt[:60]!r}")


class RuleChatModel(BaseChatModel):
    """See the module docstring. ``fail_on``: raise RuntimeError on that call (1-based); ``kill_on``:
    SIGKILL this process on that call, as a crash between two batches would."""

    calls: int = 0
    fail_on: int | None = None
    kill_on: int | None = None

    @property
    def _llm_type(self) -> str:
        return "sovseal-test-rules"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.calls += 1
        if self.kill_on == self.calls:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.fail_on == self.calls:
            raise RuntimeError("the model's server went away (injected)")
        text = answer(str(messages[-1].content))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


def rule_model() -> RuleChatModel:
    """The factory the CLI tests name with --model tests.consolidate.models:rule_model."""
    return RuleChatModel()


def prose_model() -> FakeListChatModel:
    """A model that answers in prose, not JSON (for the CLI's error path)."""
    return FakeListChatModel(responses=["Sure! The user seems to like neovim."])
