"""Raise sites whose message was built in a variable carry their advice as fields (issue 35 item 2).

The CLI prints ``exc.message`` and ``exc.cli_advice``; Python sees ``str(exc)``, the message and the
Python ``advice``. Advice for Python callers (``errors='replace'``, ``ReplicationConfig.max_page_bytes``)
left inside the message reached the command line; these sites now pass it as ``advice=`` with
``cli_advice=`` in command-line words, and ``str(exc)`` reads as before.
"""

from __future__ import annotations

import re

import pytest

from sovseal.canonical import canonicalize
from sovseal.errors import CanonicalizationError, PageTooLargeError
from sovseal.replication.fetch import PullSession

#: Advice written for Python callers (tests/cli/test_words.py): a method call, a keyword argument, a module path.
PYTHON_WORDS = re.compile(r"\w\(\)|\b[a-z_]+=|\bsovseal\.\w+\.\w+")


@pytest.mark.parametrize(("value", "where"), [({"a": "x\ud800"}, 'value["a"]'), ({"\udfff": 1}, 'the key value["\\udfff"]')])
def test_a_lone_surrogate_says_what_to_do_in_both_words(value: object, where: str) -> None:
    with pytest.raises(CanonicalizationError) as caught:
        canonicalize(value)
    exc = caught.value
    assert exc.message.startswith(where) and exc.message.endswith("which is not valid Unicode")
    assert str(exc) == f"{exc.message}; fix the text (e.g. decode it with errors='replace')"  # as before
    assert not PYTHON_WORDS.search(exc.cli_advice) and "valid UTF-8" in exc.cli_advice


def test_other_canonicalization_errors_keep_their_whole_message() -> None:
    with pytest.raises(CanonicalizationError) as caught:
        canonicalize({"n": 2**60})
    assert caught.value.message == str(caught.value) and caught.value.message.endswith("store it as a string instead")


def test_a_page_too_large_keeps_the_python_setting_out_of_the_cli_advice() -> None:
    session = PullSession.__new__(PullSession)  # no transport: only the error's words are under test
    session.endpoint, session.max_bytes = "https://sync.example.com", 1024
    exc = session._too_large(1)
    assert isinstance(exc, PageTooLargeError) and exc.code == "too_large"
    assert str(exc).endswith(
        "(about 550 KB on the wire). If this server's items are larger, raise ReplicationConfig.max_page_bytes"
    )
    assert not PYTHON_WORDS.search(exc.cli_advice) and "https://sync.example.com" in exc.cli_advice
