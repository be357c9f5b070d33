"""NeuroPath (Li et al., 2025): goal-directed path tracking over the graph, then post-retrieval completion.

One ``neuropath`` query (``PathRAG.query(q, "neuropath")``) runs:

1. **Seeds.** The question's key entities (the LLM's low-level keywords, or the offline keyword extractor's)
   are matched to entities by *name-only* embeddings (an exact name match first), and each match is expanded by
   its **coreference set**: the entities whose name embedding has cosine >= ``np_coref_threshold`` with it (at
   most ``COREF_MAX``). Name vectors are computed once per graph version and embedder and cached in memory
   and under ``PATHRAG_HOME/cache``.
2. **Dynamic path tracking**, up to ``np_max_hops`` hops (2 by default): the kept paths (at hop 1 the seeds)
   are expanded by their adjacent triples; the candidates are pruned to the top ``np_candidates`` (30) by the
   cosine between the new triple's vector (the ``relations`` vectors of the index) and the previous hop's
   expansion requirement (at hop 1 the question); the tracker (``neuropath_tracker``: the LLM, or offline
   the embedder + BM25 scorer) returns the reasoning chain, the valid paths, the paths to expand, the expansion
   requirement and whether to continue. Tracking stops when the tracker says so, when nothing is left to
   expand, at the hop cap, or when the query's LLM tokens reach ``np_token_budget`` (checked before each
   tracker call; a call in flight is never cut).
3. **Post-retrieval completion**: a second text retrieval (BM25, fused with the embedder when it is semantic)
   for the question plus the last reasoning chain and expansion requirement, merged by reciprocal rank fusion
   (k=60) with the tracked paths' passages (deepest paths first, each path's triples in order). The RRF merge
   is **our departure** (``np_passages="fused"``, the default the published figures measured): the paper takes
   the union ``D_ret = D_p ∪ D_e`` (002_0d443a49977e0766.txt, Sec. 3.4 and Algorithm 1 lines 28-32), which for a
   ranked list we read as the path documents first, then the completion's (``np_passages="union"``).

Every hop's judgement (reasoning chain, expansion requirement, ids, calls and tokens) is returned for the query
log (``queries.tracking``); the tracked paths become the query's ``path_traces``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pathrag_pipeline.llm.client import LLMClient, Usage
from pathrag_pipeline.llm.embedding import Embedder
from pathrag_pipeline.query.graph_cache import GraphSnapshot
from pathrag_pipeline.query.lexical import BM25Index
from pathrag_pipeline.query.neuropath_tracker import (
    Candidate,
    LLMTracker,
    OfflineTracker,
    TrackerOutputError,
)
from pathrag_pipeline.query.params import QueryParams
from pathrag_pipeline.query.prompting import PathTrace, clip, edge_line, node_line
from pathrag_pipeline.query.ranking import rrf
from pathrag_pipeline.query.retrieval import RetrievedNode, is_semantic
from pathrag_pipeline.text.names import name_key

COREF_MAX = 5                 # coreferent entities added per matched key entity
LEXICAL_HITS = 100            # BM25 passage hits of the question that count as lexical support
MAX_EXPANSIONS_PER_NODE = 500  # adjacent triples read per expanded entity (bounds hub entities)
DESCRIPTION_TOKENS = 40       # the new triple's description, as shown to the tracker


@dataclass(frozen=True)
class _Path:
    nodes: tuple[int, ...]
    rows: tuple[int, ...]     # relation rows along the path (len(nodes) - 1)


@dataclass
class NeuroPathRun:
    """What the tracking loop produced for one question."""

    tracker: str                          # 'llm:<model>' or 'offline:embedder+bm25'
    seeds: list[RetrievedNode]
    traces: list[PathTrace]               # tracked (valid) paths, deepest hop first
    chunk_ids: list[str]                  # ranked passages: tracked paths' passages fused with the completion
    reasoning_chain: str
    expansion_requirement: str
    completion_query: str
    stop_reason: str                      # tracker_stop, hop_cap, token_budget, nothing_to_expand, no_candidates, no_seeds, failed
    hops: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)   # the tracking calls
    error: str | None = None

    def record(self) -> dict[str, Any]:
        """The ``queries.tracking`` JSON."""
        return {"tracker": self.tracker, "stop_reason": self.stop_reason, "hops": self.hops,
                "seeds": [s.entity_name for s in self.seeds], "reasoning_chain": self.reasoning_chain,
                "expansion_requirement": self.expansion_requirement, "completion_query": self.completion_query,
                "error": self.error}


# ---- cached vectors ---------------------------------------------------------------------------------

_cache: dict[tuple[str, str, str], np.ndarray] = {}
_lock = threading.Lock()


def name_vectors(snapshot: GraphSnapshot, embedder: Embedder, cache_dir: Path | None = None) -> np.ndarray:
    """Unit vectors of the entity *names* alone (row i = node i), per graph version and embedder."""
    key = ("names", snapshot.version, embedder.identity)
    with _lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256("\x1f".join(snapshot.entity_names).encode()).hexdigest()[:16]
    path = None
    if cache_dir is not None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in embedder.identity)
        path = cache_dir / f"neuropath-names-{safe}-{digest}.npy"
        if path.is_file():
            try:
                matrix = np.load(path)
                if matrix.shape[0] == snapshot.node_count:
                    with _lock:
                        _cache[key] = matrix
                    return matrix
            except (OSError, ValueError):
                pass
    matrix = _unit(np.asarray(embedder.embed(list(snapshot.entity_names)), dtype=np.float32))
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, matrix)
        except OSError:
            pass  # the cache is an optimisation; a read-only home still answers
    with _lock:
        _cache[key] = matrix
    return matrix


def relation_vectors(snapshot: GraphSnapshot, keys: Sequence[str], matrix: np.ndarray, identity: str) -> np.ndarray:
    """The index's relation vectors aligned to the snapshot's relation rows (zeros for a row not embedded)."""
    key = ("relations", snapshot.version, identity)
    with _lock:
        cached = _cache.get(key)
    if cached is not None and cached.shape[0] == len(snapshot.relation_keys):
        return cached
    where = {k: i for i, k in enumerate(keys)}
    dim = matrix.shape[1] if matrix.ndim == 2 and matrix.shape[0] else 1
    out = np.zeros((len(snapshot.relation_keys), dim), dtype=np.float32)
    for row, rkey in enumerate(snapshot.relation_keys):
        i = where.get(rkey)
        if i is not None:
            out[row] = matrix[i]
    with _lock:
        _cache[key] = out
    return out


def clear_cache() -> None:
    with _lock:
        _cache.clear()


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


# ---- seeds and coreference ---------------------------------------------------------------------------

def coreference_set(names: np.ndarray, node: int, threshold: float, limit: int = COREF_MAX) -> list[int]:
    """The entities whose name vector has cosine >= ``threshold`` with ``node``'s, most similar first."""
    sims = names @ names[node]
    sims[node] = -1.0
    hits = np.flatnonzero(sims >= threshold)
    return [int(i) for i in hits[np.argsort(-sims[hits], kind="stable")][:limit]]


