"""Placeholder tokens: issued per session, stable, and unable to collide with the message's own text.

A token reads ``<LABEL_n>`` (``<PERSON_1>``, ``<EMAIL_ADDRESS_2>``): a model keeps it intact and
understands what it stands for. Three rules make the round trip exact:

- a token is never issued if its string occurs in any text this session has anonymized (the
  session's ``reserved`` set holds every placeholder-shaped string seen), so a message that already
  contains "<PERSON_1>" gets "<PERSON_2>" for its first person, and "<PERSON_1>" stays literal;
- a later message that contains an already issued token as literal text gets that literal replaced
  by a token of its own (label ``PLACEHOLDER``), which deanonymizes back to the literal;
- deanonymization replaces in a single left-to-right pass, so restored text is never rescanned.

A token has ``<`` only at its start and ``>`` only at its end, so an occurrence of an issued token
in anonymized text is either a token that was inserted or lies wholly inside original text, where
the first two rules ensure none exists.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .detect import Span, merge
from .identity import label_for
from .sessions import Session

#: Anything shaped like a token, whoever wrote it.
PLACEHOLDER_RE = re.compile(r"<[A-Z][A-Z0-9_]*_[0-9]+>")
#: The label of a literal issued token found in a later message.
ESCAPE_LABEL = "PLACEHOLDER"
_ESCAPE_PRIORITY = 99


def substitute(text: str, spans: Iterable[Span], session: Session) -> str:
    """``text`` with each span replaced by its session token (caller holds ``session.lock``)."""
    found = [(s.start, s.end, s.label, 0) for s in spans]
    for literal in PLACEHOLDER_RE.finditer(text):
        session.reserved.add(literal.group())
        if literal.group() in session.backward:  # an issued token quoted back: it gets a token of its own
            found.append((literal.start(), literal.end(), ESCAPE_LABEL, _ESCAPE_PRIORITY))
    out: list[str] = []
    at = 0
    for span in merge(found):
        original = text[span.start : span.end]
        out.append(text[at : span.start])
        out.append(session.forward.get(original) or _issue(original, span.label, text, session))
        at = span.end
    out.append(text[at:])
    return "".join(out)


def _issue(original: str, label: str, text: str, session: Session) -> str:
    label = label_for(label)
    n = session.counters.get(label, 0)
    while True:
        n += 1
        token = f"<{label}_{n}>"
        if token not in session.reserved and token not in text and token not in session.backward:
            break
    session.counters[label] = n
    session.forward[original] = token
    session.backward[token] = original
    return token


def restore(text: str, session: Session) -> str:
    """``text`` with every token issued in ``session`` replaced by its original (caller holds the lock)."""
    if not session.backward:
        return text
    pattern = re.compile("|".join(re.escape(token) for token in session.backward))
    return pattern.sub(lambda m: session.backward[m.group(0)], text)
