"""NeuroPath (Li et al., 2025): goal-directed path tracking over the graph, then post-retrieval completion.

One ``neuropath`` query (``PathRAG.query(q, "neuropath")``) runs one of two variants (``np_variant``):

**"paper" (the default, issue 24): the method of the paper** (``../shared/papers/002_0d443a49977e0766.txt``,
Sec. 3.3-3.4, Algorithm 1, Appendix I), read against its reference code where the text leaves a choice open
(:func:`track` says where):

1. **Key entities** from the paper's NER prompt (Figure 13) with an LLM; without one, the offline keyword rules'
   low-level keywords stand in. Each is matched to its nearest entity by *name-only* embeddings (an exact name
   match first) and expanded by its **coreference set** (Eq. 1-2: the at most ``COREF_MAX`` = 5 entities whose
   name cosine is >= ``np_coref_threshold`` = 0.8).
2. **Dynamic path tracking**, up to ``np_max_hops`` (2) hops: hop 1's candidates are the triples touching the
   seeds; at hop h > 1 the paths marked to expand grow through their expandable node *and its coreference set*
   (Eq. 3). The new candidates are pruned to the top ``np_candidates`` (30) by the cosine between the *whole
   path*, embedded, and the previous hop's expansion requirement (the question at hop 1) (Eq. 5). The tracker
   (Figure 14's prompt, verbatim) sees the kept paths (the previous hop's valid and to-expand paths, Eq. 4) with
   the new ones, and re-judges them all: valid paths (sorted by helpfulness), paths to expand, reasoning chain,
   expansion requirement, continue flag.
3. **Post-retrieval completion**: the last judged hop's valid paths give the path documents D_p; a dense
   retrieval for q' = q + c_last + g_last gives D_e; D_ret = D_p ∪ D_e, the path documents first
   (``np_passages="union"``).

**"ours"**: the variant the figures before issue 24 measured, kept for comparison in ``query/neuropath_ours.py``
(the engine imports it only when it is asked for): coreference sets at the
seeds only; every hop's valid paths kept (deepest first); pruning by the cosine of the *newest* triple's index
vector (the ``relations`` vectors); LightRAG's low-level keywords as key entities; our tracker prompt (which
also shows the triple's description); the completion by path mode's text search (BM25, fused with the embedder
when semantic) merged with the tracked paths' passages by reciprocal rank fusion (k=60, ``np_passages="fused"``).

Without an LLM the tracker is a heuristic (``neuropath_tracker.OfflineTracker``, ``heuristic:embedder+bm25``),
not NeuroPath's LLM: every output and evaluation row says so. Tracking stops when the tracker says so, when
nothing is left to expand, at the hop cap, or when the query's LLM tokens reach ``np_token_budget`` (checked
before each tracker call; a call in flight is never cut). Every hop's judgement (reasoning chain, expansion
requirement, ids, calls and tokens) is returned for the query log (``queries.tracking``); the tracked paths
become the query's ``path_traces``. Name vectors are computed once per graph version and embedder and cached in
memory and under ``PATHRAG_HOME/cache``.
"""

from __future__ import annotations

import hashlib
import logging
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
from pathrag_pipeline.query.retrieval import RetrievedNode, dense_chunks, is_semantic
from pathrag_pipeline.storage.cache_files import write_whole
from pathrag_pipeline.text.names import name_key

log = logging.getLogger(__name__)

COREF_MAX = 5                 # coreferent entities added per matched key entity
LEXICAL_HITS = 100            # BM25 passage hits of the question that count as lexical support
MAX_EXPANSIONS_PER_NODE = 500  # adjacent triples read per expanded entity (bounds hub entities)
DESCRIPTION_TOKENS = 40       # the new triple's description, as shown to the tracker
PATH_EMBED_CAP = 1000         # paper variant: new paths embedded whole per hop (preselected beyond; see track)


