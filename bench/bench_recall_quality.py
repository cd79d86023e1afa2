"""Recall quality through the real engine: LoCoMo evidence recall, SciFact and Cranfield nDCG@10.

Every dataset goes through ``Sovseal.store`` and ``Sovseal.recall`` with the on-device
all-MiniLM-L6-v2 (``sovseal.embed.Embedder``); the only shortcut is that texts are embedded in
bulk up front with ``embed_documents`` (the exact texts the engine embeds: ``memory_text`` of each
entry, and each query) and handed to the engine by a lookup embedder, which is the same model's
output the engine would compute one by one. Several fusions run side by side on the same stores
by switching ``mem.recall_params``:

    dense      vector search alone
    bm25       keyword search alone (BM25, same tokenizer)
    rrf60      reciprocal rank fusion, k = 60 (the baseline)
    weighted   sovseal's weighted fusion without lineage context
    ungated    weighted fusion + lineage context at full weight always (context_coherence=0)
    sovseal    the defaults: weighted fusion + lineage context, weighted by how coherent the chain is

The corpora are read from ``--data DIR`` (default ``$SOVSEAL_EVALDATA``; ``bench/evaldata.py`` has the
layout and the sources). LoCoMo: one store per conversation; every turn is a
memory at ``chat.session_<n>.turn_<m>`` with payload {speaker, text, image caption if any},
type episodic and the session date as metadata. Every question of categories 1-4 is a query;
R@k is the fraction of a question's evidence turns in the top k (malformed evidence strings are
split on ';' and whitespace, ids that name no turn are dropped, questions left with none are
skipped), averaged over questions; MRR is 1 / rank of the first evidence turn within the top 100.
The development split (conv-26, -30, -41, -42, -43) is for tuning; the test split (conv-44, -47,
-48, -49, -50) is only for reporting.

SciFact: the 5,183 abstracts (title + sentences), the 300 claims of claims_validation.csv as
queries, qrels rebuilt from cited_doc_ids (339 pairs, BEIR's test set); nDCG@10, binary gains.
Cranfield: 1,400 documents, 225 queries (numbered 1..225 in file order), graded qrels with gain
5 - code (code 1, "complete answer", gains 4; -1 is not relevant); nDCG@10.

Run (the stores go to a temporary directory, /dev/shm when present; the bulk embeddings are kept in
``--cache``, by default ``sovseal-bench-cache`` in the system's temporary directory):

    python bench/bench_recall_quality.py --data DIR --datasets locomo --split dev
    python bench/bench_recall_quality.py --data DIR --datasets locomo --split test
    python bench/bench_recall_quality.py --data DIR --datasets scifact,cranfield
"""

from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import io
import json
import math
import os
import re
import sys
import tempfile
import time
import tokenize
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import evaldata  # bench/ is not a package

from sovseal import Sovseal
from sovseal.embed import Embedder
from sovseal.recall import RecallParams
from sovseal.storage.entries import make_entry, memory_text

CACHE = Path(tempfile.gettempdir()) / "sovseal-bench-cache"  # bulk embeddings, shared with bench_recall_latency.py
DEV = ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43"]
TEST = ["conv-44", "conv-47", "conv-48", "conv-49", "conv-50"]

DEFAULT = RecallParams()
CONFIGS: dict[str, RecallParams] = {
    "dense": replace(DEFAULT, fusion="dense", neighbor_weights=()),
    "bm25": replace(DEFAULT, fusion="keyword", neighbor_weights=()),
    "rrf60": replace(DEFAULT, fusion="rrf", rrf_k=60, neighbor_weights=()),
    "weighted": replace(DEFAULT, neighbor_weights=()),
    "ungated": replace(DEFAULT, context_coherence=0.0),
    "sovseal": DEFAULT,
}


# -- embedding: bulk, cached, handed to the engine by a lookup -----------------------------------


class Lookup:
    """An embedder callable that returns precomputed vectors (the real model's, computed in bulk)."""

    def __init__(self, embedder: Embedder, table: dict[str, np.ndarray]) -> None:
        self.embedder, self.table = embedder, table
        self.misses = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        out = []
        for text in texts:
            vector = self.table.get(text)
            if vector is None:
                self.misses += 1
                vector = self.table[text] = self.embedder.embed_documents([text])[0]
            out.append(vector)
        return np.stack(out)


