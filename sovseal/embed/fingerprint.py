"""Which model embedded a store's vectors: its fingerprint, recorded next to the index.

Vectors of two models cannot be compared: a query embedded by one model finds nothing meaningful
among vectors of another, and a dimension change makes them unusable. So a store's vector index is
tied to the embedder that filled it. When the index is first created, the fingerprint of the
handle's embedder is written to ``<store>/index/model.json`` (atomically, no plaintext of any
memory); every later opening of the index compares the handle's embedder with it, and a mismatch
refuses recall with :class:`~sovseal.errors.EmbedderMismatchError` until ``sovseal rebuild-index``
(``sovseal.rebuild_index``) re-embeds everything with the new model and records it.

A fingerprint is a flat dict of JSON values, made by :func:`fingerprint_of`:

- the built-in :class:`~sovseal.embed.Embedder` gives its own (``Embedder.fingerprint()``): model
  name, ``origin`` (where the files were read from), ``model_sha256`` and ``tokenizer_sha256`` (the
  bytes actually run), ``dim``, ``pooling`` ("mean"), ``normalize`` ("l2"), ``max_tokens``;
- any other embedder may declare one with a ``fingerprint`` attribute: a string, or a mapping of
  JSON values, or a zero-argument callable returning either (so a wrapper can forward its model's);
  a string is recorded as ``{"fingerprint": "..."}``, a mapping as it is;
- an embedder without one is known by its qualified name (``{"callable": "module.qualname"}``; for
  an object that is not a function or method, its class's).

:func:`fingerprint_of` adds ``embedder`` (the qualified name, always) and ``dim`` (what the embedder
returned). What is compared (:func:`identity`) is every key except ``origin`` and ``embedder``: the
same model files read from another directory, or a renamed wrapper that declares the same
fingerprint, are the same model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sovseal.errors import InvalidInputError

#: The file, inside the index directory, that records the fingerprint.
RECORD = "model.json"
FORMAT = 1
#: Keys recorded for people reading the file or an error message, not compared.
INFORMATIONAL = frozenset({"origin", "embedder"})


def qualified_name(embed: object) -> str:
    """``module.qualname`` of a function or method; of its class for any other callable."""
    target = embed if hasattr(embed, "__qualname__") else type(embed)
    func = getattr(target, "__func__", target)  # a bound method: its function
    module = getattr(func, "__module__", None) or "?"
    return f"{module}.{getattr(func, '__qualname__', type(embed).__name__)}"


def fingerprint_of(embed: object, dim: int) -> dict[str, Any]:
    """The fingerprint of ``embed``, whose vectors have ``dim`` dimensions (see the module docstring)."""
    name = qualified_name(embed)
    declared = getattr(embed, "fingerprint", None)
    if callable(declared):
        declared = declared()
    if declared is None:
        found: dict[str, Any] = {"callable": name}
    elif isinstance(declared, str):
        found = {"fingerprint": declared}
    elif isinstance(declared, Mapping) and all(isinstance(k, str) for k in declared):
        found = dict(declared)
    else:
        raise InvalidInputError(
            f"the embedder's fingerprint must be a str or a mapping with str keys, got {type(declared).__name__}"
        )
    found = {"embedder": name, **found, "dim": int(dim)}
    try:
        json.dumps(found, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"the embedder's fingerprint must hold JSON values only ({exc})") from exc
    return found


def identity(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """What two fingerprints must share for their vectors to be comparable."""
    return {k: v for k, v in fingerprint.items() if k not in INFORMATIONAL}


def same_model(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return identity(a) == identity(b)


def describe(fingerprint: Mapping[str, Any] | None) -> str:
    """One line naming a model for people: what it is, where it came from, a short digest, its dimension,
    then every other compared key (the tokenizer's digest, pooling, ...), so two fingerprints that
    differ are never described alike (the same model file with another tokenizer, say)."""
    if fingerprint is None:
        return "an unknown model"
    dim = fingerprint.get("dim", "?")
    if "model_sha256" in fingerprint:
        digest = str(fingerprint.get("model_sha256") or "?")[:12]
        origin = fingerprint.get("origin")
        where = f" from {origin}" if origin else ""
        shown = {"model", "model_sha256", "dim", "tokenizer_sha256"}
        extra = [f"tokenizer sha256 {str(fingerprint.get('tokenizer_sha256') or '?')[:12]}"] if "tokenizer_sha256" in fingerprint else []
        extra += [
            f"{k} {(v if isinstance(v, str) else json.dumps(v))[:40]}" for k, v in sorted(identity(fingerprint).items()) if k not in shown
        ]
        more = f" [{', '.join(extra)}]" if extra else ""
        return f"{fingerprint.get('model', 'a model')}{where} (sha256 {digest}, {dim}-d){more}"
    if "callable" in fingerprint:
        return f"the embedder {fingerprint['callable']} ({dim}-d)"
    rest = {k: v for k, v in identity(fingerprint).items() if k != "dim"}
    declared = rest["fingerprint"] if set(rest) == {"fingerprint"} else json.dumps(rest, sort_keys=True)
    return f"the embedder {fingerprint.get('embedder', '?')} with fingerprint {str(declared)[:80]!r} ({dim}-d)"


def encode_record(fingerprint: Mapping[str, Any]) -> bytes:
    """The bytes of ``model.json``."""
    return json.dumps({"format": FORMAT, "fingerprint": dict(fingerprint)}, indent=2, sort_keys=True).encode() + b"\n"


def decode_record(data: bytes) -> dict[str, Any]:
    """The fingerprint in ``model.json``'s bytes; ValueError if they are not a record this version reads."""
    record = json.loads(data.decode("utf-8"))
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("fingerprint"), dict):
        raise ValueError(f"not a format-{FORMAT} model record")
    return dict(record["fingerprint"])