@dataclass
class NeuroPathRun:
    """What the tracking loop produced for one question."""

    tracker: str                          # 'llm:<model>' or 'heuristic:embedder+bm25' (no LLM: a heuristic tracker, not NeuroPath's)
    seeds: list[RetrievedNode]
    traces: list[PathTrace]               # tracked (valid) paths, deepest hop first
    chunk_ids: list[str]                  # ranked passages: tracked paths' passages fused with the completion
    reasoning_chain: str
    expansion_requirement: str
    completion_query: str
    stop_reason: str                      # tracker_stop, hop_cap, token_budget, nothing_to_expand, no_candidates, no_seeds, failed, tracker_invalid
    hops: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)   # the tracking calls
    error: str | None = None              # ours: the tracker's output stayed invalid, so the query fails
    tracker_error: str | None = None      # paper: the same, but tracking ends with no path (see track)

    def record(self) -> dict[str, Any]:
        """The ``queries.tracking`` JSON."""
        return {"tracker": self.tracker, "stop_reason": self.stop_reason, "hops": self.hops,
                "seeds": [s.entity_name for s in self.seeds], "reasoning_chain": self.reasoning_chain,
                "expansion_requirement": self.expansion_requirement, "completion_query": self.completion_query,
                "error": self.error, "tracker_error": self.tracker_error}


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
    if path is not None:   # one file per embedder: an earlier graph's names are replaced, not kept beside it
        write_whole(path, lambda out: np.save(out, matrix), supersedes=f"neuropath-names-{safe}-{'?' * 16}.npy")
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
    vector), then its coreference set; recorded with the keyword and the name similarity. The paper (Sec. 3.3,
    "select a set of the most similar nodes by Sim(·,·)") and its code take the nearest name vector alone; the
    exact-name head is ours (the nearest vector is that entity anyway whenever the embedder is deterministic, and
    a name-key match survives case and punctuation differences the hashing embedder does not)."""
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


# ---- the tracked paths ---------------------------------------------------------------------------------

def _trace(snapshot: GraphSnapshot, rank: int, score: float, path: Any) -> PathTrace:
    """A tracked path as a query's ``PathTrace``: a paper chain (``steps``) or, for our variant, a path of ``nodes``
    and relation ``rows``."""
    steps = path.steps if isinstance(path, _Chain) else tuple(
        (row, path.nodes[i], path.nodes[i + 1]) for i, row in enumerate(path.rows))
    nodes = _chain_nodes(steps) if steps else path.nodes
    lines = [node_line(snapshot, nodes[0])]
    for i, (row, a, b) in enumerate(steps):
        if i and a != steps[i - 1][2]:        # the paper's coreference join: the next triple starts at a coreferent
            lines.append(node_line(snapshot, a))
        lines.append(edge_line(snapshot, row, a, b))
        lines.append(node_line(snapshot, b))
    rows = [row for row, _, _ in steps]
    chunks = list(dict.fromkeys(c for r in rows for c in snapshot.relation_chunks[r]))
    chunks += [c for n in nodes for c in snapshot.entity_chunks[n] if c not in chunks]
    docs = list(dict.fromkeys([d for r in rows for d in snapshot.relation_documents[r]]
                              + [d for n in nodes for d in snapshot.entity_documents[n]]))
    return PathTrace(rank=rank, reliability=round(float(score), 6), hops=len(rows),
                     nodes=tuple(snapshot.entity_names[n] for n in nodes),
                     node_keys=tuple(snapshot.entity_keys[n] for n in nodes),
                     edge_ids=tuple(snapshot.relation_keys[r] for r in rows),
                     text="\n".join(lines), chunk_ids=tuple(chunks), document_ids=tuple(docs))


# ---- the paper's variant (np_variant="paper") ------------------------------------------------------------

@dataclass(frozen=True)
class _Chain:
    """A path of the paper's variant: its triples as (relation row, from, to). Consecutive triples meet at the
    same entity or, through the per-hop coreference expansion (Eq. 3), at a coreferent of it."""

    steps: tuple[tuple[int, int, int], ...]

    @property
    def rows(self) -> tuple[int, ...]:
        return tuple(row for row, _, _ in self.steps)

    @property
    def last(self) -> int:
        return self.steps[-1][2]


def _chain_nodes(steps: Sequence[tuple[int, int, int]]) -> tuple[int, ...]:
    nodes = [steps[0][1]]
    for _, a, b in steps:
        if a != nodes[-1]:
            nodes.append(a)
        nodes.append(b)
    return tuple(nodes)


def _triple(snapshot: GraphSnapshot, row: int, sep: str = "->") -> str:
    """One triple as the paper's reference code writes it: ``head->relation->tail; ``. Our graph's relations are
    LightRAG's (keywords and a description, no relation phrase): the keywords stand in the relation's place, and
    the description is not shown (the paper's triples carry none). Head and tail keep the stored direction."""
    names = snapshot.entity_names
    relation = clip(snapshot.relation_keywords[row], 12) or "related to"
    return f"{names[snapshot.relation_src[row]]}{sep}{relation}{sep}{names[snapshot.relation_tgt[row]]}; "


def _paper_text(snapshot: GraphSnapshot, path: _Chain) -> str:
    return "".join(_triple(snapshot, row) for row in path.rows).rstrip()


def _similarity_text(snapshot: GraphSnapshot, path: _Chain) -> str:
    """What pruning embeds: the whole path, its arrows as spaces (the reference code's ``path.replace("->", " ")``)."""
    return "".join(_triple(snapshot, row, " ") for row in path.rows).rstrip()


def _paper_start(snapshot: GraphSnapshot, seeds: Sequence[int]) -> list[_Chain]:
    """Hop 1 (Algorithm 1, lines 11-12): every triple touching a seed node, once."""
    out: list[_Chain] = []
    seen: set[int] = set()
    for seed in dict.fromkeys(seeds):
        for row in snapshot.incident_relations(seed)[:MAX_EXPANSIONS_PER_NODE]:
            if row in seen:
                continue
            seen.add(row)
            src, tgt = snapshot.relation_src[row], snapshot.relation_tgt[row]
            out.append(_Chain(((row, seed, tgt if src == seed else src),)))
    return out


def _paper_expand(snapshot: GraphSnapshot, paths: Sequence[_Chain], names: np.ndarray, threshold: float,
                  known: set[tuple[int, ...]]) -> list[_Chain]:
    """Hops 2+ (Eq. 3-4, Algorithm 1 line 15): each path to expand is extended by every triple touching its
    expandable node or a member of that node's coreference set. Ours on top: a path never revisits one of its
    nodes (the reference code does not check; it only skips a triple already kept as a path of its own)."""
    out: list[_Chain] = []
    seen = set(known)
    for path in paths:
        nodes = set(_chain_nodes(path.steps))
        link = path.last
        starts = [link, *(n for n in coreference_set(names, link, threshold) if n not in nodes)]
        for start in starts:
            for row in snapshot.incident_relations(start)[:MAX_EXPANSIONS_PER_NODE]:
                src, tgt = snapshot.relation_src[row], snapshot.relation_tgt[row]
                other = tgt if src == start else src
                if other in nodes or other == start:
                    continue
                key = (*path.rows, row)
                if key in seen:
                    continue
                seen.add(key)
                out.append(_Chain((*path.steps, (row, start, other))))
    return out


def track(question: str, params: QueryParams, *, snapshot: GraphSnapshot, embedder: Embedder,
          names: np.ndarray, relations: np.ndarray, key_entities: Sequence[str], llm: LLMClient | None,
          lexical: BM25Index, text_search: Any, tokens_spent: int = 0) -> NeuroPathRun:
    """Seeds -> path tracking -> post-retrieval completion for one question (``np_variant="paper"``; our earlier
    variant is ``query/neuropath_ours.track``, with the same arguments). ``relations`` = :func:`relation_vectors`;
    ``lexical`` = BM25 over the chunks; ``text_search(query, k)`` = the completion retriever (ranked chunk ids);
    ``tokens_spent`` = LLM tokens the query already used (keywords or key entities), counted against
    ``params.np_token_budget``.

    NeuroPath as its paper defines it (002_0d443a49977e0766.txt, Sec. 3.3-3.4, Algorithm 1; the reference
    code, github.com/KennyCaty/NeuroPath ``src/neuropath.py``, where the text leaves a choice open):

    - hop 1: the seeds (each key entity's nearest entity plus its coreference set) give every triple touching
      them; hop h > 1: the paths the tracker marked to expand are extended through their expandable node *and its
      coreference set* (Eq. 3);
    - the new candidates are pruned to the top ``np_candidates`` (30) by the cosine between the embedded *whole
      path* and the previous hop's expansion requirement (the question at hop 1) (Eq. 5). Reading: Eq. 5 ranges
      over all of P_cur, the reference code prunes only the new paths and always shows the kept ones; we follow
      the code, so the tracker, not the pruning, decides whether an earlier path stays;
    - the tracker sees the kept paths (the previous hop's valid and to-expand paths, P_val + P_exp, Eq. 4) first,
      without a tag, then the new ones with ``<expandable>: [their last entity]``, and re-judges all of them: a
      path it does not mark again is dropped;
    - the path documents D_p are the source passages of the *last* judged hop's valid paths, in the tracker's
      order; the completion query is q + c_last + g_last (Sec. 3.4), and D_ret = D_p ∪ D_e (``np_passages``
      "union" unless overridden).

    A tracker answer that stays invalid (after one re-ask with the validation error, ours) ends tracking as the
    reference code's failure path does: no valid path, no reasoning chain, so D_ret is the completion's alone;
    the query still answers, and ``queries.tracking`` keeps ``stop_reason`` "tracker_invalid" and the error
    (``tracker_error``). Small models hit it (a 0.5B model wrote years from the paths as ids); our variant fails
    the query instead.

    Bound (ours): when more than ``PATH_EMBED_CAP`` new paths appear at a hop, only that many, preselected by
    their newest triple's index vector against the requirement, are embedded whole (a hub entity can give
    thousands; the paper embeds them all on a GPU)."""
    tracker: LLMTracker | OfflineTracker = (LLMTracker(llm, style="paper") if llm is not None
                                            else OfflineTracker(embedder.identity, style="paper"))
    seeds = key_entity_seeds(snapshot, names, embedder, key_entities, params.np_coref_threshold)
    run = NeuroPathRun(tracker=tracker.identity, seeds=seeds, traces=[], chunk_ids=[], reasoning_chain="",
                       expansion_requirement="", completion_query=question, stop_reason="no_seeds")
    q_vec = _unit(np.asarray(embedder.embed([question]), dtype=np.float32))[0]
    lex_rank = {c: r for r, (c, _) in enumerate(lexical.search(question, LEXICAL_HITS), start=1)}
    vectors: dict[tuple[int, ...], np.ndarray] = {}
    kept: list[_Chain] = []                       # P_val + P_exp of the last judged hop, the tracker's order
    frontier: list[_Chain] = []                   # P_exp
    valid: list[tuple[float, _Chain]] = []        # P_val of the last judged hop, with the tracker's scores
    spent = tokens_spent
    hop = 0
    while seeds:
        hop += 1
        if hop > params.np_max_hops:
            run.stop_reason = "hop_cap"
            break
        new = (_paper_start(snapshot, [s.node for s in seeds]) if hop == 1 else
               _paper_expand(snapshot, frontier, names, params.np_coref_threshold, {p.rows for p in kept}))
        if _stops_before_judging(run, params, new, spent):
            break
        started = time.perf_counter()
        requirement = question if hop == 1 else (run.expansion_requirement or question)
        r_vec = q_vec if requirement == question else _unit(np.asarray(embedder.embed([requirement]),
                                                                      dtype=np.float32))[0]
        generated = len(new)
        if len(new) > PATH_EMBED_CAP:
            newest = np.fromiter((p.rows[-1] for p in new), dtype=np.int64, count=len(new))
            pre = np.argsort(-(relations[newest] @ r_vec), kind="stable")[:PATH_EMBED_CAP]
            new = [new[i] for i in sorted(pre)]
        fresh = [p for p in new if p.rows not in vectors]
        if fresh:
            embedded = _unit(np.asarray(embedder.embed([_similarity_text(snapshot, p) for p in fresh]),
                                        dtype=np.float32))
            vectors.update((p.rows, v) for p, v in zip(fresh, embedded))
        req_sims = np.array([float(vectors[p.rows] @ r_vec) for p in new])
        # the reference code prunes only when more than k new paths appeared, keeping their order otherwise
        order = (range(len(new)) if len(new) <= params.np_candidates
                 else np.argsort(-req_sims, kind="stable")[:params.np_candidates])
        shown = [*kept, *(new[i] for i in order)]
        fresh_from = len(kept)
        candidates = [Candidate(
            id=n, text=_paper_text(snapshot, p), new_text=_similarity_text(snapshot, p).replace(";", " "),
            requirement_similarity=float(vectors[p.rows] @ r_vec), question_similarity=float(vectors[p.rows] @ q_vec),
            lexical_rank=min((lex_rank[c] for r in p.rows for c in snapshot.relation_chunks[r] if c in lex_rank),
                             default=None),
            expandable=n > fresh_from, link=snapshot.entity_names[p.last])
            for n, p in enumerate(shown, start=1)]
        judgement = _judge(run, tracker, question, hop, requirement, candidates, generated, started,
                           fail_query=False)
        if judgement is None:   # the reference code's failure path: no path, no chain; the completion answers
            valid, run.reasoning_chain, run.expansion_requirement = [], "", ""
            break
        step = judgement.step
        spent += judgement.usage.total_tokens
        valid = [(judgement.scores.get(cid, 0.0), shown[cid - 1]) for cid in step.valid_paths]
        frontier = [shown[cid - 1] for cid in step.paths_to_expand]
        kept = list({p.rows: p for p in [*(p for _, p in valid), *frontier]}.values())
        run.reasoning_chain = step.reasoning_chain
        run.expansion_requirement = step.expansion_requirement
        if not step.continue_tracking:
            run.stop_reason = "tracker_stop"
            break
        if not frontier:
            run.stop_reason = "nothing_to_expand"
            break

    run.traces = [_trace(snapshot, rank, score, path) for rank, (score, path) in enumerate(valid, start=1)]
    tracked_chunks = list(dict.fromkeys(c for _, p in valid for r in p.rows for c in snapshot.relation_chunks[r]))
    _complete(run, question, params, tracked_chunks, text_search)
    return run


def _complete(run: NeuroPathRun, question: str, params: QueryParams, tracked_chunks: list[str],
              text_search: Any) -> None:
    """Post-retrieval completion (Sec. 3.4): the query q' = q + c_last + g_last retrieves D_e, merged with the
    tracked paths' documents D_p as ``params.np_passages`` says."""
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


def _stops_before_judging(run: NeuroPathRun, params: QueryParams, candidates: Sequence[Any], spent: int) -> bool:
    """Whether tracking ends before this hop's tracker call (no candidate, or the token budget spent); sets
    ``run.stop_reason`` when it does."""
    if not candidates:
        run.stop_reason = "no_candidates"
    elif spent >= params.np_token_budget:
        run.stop_reason = "token_budget"
    else:
        return False
    return True


def _judge(run: NeuroPathRun, tracker: Any, question: str, hop: int, requirement: str,
           candidates: Sequence[Candidate], generated: int, started: float,
           covered: Sequence[str] = (), fail_query: bool = True) -> Any:
    """One hop's judgement, recorded in ``run`` (usage, hop record); None when the tracker's output stayed
    invalid: with ``fail_query`` that fails the query (``run.error``, stop reason "failed"); without, it is
    recorded (``run.tracker_error``, stop reason "tracker_invalid") and the caller goes on without paths."""
    try:
        judgement = tracker.judge(question, hop, run.reasoning_chain, requirement, candidates, covered=covered)
    except TrackerOutputError as exc:
        run.usage = run.usage + exc.usage
        run.hops.append(_hop_record(hop, generated, len(candidates), None, exc.usage, started))
        if fail_query:
            run.stop_reason, run.error = "failed", str(exc)
        else:
            run.stop_reason, run.tracker_error = "tracker_invalid", str(exc)
            log.warning("NeuroPath tracker output stayed invalid (%s); this query goes on without tracked paths, "
                        "from the post-retrieval completion alone", " ".join(str(exc).split())[:300])
        return None
    step = judgement.step
    run.usage = run.usage + judgement.usage
    run.hops.append(_hop_record(hop, generated, len(candidates), step, judgement.usage, started,
                                [candidates[i - 1].text.split("\n", 1)[0] for i in step.valid_paths]))
    return judgement


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
            rankings.append([key for key, _ in dense_chunks(vectors, embedder, query, k)])
        return rrf(rankings, limit=k)
    return search
