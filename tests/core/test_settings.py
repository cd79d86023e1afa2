"""Settings have one owner (issue #35): every ``SOVSEAL_*`` variable is in ``sovseal.settings.REGISTRY``.

What it proves: (a) every ``SOVSEAL_*`` name in the package's source and the framework packages'
is registered, and no module but sovseal/settings.py reads ``os.environ`` / ``os.getenv`` for one
(found by parsing, not by importing); (b) docs/operations.md's "Environment variables" table is
the registry's own (names, types, defaults, meanings); (c) a bad value raises InvalidInputError
naming the variable and what it accepts, never echoing a secret; flags and the key fallback keep
their lenient reading; and ``Sovseal()`` takes its key from ``SOVSEAL_KEY`` as the command line and
the MCP server do, with the same typed errors.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backends import fail

from sovseal import Sovseal, settings
from sovseal.crypto.keychain import FALLBACK_ENV, export_key, key_file_path
from sovseal.errors import InvalidInputError, KeyUnavailableError
from sovseal.server import LimitError, Limits
from tests.core.test_import_cycles import SOURCES
from tests.fakes import fake_embed

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
NAME = re.compile(r"\bSOVSEAL_[A-Z][A-Z_]*[A-Z]\b")
#: Modules still allowed to read the environment themselves. sovseal/cli/ reads its options'
#: variables through click (``envvar=``) and a few directly until it is wired to the registry.
ALLOWED_READERS = ("sovseal/settings.py",)


def _sources() -> list[Path]:
    """The shipped source: sovseal/ and the framework packages (not their benchmarks, which read
    the repository's own ``SOVSEAL_EVALDATA`` through bench/evaldata.py)."""
    return [path for root, top in SOURCES for path in sorted((root / top).rglob("*.py"))]


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# -- (a) every name registered, read in one place ------------------------------------------------


def test_every_sovseal_variable_in_the_source_is_registered() -> None:
    registered = {setting.name for setting in settings.REGISTRY}
    assert len(registered) == len(settings.REGISTRY), "a variable is registered twice"
    seen: dict[str, str] = {}
    for path in _sources():
        for name in NAME.findall(path.read_text(encoding="utf-8")):
            seen.setdefault(name, _relative(path))
    assert {"SOVSEAL_HOME", "SOVSEAL_KEY", "SOVSEAL_SERVER_MAX_CONNECTIONS"} <= set(seen)
    missing = {name: where for name, where in seen.items() if name not in registered}
    assert not missing, f"named in the source but not in sovseal/settings.py's REGISTRY: {missing}"
    assert all(settings.by_name(name).name == name for name in registered)


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "text"`` assignments, to see through ``os.environ.get(ENV_NAME)``."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.update({target.id: node.value.value for target in node.targets if isinstance(target, ast.Name)})
    return found


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"


def environment_reads(source: str) -> list[tuple[int, str | None]]:
    """Every variable ``source`` reads or writes by name in ``os.environ`` / ``os.getenv``: (line,
    name), name None when it is not a literal (or a module constant) and so cannot be told."""
    tree = ast.parse(source)
    constants = _constants(tree)

    def key(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return constants.get(node.id)
        return None

    found: list[tuple[int, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os" and {a.name for a in node.names} & {"environ", "getenv"}:
            found.append((node.lineno, None))  # a bare environ / getenv escapes the checks below
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            found.append((node.lineno, key(node.slice)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func
            if (_is_environ(method.value) and method.attr in ("get", "setdefault", "pop")) or (
                method.attr == "getenv" and isinstance(method.value, ast.Name) and method.value.id == "os"
            ):
                found.append((node.lineno, key(node.args[0]) if node.args else None))
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            found.append((node.lineno, key(node.left)))
    return found


def test_the_read_finder_sees_every_way_of_reading_a_variable() -> None:
    source = (
        'import os\nENV = "SOVSEAL_X"\n'
        'a = os.environ.get(ENV)\nb = os.environ["SOVSEAL_Y"]\nc = os.getenv("SOVSEAL_Z")\n'
        'd = "SOVSEAL_W" in os.environ\ne = os.environ.get(name)\nos.environ.setdefault("LANCEDB_LOG", "error")\n'
        "env = dict(os.environ)\n"
    )
    assert environment_reads(source) == [
        (3, "SOVSEAL_X"), (4, "SOVSEAL_Y"), (5, "SOVSEAL_Z"), (6, "SOVSEAL_W"), (7, None), (8, "LANCEDB_LOG"),
    ]


def test_only_the_registry_reads_sovseal_variables() -> None:
    offenders = []
    for path in _sources():
        where = _relative(path)
        if where.startswith(ALLOWED_READERS):
            continue
        for line, name in environment_reads(path.read_text(encoding="utf-8")):
            if name is None or name.startswith("SOVSEAL_"):
                offenders.append(f"{where}:{line} reads {name or 'a variable it does not name'}")
    assert not offenders, "read SOVSEAL_* through sovseal.settings (settings.X.get()), not os.environ:\n" + "\n".join(offenders)


# -- (b) the docs table is the registry's --------------------------------------------------------


def _docs_section() -> str:
    text = OPERATIONS.read_text(encoding="utf-8")
    assert "\n## Environment variables\n" in text, "docs/operations.md has no 'Environment variables' section"
    return text.split("\n## Environment variables\n", 1)[1].split("\n## ", 1)[0]


def test_the_docs_table_lists_every_registered_variable_with_its_default() -> None:
    rows = {}
    for line in _docs_section().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`SOVSEAL_"):
            rows[cells[0].strip("`")] = cells
    registered = {setting.name: setting for setting in settings.REGISTRY}
    assert not set(rows) - set(registered), f"documented but not registered: {sorted(set(rows) - set(registered))}"
    assert not set(registered) - set(rows), f"registered but not documented: {sorted(set(registered) - set(rows))}"
    for name, (_, kind, default, meaning) in rows.items():
        setting = registered[name]
        assert (kind, default, meaning) == (setting.kind, settings.shown_default(setting), setting.doc), name


def test_the_docs_table_is_generated_from_the_registry() -> None:
    assert settings.docs_table() in _docs_section(), (
        "docs/operations.md's table differs from the registry: paste the output of "
        "`python -c 'from sovseal import settings; print(settings.docs_table())'`"
    )


# -- (c) parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "value", "accepted"),
    [
        (settings.SYNC_INTERVAL, "soon", "a number of seconds > 0"),
        (settings.SYNC_INTERVAL, "-5", "a number of seconds > 0"),
        (settings.SERVER_PORT, "70000", "a TCP port, 0 to 65535"),
        (settings.SERVER_MAX_CONNECTIONS, "0", "an integer >= 1"),
        (settings.ENDPOINT, "ftp://sync.example.com", "an http(s) URL"),
        (settings.CONSOLIDATE_MODEL, "mymodels", "MODULE:FACTORY"),
    ],
)
def test_a_bad_value_names_the_variable_and_what_it_accepts(
    monkeypatch: pytest.MonkeyPatch, setting: settings.Setting[object], value: str, accepted: str
) -> None:
    monkeypatch.setenv(setting.name, value)
    with pytest.raises(InvalidInputError) as info:
        setting.get()
    message = str(info.value)
    assert message.startswith(f"{setting.name}: ") and accepted in message and repr(value) in message


@pytest.mark.parametrize("setting", [s for s in settings.REGISTRY if s.secret])
def test_a_secret_is_never_echoed(monkeypatch: pytest.MonkeyPatch, setting: settings.Setting[object]) -> None:
    secret = "mysql://owner:hunter2-pw@db.example.com/x"
    monkeypatch.setenv(setting.name, secret)
    try:
        setting.get()
    except InvalidInputError as exc:
        assert setting.name in str(exc) and "hunter2" not in str(exc) and "not shown" in str(exc)
    with pytest.raises(InvalidInputError) as info:  # whatever its own parser says is wrapped the same way
        setting.read(int)
    assert setting.name in str(info.value) and "hunter2" not in str(info.value)


def test_a_role_url_that_is_not_postgresql_is_refused_without_its_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOVSEAL_SERVER_WRITER_URL", "mysql://writer:hunter2@db/x")
    with pytest.raises(InvalidInputError, match=r"SOVSEAL_SERVER_WRITER_URL: .*a postgresql:// URL") as info:
        settings.SERVER_WRITER_URL.get()
    assert "hunter2" not in str(info.value)


def test_unset_or_blank_means_the_default_and_each_read_sees_the_environment_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOVSEAL_SERVER_PORT", raising=False)
    assert settings.SERVER_PORT.get() == 8765 and settings.SERVER_PORT.given() is None
    monkeypatch.setenv("SOVSEAL_SERVER_PORT", "  ")
    assert settings.SERVER_PORT.get() == 8765 and not settings.SERVER_PORT.is_set()
    monkeypatch.setenv("SOVSEAL_SERVER_PORT", " 9000 ")
    assert settings.SERVER_PORT.get() == 9000
    monkeypatch.setenv("SOVSEAL_SYNC_INTERVAL", "2.5")
    assert settings.SYNC_INTERVAL.get() == 2.5


@pytest.mark.parametrize(("value", "on"), [("1", True), ("true", True), ("ON", True), ("0", False), ("", False), ("maybe", False)])
def test_flags_are_on_only_when_asked_and_never_refuse_a_value(monkeypatch: pytest.MonkeyPatch, value: str, on: bool) -> None:
    """Both flags loosen a safety default, so any value not understood leaves it in place, as before."""
    for flag in (settings.ALLOW_INSECURE_HTTP, settings.LOG_REPLICATION_BODIES):
        monkeypatch.setenv(flag.name, value)
        assert flag.get() is on


@pytest.mark.parametrize(("value", "on"), [("file", True), (" FILE ", True), ("1", False), ("keyring", False), ("", False)])
def test_the_key_fallback_needs_the_exact_opt_in(monkeypatch: pytest.MonkeyPatch, value: str, on: bool) -> None:
    monkeypatch.setenv(settings.KEY_FALLBACK.name, value)
    assert settings.KEY_FALLBACK.get() is on


def test_a_server_limit_from_the_environment_is_still_a_limit_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOVSEAL_SERVER_BODY_TIMEOUT", "later")
    with pytest.raises(LimitError, match="SOVSEAL_SERVER_BODY_TIMEOUT: 'later' is not a number of seconds > 0"):
        Limits()


# -- Sovseal() and SOVSEAL_KEY -----------------------------------------------------------------


@pytest.fixture
def no_keychain(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A machine whose keychain holds nothing (and no key file fallback)."""
    monkeypatch.delenv(FALLBACK_ENV, raising=False)
    monkeypatch.delenv("SOVSEAL_KEY", raising=False)
    monkeypatch.delenv("SOVSEAL_ENDPOINT", raising=False)
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    yield
    keyring.set_keyring(previous)


def test_sovseal_opens_a_store_with_the_key_in_sovseal_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_keychain: None) -> None:
    key = os.urandom(32)
    path = tmp_path / "store"
    with Sovseal(path, key=key, embedder=fake_embed) as mem:
        mem.store("user.editor", "neovim")
    with pytest.raises(KeyUnavailableError):  # the keychain does not hold it
        Sovseal(path, embedder=fake_embed)
    monkeypatch.setenv("SOVSEAL_KEY", export_key(key))
    with Sovseal(path, embedder=fake_embed) as mem:
        assert mem.get("user.editor").payload == "neovim"
        assert mem.key_backend == "env:SOVSEAL_KEY"


def test_a_new_store_made_with_sovseal_key_saves_the_key_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_keychain: None
) -> None:
    key = os.urandom(32)
    monkeypatch.setenv("SOVSEAL_KEY", export_key(key))
    with Sovseal(tmp_path / "new", embedder=fake_embed) as mem:
        mem.store("a", "1")
    assert not key_file_path(tmp_path / "new").exists()
    monkeypatch.delenv("SOVSEAL_KEY")
    with Sovseal(tmp_path / "new", key=key, embedder=fake_embed) as mem:  # the store is under that key
        assert mem.get("a").payload == "1"


def test_a_wrong_sovseal_key_is_a_key_error_that_names_the_variable_not_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_keychain: None
) -> None:
    path = tmp_path / "store"
    Sovseal(path, key=os.urandom(32), embedder=fake_embed).close()
    wrong = export_key(os.urandom(32))
    monkeypatch.setenv("SOVSEAL_KEY", wrong)
    with pytest.raises(KeyUnavailableError) as info:  # what `sovseal status` exits 4 with
        Sovseal(path, embedder=fake_embed)
    assert "SOVSEAL_KEY" in str(info.value) and wrong.split(":")[1] not in str(info.value)
    monkeypatch.setenv("SOVSEAL_KEY", "sovseal-key-v1:c2VjcmV0LWJ1dC1zaG9ydA:00")
    with pytest.raises(InvalidInputError) as malformed:  # what the command line exits 2 with
        Sovseal(path, embedder=fake_embed)
    assert str(malformed.value).startswith("SOVSEAL_KEY: ") and "c2VjcmV0" not in str(malformed.value)


def test_a_bad_sync_interval_fails_the_open_and_leaves_the_store_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = os.urandom(32)
    replicated = {"endpoint": "http://127.0.0.1:9", "api_key": "sov_test", "project": "settings-test"}
    monkeypatch.setenv("SOVSEAL_SYNC_INTERVAL", "soon")
    with pytest.raises(InvalidInputError, match="SOVSEAL_SYNC_INTERVAL: 'soon' is not a number of seconds > 0"):
        Sovseal(tmp_path / "s", key=key, embedder=fake_embed, **replicated)
    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as mem:  # not replicated: the variable is not read
        assert mem.syncing is None
    monkeypatch.setenv("SOVSEAL_SYNC_INTERVAL", "30")
    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed, lock_timeout=1, **replicated) as mem:  # the lock was let go
        assert mem.syncing is not None and mem.syncing.interval == 30
