"""Commands that neither recall nor embed do not import the heavy libraries (docs/cli.md, start-up).

LanceDB, pyarrow, ONNX Runtime and the rest cost seconds between them at import; a CLI call that
only reads the journal must not pay for them. Checked on ``sys.modules`` in a fresh interpreter
after each command, never on wall-clock time (which depends on the machine and its load).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import Run

HEAVY = (
    "lancedb", "pyarrow", "onnxruntime", "tokenizers", "numpy", "sovseal.recall.vector_index", "sovseal.embed", "sovseal.recall",
    "uvicorn", "starlette", "mcp", "psycopg", "presidio_analyzer", "spacy", "httpx",
)

#: Runs each command of argv[1] (a JSON list) in this one interpreter, as the console script would,
#: and prints the heavy modules imported so far after each: the import itself first.
PROBE = """
import json, sys
heavy = json.loads(sys.argv[2])
loaded = lambda: sorted(m for m in heavy if m in sys.modules)
import sovseal.cli
report = {"import sovseal.cli": loaded()}
for args in json.loads(sys.argv[1]):
    try:
        sovseal.cli.main(args, prog_name="sovseal")
    except SystemExit as exc:
        assert not exc.code, (args, exc.code)
    report[" ".join(args)] = loaded()
print(json.dumps(report), file=sys.stderr)
"""


def probe(home: Path, commands: list[list[str]], heavy: tuple[str, ...], **env: str) -> dict[str, list[str]]:
    """The heavy modules loaded after ``import sovseal.cli`` and after each command, in a fresh interpreter."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SOVSEAL_")}
    environ.update(SOVSEAL_HOME=str(home), **env)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(commands), json.dumps(heavy)],
        env=environ, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report: dict[str, list[str]] = json.loads(proc.stderr.strip().splitlines()[-1])
    assert len(report) == len(commands) + 1, report
    return report


def test_reading_commands_import_no_heavy_library(store: Run, tmp_path: Path) -> None:
    store("store", "user.editor", "neovim")
    store("store", "user.editor", "neovim")
    store("fork", "--name", "exp")
    snapshot = store.json("status")["head"]
    commands = [
        ["--help"], ["status"], ["get", "user.editor"], ["log"], ["log", "--graph"], ["branches"], ["verify"],
        ["mind"], ["fork", snapshot[:12], "--name", "other"], ["rollback", snapshot[:12]],
        ["export", str(tmp_path / "backup.sovseal")], ["key", "export"], ["status", "--json"],
    ]
    report = probe(store.home, commands, HEAVY, SOVSEAL_KEY_FALLBACK="file")
    assert report == {name: [] for name in report}, report


def test_a_given_key_needs_no_keyring(store: Run) -> None:
    """keyring's search for an OS keychain is a good part of a call's start-up: a key passed in
    SOVSEAL_KEY (or --key-file) never needs it."""
    store("store", "user.editor", "neovim")
    key = store("key", "export").stdout.strip()
    report = probe(store.home, [["status"], ["get", "user.editor"], ["log"]], (*HEAVY, "keyring"), SOVSEAL_KEY=key)
    assert report == {name: [] for name in report}, report
