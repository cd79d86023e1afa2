"""The identity layer reads the user's own facts from a real sovseal store (memories under
"identity."), re-reads them after a write, and the map never reaches the store's files or a log."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.anonymize import Anonymizer
from sovseal.anonymize.identity import facts_from_state, label_for

FACTS = {
    "identity.name": ["Jane Q. Doe", "Jane Doe"],
    "identity.employer": "Acme Corp",
    "identity.profile": {"city": "Lisbon", "handles": {"github": "janedoe42"}, "badge": 73195, "admin": True},
}


def _store_identity(mem: Sovseal) -> None:
    for path, payload in FACTS.items():
        mem.store(path, payload, type="semantic")
    mem.store("user.editor", "neovim")  # not an identity fact: never anonymized


def test_facts_and_labels_from_payloads() -> None:
    facts = facts_from_state({**FACTS, "identity.": "ignored", "identityx": "ignored", "user.name": "ignored"})
    assert facts == {
        "NAME": ["Jane Q. Doe", "Jane Doe"],
        "EMPLOYER": ["Acme Corp"],
        "CITY": ["Lisbon"],
        "GITHUB": ["janedoe42"],
        "BADGE": ["73195"],
    }
    assert label_for("home-address") == "HOME_ADDRESS" and label_for("2fa") == "ID_2FA" and label_for("é") == "IDENTITY"


def test_identity_facts_from_a_real_store_follow_its_writes(mem: Sovseal, anonymizer: Anonymizer) -> None:
    _store_identity(mem)
    text = "Jane Doe (janedoe42 on Codeberg) from acme corp moved to LISBON; badge 73195. Her editor: neovim."
    safe, session_id = anonymizer.anonymize(text, memory=mem)
    assert safe == "<NAME_1> (<GITHUB_1> on Codeberg) from <EMPLOYER_1> moved to <CITY_1>; badge <BADGE_1>. Her editor: neovim."
    assert anonymizer.deanonymize(safe, session_id) == text
    # A new fact is picked up after the write that stores it, and gone after its delete.
    assert anonymizer.anonymize("Ping Rosalind", memory=mem).text == "Ping Rosalind"
    mem.store("identity.partner", "Rosalind", type="semantic")
    assert anonymizer.anonymize("Ping Rosalind", memory=mem).text == "Ping <PARTNER_1>"
    mem.delete("identity.partner")
    assert anonymizer.anonymize("Ping Rosalind", memory=mem).text == "Ping Rosalind"


def test_facts_in_scripts_written_without_spaces_are_found_in_running_text(mem: Sovseal, anonymizer: Anonymizer) -> None:
    """Chinese and Japanese run words together, so a fact there has no word boundary around it; a fact
    in a script written with spaces still matches only as a whole word ("Ann" not in "Annual")."""
    mem.store("identity.name", ["王小明", "山田太郎", "Ann"], type="semantic")
    mem.store("identity.city", "北京", type="semantic")
    cases = {
        "我叫王小明，住在北京。": "我叫<NAME_1>，住在<CITY_1>。",
        "王小明先生住在北京市": "<NAME_1>先生住在<CITY_1>市",
        "私は山田太郎です。": "私は<NAME_1>です。",
        "山田太郎 lives in 北京": "<NAME_1> lives in <CITY_1>",
        "Annual report by Ann, Annie and 王小明Ann": "Annual report by <NAME_1>, Annie and <NAME_2>Ann",
    }
    for text, expected in cases.items():
        safe, session_id = anonymizer.anonymize(text, memory=mem)
        assert safe == expected, text
        assert anonymizer.deanonymize(safe, session_id) == text


def test_an_empty_store_has_no_facts(mem: Sovseal, anonymizer: Anonymizer) -> None:
    assert anonymizer.anonymize("Jane Doe", memory=mem).text == "Jane Doe"


def test_the_map_never_reaches_the_store_directory_or_a_log(
    mem: Sovseal,
    store_dir: Path,
    anonymizer: Anonymizer,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)  # the root logger and every library under it, at DEBUG
    for name in ("presidio-analyzer", "sovseal", "spacy"):
        caplog.set_level(logging.DEBUG, logger=name)
    _store_identity(mem)
    originals = [
        "Jane Doe",
        "Acme Corp",
        "janedoe42",
        "Lisbon",
        "zelda.fitzgerald@example.org",
        "+44 20 7946 0958",
        "GB82 WEST 1234 5698 7654 32",
        "4111 1111 1111 1111",
        "sk-proj-Abc123Def456Ghi789Jkl012",
        "ProjectNightingale",
    ]
    text = (
        "Jane Doe of Acme Corp (janedoe42, Lisbon) asks zelda.fitzgerald@example.org to call +44 20 7946 0958, "
        "pay GB82 WEST 1234 5698 7654 32 by 4111 1111 1111 1111 and rotate sk-proj-Abc123Def456Ghi789Jkl012 "
        "before ProjectNightingale ships."
    )
    safe, session_id = anonymizer.anonymize(text, memory=mem)
    # The agent stores the anonymized message and the model's answer as memories, as it would.
    mem.store("chat.anonymized", safe, type="episodic")
    answer = "Sure, <NAME_1> - I will call <PHONE_NUMBER_1> after paying <IBAN_CODE_1>."
    mem.store("chat.answer", answer, type="episodic")
    assert anonymizer.deanonymize(answer, session_id).startswith("Sure, Jane Doe - I will call +44 20 7946 0958")
    for original in originals:
        assert original not in safe
    mem.close()

    logging.getLogger("presidio-analyzer").warning("canary %s", "presidio")
    logging.getLogger("sovseal.anonymize").debug("canary %s", "sovseal")
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.args!r}" for r in caplog.records) + caplog.text
    assert "canary presidio" in logged and "canary sovseal" in logged  # the capture sees both loggers
    out, err = capfd.readouterr()  # and whatever native code (LanceDB) wrote to the process's fds
    logged += out + err
    files = [p for p in store_dir.rglob("*") if p.is_file()]
    assert files
    for original in [*originals, session_id]:
        assert original not in logged, original
        for variant in {original, original.lower(), original.replace(" ", "")}:
            for path in files:
                assert variant.encode() not in path.read_bytes(), (variant, path)
                assert variant.encode("utf-16-le") not in path.read_bytes(), (variant, path)
