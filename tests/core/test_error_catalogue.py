"""The error catalogue: every error sovseal raises on purpose is a class of ``sovseal.errors``, with an
exit code the CLI documents and its advice as fields (Python words and CLI words apart), and
docs/errors.md lists every one. A class defined anywhere else, a new class without a row in the docs,
or an exit code outside ``EXIT_CODES`` fails here.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pickle
import pkgutil
import re
from pathlib import Path

import pytest

import sovseal
from sovseal import errors
from sovseal.errors import EXIT_CODES, EXIT_OK, SovsealError

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
#: Advice written for Python callers: a method call, a keyword argument, a module path.
PYTHON_WORDS = re.compile(r"\w\(\)|\b[a-z_]+=|\bsovseal\.\w+\.\w+")


def _catalogue() -> list[type[SovsealError]]:
    return [c for c in vars(errors).values() if inspect.isclass(c) and issubclass(c, SovsealError) and c.__module__ == errors.__name__]


def _subclasses(cls: type) -> set[type]:
    found: set[type] = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def test_every_error_class_in_the_package_is_defined_in_errors_py() -> None:
    for module in pkgutil.walk_packages(sovseal.__path__, "sovseal."):
        if module.name == "sovseal.__main__":  # importing it runs the command line
            continue
        try:
            importlib.import_module(module.name)
        except ImportError:  # an optional extra that is not installed: the source scan below still reads it
            continue
    ours = [c for c in _subclasses(SovsealError) if c.__module__.split(".")[0] == "sovseal"]
    outside = sorted(f"{c.__module__}.{c.__qualname__}" for c in ours if c.__module__ != errors.__name__)
    assert not outside, f"define these in sovseal/errors.py (and re-export them where they were): {outside}"


def test_no_module_subclasses_a_catalogued_error_in_its_source() -> None:
    """The same rule read from the source, so a module that does not import here is checked too."""
    names = {c.__name__ for c in _catalogue()}
    offenders = []
    for path in sorted((ROOT / "sovseal").rglob("*.py")):
        if path == ROOT / "sovseal" / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id in names for b in node.bases):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not offenders, offenders


@pytest.mark.parametrize("cls", _catalogue(), ids=lambda c: c.__name__)
def test_each_class_has_a_documented_exit_code_and_advice_fields(cls: type[SovsealError]) -> None:
    assert isinstance(cls.exit_code, int) and cls.exit_code in EXIT_CODES and cls.exit_code != EXIT_OK
    assert isinstance(cls.advice, str) and isinstance(cls.cli_advice, str)
    assert not PYTHON_WORDS.search(cls.cli_advice), f"{cls.__name__}.cli_advice must be in command-line words"
    assert re.search(rf"^\| `{cls.__name__}` \| .* \| {cls.exit_code} \| ", DOCS, re.M), f"docs/errors.md has no row for {cls.__name__}"


def test_the_documented_exit_codes_are_the_clis() -> None:
    from sovseal import cli

    assert EXIT_CODES.items() <= cli.EXIT_CODES.items()  # the CLI adds its own (130: interrupted)
    for code in EXIT_CODES:
        assert re.search(rf"^\| {code} \| `EXIT_\w+` \| ", DOCS, re.M), code


def test_str_is_the_message_then_the_python_advice() -> None:
    bare = errors.UnknownBranchError("no branch named 'x'")
    assert str(bare) == bare.message == "no branch named 'x'" and bare.advice == bare.cli_advice == ""
    exc = errors.UnknownBranchError(
        "no branch named 'x'", advice="list them with branches()", cli_advice="list branches with `sovseal branches`"
    )
    assert str(exc) == "no branch named 'x'; list them with branches()" and exc.message == "no branch named 'x'"
    assert exc.exit_code == errors.EXIT_NOT_FOUND and isinstance(exc, KeyError)
    sentence = errors.KeyUnavailableError("the key given has id 12.", advice="Pass the store's own key.")
    assert str(sentence) == "the key given has id 12. Pass the store's own key." and sentence.message == "the key given has id 12."
    colon = errors.InvalidInputError("needs an API key:", advice="pass api_key=...")
    assert str(colon) == "needs an API key: pass api_key=..."


def test_class_level_advice_is_a_default_an_instance_may_override() -> None:
    default = errors.ModelUnavailableError("no model here.", advice="pass Embedder(model_dir=...)")
    assert "SOVSEAL_MODEL_DIR" in default.cli_advice and str(default) == "no model here. pass Embedder(model_dir=...)"
    own = errors.ModelUnavailableError("no model here.", cli_advice="set SOVSEAL_MODEL_DIR")
    assert own.cli_advice == "set SOVSEAL_MODEL_DIR" and type(own).cli_advice != own.cli_advice


def test_errors_survive_pickling_with_their_fields() -> None:
    """A worker process's error reaches its parent whole (keyword-only fields included)."""
    for exc in (
        errors.IntegrityError("x failed", advice=errors.RUN_VERIFY, cli_advice=errors.RUN_VERIFY_CLI),
        errors.KeyRotatedError("rotated", new_key_id="ab12", advice="import the new key"),
        errors.ReplicationError("refused", status=403, code="forbidden", ids=["a"]),
        errors.StorageError(28, "the disk is full"),
    ):
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc) and str(back) == str(exc) and back.message == exc.message
        assert back.advice == exc.advice and back.cli_advice == exc.cli_advice and vars(back) == vars(exc)


def test_old_import_paths_still_work() -> None:
    from sovseal.consolidate.errors import ConsolidationError, ModelOutputError
    from sovseal.consolidate.run import UnknownRunError
    from sovseal.replication.fetch import PageTooLargeError
    from sovseal.server.limits import LimitError
    from sovseal.storage.journal import JournalHeaderError

    moved = (ConsolidationError, ModelOutputError, UnknownRunError, PageTooLargeError, LimitError, JournalHeaderError)
    assert all(getattr(errors, cls.__name__) is cls for cls in moved)


def test_the_mcp_error_envelope_carries_the_fields() -> None:
    from sovseal.mcp.envelope import error_envelope

    exc = errors.UnknownBranchError(
        "no branch named 'x'", advice="list them with branches()", cli_advice="list branches with `sovseal branches`"
    )
    error = error_envelope(exc)["error"]
    assert error == {
        "type": "UnknownBranchError",
        "message": str(exc),
        "advice": "list them with branches()",
        "cli_advice": "list branches with `sovseal branches`",
        "exit_code": errors.EXIT_NOT_FOUND,
    }
    assert error_envelope(RuntimeError("a bug"))["error"]["exit_code"] == errors.EXIT_ERROR
