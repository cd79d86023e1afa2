"""How results are shown: plain lines that never wrap, short ids, sizes and times for people,
JSON for scripts, progress bars and notes on stderr; and parsing the JSON a user types.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from sovseal.cli.errors import _one_line
from sovseal.errors import InvalidInputError
from sovseal.models import Progress
from sovseal.sdk.views import jsonable


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(jsonable(data), indent=2, ensure_ascii=False))


def _console(err: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=err, highlight=False, soft_wrap=False)


def _note(text: str) -> None:
    """A human note on stderr (never mixed into stdout, which scripts may read)."""
    click.echo(text, err=True)


#: Control characters a terminal acts on instead of showing (C0, DEL, C1): in stored text they could
#: set the window title, clear the screen or hide what follows. Multi-line text keeps tab and newline.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


_CONTROL_IN_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


_ESCAPE_NAMES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(value: str, *, text: bool = False) -> str:
    """``value`` for human output, its control characters shown as escapes (``\\x1b``, ``\\n``).

    Paths, payloads and branch names come from agents, other devices and backups: printed as they
    are, they would drive the terminal; click strips only some of them, and only on a pipe, so the
    output would also differ between a terminal and a pipe. ``text``: a multi-line payload, which
    keeps its newlines and tabs. ``--json`` output is never passed through this.
    """
    pattern = _CONTROL_IN_TEXT if text else _CONTROL
    return pattern.sub(lambda m: _ESCAPE_NAMES.get(m.group(), f"\\x{ord(m.group()):02x}"), value)


def _short(sid: str | None) -> str:
    """A snapshot id as human output shows it: ``snap_`` and 12 hex digits, like git's short ids
    (commands take any unique prefix back; ``--json`` prints ids in full)."""
    return sid[:17] if sid else "-"


def _human(value: Any, sep: str = ", ") -> str:
    """A value of ``status`` on one line: snapshot ids short, lists joined by ``sep``, mappings as
    ``k=v`` (their lists joined by spaces), None as -."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return _short(value) if re.fullmatch(r"snap_[0-9a-f]{64}", value) else _visible(value)
    if isinstance(value, list):
        return sep.join(_human(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={_human(v, ' ')}" for k, v in value.items())
    return str(value)


def _count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 branch``, ``2 branches``: ``plural`` defaults to ``noun`` + s."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _size(n: int) -> str:
    """A byte count for humans: ``512 bytes``, ``3.4 KiB``, ``12.0 MiB``."""
    if abs(n) < 1024:
        return _count(n, "byte")
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):  # noqa: B007 - the unit is read after the loop, where it stopped
        value /= 1024
        if abs(value) < 1024:
            break
    return f"{value:.1f} {unit}"


def _reclaimed(n: int) -> str:
    """What a compaction freed: a skeleton is padded like any sealed record, so erasing a record
    smaller than that frees nothing (the journal may even grow by a few bytes)."""
    return f"{_size(n)} reclaimed" if n > 0 else "nothing reclaimed (the erased records were no larger than their skeletons)"


def _fields(rows: list[tuple[str, str]], *, label_style: dict[str, Any]) -> None:
    """Print label/value pairs as aligned lines, each on one line however long (never wrapped)."""
    width = max((len(label) for label, _ in rows), default=0)
    for label, value in rows:
        click.echo(f"{click.style(label.ljust(width), **label_style)}  {_visible(value)}")


def _compact(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _when(dt: Any) -> str:
    return "-" if dt is None else f"{dt:%Y-%m-%d %H:%M:%S}"


@contextmanager
def _progress(label: str) -> Iterator[Progress]:
    """A rich progress bar on stderr, drawn only when stderr is a terminal (else rich is not even
    imported: it would cost a script's every call a tenth of a second)."""
    if not sys.stderr.isatty():
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = _console(err=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _parse_json(text: str, what: str, hint: str) -> Any:
    """``text`` as JSON, or bad input (exit 2) saying why: malformed, nested deeper than Python's
    parser recurses (RecursionError), or a number longer than Python converts (ValueError)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); {hint}") from None
    except RecursionError:
        raise InvalidInputError(f"{what} is JSON nested too deeply to read (arrays or objects hundreds of levels deep); {hint}") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise InvalidInputError(f"{what} is JSON that cannot be read ({_one_line(str(exc)).split(':')[0]}); {hint}") from None


def _parse_payload(text: str, mode: str) -> Any:
    if mode == "text":
        return text
    stripped = text.strip()
    if mode == "json" or stripped[:1] in ("{", "[", '"'):
        return _parse_json(stripped, "PAYLOAD", "fix it, or pass --as text to store it as a plain string")
    return text


def _parse_object(text: str | None, what: str, example: str) -> dict[str, Any] | None:
    if text is None:
        return None
    value = _parse_json(text, what, f"pass a JSON object such as '{example}'")
    if not isinstance(value, dict):
        raise InvalidInputError(f"{what} must be a JSON object such as '{example}', not {type(value).__name__}")
    return value
