"""Keyword analysis: the same steps for a memory and for a query.

Lower-case, split on anything that is not a letter or a digit, drop English stop words, then the
Snowball English stemmer (PyStemmer) so ``painted`` matches ``paint`` and ``photos`` matches
``photo``. Digits are kept (years, versions, counts). Nothing here touches the disk: the tokens
live only in the in-memory keyword index.
"""

from __future__ import annotations

import re
import threading

import Stemmer

_WORD = re.compile(r"[^\W_]+")

#: The NLTK English stop word list (179 words; its contractions split as the tokenizer splits them).
STOPWORDS = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself
    it its itself they them their theirs themselves what which who whom this that these those am is are was were be
    been being have has had having do does did doing a an the and but if or because as until while of at by for with
    about against between into through during before after above below to from up down in out on off over under
    again further then once here there when where why how all any both each few more most other some such no nor not
    only own same so than too very s t can will just don should now d ll m o re ve y ain aren couldn didn doesn hadn
    hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn
    """.split()
)

_local = threading.local()  # a Stemmer object is not safe to share between threads


def _stemmer() -> Stemmer.Stemmer:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


def tokens(text: str) -> list[str]:
    """The index terms of ``text``, in order, repeats kept (BM25 counts them)."""
    words = [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]
    return _stemmer().stemWords(words) if words else []