def key_entity_seeds(snapshot: GraphSnapshot, names: np.ndarray, embedder: Embedder, keywords: Sequence[str],
                     threshold: float) -> list[RetrievedNode]:
    """Each key entity's best-matching entity by name (an exact name-key match first, else the nearest name
    vector), then its coreference set; recorded with the keyword and the name similarity."""
    out: list[RetrievedNode] = []
    seen: set[int] = set()

    def add(keyword: str, node: int, similarity: float) -> None:
        if node not in seen:
            seen.add(node)
            out.append(RetrievedNode(len(out), keyword, node, snapshot.entity_keys[node],
                                     snapshot.entity_names[node], round(float(similarity), 6)))

    if not keywords:
        return out
    vectors = _unit(np.asarray(embedder.embed(list(keywords)), dtype=np.float32))
    for keyword, vector in zip(keywords, vectors):
        exact = snapshot.node_of(name_key(keyword))
        sims = names @ vector
        anchor = exact if exact is not None else int(np.argmax(sims))
        anchor_sim = 1.0 if exact is not None else float(sims[anchor])
        if anchor_sim <= 0.0:
            continue
        add(keyword, anchor, anchor_sim)
        for other in coreference_set(names, anchor, threshold):
            add(keyword, other, float(names[other] @ names[anchor]))
    return out


# ---- the tracking loop ---------------------------------------------------------------------------------

def _chain_text(snapshot: GraphSnapshot, path: _Path) -> str:
    parts = [snapshot.entity_names[path.nodes[0]]]
    for i, row in enumerate(path.rows):
        keywords = clip(snapshot.relation_keywords[row], 12) or "related to"
        parts.append(f" --[{keywords}]--> {snapshot.entity_names[path.nodes[i + 1]]}")
    return "".join(parts)


def _candidate_text(snapshot: GraphSnapshot, path: _Path) -> str:
    description = clip(snapshot.relation_descriptions[path.rows[-1]], DESCRIPTION_TOKENS)
    return _chain_text(snapshot, path) + (f"\n    ({description})" if description else "")


