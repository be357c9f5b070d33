"""`pathrag bench quantized`: what all-MiniLM-L6-v2 quantized to int8 costs in recall and gains in speed.

Both models run on onnxruntime through the embedder the pipeline uses (``st-onnx:`` and ``st-onnx-q8:``; the
int8 file is made once from the local export by sentence-transformers' dynamic quantization for AVX2, nothing
downloaded). On the dataset's passages and questions: passage recall@k of each question's nearest passages by
cosine (the dense search of naive mode and of path mode's text hits), the paired bootstrap interval of the
quantized model's mean recall against the full model's, question by question, the cosine between the two
models' vectors of the same passage, and texts/s embedding the passages (batched longest first, as indexing does).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from pathrag_lab.bench.offline_width import KS, _load, passage_recall

Log = Callable[[str], None]
HEADING = "Quantized local embedder"


def _quiet(_: str) -> None:
    """Default progress sink."""


def run_quantized_bench(dataset: Path, cache: Path, log: Log = _quiet) -> dict[str, Any]:
    from pathrag_pipeline.evaluation.bootstrap import paired_bootstrap
    from pathrag_pipeline.llm.embedding import SentenceTransformerEmbedder

    ids, texts, questions, gold = _load(dataset)
    out: dict[str, Any] = {"dataset": dataset.name, "passages": len(texts), "questions": len(questions), "models": {}}
    per_question, vectors = {}, {}
    for label, quantized in (("full", False), ("int8", True)):
        log(f"{label} model")
        embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", backend="onnx", onnx_cache=cache,
                                               quantized=quantized)
        embedder.embed(texts[:8])                                   # load (and export) outside the timing
        started = time.perf_counter()
        passages = embedder.embed(texts)
        rate = len(texts) / (time.perf_counter() - started)
        asked = embedder.embed(questions)
        recall, mean_r = passage_recall(asked, passages, ids, gold)
        per_question[label], vectors[label] = mean_r, passages
        out["models"][label] = {"identity": embedder.identity, "runtime": embedder.runtime, "recall": recall,
                                "mean_r": round(float(mean_r.mean()), 4), "texts_per_s": round(rate, 1)}
    iv = paired_bootstrap(per_question["int8"].tolist(), per_question["full"].tolist())
    cosines = (vectors["int8"] * vectors["full"]).sum(axis=1)
    out["int8_vs_full"] = [round(iv.diff, 4), round(iv.low, 4), round(iv.high, 4)]
    out["cosine_min"] = round(float(cosines.min()), 4)
    out["cosine_median"] = round(float(np.median(cosines)), 4)
    out["speedup"] = round(out["models"]["int8"]["texts_per_s"] / out["models"]["full"]["texts_per_s"], 2)
    return out


def markdown_section(r: dict[str, Any]) -> str:
    from pathrag_lab.bench.report import machine_info, md_table

    d, lo, hi = r["int8_vs_full"]
    verdict = "loses recall" if hi < 0 else "gains recall" if lo > 0 else "ties"
    rows = [[f"{label} (`{m['runtime']}`, identity `{m['identity']}`)", *[f"{m['recall'][k]:.3f}" for k in KS],
             f"{m['mean_r']:.3f}", m["texts_per_s"]] for label, m in r["models"].items()]
    m = machine_info()
    return "\n\n".join([
        f"## {HEADING}",
        "Reproduce: `HF_HUB_OFFLINE=1 pathrag bench quantized`",
        f"all-MiniLM-L6-v2 on onnxruntime, full precision and quantized to int8 (dynamic quantization for AVX2 by "
        f"sentence-transformers, made once from the local export). On {r['dataset']}: its {r['passages']} passages "
        f"and {r['questions']} questions embedded by each model, each question's nearest passages by cosine, passage "
        "recall@k against the gold passages; texts/s embedding the passages, batched longest first as indexing does.",
        md_table(["model", *[f"R@{k}" for k in KS], "mean R", "passages/s"], rows),
        f"- int8 − full, mean R (paired bootstrap over the questions, 95% CI): **{d:+.3f} [{lo:+.3f}, {hi:+.3f}]**, "
        f"{verdict}; speed **{r['speedup']}x**; cosine between the two models' vectors of the same passage: median "
        f"{r['cosine_median']}, lowest {r['cosine_min']} (other vectors: its own embedder identity, so an index "
        "is re-embedded when switching).\n"
        "- Use it with `pip install -e .[local-embeddings-onnx]` and `PATHRAG_EMBED_MODEL=st-onnx-q8:all-MiniLM-L6-v2` "
        "(the int8 file is written into PATHRAG_HOME/models on first use).",
        f"_Measured {m['date']} on {m['usable_cores']} cores ({m['cpu']}, Python {m['python']})._",
    ])


def to_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1)
