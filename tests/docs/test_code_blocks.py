"""Every ```python block of README.md and docs/**/*.md runs as written (issue #21).

A reader pastes a page's blocks, top to bottom, into one interpreter; a block that only works with a
name the page never defines, or a key the reader cannot have, is a broken promise. So each page is
run that way: Sybil parses it and its examples are evaluated in order in one namespace per page.

Each page starts where a new user starts: an empty temporary HOME that is also the working directory
and the temporary directory, the ``sovseal`` command on PATH as pip installs it, and no ``SOVSEAL_*``
settings but ``SOVSEAL_KEY_FALLBACK=file`` (a headless machine's way to keep a key). Keyring's
``fail`` backend stands in for the OS keychain, so no page reads or writes the developer's keychain
or store. The directory is removed after the page, so nothing is left in /tmp, and a server the page
started is stopped, even when the page fails half-way. The embedder is the real on-device model, as
a reader gets it.

A page may skip a block with Sybil's ``<!-- skip: next "reason" -->``; the reason is shown to the reader.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backends import fail
from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

from sovseal import Sovseal

ROOT = Path(__file__).resolve().parents[2]
SYBIL = Sybil(parsers=[PythonCodeBlockParser(), SkipParser()])
PAGES = [page for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))] if list(SYBIL.parse(page))]

#: A fake chat model the reader can see, and the commented line with the real one it stands in for.
FAKE_MODEL = re.compile(r"\b(GenericFakeChatModel|FakeListChatModel|MockLLM)\(")
REAL_MODEL_LINE = re.compile(r"^\s*#\s*\w+\s*=\s*(Chat[A-Z]\w*|OpenAI)\(model=", re.M)


@pytest.fixture
def new_user(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A fresh HOME, working directory and temporary directory, with no keychain; removed afterwards.

    Every sovseal handle the page opens is closed before that, so a page that fails before its own
    ``close()`` leaves no index worker writing into (and so re-creating) the removed directory.
    """
    opened: list[Sovseal] = []
    init = Sovseal.__init__

    def tracked(self: Sovseal, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)
        opened.append(self)

    with tempfile.TemporaryDirectory(prefix="sovseal-docs-") as home:
        scratch = Path(home) / "tmp"
        scratch.mkdir()
        for name in [n for n in os.environ if n.startswith("SOVSEAL_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("SOVSEAL_KEY_FALLBACK", "file")
        monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")  # the pages' subprocesses
        monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
        monkeypatch.setenv("HOME", home)
        monkeypatch.setenv("TMPDIR", str(scratch))
        monkeypatch.setattr(tempfile, "tempdir", str(scratch))
        monkeypatch.chdir(home)
        monkeypatch.setattr(Sovseal, "__init__", tracked)
        previous = keyring.get_keyring()
        keyring.set_keyring(fail.Keyring())
        try:
            yield
        finally:
            for handle in opened:
                handle.close()  # a no-op for one the page closed
            keyring.set_keyring(previous)
            monkeypatch.undo()  # leave the directory before it is removed


def test_the_pages_with_code_are_found() -> None:
    names = {page.relative_to(ROOT).as_posix() for page in PAGES}
    assert {"README.md", "docs/integrations/langchain.md", "docs/integrations/langgraph.md", "docs/integrations/llama_index.md"} <= names


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")  # langchain.md says so itself
@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
@pytest.mark.usefixtures("new_user")
def test_page_runs_top_to_bottom(page: Path) -> None:
    document = SYBIL.parse(page)
    try:
        for example in document:
            example.evaluate()
    finally:  # a server the page started stops, even when a later block failed
        for process in [v for v in document.namespace.values() if isinstance(v, subprocess.Popen)]:
            process.kill()
            process.wait()


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_a_fake_chat_model_comes_with_the_real_line(page: Path) -> None:
    """Where an LLM would answer, the reader sees the real model's line (commented) beside the fake one."""
    for example in SYBIL.parse(page):
        source = str(example.parsed)
        if FAKE_MODEL.search(source):
            assert REAL_MODEL_LINE.search(source), f"{page.name}, line {example.line}: show the real chat model, commented"
