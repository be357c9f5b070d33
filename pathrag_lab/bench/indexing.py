"""`pathrag bench indexing`: what a full build and an incremental re-index cost, stage by stage.

Three measurements, all through ``run_indexing`` exactly as ``pathrag index`` runs it:

- offline: the generated corpus of ``bench_ingest.generate_corpus`` built from scratch (time per stage,
  offline extraction throughput), then one document edited and the index brought up to date (time, chunks
  re-extracted, rows re-embedded);
- LLM: the same corpus against a local scripted OpenAI-compatible server
  (``pathrag_lab.testing.openai_server``) that answers each extraction prompt with the offline
  extractor's output for the chunk in the prompt, so the graph is realistic. It measures the pipeline's call
  accounting and overhead (calls and tokens per chunk, calls to re-index one changed document) — not an LLM's
  quality or latency. Token figures are the fake server's (whitespace words of the messages), not a real
  tokenizer's;
- musique-100: a public benchmark's passages ingested and its LLM-extracted triples imported.

Stage times come from the stage reports: ingest is the sync's own time, extraction the extraction stage's
time minus its graph merge, merge the merge's time, and embeddings the rest of the ``run_indexing`` call.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from pathrag_pipeline.config import BENCH_DIR
from pathrag_lab.bench.ingest import generate_corpus
from pathrag_pipeline.config import Settings
from pathrag_pipeline.index.llm_extraction import GLEANING_PROMPT
from pathrag_pipeline.index.extraction_models import ChunkExtraction
from pathrag_pipeline.index.offline_extraction import extract_offline
from pathrag_pipeline.index.pipeline import IndexReport, run_indexing
from pathrag_pipeline.storage.store import Store
from pathrag_lab.testing.openai_server import FakeOpenAIServer

MUSIQUE = BENCH_DIR / "musique-100"
LLM_CAVEAT = ("Measured against a local scripted OpenAI-compatible server (127.0.0.1) that answers with the offline "
              "extractor's output: this is the pipeline's call accounting and overhead, not an LLM's quality or "
              "latency. Token counts are the fake server's (whitespace words of the messages).")
STAGES = ("ingest", "extraction", "merge", "embeddings")

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    """Default progress sink: say nothing."""


# ---- running one index --------------------------------------------------------------------------

def _settings(home: Path, docs: Path, **overrides: Any) -> Settings:
    """Settings isolated from the caller's environment: only what the benchmark sets applies."""
    return Settings.from_env(env={}, home=home, docs=docs, **overrides)


def timed_index(settings: Settings, folder: Path, triples: Path | None = None) -> tuple[IndexReport, dict[str, float]]:
    """Run ``run_indexing`` and split its wall time into stages (seconds, rounded to ms)."""
    started = time.perf_counter()
    report = run_indexing(settings, folder=folder, trigger="bench", triples=triples)
    total = time.perf_counter() - started
    graph_stage = report.extraction if report.extraction is not None else report.triples
    merge = graph_stage.merge.seconds if graph_stage is not None and graph_stage.merge is not None else 0.0
    graph_seconds = graph_stage.seconds if graph_stage is not None else 0.0
    stages = {
        "ingest": report.sync.seconds,
        "extraction": graph_seconds - merge,
        "merge": merge,
        "embeddings": total - report.sync.seconds - graph_seconds,
        "total": total,
    }
    return report, {k: round(v, 3) for k, v in stages.items()}


def _embedded(report: IndexReport) -> dict[str, int]:
    return {table: stats.embedded for table, stats in report.embeddings.tables.items()}


def _document_chunks(settings: Settings, folder: Path, path: Path) -> dict[str, str]:
    """chunk id -> text of the document stored from file ``path`` (under the indexed ``folder``)."""
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        rows = con.execute(
            "SELECT c.id, c.text FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.path = ?",
            [path.relative_to(folder).as_posix()],
        ).fetchall()
    return dict(rows)


def _edit(path: Path, round_no: int) -> None:
    """Append one sentence: the document changes, every other file stays byte-identical."""
    path.write_text(path.read_text() + f"\nAn added line, edit {round_no}: Vera Quist moved to Carrick.\n")


def _corpus(base: Path, n_docs: int) -> tuple[Path, Path]:
    """Generate the corpus; returns its folder and the .txt file the benchmark edits."""
    folder = base / "corpus"
    paths = generate_corpus(folder, n_docs)
    victim = next((p for p in paths if p.suffix == ".txt"), paths[0])
    return folder, victim


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def _median_stages(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: _median([r[k] for r in runs]) for k in (*STAGES, "total")}


# ---- offline ------------------------------------------------------------------------------------