def _new_text(snapshot: GraphSnapshot, path: _Path) -> str:
    a, b, row = path.nodes[-2], path.nodes[-1], path.rows[-1]
    return f"{snapshot.entity_names[a]} {snapshot.relation_keywords[row]} {snapshot.entity_names[b]}"


def _expand(snapshot: GraphSnapshot, paths: Sequence[_Path]) -> list[_Path]:
    """Every path extended by one adjacent triple that does not revisit one of its nodes; one per edge set."""
    out: list[_Path] = []
    seen: set[tuple[int, ...]] = set()
    for path in paths:
        last = path.nodes[-1]
        for row in snapshot.incident_relations(last)[:MAX_EXPANSIONS_PER_NODE]:
            src, tgt = snapshot.relation_src[row], snapshot.relation_tgt[row]
            other = tgt if src == last else src
            if other in path.nodes:
                continue
            key = (*path.rows, row)
            if key in seen:
                continue
            seen.add(key)
            out.append(_Path((*path.nodes, other), (*path.rows, row)))
    return out


def _trace(snapshot: GraphSnapshot, rank: int, score: float, path: _Path) -> PathTrace:
    lines = [node_line(snapshot, path.nodes[0])]
    for i, row in enumerate(path.rows):
        lines.append(edge_line(snapshot, row, path.nodes[i], path.nodes[i + 1]))
        lines.append(node_line(snapshot, path.nodes[i + 1]))
    chunks = list(dict.fromkeys(c for r in path.rows for c in snapshot.relation_chunks[r]))
    chunks += [c for n in path.nodes for c in snapshot.entity_chunks[n] if c not in chunks]
    docs = list(dict.fromkeys([d for r in path.rows for d in snapshot.relation_documents[r]]
                              + [d for n in path.nodes for d in snapshot.entity_documents[n]]))
    return PathTrace(rank=rank, reliability=round(float(score), 6), hops=len(path.rows),
                     nodes=tuple(snapshot.entity_names[n] for n in path.nodes),
                     node_keys=tuple(snapshot.entity_keys[n] for n in path.nodes),
                     edge_ids=tuple(snapshot.relation_keys[r] for r in path.rows),
                     text="\n".join(lines), chunk_ids=tuple(chunks), document_ids=tuple(docs))


