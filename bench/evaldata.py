"""Where the benchmarks find their evaluation corpora: ``--data DIR``, else ``$SOVSEAL_EVALDATA``.

LoCoMo, SciFact and Cranfield stay outside the repository (their licences are not the project's,
and only the benchmarks read them). Every benchmark that reads one takes ``--data DIR``, by default
the ``SOVSEAL_EVALDATA`` environment variable; with neither, or with a file missing, it says what is
missing, where to get it and which layout DIR must have, and exits with status 2. DIR holds:

    locomo/locomo10.json
    scifact/scifact.zip            (corpus_train.csv and claims_validation.csv inside)
    cranfield/cran.all.1400
    cranfield/cran.qry
    cranfield/cranqrel

The sources below are the exact files the committed figures were measured on (commit-pinned, with
their SHA-256); a file that differs is read, with a warning that its figures may not match.

Scripts in ``bench/`` import this module directly; the framework packages' benchmarks put this
directory on ``sys.path`` first (``integrations/*/bench`` is three levels below the repository).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

ENV = "SOVSEAL_EVALDATA"


@dataclass(frozen=True)
class File:
    """One corpus file: its place under DIR, where to download it, its SHA-256, and its licence."""

    path: str
    url: str
    sha256: str


@dataclass(frozen=True)
class Corpus:
    name: str
    what: str
    licence: str
    files: tuple[File, ...]


_LOCOMO = "https://raw.githubusercontent.com/snap-research/LoCoMo/3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376"
_SCIFACT = "https://raw.githubusercontent.com/sumithra-p-v/claimverifier/c89fe399bf3e91aa4502b10d673b07db27891526"
_CRANFIELD = "https://raw.githubusercontent.com/noramtboraas/information-retrieval/9e359c7c9f73c54847fef540677c8810ac66c630"

CORPORA: dict[str, Corpus] = {
    "locomo": Corpus(
        "locomo",
        "LoCoMo, github.com/snap-research/LoCoMo data/locomo10.json",
        "CC BY-NC 4.0 (non-commercial)",
        (
            File(
                "locomo/locomo10.json", f"{_LOCOMO}/data/locomo10.json", "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
            ),
        ),
    ),
    "scifact": Corpus(
        "scifact",
        "SciFact (AllenAI, Wadden et al. 2020) as CSV; claims_validation.csv is BEIR's SciFact test set (300 queries, 339 qrels)",
        "CC BY-NC 2.0 (non-commercial)",
        (File("scifact/scifact.zip", f"{_SCIFACT}/data/scifact.zip", "a798a7046af0f6fa04476448459ce7cafeea5bd90d4d99c53a0e27dc5e1a4673"),),
    ),
    "cranfield": Corpus(
        "cranfield",
        "Cranfield 1400 (SMART format)",
        "freely redistributed for IR research",
        (
            File(
                "cranfield/cran.all.1400", f"{_CRANFIELD}/cran.all.1400", "fbb8935a93263ab6c9fadefb507fd7cd5e101e7fbeb31c12e6bff6dd501315e8"
            ),
            File("cranfield/cran.qry", f"{_CRANFIELD}/cran.qry", "99578ceb88941ef89c14faf7c63c23776a376d8fba319b990f01d0c601d8b03f"),
            File("cranfield/cranqrel", f"{_CRANFIELD}/cranqrel", "a90f56082cd44db70bf2c21ebca39a1a34e37c82ccb5ddf1bcc64f18795234c7"),
        ),
    ),
}


def add_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--data DIR`` option, the same on every benchmark that reads a corpus."""
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"folder with the evaluation corpora (locomo/, scifact/, cranfield/); default: ${ENV}",
    )


def how_to_get(names: list[str], folder: str = '"$HOME/sovseal-evaldata"') -> str:
    """The files DIR must hold for the corpora ``names``, and the shell lines that fetch them."""
    lines = []
    for name in names:
        corpus = CORPORA[name]
        lines += [f"  {file.path:<26} {corpus.what}; licence {corpus.licence}" for file in corpus.files]
    lines += ["", "To fetch them (the exact files of the committed figures):", "", f"  DIR={folder}"]
    for name in names:
        lines += [f'  curl -fL --create-dirs -o "$DIR/{file.path}" {file.url}' for file in CORPORA[name].files]
    lines.append(f'  export {ENV}="$DIR"')
    return "\n".join(lines)


def _fail(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(2)


def root(data: Path | None, names: list[str]) -> Path:
    """The corpus folder (``--data``, else ``$SOVSEAL_EVALDATA``) with the files of ``names`` in it.

    Missing folder or files: a message saying what is missing and where to get it, exit status 2."""
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in CORPORA]
    if unknown:
        raise ValueError(f"unknown corpus {unknown}; known: {', '.join(CORPORA)}")
    script = Path(sys.argv[0]).name or "this benchmark"
    source = "--data"
    if data is None and os.environ.get(ENV):
        data, source = Path(os.environ[ENV]), f"${ENV}"
    if data is None:
        _fail(
            f"{script} reads {', '.join(names)}, which the repository does not ship: pass --data DIR or set "
            f"{ENV}=DIR, where DIR holds\n\n" + how_to_get(names) + "\n\nOne DIR serves every benchmark "
            '(docs/benchmarks.md, "Reproduce from a fresh clone").'
        )
    base = data.expanduser().resolve()  # type: ignore[union-attr]
    absent = [f.path for n in names for f in CORPORA[n].files if not (base / f.path).is_file()]
    if absent:
        lacking = [n for n in names if any(f.path in absent for f in CORPORA[n].files)]
        _fail(
            f"{script}: {source} names {base}, which lacks {', '.join(absent)}. It must hold\n\n"
            + how_to_get(lacking, shlex.quote(str(base)))
        )
    return base


def check(base: Path, names: list[str]) -> None:
    """Warn (stderr) for each file whose SHA-256 is not the one the committed figures were measured on."""
    for name in dict.fromkeys(names):
        for file in CORPORA[name].files:
            digest = hashlib.sha256((base / file.path).read_bytes()).hexdigest()
            if digest != file.sha256:
                print(
                    f"warning: {base / file.path} is not the file of the committed figures (sha256 {digest[:12]}…, "
                    f"expected {file.sha256[:12]}…): figures may differ",
                    file=sys.stderr,
                )


def resolve(data: Path | None, names: list[str]) -> Path:
    """``root`` then ``check``: what a benchmark calls once, before it loads anything."""
    base = root(data, names)
    check(base, names)
    return base
