"""The anonymizer never reaches for the network or writes a cache: checked in a fresh interpreter
(nothing imported or cached beforehand) with an audit hook that records every socket lookup and
connect, and a private HOME that must stay empty. Without Presidio, a typed error says what to install."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sovseal.anonymize import Detector
from sovseal.errors import AnonymizerUnavailableError

_SCRIPT = r"""
import json, sys
attempts = []
# Lookups and traffic; not socket.bind (urllib3's import binds ::1 once to probe IPv6 support).
WATCHED = {"socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
           "socket.sendto", "socket.sendmsg", "http.client.connect", "urllib.Request"}
def guard(event, args):
    if event in WATCHED:
        attempts.append(event)
sys.addaudithook(guard)

import sovseal.anonymize
lazy = "presidio_analyzer" not in sys.modules and "spacy" not in sys.modules
from sovseal.anonymize import Anonymizer

text = ("Jane <jane.doe@acme-corp.com> https://intranet.acme-corp.com/x +44 20 7946 0958 "
        "GB82 WEST 1234 5698 7654 32 4111 1111 1111 1111 10.0.0.7 sk-proj-Abc123Def456Ghi789Jkl012 ProjectNightingale")
anonymizer = Anonymizer()
safe, session_id = anonymizer.anonymize(text)
assert anonymizer.deanonymize(safe, session_id) == text
seen = list(attempts)
import socket
socket.getaddrinfo("localhost", 9)  # the control: the guard does see a lookup
print(json.dumps({"lazy": lazy, "attempts": seen, "control": attempts[len(seen):], "safe": safe,
                  "ner": anonymizer.detector.ner_model}))
"""


def test_no_network_and_no_files_from_a_cold_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOVSEAL_", "XDG_"))}
    env.update(HOME=str(home), TLDEXTRACT_CACHE=str(home / "tld"))
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["lazy"] is True  # importing sovseal.anonymize loads neither Presidio nor spaCy
    assert report["attempts"] == []
    assert report["control"] and report["control"][0] == "socket.getaddrinfo"
    assert "acme-corp" not in report["safe"] and "<EMAIL_ADDRESS_1>" in report["safe"]
    assert list(home.rglob("*")) == []  # no suffix-list cache, no model download, nothing
    assert "Downloading" not in proc.stderr and "acme" not in proc.stderr


def test_without_presidio_a_typed_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "presidio_analyzer", None)  # what `import` sees when it is not installed
    with pytest.raises(AnonymizerUnavailableError, match=r'pip install "sovseal\[anonymize\]"'):
        Detector(ner_model="none").ready()