def embed_all(embedder: Embedder, texts: list[str], cache: Path | None, name: str) -> dict[str, np.ndarray]:
    unique = list(dict.fromkeys(texts))
    digest = hashlib.sha256("\x00".join(unique).encode()).hexdigest()[:16]
    path = cache / f"{name}-{digest}-{embedder.model_sha256 or 'model'}.npy" if cache else None
    if path is not None and path.exists():
        vectors = np.load(path)
    else:
        started = time.perf_counter()
        vectors = embedder.embed_documents(unique)
        print(f"  embedded {len(unique)} texts for {name} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, vectors)
    return dict(zip(unique, vectors, strict=True))


def entry_text(path: str, payload: Any, **options: Any) -> str:
    return memory_text(make_entry("store", path, payload, **options))


# -- datasets ---------------------------------------------------------------------------------------


def locomo(data_dir: Path, conversations: list[str]) -> list[dict[str, Any]]:
    data = json.loads((data_dir / "locomo" / "locomo10.json").read_text())
    out = []
    for sample in data:
        if sample["sample_id"] not in conversations:
            continue
        conv = sample["conversation"]
        sessions = sorted(int(k.split("_")[1]) for k, v in conv.items() if re.fullmatch(r"session_\d+", k) and isinstance(v, list))
        items, by_id = [], {}
        for n in sessions:
            date = conv.get(f"session_{n}_date_time", "")
            for turn in conv[f"session_{n}"]:
                payload = {"speaker": turn["speaker"], "text": turn["text"]}
                if turn.get("blip_caption"):
                    payload["image"] = turn["blip_caption"]
                path = f"chat.session_{n}.turn_{turn['dia_id'].split(':')[-1]}"
                by_id[turn["dia_id"]] = path
                items.append(
                    {"path": path, "payload": payload, "metadata": {"session": n, "date": date, "turn": turn["dia_id"]}, "type": "episodic"}
                )
        queries = []
        for qa in sample["qa"]:
            if qa["category"] not in (1, 2, 3, 4):
                continue
            relevant: dict[str, float] = {}
            for evidence in qa.get("evidence", []):
                for part in re.split(r"[;\s]+", evidence):
                    if part in by_id:
                        relevant[by_id[part]] = 1.0
            if relevant:
                queries.append({"query": qa["question"], "relevant": relevant, "category": qa["category"]})
        out.append({"name": sample["sample_id"], "items": items, "queries": queries})
    return out


def _scifact_sentences(text: str) -> list[str]:
    """The abstract column is a NumPy repr of a list of strings with no commas: read its STRING tokens."""
    return [ast.literal_eval(t.string) for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.STRING]


def scifact(data_dir: Path) -> list[dict[str, Any]]:
    with zipfile.ZipFile(data_dir / "scifact" / "scifact.zip") as z:

        def rows(suffix: str) -> list[dict[str, str]]:
            name = next(n for n in z.namelist() if n.endswith(suffix))
            return list(csv.DictReader(io.TextIOWrapper(z.open(name), encoding="utf-8")))

        items = [
            {
                "path": f"scifact.doc_{r['doc_id']}",
                "payload": {"title": r["title"], "text": " ".join(_scifact_sentences(r["abstract"]))},
                "type": "semantic",
            }
            for r in rows("corpus_train.csv")
        ]
        claims: dict[str, str] = {}
        qrels: dict[str, dict[str, float]] = {}
        for r in rows("claims_validation.csv"):
            claims[r["id"]] = r["claim"]
            for doc in re.findall(r"\d+", r["cited_doc_ids"]):
                qrels.setdefault(r["id"], {})[f"scifact.doc_{doc}"] = 1.0
    queries = [{"query": claims[i], "relevant": qrels[i]} for i in claims if i in qrels]
    return [{"name": "scifact", "items": items, "queries": queries}]


def _smart(path: Path) -> list[dict[str, str]]:
    """Records of a SMART file: .I id, then fields .T .A .B .W, each on the lines after its tag."""
    records: list[dict[str, str]] = []
    field = None
    for line in path.read_text(encoding="latin-1").splitlines():
        if line.startswith(".I"):
            records.append({"I": line[2:].strip()})
            field = None
        elif re.fullmatch(r"\.[TABW]\s*", line):
            field = line[1]
            records[-1][field] = ""
        elif field is not None:
            records[-1][field] += line.strip() + " "
    return records


def cranfield(data_dir: Path) -> list[dict[str, Any]]:
    base = data_dir / "cranfield"
    docs = _smart(base / "cran.all.1400")
    items = [
        {
            "path": f"cranfield.doc_{d['I']}",
            "payload": {"title": d.get("T", "").strip(), "text": d.get("W", "").strip()},
            "type": "semantic",
        }
        for d in docs
    ]
    qrels: dict[int, dict[str, float]] = {}
    for line in (base / "cranqrel").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3 and int(parts[2]) in (1, 2, 3, 4):
            qrels.setdefault(int(parts[0]), {})[f"cranfield.doc_{int(parts[1])}"] = 5.0 - int(parts[2])
    queries = []
    for number, q in enumerate(_smart(base / "cran.qry"), 1):  # qrels number queries 1..225 in file order
        if number in qrels:
            queries.append({"query": q.get("W", "").strip(), "relevant": qrels[number]})
    return [{"name": "cranfield", "items": items, "queries": queries}]


# -- metrics ----------------------------------------------------------------------------------------


def recall_metrics(ranked: list[str], relevant: dict[str, float]) -> dict[str, float]:
    out = {f"R@{k}": sum(1 for p in ranked[:k] if p in relevant) / len(relevant) for k in (1, 5, 10)}
    first = next((i for i, p in enumerate(ranked) if p in relevant), None)
    out["MRR"] = 0.0 if first is None else 1.0 / (first + 1)
    return out


def ndcg_at_10(ranked: list[str], relevant: dict[str, float]) -> dict[str, float]:
    dcg = sum((2 ** relevant.get(p, 0.0) - 1) / math.log2(i + 2) for i, p in enumerate(ranked[:10]))
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return {"nDCG@10": dcg / idcg if idcg else 0.0, "R@10": sum(1 for p in ranked[:10] if p in relevant) / len(relevant)}


# -- the run ----------------------------------------------------------------------------------------


def run(
    name: str,
    groups: list[dict[str, Any]],
    embedder: Embedder,
    configs: dict[str, RecallParams],
    metric: Callable[[list[str], dict[str, float]], dict[str, float]],
    k: int,
    workdir: str | None,
    cache: Path | None,
) -> dict[str, dict[str, float]]:
    texts = [entry_text(i["path"], i["payload"], metadata=i.get("metadata"), type=i["type"]) for g in groups for i in g["items"]]
    texts += [q["query"] for g in groups for q in g["queries"]]
    table = embed_all(embedder, texts, cache, name)
    totals: dict[str, dict[str, float]] = {c: {} for c in configs}
    count = 0
    for group in groups:
        lookup = Lookup(embedder, table)
        with tempfile.TemporaryDirectory(dir=workdir) as tmp, Sovseal(Path(tmp) / "store", key=os.urandom(32), embedder=lookup) as mem:
            started = time.perf_counter()
            for item in group["items"]:
                mem.store(item["path"], item["payload"], metadata=item.get("metadata"), type=item["type"])
            stored = time.perf_counter() - started
            for config, params in configs.items():
                mem.recall_params = params
                started = time.perf_counter()
                for q in group["queries"]:
                    ranked = [m.path for m in mem.recall(q["query"], k=k)]
                    for key, value in metric(ranked, q["relevant"]).items():
                        totals[config][key] = totals[config].get(key, 0.0) + value
                print(
                    f"  {group['name']}: {config} {len(group['queries'])} queries in {time.perf_counter() - started:.1f} s "
                    f"({len(group['items'])} memories stored in {stored:.0f} s)",
                    file=sys.stderr,
                )
            assert lookup.misses == 0, "a text was embedded outside the bulk pass"
        count += len(group["queries"])
    return {c: {key: v / count for key, v in m.items()} | {"queries": count} for c, m in totals.items()}


def show(title: str, results: dict[str, dict[str, float]]) -> None:
    print(f"\n{title}")
    keys = [k for k in next(iter(results.values())) if k != "queries"]
    print(f"  {'fusion':10s} " + " ".join(f"{k:>8s}" for k in keys) + "   queries")
    for config, metrics in results.items():
        print(f"  {config:10s} " + " ".join(f"{metrics[k]:8.3f}" for k in keys) + f"   {int(metrics['queries'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="locomo,scifact,cranfield")
    parser.add_argument("--split", choices=["dev", "test", "all"], default="dev", help="LoCoMo split")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument(
        "--cache", type=Path, default=CACHE, help="directory to keep bulk embeddings in between runs (default: %(default)s)"
    )
    parser.add_argument("--no-cache", dest="cache", action="store_const", const=None, help="embed everything afresh, keep nothing")
    parser.add_argument("--workdir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    evaldata.add_argument(parser)
    args = parser.parse_args()
    datasets = args.datasets.split(",")
    unknown = [d for d in datasets if d not in evaldata.CORPORA]
    if unknown:
        raise SystemExit(f"unknown dataset(s) {', '.join(unknown)}; known: {', '.join(evaldata.CORPORA)}")
    data_dir = evaldata.resolve(args.data, datasets)
    configs = {c: CONFIGS[c] for c in args.configs.split(",")}
    embedder = Embedder()
    embedder.ready()
    print(f"model: {embedder.origin} sha256 {embedder.model_sha256}; defaults: {DEFAULT}", file=sys.stderr)
    report: dict[str, Any] = {}
    for dataset in datasets:
        started = time.perf_counter()
        if dataset == "locomo":
            convs = {"dev": DEV, "test": TEST, "all": DEV + TEST}[args.split]
            results = run("locomo", locomo(data_dir, convs), embedder, configs, recall_metrics, 100, args.workdir, args.cache)
            title = f"LoCoMo {args.split} split ({', '.join(convs)}), categories 1-4"
        elif dataset == "scifact":
            results = run("scifact", scifact(data_dir), embedder, configs, ndcg_at_10, 10, args.workdir, args.cache)
            title = "SciFact test (300 claims, 339 qrels)"
        elif dataset == "cranfield":
            results = run("cranfield", cranfield(data_dir), embedder, configs, ndcg_at_10, 10, args.workdir, args.cache)
            title = "Cranfield (225 queries, graded qrels)"
        else:
            raise SystemExit(f"unknown dataset {dataset!r}")
        show(f"{title}  [{time.perf_counter() - started:.0f} s]", results)
        report[dataset] = results
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