def track(question: str, params: QueryParams, *, snapshot: GraphSnapshot, embedder: Embedder,
          names: np.ndarray, relations: np.ndarray, key_entities: Sequence[str], llm: LLMClient | None,
          lexical: BM25Index, text_search: Any, tokens_spent: int = 0) -> NeuroPathRun:
    """Run seeds -> path tracking -> post-retrieval completion for one question.

    ``relations`` = :func:`relation_vectors`; ``lexical`` = BM25 over the chunks; ``text_search(query, k)`` =
    the completion retriever (ranked chunk ids); ``tokens_spent`` = LLM tokens the query already used
    (keywords), counted against ``params.np_token_budget``.
    """
    tracker: LLMTracker | OfflineTracker = LLMTracker(llm) if llm is not None else OfflineTracker(embedder.identity)
    seeds = key_entity_seeds(snapshot, names, embedder, key_entities, params.np_coref_threshold)
    run = NeuroPathRun(tracker=tracker.identity, seeds=seeds, traces=[], chunk_ids=[], reasoning_chain="",
                       expansion_requirement=question, completion_query=question, stop_reason="no_seeds")
    q_vec = _unit(np.asarray(embedder.embed([question]), dtype=np.float32))[0]
    lex_rank = {c: r for r, (c, _) in enumerate(lexical.search(question, LEXICAL_HITS), start=1)}
    frontier = [_Path((s.node,), ()) for s in seeds]
    tracked: dict[tuple[int, ...], tuple[int, float, _Path]] = {}   # rows -> (hop, score, path)
    covered: list[str] = []
    spent = tokens_spent
    hop = 0
    while frontier:
        hop += 1
        if hop > params.np_max_hops:
            run.stop_reason = "hop_cap"
            break
        expanded = _expand(snapshot, frontier)
        if not expanded:
            run.stop_reason = "no_candidates"
            break
        if spent >= params.np_token_budget:
            run.stop_reason = "token_budget"
            break
        started = time.perf_counter()
        r_vec = q_vec if hop == 1 else _unit(np.asarray(embedder.embed([run.expansion_requirement]),
                                                        dtype=np.float32))[0]
        new_rows = np.fromiter((p.rows[-1] for p in expanded), dtype=np.int64, count=len(expanded))
        req_sims = relations[new_rows] @ r_vec
        q_sims = relations[new_rows] @ q_vec
        order = np.argsort(-req_sims, kind="stable")[:params.np_candidates]
        shown = [expanded[i] for i in order]
        candidates = [Candidate(id=n, text=_candidate_text(snapshot, p), new_text=_new_text(snapshot, p),
                                requirement_similarity=float(req_sims[i]), question_similarity=float(q_sims[i]),
                                lexical_rank=min((lex_rank[c] for c in snapshot.relation_chunks[p.rows[-1]]
                                                  if c in lex_rank), default=None))
                      for n, (i, p) in enumerate(zip(order, shown), start=1)]
        try:
            judgement = tracker.judge(question, hop, run.reasoning_chain, run.expansion_requirement, candidates,
                                      covered=covered)
        except TrackerOutputError as exc:
            run.usage = run.usage + exc.usage
            run.hops.append(_hop_record(hop, len(expanded), len(shown), None, exc.usage, started))
            run.stop_reason, run.error = "failed", str(exc)
            return run
        step, usage = judgement.step, judgement.usage
        run.usage = run.usage + usage
        spent += usage.total_tokens
        run.hops.append(_hop_record(hop, len(expanded), len(shown), step, usage, started,
                                    [candidates[i - 1].text.split("\n", 1)[0] for i in step.valid_paths]))
        for cid in step.valid_paths:
            path = shown[cid - 1]
            if path.rows not in tracked:
                tracked[path.rows] = (hop, judgement.scores.get(cid, 0.0), path)
                covered.append(candidates[cid - 1].new_text)
        run.reasoning_chain = step.reasoning_chain or run.reasoning_chain
        run.expansion_requirement = step.expansion_requirement or run.expansion_requirement
        frontier = [shown[cid - 1] for cid in step.paths_to_expand]
        if not step.continue_tracking:
            run.stop_reason = "tracker_stop"
            break
        if not frontier:
            run.stop_reason = "nothing_to_expand"
            break

    # deepest hop first (a longer path carries the whole chain), then the tracker's score, then order found
    kept = sorted(tracked.values(), key=lambda t: (-t[0], -t[1]))
    run.traces = [_trace(snapshot, rank, score, path) for rank, (_, score, path) in enumerate(kept, start=1)]
    tracked_chunks = list(dict.fromkeys(c for _, _, p in kept for r in p.rows for c in snapshot.relation_chunks[r]))
    parts = [question]
    if run.reasoning_chain:
        parts.append(run.reasoning_chain)
    if run.expansion_requirement and run.expansion_requirement != question:
        parts.append(run.expansion_requirement)
    run.completion_query = " ".join(" ".join(parts).split())
    completion = list(text_search(run.completion_query, params.top_n))
    if params.np_passages == "tracked":
        run.chunk_ids = tracked_chunks
    elif params.np_passages == "completion" or not tracked_chunks:
        run.chunk_ids = completion
    elif params.np_passages == "union":   # the paper's D_p ∪ D_e: path documents first, then the completion's
        run.chunk_ids = list(dict.fromkeys([*tracked_chunks, *completion]))
    else:
        run.chunk_ids = rrf([tracked_chunks, completion])
    return run


def _hop_record(hop: int, generated: int, shown: int, step: Any, usage: Usage, started: float,
                valid: Sequence[str] = ()) -> dict[str, Any]:
    record: dict[str, Any] = {"hop": hop, "candidates": generated, "shown": shown}
    if step is not None:
        record.update({"reasoning_chain": step.reasoning_chain, "expansion_requirement": step.expansion_requirement,
                       "valid_paths": list(valid), "valid": list(step.valid_paths),
                       "expand": list(step.paths_to_expand), "continue": bool(step.continue_tracking)})
    record.update({"calls": usage.calls, "prompt_tokens": usage.prompt_tokens,
                   "completion_tokens": usage.completion_tokens,
                   "ms": round((time.perf_counter() - started) * 1000.0, 3)})
    return record


def completion_search(vectors: Any, embedder: Embedder, lexical: BM25Index, how: str) -> Any:
    """The post-retrieval completion retriever: BM25, fused by RRF with the embedder's nearest chunks when
    ``how`` allows it and the embedder is semantic (the same choice as path mode's text evidence)."""
    def search(query: str, k: int) -> list[str]:
        rankings = []
        if how != "vector":
            rankings.append([c for c, _ in lexical.search(query, k)])
        if vectors is not None and (how == "vector" or (how == "hybrid" and is_semantic(embedder))):
            vector = embedder.embed([query])[0]
            rankings.append(list(dict.fromkeys(str(h.key) for h in vectors.search("chunks", vector, k))))
        return rrf(rankings, limit=k)
    return search
