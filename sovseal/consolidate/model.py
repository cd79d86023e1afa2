"""Talking to "any LangChain chat model" without importing LangChain.

A model is duck-typed: anything with ``invoke(prompt)`` that returns an object with ``.content``
(LangChain's ``AIMessage``) or a plain ``str``, or a plain callable ``model(prompt) -> str``. The
answer must be one JSON object; it is validated with pydantic, and anything else raises
:class:`ModelOutputError` before the pass writes a byte.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InvalidInputError
from .errors import ModelOutputError

T = TypeVar("T", bound=BaseModel)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_RAW_SHOWN = 300


class ChatModel(Protocol):
    """What consolidation needs of a chat model (every LangChain chat model has it)."""

    def invoke(self, input: str) -> Any: ...


def check_model(model: object) -> None:
    """Fail early, before any work, on something that cannot be asked a question."""
    if not (callable(getattr(model, "invoke", None)) or callable(model)):
        raise InvalidInputError(
            f"model must be a chat model (an object with invoke(prompt), e.g. any LangChain chat model) "
            f"or a callable prompt -> str; got {type(model).__name__}"
        )


def _text(answer: Any) -> str:
    """The text of a chat model's answer: a str, or ``.content`` as a str or a list of content parts."""
    content = getattr(answer, "content", answer)
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # LangChain content blocks: strings or {"type": "text", "text": ...}
        return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content if isinstance(p, (str, dict)))
    raise TypeError(f"the model returned {type(answer).__name__}, not a message or a str")


def _json_object(text: str) -> Any:
    """The JSON object in ``text``: the whole text, a fenced ```json block, or the outermost {...}."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1)
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        start, end = stripped.find("{"), stripped.rfind("}")
        if start < 0 or end <= start:
            raise
        return json.loads(stripped[start : end + 1])


def ask(model: Any, prompt: str, schema: type[T], *, pass_name: str, batch: str) -> T:
    """Ask ``model`` and validate its JSON answer against ``schema``; ModelOutputError otherwise."""
    invoke = getattr(model, "invoke", None)
    answer = invoke(prompt) if callable(invoke) else model(prompt)
    try:
        raw = _text(answer)
    except TypeError as exc:
        raise ModelOutputError(
            f"{pass_name} batch {batch}: {exc}; nothing was written for it", pass_name=pass_name, batch=batch, raw=""
        ) from None
    try:
        return schema.model_validate(_json_object(raw))
    except (json.JSONDecodeError, ValidationError) as exc:
        shown = raw if len(raw) <= _RAW_SHOWN else raw[:_RAW_SHOWN] + "…"
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else f"{exc.error_count()} field error(s): {_first_error(exc)}"
        raise ModelOutputError(
            f"{pass_name} batch {batch}: the model's answer is not the JSON asked for ({reason}); nothing was "
            f"written for this batch. Run consolidate again to retry it (finished batches are kept), or use "
            f"another model. The answer began: {shown!r}",
            pass_name=pass_name,
            batch=batch,
            raw=raw,
        ) from None


def invalid(pass_name: str, batch: str, problem: str, raw: Any) -> ModelOutputError:
    """A well-formed answer that names something that is not there (an index out of range, ...)."""
    return ModelOutputError(
        f"{pass_name} batch {batch}: {problem}; nothing was written for this batch. Run consolidate again "
        "to retry it, or use another model.",
        pass_name=pass_name,
        batch=batch,
        raw=json.dumps(raw.model_dump() if isinstance(raw, BaseModel) else raw, default=str),
    )


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
    return f"{where}: {err.get('msg', '')}"


# -- the answers each pass asks for ------------------------------------------------------------


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class NewFact(_Answer):
    path: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=4000)
    sources: list[int] = Field(default_factory=list)


class Reinforcement(_Answer):
    candidate: int
    sources: list[int] = Field(default_factory=list)


class PromotionAnswer(_Answer):
    memories: list[NewFact] = Field(default_factory=list)
    reinforce: list[Reinforcement] = Field(default_factory=list)


class EdgeAnswer(_Answer):
    source: int
    target: int
    relation: str = Field(min_length=1, max_length=64)


class GraphAnswer(_Answer):
    edges: list[EdgeAnswer] = Field(default_factory=list)


class DigestAnswer(_Answer):
    summary: str = Field(min_length=1, max_length=8000)
