"""Querying: question -> keywords -> nodes -> pruned paths -> prompt -> answer, timed and logged.

``PathRAG`` is the Python API (and what ``pathrag ask`` and the Dagster query job call). One query runs
these stages, each timed and, where a model is involved, with its token usage recorded:

1. ``keywords``: low- and high-level keywords, by the LLM (instructor, LightRAG's keyword prompt) or the
   offline extractor;
2. ``graph``: the cached graph snapshot (rebuilt only when the graph version changed);
3. ``retrieval``: nearest entities per keyword, merged round-robin (or a LightRAG mode's context);
4. ``pruning``: flow-based pruning keeps the ``top_k`` most reliable paths between the retrieved nodes;
5. ``sources``: the chunks behind the paths, nodes and edges (ranked, for the answer and for recall@k);
6. ``prompt``: paths in ascending reliability within the token budget;
7. ``answer``: the LLM's answer, or offline an extractive one.

``neuropath`` mode replaces stages 3-4 by NeuroPath's seeds, ``tracking`` and completion (``query/neuropath.py``,
reached from ``_run_neuropath``).

DuckDB is read on short read-only connections before the answer stage and written once afterwards
(``query_log``), so no connection is open while an LLM call is in flight.
"""

from __future__ import annotations

import csv
import contextlib
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from pathrag_pipeline.blas_threads import one_blas_thread
from pathrag_pipeline.query.answering import Answer, Evidence, answer_with_llm, extractive_answer
from pathrag_pipeline.config import Settings
from pathrag_pipeline.llm.embedding import Embedder, embedder_from_settings
from pathrag_pipeline.query.graph_cache import GraphSnapshot, load_graph
from pathrag_pipeline.query.keywords import Keywords, NamedEntities, extract_keywords_offline
from pathrag_pipeline.llm.client import LLMClient, LLMOutputError, Usage, llm_from_settings
from pathrag_pipeline.query.prompting import (
    NEUROPATH_NER_PROMPT,
    PathTrace,
    Prompt,
    neuropath_ner_message,
    neuropath_prompt,
    render_paths,
)
from pathrag_pipeline.query.params import (  # noqa: F401 (re-exported)
    MODES,
    PROMPT_STYLES,
    QueryParams,
    mode_params,
)
from pathrag_pipeline.query.prompt_layouts import ChunkSource, at_budget, ordered_prompt, passages_of
from pathrag_pipeline.query.pruning import ScoredPath, prune_paths
from pathrag_pipeline.query.query_log import log_results
from pathrag_pipeline.query.results import QueryResult
from pathrag_pipeline.query.retrieval import (
    ModeContext,
    RetrievedNode,
    global_context,
    hybrid_context,
    is_semantic,
    local_context,
    naive_context,
    query_keywords,
    rank_passages,
    retrieve_nodes,
    retrieve_relations,
    seeds_stand_out,
    standing_seeds,
    text_chunks,
)
from pathrag_pipeline.query.lexical import KEPT_PASSAGES, chunk_index, entity_index, kept_passages
from pathrag_pipeline.query.ranking import HIPPORAG_DAMPING, PPR_DAMPING, graph_passages, rrf
from pathrag_pipeline.query.path_pooling import RESELECT_POOL, apply_pooling, relation_scores
from pathrag_pipeline.query.recent_vectors import RecentVectors
from pathrag_pipeline.storage.store import Store, close_kept_reads
from pathrag_pipeline.storage.vector_location import VectorLocation
from pathrag_pipeline.storage.vector_store import VectorStore

# Passages ranked per query: enough for recall@k at any k an evaluation reports, bounded so a hub entity
# with thousands of source chunks does not turn one query into a bulk read.
log = logging.getLogger("pathrag_pipeline.query")
MAX_RANKED_CHUNKS = 100
# Path mode's offline answer quotes sentences of this many best-ranked passages first (``PathRAG._evidence``);
# 3 and 5 both beat quoting the paths' sources on the sample questions and on musique-100, 5 slightly more.
ANSWER_PASSAGES = 5
OFFLINE = "offline"
KEYWORD_MEMO = 4096   # questions whose LLM keywords one PathRAG instance remembers (oldest forgotten first)

KEYWORD_PROMPT = """You identify the keywords of a user's question for searching a knowledge graph.

- high_level: overarching concepts or themes the question is about (e.g. "international trade", "economic impact").
- low_level: specific entities, names, places, dates, objects or concrete terms in the question (e.g. "Trade agreements", "Tariffs").

Copy names exactly as written in the question. Return only keywords that help find the answer; use short phrases,
not sentences.

Example question: "How does international trade influence global economic stability?"
high_level: ["International trade", "Global economic stability", "Economic impact"]
low_level: ["Trade agreements", "Tariffs", "Currency exchange", "Imports", "Exports"]"""


