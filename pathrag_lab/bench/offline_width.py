"""`pathrag bench offline-width`: recall against size for the offline (hashing) embedder's vector width.

The download-free embedder hashes a text's features into ``dim`` buckets; collisions add noise of about
1/sqrt(dim) to cosines, and every vector costs 4 x dim bytes in LanceDB (entities, relations and chunks each get
one). This benchmark embeds the dataset's passages and questions at several widths and measures passage
recall@k of the question's nearest passages (the dense search naive mode and path mode's text hits use), with the
bytes per vector and a paired bootstrap interval of each width's mean recall against the default's, so the
default width is a choice made on the measured trade-off, not a guess.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

Log = Callable[[str], None]
HEADING = "Offline embedder width"
WIDTHS = (128, 256, 512, 1024, 2048, 4096, 8192)
KS = (2, 5, 10)


def _quiet(_: str) -> None:
    """Default progress sink."""


def _load(dataset: Path) -> tuple[list[str], list[str], list[str], list[set[str]]]:
    ids, texts = [], []
    for line in (dataset / "corpus.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            ids.append(row["id"])
            texts.append(f"{row.get('title', '')}\n{row['text']}")
    questions, gold = [], []
    for line in (dataset / "questions.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            questions.append(row["question"])
            gold.append(set(row["gold_ids"]))
    return ids, texts, questions, gold


def passage_recall(asked: np.ndarray, passages: np.ndarray, ids: list[str], gold: list[set[str]]
                   ) -> tuple[dict[int, float], np.ndarray]:
    """Recall@k (k in KS) of each question's nearest passages by cosine against its gold passages, and each
    question's mean recall over the ks (for paired intervals)."""
    order = np.argsort(-(asked @ passages.T), axis=1)
    recall, per_question = {}, np.zeros(len(gold))
    for k in KS:
        hits = [len({ids[j] for j in order[i, :k]} & gold[i]) / len(gold[i]) for i in range(len(gold))]
        recall[k] = round(float(np.mean(hits)), 4)
        per_question += np.asarray(hits) / len(KS)
    return recall, per_question


def run_width_bench(dataset: Path, widths: tuple[int, ...] = WIDTHS, log: Log = _quiet) -> dict[str, Any]:
    from pathrag_pipeline.evaluation.bootstrap import paired_bootstrap
    from pathrag_pipeline.llm.embedding import HashingEmbedder

    ids, texts, questions, gold = _load(dataset)
    rows = []
    for dim in widths:
        log(f"width {dim}")
        embedder = HashingEmbedder(dim)
        started = time.perf_counter()
        passages = embedder.embed(texts)
        asked = embedder.embed(questions)
        seconds = time.perf_counter() - started
        recall, per_question = passage_recall(asked, passages, ids, gold)
        rows.append({"dim": dim, "bytes_per_vector": 4 * dim, "recall": recall, "mean_r": per_question.tolist(),
                     "embed_ms_per_text": round(1000 * seconds / (len(texts) + len(questions)), 3)})
    default = HashingEmbedder().dim
    base = next(r for r in rows if r["dim"] == default)["mean_r"] if default in widths else rows[0]["mean_r"]
    for r in rows:
        # paired bootstrap of mean R (over k) against the default width, question by question
        iv = paired_bootstrap(r["mean_r"], base)
        r["vs_default"] = [round(iv.diff, 4), round(iv.low, 4), round(iv.high, 4)]
        r["mean_r"] = round(float(np.mean(r.pop("mean_r"))), 4)
    return {"dataset": dataset.name, "passages": len(texts), "questions": len(questions), "widths": rows,
            "default": default}


def markdown_section(r: dict[str, Any]) -> str:
    from pathrag_lab.bench.report import machine_info, md_table

    def delta(w: dict) -> str:
        d, lo, hi = w["vs_default"]
        return "" if w["dim"] == r["default"] else f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]"

    rows = [[("**" + str(w["dim"]) + "** (default)") if w["dim"] == r["default"] else w["dim"], w["bytes_per_vector"],
             *[f"{w['recall'][k]:.3f}" for k in KS], f"{w['mean_r']:.3f}", delta(w), w["embed_ms_per_text"]]
            for w in r["widths"]]
    m = machine_info()
    wider = [w for w in r["widths"] if w["dim"] > r["default"]]
    narrower = [w for w in r["widths"] if w["dim"] < r["default"]]
    beats = [w["dim"] for w in wider if w["vs_default"][1] > 0]
    loses = [w["dim"] for w in narrower if w["vs_default"][2] < 0]
    verdict = (f"Against the default {r['default']}: narrower widths that lose recall by the interval: "
               f"{', '.join(map(str, loses)) or 'none'}; wider widths that gain by the interval: "
               f"{', '.join(map(str, beats)) or 'none'} (each doubling doubles the vectors' bytes).")
    return "\n\n".join([
        f"## {HEADING}",
        f"Reproduce: `pathrag bench offline-width`",
        f"The download-free hashing embedder at several widths on {r['dataset']}: its {r['passages']} passages and "
        f"{r['questions']} questions embedded, each question's nearest passages by cosine, passage recall@k against "
        "the gold passages (the dense search of naive mode and of path mode's text hits). Every entity, relation "
        "and chunk stores one vector of 4 bytes per dimension in LanceDB.",
        md_table(["width", "bytes/vector", *[f"R@{k}" for k in KS], "mean R", "Δ mean R vs default [95% CI]",
                  "embed ms/text"], rows),
        verdict,
        f"_Measured {m['date']} on {m['usable_cores']} cores ({m['cpu']}, Python {m['python']})._",
    ])


def to_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1)
