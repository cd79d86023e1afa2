"""One owner per mechanism (issue #35): a durability or locking call outside its module fails here.

What it proves: in sovseal/, only ``sovseal/durable.py`` calls ``os.fsync`` or ``fcntl.F_FULLFSYNC``
(so every durable write gets the macOS full fsync and the durability audit sees every fsync), and
only ``sovseal/filelock.py`` takes a file lock (``fcntl.flock``, ``fcntl.lockf``,
``msvcrt.locking``). A second home for either is how the mechanisms drifted apart before.

How: each source file is parsed (nothing is imported) and every ``module.name`` attribute and
every ``from module import name`` is matched, so a docstring that mentions fsync does not count
but an aliased import does. A failure names file:line of each use.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sovseal"

#: (module, name) -> the one file allowed to use it, relative to the repository root.
OWNERS: dict[tuple[str, str], str] = {
    ("os", "fsync"): "sovseal/durable.py",
    ("fcntl", "F_FULLFSYNC"): "sovseal/durable.py",
    ("fcntl", "flock"): "sovseal/filelock.py",
    ("fcntl", "lockf"): "sovseal/filelock.py",
    ("msvcrt", "locking"): "sovseal/filelock.py",
}
_DURABLE = {k: v for k, v in OWNERS.items() if v == "sovseal/durable.py"}
_LOCKS = {k: v for k, v in OWNERS.items() if v == "sovseal/filelock.py"}


def uses(path: Path, wanted: set[tuple[str, str]]) -> list[tuple[int, str, str]]:
    """(line, module, name) of every use of a ``wanted`` name in the file at ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    aliases: dict[str, str] = {}  # local name -> module it stands for (``import os as _os``)
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [(node.lineno, node.module, a.name) for a in node.names if (node.module, a.name) in wanted]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = aliases.get(node.value.id, node.value.id)
            if (module, node.attr) in wanted:
                found.append((node.lineno, module, node.attr))
    return sorted(found)


def strays(owners: dict[tuple[str, str], str]) -> list[str]:
    """``file:line uses module.name (only owner may)`` for every use outside its owner."""
    out: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for line, module, name in uses(path, set(owners)):
            owner = owners[(module, name)]
            if relative != owner:
                out.append(f"{relative}:{line} uses {module}.{name} (only {owner} may)")
    return out


def test_fsync_only_in_durable() -> None:
    found = strays(_DURABLE)
    assert not found, "durable writes have one owner, sovseal/durable.py; use its helpers:\n" + "\n".join(found)


def test_file_locks_only_in_filelock() -> None:
    found = strays(_LOCKS)
    assert not found, "file locks have one owner, sovseal/filelock.py; use WriterLock:\n" + "\n".join(found)


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The check can fail: plain, aliased and from-imported uses are all found."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os as _os\nimport fcntl\nfrom os import fsync\n"
        "def f(fd):\n    _os.fsync(fd)\n    fcntl.flock(fd, fcntl.LOCK_EX)\n    fsync(fd)\n"
        '"""os.fsync in a docstring is not a use"""\n',
        encoding="utf-8",
    )
    assert uses(sample, {("os", "fsync"), ("fcntl", "flock")}) == [
        (3, "os", "fsync"),
        (5, "os", "fsync"),
        (6, "fcntl", "flock"),
    ]