class _Clock:
    """Per-stage wall time in milliseconds."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = round(self.ms.get(name, 0.0) + (time.perf_counter() - started) * 1000.0, 3)


def _usage(usage: Usage, memo: bool = False) -> dict[str, int]:
    """A stage's LLM use. A memo hit (keywords already asked through this instance) spent nothing: its calls and
    tokens are 0, and ``memo_calls``/``memo_tokens`` say what the first ask cost (a mode's standalone cost)."""
    if memo:
        return {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "memo_calls": usage.calls,
                "memo_tokens": usage.prompt_tokens + usage.completion_tokens}
    return {"calls": usage.calls, "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}


def fetch_chunks(store: Store, chunk_ids: Sequence[str]) -> dict[str, ChunkSource]:
    """Text, document and title of the given chunks (ids no longer in ``chunks`` are absent).

    Inside a read block that loaded the chunk BM25 index with its passages (``lexical.kept_passages``, up to
    ``KEPT_PASSAGES`` of them), from memory; else from the file, remembering what was read in the block's memo
    (``Store.read_memo``: valid while the DuckDB file is unchanged, across the queries sharing the kept
    connection) so a passage read once is not read again, and emptying it when it would hold more than
    ``KEPT_PASSAGES``."""
    if not chunk_ids:
        return {}
    kept = kept_passages(store)
    if kept is not None:
        out = {}
        for c in dict.fromkeys(chunk_ids):
            if c in kept:
                document_id, title, text = kept[c]
                out[c] = ChunkSource(c, document_id, document_id if title is None else title, text)
        return out
    memo = store.read_memo()
    known: dict[str, ChunkSource | None] = {} if memo is None else memo.setdefault("chunk_sources", {})
    wanted = [c for c in dict.fromkeys(chunk_ids) if c not in known]
    fetched: dict[str, ChunkSource] = {}
    if wanted:
        with store.connect(read_only=True) as con:
            rows = con.execute(
                """SELECT c.id, c.document_id, coalesce(d.title, c.document_id), c.text
                   FROM chunks c LEFT JOIN documents d ON d.id = c.document_id
                   WHERE c.id IN (SELECT unnest(?::VARCHAR[]))""",
                [wanted],
            ).fetchall()
        fetched = {r[0]: ChunkSource(*r) for r in rows}
    found = {c: fetched[c] if c in fetched else known.get(c) for c in chunk_ids}
    if memo is not None and wanted:
        if len(known) + len(wanted) > KEPT_PASSAGES:
            known.clear()
        known.update({c: fetched.get(c) for c in wanted})   # None: no such chunk (remembered as such)
    return {c: source for c, source in found.items() if source is not None}


class PathRAG:
    """Query an index built by the pipeline: ``PathRAG().query("Who founded X?")``.

    Settings come from the environment unless given. With no LLM configured every stage runs offline
    (rule-based keywords, the configured embedder, extractive answers). Each query is appended to the
    query log tables unless ``record=False``.

    Queries asked back to back share one open DuckDB file: it stays open for ``store.KEEP_READING_S`` after a
    query (a write of this process closes it first; another process's writer waits that long at most).
    ``close()`` (or ``with PathRAG() as rag:``) frees the file at once.
    """

    def __init__(self, settings: Settings | None = None, *, embedder: Embedder | None = None,
                 llm: LLMClient | None = None, record: bool = True, asked_from: str = "python") -> None:
        self.settings = settings or Settings.from_env()
        self.store = Store.for_settings(self.settings)
        # the question's text is embedded by several stages of a query: once (query/recent_vectors.py)
        self.embedder = RecentVectors(embedder or embedder_from_settings(self.settings))
        self.llm = llm if llm is not None else llm_from_settings(self.settings)
        self.record = record
        self.asked_from = asked_from   # queries.asked_from of what this engine logs: the command or job asking
        self._vectors: VectorStore | None = None
        self._relation_rows: tuple[object, dict[str, int]] | None = None
        self._keyword_memo: dict[str | tuple[str, str], tuple[Keywords, Usage]] = {}
        self._ahead = None   # the thread pool of ``_embed_ahead``, made on first use

    @property
    def vectors(self) -> VectorStore:
        if self._vectors is None:
            location = VectorLocation.for_settings(self.settings)
            if not location.exists():
                raise FileNotFoundError(
                    f"no vector store at {location}: run `pathrag index PATH` or "
                    "`pathrag quickstart` first"
                )
            self._vectors = VectorStore(location)
        return self._vectors

    # ---- public API ------------------------------------------------------------------------------
    def close(self) -> None:
        """Free the DuckDB file at once (the read connection kept after the last query) and the embedding thread.
        The engine stays usable: the next query opens the file again."""
        close_kept_reads(self.store.path)
        if self._ahead is not None:
            self._ahead.shutdown(wait=False)
            self._ahead = None

    def __enter__(self) -> "PathRAG":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, question: str, mode: str = "path", **settings: Any) -> QueryResult:
        """Answer one question. ``mode`` is ``path`` (PathRAG), ``neuropath`` (NeuroPath path tracking,
        ``query/neuropath.py``) or a LightRAG baseline (naive, local, global, hybrid). ``settings`` are
        ``QueryParams`` fields by name (``top_n=20, prompt="paths", seed_pass=True``; each declared once in
        ``query/params.py``, listed in docs/configuration.md); the rest keep their defaults."""
        params = QueryParams(**settings)
        return self.query_many([question], mode, params=params)[0]

    def query_many(self, questions: Sequence[str], mode: str = "path", *, params: QueryParams | None = None,
                   budgets: Sequence[int] = (), **kwargs: Any) -> list[QueryResult]:
        """Answer several questions with the same settings; the log is written once for the batch (and for
        the questions already answered if one fails, before the error propagates).

        ``budgets`` (evaluation): also render each query's answer prompt at these token budgets, from the same
        retrieval, into ``QueryResult.prompts`` (what the LLM would read at each budget; nothing is sent)."""
        if params is None:
            params = QueryParams(**kwargs)
        elif kwargs:
            raise TypeError("give either params=QueryParams(...) or keyword parameters, not both")
        params = params.resolved()
        if mode not in MODES:
            raise ValueError(f"mode={mode!r} is not one of {', '.join(MODES)}")
        questions = list(questions)
        for i, q in enumerate(questions):
            if not isinstance(q, str) or not q.strip():
                raise ValueError(f"question {i} is empty or not text ({q!r}); give a non-empty question")
        results: list[QueryResult] = []
        try:
            with one_blas_thread():   # a query's products are small: no BLAS threads to wake (blas_threads.py)
                for q in questions:
                    results.append(self._run(q, mode, params, tuple(budgets)))
        finally:
            if self.record:
                log_results(self.store, results)   # into the spool while the file is kept for the next query
        return results

    @contextmanager
    def shared_reads(self) -> Iterator[None]:
        """Queries inside this block share one read-only DuckDB connection and one opening of each vector table
        (``Store.reading``, ``VectorStore.pinned``): the query service answers a batch of queued offline asks in
        one block, where each alone spends about half its CPU opening the DuckDB file and the LanceDB tables.
        The block holds the DuckDB file's read lock, so an index run waits for its end: keep it to a few queries
        and never hold it across an LLM call (``_run`` closes its reads before the answer for that reason; inside
        this block they stay open). A home without an index yields without sharing, so each query reports that
        in its own words. Only for an engine made with ``record=False`` (its caller logs the results): logging
        writes the DuckDB file, which this block holds open for reading."""
        if self.record:
            raise ValueError("shared_reads() needs PathRAG(..., record=False): a query that logs its own rows "
                             "writes the database this block holds open for reading")
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(self.store.reading())
                stack.enter_context(self.vectors.pinned())
            except FileNotFoundError:
                pass
            yield

    # ---- stages ----------------------------------------------------------------------------------
    def _keywords(self, question: str, source: str = "llm") -> tuple[Keywords, Usage, bool]:
        """The question's keywords, what the LLM spent on them, and whether they came from this instance's
        memo. LightRAG caches its keyword call's response; the memo does the same for the LLM's keywords of a
        question already asked through this instance (evaluation asks every question in several modes). A memo
        hit reports the usage of the call that produced it, so every mode counts what it would spend alone."""
        if self.llm is None or source == "offline":
            return extract_keywords_offline(question), Usage(), False
        return self._llm_keywords(
            question, question, "LLM keywords",
            [{"role": "system", "content": KEYWORD_PROMPT}, {"role": "user", "content": f"Question: {question}"}],
            Keywords, lambda k: k if k.low_level or k.high_level else None)

    def _key_entities(self, question: str, source: str = "llm") -> tuple[Keywords, Usage, bool]:
        """NeuroPath's key entities (``np_variant="paper"``): with an LLM, the paper's NER prompt (Figure 13),
        its ``named_entities`` as the low-level keywords; without one (or ``keywords="offline"``), the offline
        keyword rules' low-level keywords stand in (a heuristic, like the offline tracker). Memoised per question
        as the keywords are."""
        if self.llm is None or source == "offline":
            return extract_keywords_offline(question), Usage(), False

        def entities(answer: NamedEntities) -> Keywords | None:
            names = [e.strip() for e in answer.named_entities if e and e.strip()]
            return Keywords(low_level=names, high_level=[]) if names else None

        return self._llm_keywords(
            question, ("ner", question), "NeuroPath key entities",
            [{"role": "system", "content": NEUROPATH_NER_PROMPT},
             {"role": "user", "content": neuropath_ner_message(question)}], NamedEntities, entities)

    def _llm_keywords(self, question: str, memo_key: str | tuple[str, str], what: str, messages: list[dict],
                      model: type, to_keywords: Any) -> tuple[Keywords, Usage, bool]:
        """One memoised keyword-stage LLM call: ``to_keywords(answer)``, or the offline rules when it gives None."""
        memo = self._keyword_memo.get(memo_key)
        if memo is not None:
            return memo[0], memo[1], True
        assert self.llm is not None
        try:
            result = self.llm.structured(messages, model, stage="keywords")
        except LLMOutputError as exc:
            # Our departure from LightRAG (which answers "fail" when its keyword JSON does not parse): a small model's
            # keyword answer cut at the cap or invalid costs the query its LLM keywords, not its answer. The offline
            # rules stand in, and the warning says so (issue 27: a tools-mode keyword call ran to its 1024-token cap).
            log.warning("%s failed (%s); the offline keyword rules are used for this question", what,
                        " ".join(str(exc).split())[:300])
            return extract_keywords_offline(question), exc.usage, False
        keywords = to_keywords(result.value) or extract_keywords_offline(question)
        if len(self._keyword_memo) >= KEYWORD_MEMO:
            self._keyword_memo.pop(next(iter(self._keyword_memo)))
        self._keyword_memo[memo_key] = (keywords, result.usage)
        return keywords, result.usage, False

    def _embed_ahead(self, text: str, params: QueryParams, mode: str):
        """The question's vector, asked for in a thread while the LLM finds its keywords (the retrieval needs
        both; ``RecentVectors`` keeps it for the retrieval): with an embedding endpoint or model, its time is
        hidden behind the keyword call's. None when no keyword call goes to an LLM (nothing to hide behind)."""
        if self.llm is None or params.keywords_for(mode) == "offline" or text in self._keyword_memo:
            return None
        if self._ahead is None:
            from concurrent.futures import ThreadPoolExecutor

            self._ahead = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pathrag-embed-ahead")
        return self._ahead.submit(self.embedder.embed, [text])

    def _check_vectors(self, table: str) -> None:
        meta = self.vectors.meta(table)
        if meta is None or meta.rows == 0:
            from pathrag_pipeline.index.embedding_stage import unembedded_rows

            with self.store.connect(read_only=True) as con:
                left = unembedded_rows(con).get(table)
            if left:
                raise FileNotFoundError(
                    f"the vector table {table!r} in {self.settings.lancedb_location} is empty: the last index run "
                    f"left its {left} row(s) without vectors (an embedding batch failed); run `pathrag index` to "
                    "embed them")
            raise FileNotFoundError(
                f"the vector table {table!r} in {self.settings.lancedb_location} is empty: index documents "
                "(`pathrag index PATH`) so entities, relations and chunks are embedded"
            )
        if meta.embedder != self.embedder.identity:
            raise ValueError(
                f"vector table {table!r} was built with {meta.embedder} but the configured embedder is "
                f"{self.embedder.identity}; set PATHRAG_EMBED_MODEL / PATHRAG_EMBED_BASE_URL back, or re-embed"
            )

    def _run(self, question: str, mode: str, params: QueryParams, budgets: tuple[int, ...] = ()) -> QueryResult:
        clock = _Clock()
        started = time.perf_counter()
        asked_at = datetime.now(timezone.utc).replace(tzinfo=None)
        tokens: dict[str, dict[str, int]] = {}
        text = question.strip()

        if mode == "neuropath":
            return self._run_neuropath(question, params, clock, started, asked_at, budgets)
        keywords = Keywords(low_level=[], high_level=[])
        if mode != "naive":
            ahead = self._embed_ahead(text, params, mode)
            with clock.stage("keywords"):
                keywords, usage, memo = self._keywords(text, params.keywords_for(mode))
            tokens["keywords"] = _usage(usage, memo)
            if ahead is not None:
                with contextlib.suppress(Exception):   # a failed embedding fails again, and says so, where it is used
                    ahead.result()

        # graph, retrieval, pruning and sources read DuckDB three times: one open connection serves them all
        # (opening the file is most of each read's cost). Its block ends before the answer: the connection is kept
        # for the next query only KEEP_READING_S more (store.py), so a slow model's answer never holds the file
        reads = contextlib.ExitStack()
        try:
            reads.enter_context(self.store.reading())
            return self._retrieve_and_answer(question, text, mode, params, budgets, keywords, clock, tokens,
                                             started, asked_at, reads)
        finally:
            reads.close()

    def _retrieve_and_answer(self, question: str, text: str, mode: str, params: QueryParams,
                             budgets: tuple[int, ...], keywords: Keywords, clock: _Clock,
                             tokens: dict[str, dict[str, int]], started: float, asked_at: datetime,
                             reads: contextlib.ExitStack) -> QueryResult:
        kw_all = query_keywords(keywords.low_level, keywords.high_level, text)
        snapshot: GraphSnapshot | None = None
        if mode != "naive":
            with clock.stage("graph"):
                snapshot = load_graph(self.store)

        traces: list[PathTrace] = []
        scored = []
        with clock.stage("retrieval"):   # (opening LanceDB, and importing it in a new process, counts here)
            with contextlib.suppress(FileNotFoundError):   # no vector store: the retrieval says so in its words
                # each vector table opened once for the query, not at each search (6 openings, ~14 ms a query), and
                # kept with the read connection for the next query (``VectorStore.pinned``)
                reads.enter_context(self.vectors.pinned(keep_in=self.store.read_memo()))
            ctx, retrieved, path_ends = self._retrieve(text, mode, params, keywords, snapshot)

        if mode == "path":
            assert snapshot is not None
            with clock.stage("pruning"):
                scored, traces = self._paths(text, params, snapshot, retrieved, path_ends)

        with clock.stage("sources"):
            if mode == "path":
                assert snapshot is not None
                ranked = self._path_passages(text, params, snapshot, retrieved, scored, traces)
            else:
                ranked = list(dict.fromkeys(ctx.chunk_ids))[:MAX_RANKED_CHUNKS]
            sources = fetch_chunks(self.store, ranked)
            chunk_ids = [c for c in ranked if c in sources]
            document_ids = list(dict.fromkeys(sources[c].document_id for c in chunk_ids))
        reads.close()

        with clock.stage("prompt"):
            # passage_order="question": the question's cosine to every ranked passage, once for all the budgets
            cosines = (self._question_cosines(text, chunk_ids)
                       if mode == "path" and params.passage_order == "question" else None)
            prompt = ordered_prompt(text, mode, params, snapshot, scored, traces, retrieved, ctx, sources,
                                          chunk_ids, cosines)
            prompts = {b: at_budget(ordered_prompt(text, mode, dataclasses.replace(params, token_budget=b),
                                                          snapshot, scored, traces, retrieved, ctx, sources, chunk_ids,
                                                          cosines),
                                     b, sources)
                       for b in budgets}
        tokens["prompt"] = {"prompt_tokens": prompt.tokens, "dropped_items": prompt.dropped}

        with clock.stage("answer"):
            answer = self._answer(text, mode, params, keywords, kw_all, prompt, snapshot, traces, retrieved,
                                  sources, chunk_ids)
        tokens["answer"] = _usage(answer.usage)
        result = self._result(question, mode, params, asked_at, answer, keywords, traces, retrieved, chunk_ids,
                              document_ids, clock, tokens, started, prompt, snapshot)
        result.prompts = prompts
        return result

    def _retrieve(self, text: str, mode: str, params: QueryParams, keywords: Keywords,
                  snapshot: GraphSnapshot | None) -> tuple[ModeContext, list[RetrievedNode], list[RetrievedNode]]:
        """What a mode retrieves before any pruning: its context (the LightRAG modes'), the seed entities and, with
        ``path_seeds="standing"``, the seeds the paths run between."""
        retrieved: list[RetrievedNode] = []
        path_ends: list[RetrievedNode] = []
        ctx = ModeContext()
        if mode == "naive":
            how = params.chunk_search_for(mode)
            if how != "bm25":
                self._check_vectors("chunks")
            lexical = chunk_index(self.store) if how != "vector" else None
            ctx = naive_context(self.vectors if how != "bm25" else None, self.embedder, text,
                                params.top_n, how=how, lexical=lexical)
        else:
            assert snapshot is not None
            if mode in ("path", "local", "hybrid"):
                self._check_vectors("entities")
                # Nodes come from the low-level (entity) keywords, as in PathRAG; path mode adds the whole
                # question as one more query, so a question naming no entity still finds its nodes.
                ask_question = mode == "path" and "question_seed" not in params.revert
                low_level = keywords.low_level
                if mode == "path" and params.seed_query == "joined" and low_level:
                    low_level = [", ".join(low_level)]    # SEED_QUERIES (query/params.py)
                low = query_keywords(low_level, [text] if ask_question else [], text)
                # the question's text rides along (one embedding request, not two): the sources stage embeds it
                # next, and RecentVectors hands it over (already there when it was embedded during the keyword call)
                low_vectors = np.asarray(self.embedder.embed([*low, text] if mode == "path" else low))[:len(low)]
                retrieved = retrieve_nodes(snapshot, self.vectors, self.embedder, low, params.top_n,
                                           lexical=entity_index(snapshot) if params.seed_search == "hybrid" else None,
                                           exact_name="exact_name" not in params.revert,
                                           keyword_vectors=low_vectors)
                if (mode == "path" and "seed_gate" not in params.revert
                        and not seeds_stand_out(self.vectors, low_vectors, low, retrieved)):
                    retrieved = []   # nothing the question names is in the graph: no paths (issue 25)
                if mode == "path" and params.path_seeds == "standing":
                    path_ends = standing_seeds(self.vectors, low_vectors, low, retrieved)
            if mode in ("global", "hybrid"):
                self._check_vectors("relations")
                high = query_keywords([], keywords.high_level, text)
                rels = retrieve_relations(snapshot, self.vectors, self.embedder, high, params.top_n)
                global_ctx = global_context(snapshot, rels)
            if mode == "local":
                ctx = local_context(snapshot, retrieved)
            elif mode == "global":
                ctx = global_ctx
                retrieved = ctx.nodes
            elif mode == "hybrid":
                ctx = hybrid_context(local_context(snapshot, retrieved), global_ctx)
                retrieved = ctx.nodes
        return ctx, retrieved, path_ends

    def _paths(self, text: str, params: QueryParams, snapshot: GraphSnapshot, retrieved: list[RetrievedNode],
               path_ends: list[RetrievedNode]) -> tuple[list[ScoredPath], list[PathTrace]]:
        """PathRAG's flow-based pruning between the seeds (query/pruning.py), then Path Pooling when asked."""
        pool = RESELECT_POOL if params.path_pooling == "reselect" else 1
        ends = retrieved if params.path_seeds == "all" else path_ends   # PATH_SEEDS (query/params.py)
        scored = prune_paths(snapshot.view, [n.node for n in ends], alpha=params.alpha,
                             theta=params.theta, max_hops=params.max_hops, top_k=params.top_k * pool,
                             variant=params.variant, ordering=params.ordering, seed_pass=params.seed_pass)
        if params.path_pooling != "off":
            scored = self._pool_paths(text, params, snapshot, retrieved, scored)
        return scored, render_paths(snapshot, scored)

    def _answer(self, text: str, mode: str, params: QueryParams, keywords: Keywords, kw_all: list[str],
                prompt: Prompt, snapshot: GraphSnapshot | None, traces: list[PathTrace],
                retrieved: list[RetrievedNode], sources: dict, chunk_ids: list[str]) -> Answer:
        """The LLM's answer to the prompt, or offline the extractive one from the mode's evidence."""
        if not params.answer:
            return Answer("", "none", Usage())
        if self.llm is not None:
            return answer_with_llm(self.llm, prompt, params.response, text)
        texts = {c: s.text for c, s in sources.items()}
        documents = {c: (s.document_id, s.title) for c, s in sources.items()}
        path_names = tuple(dict.fromkeys(n for t in traces for n in t.nodes)) if mode == "path" else ()
        for evidence in self._evidence(mode, snapshot, traces, retrieved, chunk_ids):
            answer = extractive_answer(text, kw_all, evidence, texts, names=keywords.low_level,
                                       documents=documents, path_names=path_names)
            if answer.found:
                break
        return answer

    def _run_neuropath(self, question: str, params: QueryParams, clock: _Clock, started: float,
                       asked_at: datetime, budgets: tuple[int, ...] = ()) -> QueryResult:
        """NeuroPath (``query/neuropath.py``): key entities, path tracking, post-retrieval completion, answer.
        A tracker whose output stays invalid fails this query (``error`` set, no answer), not the batch."""
        from pathrag_pipeline.query import neuropath

        text = question.strip()
        tokens: dict[str, dict[str, int]] = {}
        paper = params.np_variant == "paper"
        with clock.stage("keywords"):
            if paper:   # the paper's key entities: its NER prompt (Figure 13) with an LLM
                keywords, usage, memo = self._key_entities(text, params.keywords_for("neuropath"))
            else:       # ours: LightRAG's low-level keywords
                keywords, usage, memo = self._keywords(text, params.keywords_for("neuropath"))
        tokens["keywords"] = _usage(usage, memo)
        with clock.stage("graph"):
            snapshot = load_graph(self.store)
        with clock.stage("retrieval"):
            self._check_vectors("relations")
            names = neuropath.name_vectors(snapshot, self.embedder, self.settings.home / "cache")
            rel_keys, rel_matrix = self.vectors.matrix("relations")
            relations = neuropath.relation_vectors(snapshot, rel_keys, rel_matrix, self.embedder.identity)
            lexical = chunk_index(self.store)
            # the paper's completion is a dense retrieval (its reference code: the query + thought against the
            # passage embeddings), with whatever embedder is configured (offline: the hashing one, a lexical
            # cosine); ours: path mode's text search (BM25, fused with the embedder when it is semantic)
            how = "vector" if paper and params.chunk_search == "auto" else params.chunk_search_for("path")
            semantic = how == "vector" or (how != "bm25" and is_semantic(self.embedder))
            if semantic:
                self._check_vectors("chunks")
            search = neuropath.completion_search(self.vectors if semantic else None, self.embedder, lexical, how)
        with clock.stage("tracking"):
            if paper:
                track = neuropath.track
            else:   # our earlier variant, kept for comparison: imported only when asked for
                from pathrag_pipeline.query.neuropath_ours import track
            run = track(text, params, snapshot=snapshot, embedder=self.embedder, names=names, relations=relations,
                        key_entities=query_keywords(keywords.low_level, [], text),
                        llm=self.llm if params.np_tracker == "auto" else None, lexical=lexical, text_search=search,
                        tokens_spent=usage.total_tokens)
        tokens["tracking"] = _usage(run.usage)
        tokens["completion"] = _usage(Usage())
        with clock.stage("sources"):
            ranked = [] if run.error else run.chunk_ids[:MAX_RANKED_CHUNKS]
            sources = fetch_chunks(self.store, ranked)
            chunk_ids = [c for c in ranked if c in sources]
            document_ids = list(dict.fromkeys(sources[c].document_id for c in chunk_ids))
        with clock.stage("prompt"):
            passages = passages_of(chunk_ids, sources)
            prompt = neuropath_prompt(text, run.reasoning_chain, run.traces, passages, token_budget=params.token_budget)
            prompts = {b: at_budget(neuropath_prompt(text, run.reasoning_chain, run.traces, passages, token_budget=b),
                                     b, sources) for b in budgets}
        tokens["prompt"] = {"prompt_tokens": prompt.tokens, "dropped_items": prompt.dropped}
        with clock.stage("answer"):
            if run.error:
                answer = Answer("", "failed", Usage())
            elif not params.answer:
                answer = Answer("", "none", Usage())
            elif self.llm is not None:
                answer = answer_with_llm(self.llm, prompt, params.response, text)
            else:
                evidence = [Evidence(t.nodes, t.chunk_ids, path=True) for t in run.traces] + [Evidence((), (c,)) for c in chunk_ids]
                answer = extractive_answer(text, query_keywords(keywords.low_level, keywords.high_level, text),
                                           evidence, {c: s.text for c, s in sources.items()}, names=keywords.low_level,
                                           documents={c: (s.document_id, s.title) for c, s in sources.items()})
        tokens["answer"] = _usage(answer.usage)
        result = self._result(question, "neuropath", params, asked_at, answer, keywords, run.traces, run.seeds,
                              chunk_ids, document_ids, clock, tokens, started, prompt, snapshot)
        result.params["tracker"] = run.tracker
        result.tracking, result.error = run.record(), run.error
        result.prompts = prompts
        return result

    def _path_passages(self, text: str, params: QueryParams, snapshot: GraphSnapshot,
                       retrieved: list[RetrievedNode], scored: list, traces: list[PathTrace]) -> list[str]:
        """Passages of a path-mode query, best first, by ``params.passages`` (see ``query/ranking.py``)."""
        if params.passages == "legacy":
            return rank_passages([(n.rank, snapshot.entity_chunks[n.node]) for n in retrieved],
                                 [(t.rank, t.reliability, t.chunk_ids) for t in traces], MAX_RANKED_CHUNKS)
        if params.passages == "path_order":
            chunks = [c for t in traces for c in t.chunk_ids] + [c for n in retrieved for c in snapshot.entity_chunks[n.node]]
            return list(dict.fromkeys(chunks))[:MAX_RANKED_CHUNKS]
        seeds = [(n.rank, n.node, n.similarity) for n in retrieved]
        paths = [] if params.passages in ("seeds", "no_paths") else [
            (p.source, p.target, p.score, p.nodes,
             [c for e in p.edges for c in snapshot.relation_chunks[snapshot.edge_rows[e]]])
            for p in scored]
        text_hits: list[tuple[str, float]] = []
        text_ranking: list[str] = []
        if params.passages in ("fused", "no_paths", "unweighted", "text_fused"):
            rankings = []
            how = params.chunk_search_for("path")
            if how != "vector":
                rankings.append([c for c, _ in chunk_index(self.store).search(text, params.top_n)])
            if how == "vector" or (how == "hybrid" and is_semantic(self.embedder)):
                rankings.append([c for c, _ in text_chunks(self.vectors, self.embedder, None, text,
                                                           params.top_n, "vector")])
            # as many text hits as seed entities (top_n): each source restarts the walk at its N best items,
            # each weighted by its cosine to the question (query/ranking.py), like the seeds to their keywords
            text_ranking = rrf(rankings)
            hits = text_ranking[:params.top_n]
            self._check_vectors("chunks")
            sims = self.vectors.similarities("chunks", self.embedder.embed([text])[0], hits)
            text_hits = [(c, sims.get(c, 0.0)) for c in hits]
        walked = graph_passages(snapshot, seeds, paths, MAX_RANKED_CHUNKS, text=text_hits,
                                weighted=params.passages != "unweighted" and "similarity" not in params.revert,
                                min_ends="both_ends" in params.revert,
                                damping=HIPPORAG_DAMPING if "damping" in params.revert else PPR_DAMPING)
        if params.passages == "text_fused":
            # the walk's ranking and the question's own text ranking as two equal votes (RRF, k=60): the walk
            # spreads its mass over every passage of the seeds' entities and can push the passage that matches the
            # question best down the list; the fusion gives that passage back its place near the head
            return rrf([walked, text_ranking], limit=MAX_RANKED_CHUNKS)
        return walked

    def _pool_paths(self, text: str, params: QueryParams, snapshot: GraphSnapshot, retrieved: list[RetrievedNode],
                    scored: list) -> list:
        """Path Pooling of the pruned paths (``params.path_pooling``), scored against the relation vectors."""
        def relations(path) -> list[tuple[int, int, str]]:
            return [(path.nodes[i], path.nodes[i + 1], snapshot.relation_keys[snapshot.edge_rows[e]])
                    for i, e in enumerate(path.edges)]

        keys = [key for p in scored for _, _, key in relations(p)]
        self._check_vectors("relations")
        all_keys, matrix = self.vectors.matrix("relations")
        if self._relation_rows is None or self._relation_rows[0] is not matrix:
            self._relation_rows = (matrix, {k: i for i, k in enumerate(all_keys)})
        scores = relation_scores(self.embedder.embed([text])[0], keys, self._relation_rows[1], matrix)
        # the query entities: each keyword's best entity (the entities the question names)
        best: dict[str, int] = {}
        for n in sorted(retrieved, key=lambda n: n.rank):
            best.setdefault(n.keyword, n.node)
        query_nodes = list(best.values())
        return apply_pooling(scored, params.path_pooling, params.top_k, relations, query_nodes, scores,
                             params.pool_variant)

    def _question_cosines(self, text: str, chunk_ids: Sequence[str]) -> dict[str, float]:
        """The question's cosine to each of these passages (those with a stored vector)."""
        self._check_vectors("chunks")
        return self.vectors.similarities("chunks", self.embedder.embed([text])[0], chunk_ids)

    @staticmethod
    def _evidence(mode: str, snapshot: GraphSnapshot | None, traces: list[PathTrace],
                  retrieved: list[RetrievedNode], chunk_ids: list[str]) -> list[list[Evidence]]:
        """What the offline answer quotes from, in order of preference: the first list that yields a sentence
        sharing a word with the question is used. Path mode quotes its ``ANSWER_PASSAGES`` best-ranked passages
        first: their ranking fuses the paths' provenance with the question's BM25 hits (``_path_passages``), and
        quoting them answered more questions, on the sample questions and on musique-100, than quoting the
        paths' own sources in reliability order did (issue 25; `pathrag bench sample-answers` reports the
        current counts); the paths' sources come next."""
        if mode == "naive" or snapshot is None:
            return [[Evidence((), (c,)) for c in chunk_ids]]
        units = [Evidence(t.nodes, t.chunk_ids, path=True) for t in traces]
        units += [Evidence((n.entity_name,), snapshot.entity_chunks[n.node]) for n in retrieved]
        if mode == "path":
            return [[Evidence((), (c,)) for c in chunk_ids[:ANSWER_PASSAGES]], units]
        return [units]

    def _result(self, question: str, mode: str, params: QueryParams, asked_at: datetime, answer: Answer,
                keywords: Keywords, traces: list[PathTrace], retrieved: list[RetrievedNode], chunk_ids: list[str],
                document_ids: list[str], clock: _Clock, tokens: dict[str, dict[str, int]], started: float,
                prompt: Prompt, snapshot: GraphSnapshot | None) -> QueryResult:
        record = mode_params(mode, params)
        record["embedder"] = self.embedder.identity
        record["graph_version"] = snapshot.version if snapshot is not None else None
        provider, model = (OFFLINE, OFFLINE) if self.llm is None else (self.llm.identity["provider"], self.llm.model)
        return QueryResult(
            query_id=uuid.uuid4().hex,
            question=question,
            mode=mode,
            asked_at=asked_at,
            answer=answer.text,
            answer_kind=answer.kind,
            provider=provider,
            model=model,
            params=record,
            keywords={"low_level": list(keywords.low_level), "high_level": list(keywords.high_level)},
            paths=traces,
            retrieved=retrieved,
            chunk_ids=chunk_ids,
            document_ids=document_ids,
            timings_ms=dict(clock.ms),
            tokens=tokens,
            total_ms=round((time.perf_counter() - started) * 1000.0, 3),
            prompt=prompt.text,
            raw_answer=answer.raw,
            citations=[c.to_dict() for c in answer.citations],
            asked_from=self.asked_from,
        )


def run_questions(settings: Settings, questions: list[str], mode: str = "path",
                  params: dict[str, Any] | None = None, asked_from: str = "python") -> list[QueryResult]:
    """Answer and log a batch of questions (the Dagster query job's entry point: ``asked_from`` names its run)."""
    return PathRAG(settings, asked_from=asked_from).query_many(questions, mode, **(params or {}))


def load_questions(path: str | Path) -> list[str]:
    """Questions from a file: JSONL (``{"question": ...}`` or ``{"id", "question"}`` per line, or a JSON
    string per line), a JSON list, CSV with a ``question`` column, or plain text with one question per
    line (blank lines and lines starting with ``#`` skipped)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"question file {path} does not exist")
    suffix = path.suffix.lower()
    text = path.read_text(encoding="utf-8")
    questions: list[str] = []
    if suffix == ".jsonl":
        for lineno, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                questions.append(_question_of(_json(line, path, lineno), path, lineno))
    elif suffix == ".json":
        data = _json(text, path, 1)
        if not isinstance(data, list):
            raise ValueError(f"{path}: a .json question file must hold a list of questions or objects")
        questions = [_question_of(item, path, i + 1) for i, item in enumerate(data)]
    elif suffix == ".csv":
        reader = csv.DictReader(text.splitlines())
        if "question" not in (reader.fieldnames or []):
            raise ValueError(f"{path}: CSV has columns {reader.fieldnames}; it needs a 'question' column")
        questions = [row["question"].strip() for row in reader if (row["question"] or "").strip()]
    else:
        questions = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not questions:
        raise ValueError(f"{path} holds no questions")
    return questions


def _json(text: str, path: Path, lineno: int) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None


def _question_of(item: Any, path: Path, lineno: int) -> str:
    if isinstance(item, str) and item.strip():
        return item.strip()
    if isinstance(item, dict) and isinstance(item.get("question"), str) and item["question"].strip():
        return item["question"].strip()
    raise ValueError(f"{path}:{lineno}: expected a question string or an object with a 'question' field")
