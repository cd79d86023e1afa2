"""No tracked file points a reader to a document a clone of the repository does not have.

The product documents sovseal was first specified from, the research notes and the design contract
beside them never ship with the code: a comment that cites one by name or section sends a reader
nowhere. Cite docs/design.md (or another page of docs/) by section, or state the reason in place.
``.ci/`` is left out: it describes the CI's own isolation, not the product. This file spells its
patterns so that they do not match themselves, and is scanned like any other.

What it proves: no line of a tracked text file (outside ``.ci/``) matches :data:`PATTERNS`; a
failure names file:line of each match.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: What a citation of an absent document looks like (docs/design.md, lower case, is the shipped one).
PATTERNS = [
    re.compile(r"DESIGN\.md"),
    re.compile(r"\bseeds?\s+0\d\d\b", re.IGNORECASE),
    re.compile(r"\bseeds[/]", re.IGNORECASE),
    re.compile(r"\bseed[ ]design\b", re.IGNORECASE),
    re.compile(r"(?<![\w-])research[/]"),  # not a URL such as github.com/snap-research/LoCoMo
    re.compile(r"\.\./shared"),
]
EXCLUDED = (".ci/",)


def tracked_files() -> list[str]:
    """The repository's tracked files (every file but .git's when git or the repository is not there)."""
    git = shutil.which("git")
    if git is not None and (ROOT / ".git").exists():
        listed = subprocess.run([git, "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
        if listed.returncode == 0:
            return [name for name in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if name]
    return [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.relative_to(ROOT).parts]


def outside_references(names: list[str]) -> list[str]:
    found: list[str] = []
    for name in names:
        if name.startswith(EXCLUDED):
            continue
        path = ROOT / name
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary (a golden store, an image) or deleted in the work tree
        for number, line in enumerate(text.splitlines(), 1):
            if any(pattern.search(line) for pattern in PATTERNS):
                found.append(f"{name}:{number}: {line.strip()}")
    return found


def test_no_tracked_file_cites_a_document_a_clone_lacks() -> None:
    found = outside_references(tracked_files())
    assert not found, "cite docs/ or state the reason instead:\n" + "\n".join(found)


def test_the_patterns_catch_what_they_are_for() -> None:
    def hits(line: str) -> bool:
        return any(pattern.search(line) for pattern in PATTERNS)

    cited = ["(DESIGN" + ".md §6)", "as seed " + "000 specifies", "Seed " + "004's flow", "see seeds" + "/001.md",
             "research" + "/reliability.md §2", ".." + "/shared/notes", "Differences from the seed" + " design"]
    for line in cited:
        assert hits(line), line
    for line in ("docs/design.md, \"On disk\"", "--seeds 20", "rng = random.Random(seed)", "github.com/snap-research/LoCoMo"):
        assert not hits(line), line
