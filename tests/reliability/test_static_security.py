"""Static checks: bandit over sovseal and the integrations' sources, every finding fixed or justified.

What it proves: the security linter finds nothing that nobody has looked at. A finding is either
fixed, or silenced on its own line with ``# nosec BXXX -- reason`` naming the one check it
silences and saying why it does not apply; a bare ``# nosec`` (which silences every check on the
line) or one without a reason fails the test too. All severities and confidences count.

How: ``python -m bandit -r`` with JSON output on the package sources (tests, benchmarks and
cookbooks are not shipped and are not scanned).
"""

from __future__ import annotations

import json
import re
import subprocess  # nosec B404 -- runs bandit, a fixed argv, no shell
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    ROOT / "sovseal",
    ROOT / "integrations" / "langchain-sovseal" / "langchain_sovseal",
    ROOT / "integrations" / "langgraph-checkpoint-sovseal" / "langgraph",
    ROOT / "integrations" / "llama-index-sovseal" / "llama_index",
]
NOSEC = re.compile(r"#\s*nosec\b(.*)$")
JUSTIFIED = re.compile(r"^\s+B\d{3}(,\s*B\d{3})*\s+--\s+\S.{5,}")


def test_bandit_finds_nothing_unjustified() -> None:
    sources = [str(p) for p in SOURCES if p.is_dir()]
    assert sources and str(ROOT / "sovseal") in sources
    run = subprocess.run(  # nosec B603 -- fixed argv: this interpreter running bandit on our own sources
        [sys.executable, "-m", "bandit", "-q", "-r", "-f", "json", *sources], capture_output=True, text=True, timeout=300, check=False
    )
    report = json.loads(run.stdout)
    assert not report["errors"], report["errors"]
    findings = [
        f"{Path(r['filename']).resolve().relative_to(ROOT)}:{r['line_number']}: {r['test_id']} "
        f"({r['issue_severity']}/{r['issue_confidence']}) {r['issue_text']}"
        for r in report["results"]
    ]
    assert not findings, "fix these or justify each inline with '# nosec BXXX -- reason':\n" + "\n".join(findings)
    scanned = report["metrics"]["_totals"]["loc"]
    assert scanned > 5000  # really scanned the package, not an empty directory


def test_every_nosec_names_its_check_and_says_why() -> None:
    bare: list[str] = []
    for source in SOURCES:
        for path in sorted(source.rglob("*.py")) if source.is_dir() else []:
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                match = NOSEC.search(line)
                if match and not JUSTIFIED.match(match.group(1)):
                    bare.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not bare, "write '# nosec BXXX -- reason' (the check it silences and why):\n" + "\n".join(bare)