def offline_bench(n_docs: int = 1000, repeats: int = 3, edits: int = 3, workdir: Path | None = None,
                  log: Log = _quiet) -> dict[str, Any]:
    """Full offline build (median of ``repeats`` fresh homes) and re-index after one edit (median of ``edits``)."""
    if n_docs < 1 or repeats < 1 or edits < 1:
        raise ValueError(f"n_docs={n_docs}, repeats={repeats}, edits={edits} must all be at least 1")
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-indexing-"))
    folder, victim = _corpus(base, n_docs)
    full_runs: list[dict[str, float]] = []
    report = None
    settings = None
    for r in range(repeats):
        home = base / f"home-offline{r}"
        shutil.rmtree(home, ignore_errors=True)
        settings = _settings(home, folder)
        log(f"offline full build {r + 1}/{repeats} of {n_docs} documents")
        report, stages = timed_index(settings, folder)
        full_runs.append(stages)
    assert report is not None and settings is not None and report.extraction is not None
    full = report
    extraction_s = [r["extraction"] for r in full_runs]

    incremental_runs: list[dict[str, float]] = []
    incremental: list[dict[str, Any]] = []
    for e in range(edits):
        _edit(victim, e)
        log(f"offline re-index after editing {victim.name} ({e + 1}/{edits})")
        inc, stages = timed_index(settings, folder)
        assert inc.extraction is not None
        victim_chunks = _document_chunks(settings, folder, victim)
        incremental_runs.append(stages)
        incremental.append({
            "files_changed": len(inc.sync.plan.changed),
            "chunks_written": inc.sync.chunks_written,
            "chunks_reextracted": inc.extraction.extracted,
            "chunks_from_cache": inc.extraction.cache_hits,
            "chunks_of_edited_document": len(victim_chunks),
            "rows_reembedded": _embedded(inc),
        })
    full_med = _median_stages(full_runs)
    inc_med = _median_stages(incremental_runs)
    chunks = full.extraction.extracted
    return {
        "documents": full.graph["documents"],
        "chunks": full.graph["chunks"],
        "entities": full.graph["entities"],
        "relations": full.graph["relations"],
        "repeats": repeats,
        "edits": edits,
        "full_s": full_med,
        "full_runs": full_runs,
        "offline_extraction_chunks_per_s": round(chunks / statistics.median(extraction_s), 1)
        if statistics.median(extraction_s) > 0 else None,
        "rows_embedded_full": _embedded(full),
        "edited_file": str(victim.relative_to(folder)),
        "incremental_s": inc_med,
        "incremental_runs": incremental_runs,
        "incremental": incremental,
        "ratio_full_to_incremental": round(full_med["total"] / inc_med["total"], 1) if inc_med["total"] else None,
    }


# ---- LLM mode against a local scripted server ---------------------------------------------------

def _prompt_parts(request: dict[str, Any]) -> tuple[str | None, str] | None:
    """(title, chunk text) of the extraction prompt in a chat request, or None if it carries none."""
    for message in request.get("messages") or []:
        content = str(message.get("content") or "")
        if message.get("role") == "user" and "\nText:\n" in content:
            head, text = content.split("\nText:\n", 1)
            title = head.split("Document title:", 1)[1].strip() if "Document title:" in head else None
            return (None if title in (None, "(untitled)") else title), text.rstrip("\n")
    return None


