"""NeuroPath, our earlier variant (``np_variant="ours"``), kept for comparison with the paper's method.

The figures before issue 24 measured this loop; the default is the paper's (``query/neuropath.py``, whose docstring
sets the two side by side). Not on the default path: the engine imports this module only when the variant is asked
for (``--np-variant ours``, the evaluation's ``neuropath:ours``). It differs from the paper's in: coreference sets at
the seeds only; every hop's valid paths kept (deepest first); pruning by the cosine of the *newest* triple's index
vector (the ``relations`` vectors); our tracker prompt (which also shows the triple's description); the completion
merged with the tracked paths' passages by reciprocal rank fusion (``np_passages="fused"``). Seeds, the tracker's
judgement, the traces and the completion are the paper variant's own functions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pathrag_pipeline.llm.client import LLMClient
from pathrag_pipeline.llm.embedding import Embedder
from pathrag_pipeline.query.graph_cache import GraphSnapshot
from pathrag_pipeline.query.lexical import BM25Index
from pathrag_pipeline.query.neuropath import (
    DESCRIPTION_TOKENS,
    LEXICAL_HITS,
    MAX_EXPANSIONS_PER_NODE,
    NeuroPathRun,
    _complete,
    _judge,
    _stops_before_judging,
    _trace,
    _unit,
    key_entity_seeds,
)
from pathrag_pipeline.query.neuropath_tracker import Candidate, LLMTracker, OfflineTracker
from pathrag_pipeline.query.params import QueryParams
from pathrag_pipeline.query.prompting import clip


@dataclass(frozen=True)
class _Path:
    nodes: tuple[int, ...]
    rows: tuple[int, ...]     # relation rows along the path (len(nodes) - 1)


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


def track(question: str, params: QueryParams, *, snapshot: GraphSnapshot, embedder: Embedder,
          names: np.ndarray, relations: np.ndarray, key_entities: Sequence[str], llm: LLMClient | None,
          lexical: BM25Index, text_search: Any, tokens_spent: int = 0) -> NeuroPathRun:
    """``np_variant="ours"``: the tracking loop the figures before issue 24 measured (module docstring); the
    arguments are ``neuropath.track``'s."""
    tracker: LLMTracker | OfflineTracker = (LLMTracker(llm, style="ours") if llm is not None
                                            else OfflineTracker(embedder.identity))
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
        if _stops_before_judging(run, params, expanded, spent):
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
        judgement = _judge(run, tracker, question, hop, run.expansion_requirement, candidates, len(expanded),
                           started, covered=covered)
        if judgement is None:
            return run
        step = judgement.step
        spent += judgement.usage.total_tokens
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
    _complete(run, question, params, tracked_chunks, text_search)
    return run
