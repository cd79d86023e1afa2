"""One owner per mechanism (issue #35): a durability or locking call outside its module fails here.

What it proves: in sovseal/, only ``sovseal/durable.py`` calls ``os.fsync`` or ``fcntl.F_FULLFSYNC``
(so every durable write gets the macOS full fsync and the durability audit sees every fsync), and
only ``sovseal/filelock.py`` takes a file lock (``fcntl.flock``, ``fcntl.lockf``,
``msvcrt.locking``), and no module (nor a framework package) hand-writes an LRU cache on an
``OrderedDict`` (``move_to_end``, ``popitem(last=False)``): caches are ``cachetools``'. A second
home for any of them is how the mechanisms drifted apart before.

How: each source file is parsed (nothing is imported) and every ``module.name`` attribute and
every ``from module import name`` is matched, so a docstring that mentions fsync does not count
but an aliased import does. A failure names file:line of each use.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sovseal"
#: Where caches are looked for: the engine and the framework packages.
CACHE_ROOTS = [PACKAGE, ROOT / "integrations"]

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


def hand_written_lru(path: Path) -> list[int]:
    """Lines of ``x.move_to_end(...)`` and ``x.popitem(last=False)`` calls: an OrderedDict LRU."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and (
            node.func.attr == "move_to_end"
            or (
                node.func.attr == "popitem"
                and any(k.arg == "last" and isinstance(k.value, ast.Constant) and k.value.value is False for k in node.keywords)
            )
        )
    )


def test_no_hand_written_lru_cache() -> None:
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{line}"
        for root in CACHE_ROOTS
        for path in sorted(root.rglob("*.py"))
        for line in hand_written_lru(path)
    ]
    assert not found, "caches have one owner: use cachetools.LRUCache instead of an OrderedDict:\n" + "\n".join(found)


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
    lru = tmp_path / "lru.py"
    lru.write_text("def f(d, k):\n    d.move_to_end(k)\n    d.popitem(last=False)\n    d.popitem()\n", encoding="utf-8")
    assert hand_written_lru(lru) == [2, 3]