class OfflineBackedModel:
    """Chat responder that plays an extraction LLM by running the offline extractor on the prompt's chunk.

    The first pass answers with the entities of all but the last sentence-worth of output (about 4/5 of the
    entities, with the relations among them); the gleaning pass adds the rest, so gleaning has something to
    find, as with a real model. Description-summary prompts get their first two descriptions joined. Every
    chunk text asked about is recorded so callers can check which chunks were (re-)extracted.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str | None, str], ChunkExtraction] = {}
        self.chunk_texts: list[str] = []
        self.summaries = 0

    def reset(self) -> None:
        with self._lock:
            self.chunk_texts.clear()
            self.summaries = 0

    def _extraction(self, title: str | None, text: str) -> ChunkExtraction:
        key = (title, text)
        with self._lock:
            cached = self._cache.get(key)
        if cached is None:
            cached = extract_offline(text, title)
            with self._lock:
                self._cache[key] = cached
        return cached

    def __call__(self, request: dict[str, Any]) -> str:
        last = str((request.get("messages") or [{}])[-1].get("content") or "")
        if "Description list:" in last:
            with self._lock:
                self.summaries += 1
            items = [line[2:] for line in last.split("Description list:", 1)[1].splitlines() if line.startswith("- ")]
            return " ".join(items[:2]) or "No description."
        parts = _prompt_parts(request)
        if parts is None:
            return json.dumps({"entities": [], "relations": []})
        title, text = parts
        full = self._extraction(title, text)
        keep = max(1, (len(full.entities) * 4) // 5)
        first = {e.name for e in full.entities[:keep]}
        # the gleaning pass, or a re-ask of it after an invalid reply (the validation error is then the last message)
        if any(m.get("content") == GLEANING_PROMPT for m in request.get("messages") or []):
            entities = full.entities[keep:]
            relations = [r for r in full.relations if not (r.source in first and r.target in first)]
        else:
            with self._lock:
                self.chunk_texts.append(text)
            entities = full.entities[:keep]
            relations = [r for r in full.relations if r.source in first and r.target in first]
        return ChunkExtraction(entities=entities, relations=relations).model_dump_json()


def llm_bench(n_docs: int = 1000, gleanings: tuple[int, ...] = (1, 0), workdir: Path | None = None,
              log: Log = _quiet) -> dict[str, Any]:
    """Calls and tokens per chunk for each gleaning setting, then the calls to re-index one edited document."""
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-llm-"))
    folder, victim = _corpus(base, n_docs)
    model = OfflineBackedModel()
    builds: list[dict[str, Any]] = []
    incremental: dict[str, Any] = {}
    with FakeOpenAIServer() as server:
        server.chat_responder = model
        for g_index, gleaning in enumerate(gleanings):
            home = base / f"home-llm-glean{gleaning}"
            shutil.rmtree(home, ignore_errors=True)
            settings = _settings(home, folder, llm_base_url=server.base_url, llm_model="fake-chat",
                                 gleaning=gleaning)
            server.reset()
            model.reset()
            log(f"LLM-mode full build of {n_docs} documents, gleaning={gleaning}")
            report, stages = timed_index(settings, folder)
            x = report.extraction
            assert x is not None
            chunks = x.extracted or 1
            builds.append({
                "gleaning": gleaning,
                "chunks_extracted": x.extracted,
                "failed": x.failed,
                "calls_server_received": server.count("chat"),
                "calls_pipeline_counted": x.calls + x.summary_calls,
                "extraction_calls": x.calls,
                "summary_calls": x.summary_calls,
                "calls_per_chunk": round(x.calls / chunks, 3),
                "prompt_tokens_per_chunk": round(x.prompt_tokens / chunks, 1),
                "completion_tokens_per_chunk": round(x.completion_tokens / chunks, 1),
                "seconds": stages,
                "chunks_per_s": round(x.extracted / stages["extraction"], 1) if stages["extraction"] > 0 else None,
                "entities": report.graph["entities"],
                "relations": report.graph["relations"],
            })
            if g_index == 0:
                _edit(victim, 0)
                server.reset()
                model.reset()
                log(f"LLM-mode re-index after editing {victim.name}")
                inc, inc_stages = timed_index(settings, folder)
                ix = inc.extraction
                assert ix is not None
                victim_texts = set(_document_chunks(settings, folder, victim).values())
                asked = list(model.chunk_texts)
                incremental = {
                    "gleaning": gleaning,
                    "edited_file": str(victim.relative_to(folder)),
                    "chunks_of_edited_document": len(victim_texts),
                    "chunks_reextracted": ix.extracted,
                    "calls_server_received": server.count("chat"),
                    "extraction_calls": ix.calls,
                    "summary_calls": ix.summary_calls,
                    "only_edited_document": bool(asked) and all(t in victim_texts for t in asked),
                    "seconds": inc_stages,
                    "rows_reembedded": _embedded(inc),
                }
    full_calls = builds[0]["calls_server_received"] if builds else 0
    return {
        "caveat": LLM_CAVEAT,
        "documents": n_docs,
        "builds": builds,
        "incremental": incremental,
        "ratio_full_to_incremental_calls": round(full_calls / incremental["calls_server_received"], 1)
        if incremental.get("calls_server_received") else None,
    }


# ---- musique-100 --------------------------------------------------------------------------------

def musique_bench(folder: Path = MUSIQUE, workdir: Path | None = None, log: Log = _quiet) -> dict[str, Any] | None:
    """Ingest the dataset's corpus.jsonl and import its triples.jsonl; None when the dataset is absent."""
    corpus, triples = folder / "corpus.jsonl", folder / "triples.jsonl"
    if not (corpus.is_file() and triples.is_file()):
        return None
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-musique-"))
    docs = base / "musique-docs"
    docs.mkdir(parents=True, exist_ok=True)
    shutil.copy(corpus, docs / "corpus.jsonl")  # only the passages: questions must not be indexed
    settings = _settings(base / "home-musique", docs)
    log("musique-100: ingest corpus.jsonl and import triples.jsonl")
    report, stages = timed_index(settings, docs, triples=triples)
    _, again = timed_index(settings, docs, triples=triples)
    t = report.triples
    assert t is not None
    return {
        "dataset": folder.name,
        "passages": report.graph["documents"],
        "chunks": report.graph["chunks"],
        "triples": t.triples,
        "malformed_lines": t.malformed,
        "matched_documents": t.matched_documents,
        "entities": report.graph["entities"],
        "relations": report.graph["relations"],
        "rows_embedded": _embedded(report),
        "seconds": {("import" if k == "extraction" else k): v for k, v in stages.items()},
        "unchanged_rerun_s": again["total"],
    }
