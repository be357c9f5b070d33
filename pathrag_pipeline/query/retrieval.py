"""Retrieval: from query keywords to graph nodes (PathRAG) and to the contexts of the LightRAG modes.

PathRAG's node retrieval embeds each keyword, takes the nearest entities by cosine for each, and merges
the per-keyword rankings round-robin (first hit of every keyword, then the second, ...) until ``top_n``
distinct nodes are chosen. Round-robin rather than one global similarity sort keeps one very
"embeddable" keyword from filling every slot, so each aspect of a multi-hop question gets seeds.

The LightRAG baselines (Guo et al. 2024) are reproduced for comparison:

- ``naive``: nearest chunks to the question.
- ``local``: low-level keywords -> entities -> the relations of their ego networks (ranked by the
  endpoints' degree sum, then strength, as LightRAG does) and the entities' source chunks.
- ``global``: high-level keywords -> nearest relations -> their endpoint entities and source chunks.
- ``hybrid``: the local and global contexts interleaved and deduplicated.
"""

from __future__ import annotations

import math

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from pathrag_pipeline.llm.embedding import Embedder
from pathrag_pipeline.query.graph_cache import GraphSnapshot
from pathrag_pipeline.query.lexical import BM25Index
from pathrag_pipeline.query.params import DEFAULT_TOP_N
from pathrag_pipeline.query.ranking import rrf
from pathrag_pipeline.text.names import name_key



class VectorSearch(Protocol):
    """What retrieval needs from the vector store (``vector_store.VectorStore``)."""

    def nearest(self, table: str, queries: Any, k: int, embedder: Any = None) -> list[list[tuple[str, float]]]: ...

    def similarities(self, table: str, vector: Any, keys: Iterable[str]) -> dict[str, float]: ...

    def matrix(self, table: str) -> tuple[list[str], Any]: ...


# Fewer entities than this give no background to judge a seed against (``seeds_stand_out`` lets all pass).
BACKGROUND_MIN = 50
# The chance per keyword that pure noise clears ``seeds_stand_out``'s bar (a convention, not fitted to a dataset).
NOISE_RISK = 0.01


@dataclass(frozen=True)
class RetrievedNode:
    """An entity chosen for the query: which keyword found it, at what similarity, at what overall rank."""

    rank: int
    keyword: str
    node: int
    entity_key: str
    entity_name: str
    similarity: float


@dataclass(frozen=True)
class RetrievedRelation:
    rank: int
    keyword: str
    row: int              # index into the snapshot's relation arrays
    relation_key: str
    similarity: float


@dataclass
class ModeContext:
    """What a LightRAG-style mode puts in front of the LLM, each list ranked best first."""

    nodes: list[RetrievedNode] = field(default_factory=list)
    relations: list[int] = field(default_factory=list)       # snapshot relation rows
    chunk_ids: list[str] = field(default_factory=list)
    chunk_scores: dict[str, float] = field(default_factory=dict)


def query_keywords(low_level: Sequence[str], high_level: Sequence[str], fallback: str) -> list[str]:
    """Distinct keywords (low-level first, case-insensitive), or ``[fallback]`` when there are none."""
    seen: set[str] = set()
    out: list[str] = []
    for kw in [*low_level, *high_level]:
        text = " ".join(str(kw).split())
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            out.append(text)
    return out or [" ".join(fallback.split())]


def round_robin(rankings: Sequence[Sequence[tuple[str, float]]], limit: int) -> list[tuple[int, str, float]]:
    """Merge per-keyword rankings of (key, similarity): the i-th hit of every ranking before any (i+1)-th,
    skipping keys already taken, until ``limit`` distinct keys. Returns (ranking index, key, similarity)."""
    taken: set[str] = set()
    out: list[tuple[int, str, float]] = []
    depth = max((len(r) for r in rankings), default=0)
    for i in range(depth):
        for which, ranking in enumerate(rankings):
            if i < len(ranking) and ranking[i][0] not in taken:
                taken.add(ranking[i][0])
                out.append((which, ranking[i][0], ranking[i][1]))
                if len(out) >= limit:
                    return out
    return out


def _search_each(vectors: VectorSearch, table: str, embedder: Embedder, keywords: list[str], k: int,
                 matrix: np.ndarray | None = None) -> list[list[tuple[str, float]]]:
    """Per keyword, the ``k`` nearest rows of ``table`` as (key, cosine); ``matrix`` = the keywords' vectors. One
    search for all the keywords: one matrix product instead of one per keyword (a third of the time for three)."""
    matrix = np.asarray(embedder.embed(keywords) if matrix is None else matrix)
    if len(matrix) == 0:
        return []
    return vectors.nearest(table, matrix, k)


def retrieve_nodes(snapshot: GraphSnapshot, vectors: VectorSearch, embedder: Embedder, keywords: list[str],
                   top_n: int = DEFAULT_TOP_N, lexical: BM25Index | None = None, *,
                   exact_name: bool = True, keyword_vectors: np.ndarray | None = None) -> list[RetrievedNode]:
    """The ``top_n`` entities nearest to the keywords, merged round-robin over keywords.

    Each keyword asks for ``top_n`` neighbours so the merge can fill every slot even when the keywords'
    neighbourhoods overlap. An entity whose key equals the keyword's own name key (``names.name_key``)
    heads that keyword's ranking whatever its cosine: an entity vector embeds the name *and* a long merged
    description, so a lexical or small embedder can rank a short, loosely related entity above the very
    entity the question names. It is recorded with similarity 1.0. Vector hits whose entity is not in the
    graph snapshot (vectors not yet re-synced after a merge) are skipped. With ``lexical``, each keyword's
    vector and BM25 rankings are fused by RRF; an entity only BM25 found carries its own cosine to the
    keyword too (``similarity`` is always the embedder's, whichever retriever found the entity).
    ``exact_name=False`` drops the exact-name head (the paper's cosine order alone; an ablation).
    ``keyword_vectors``: the keywords' embeddings when the caller already has them.
    """
    if top_n < 1:
        raise ValueError(f"top_n={top_n} must be at least 1 (PathRAG uses 40)")
    rankings = []
    matrix = np.asarray(embedder.embed(keywords) if keyword_vectors is None else keyword_vectors)
    for keyword, row, ranking in zip(keywords, matrix, _search_each(vectors, "entities", embedder, keywords, top_n,
                                                                     matrix)):
        exact = name_key(keyword)
        if not exact_name:
            exact = None
        head = [(exact, 1.0)] if exact is not None and snapshot.node_of(exact) is not None else []
        vector = [(key, sim) for key, sim in ranking if key != exact and snapshot.node_of(key) is not None]
        if lexical is not None:
            sims = dict(vector)
            lex = [key for key, _ in lexical.search(keyword, top_n) if key != exact and snapshot.node_of(key) is not None]
            fused = rrf([[k for k, _ in vector], lex], limit=top_n)
            sims.update(vectors.similarities("entities", row, [k for k in fused if k not in sims]))
            vector = [(key, sims.get(key, 0.0)) for key in fused]
        rankings.append(head + vector)
    out: list[RetrievedNode] = []
    for rank, (which, key, sim) in enumerate(round_robin(rankings, top_n)):
        node = snapshot.node_of(key)
        assert node is not None
        out.append(RetrievedNode(rank, keywords[which], node, key, snapshot.entity_names[node], sim))
    return out


def standing_seeds(vectors: VectorSearch, keyword_vectors: np.ndarray, keywords: list[str],
                   retrieved: Sequence[RetrievedNode]) -> list[RetrievedNode]:
    """The seeds more similar to their keyword than chance would make the best of all entities, in their order.

    The top-N neighbours always exist, related or not: an off-topic question got 15 paths between entities that
    merely came nearest (issue 25). Per keyword, the background is its cosine to every entity: a seed stands out
    when it reaches mean + std * sqrt(2 ln(n / NOISE_RISK)) of that background, the Gaussian tail bound under which
    the best of n draws of noise stays with probability 1 - NOISE_RISK (the bare expected maximum, sqrt(2 ln n),
    is exceeded by noise about half the time: a hashing collision passed it in the tests). The bar grows with the
    graph and with the background's own spread instead of being a constant tuned to one embedder. An exact-name
    seed always stands out; in a graph of fewer than ``BACKGROUND_MIN`` entities, too small to estimate a
    background, every seed does."""
    if not retrieved:
        return []
    _, matrix = vectors.matrix("entities")
    count = matrix.shape[0]
    if count < BACKGROUND_MIN:
        return list(retrieved)
    sims = matrix @ np.asarray(keyword_vectors, dtype=np.float32).T    # (entities, keywords)
    bar = sims.mean(axis=0) + sims.std(axis=0) * math.sqrt(2.0 * math.log(count / NOISE_RISK))
    index = {k: i for i, k in enumerate(keywords)}
    return [n for n in retrieved
            if n.similarity >= 1.0 or (n.keyword in index and n.similarity >= bar[index[n.keyword]])]


def seeds_stand_out(vectors: VectorSearch, keyword_vectors: np.ndarray, keywords: list[str],
                    retrieved: Sequence[RetrievedNode]) -> bool:
    """Whether some seed stands out of its keyword's background (:func:`standing_seeds`): when none does, nothing
    the question names is in the graph. Our departure from PathRAG, which always keeps the top N
    (``revert=("seed_gate",)`` restores it)."""
    if any(n.similarity >= 1.0 for n in retrieved):
        return True
    return bool(standing_seeds(vectors, keyword_vectors, keywords, retrieved))


def retrieve_relations(snapshot: GraphSnapshot, vectors: VectorSearch, embedder: Embedder, keywords: list[str],
                       top_n: int = DEFAULT_TOP_N) -> list[RetrievedRelation]:
    """The ``top_n`` relations nearest to the keywords, merged round-robin like :func:`retrieve_nodes`."""
    if top_n < 1:
        raise ValueError(f"top_n={top_n} must be at least 1")
    rankings = [
        [(key, sim) for key, sim in ranking if key in snapshot.relation_index]
        for ranking in _search_each(vectors, "relations", embedder, keywords, top_n)
    ]
    return [
        RetrievedRelation(rank, keywords[which], snapshot.relation_index[key], key, sim)
        for rank, (which, key, sim) in enumerate(round_robin(rankings, top_n))
    ]


def is_semantic(embedder: Embedder) -> bool:
    """False for the offline hashing embedder (words and n-grams: a lexical signal BM25 already covers)."""
    return not str(getattr(embedder, "identity", "")).startswith("offline")


def dense_chunks(vectors: VectorSearch, embedder: Embedder, question: str, k: int) -> list[tuple[str, float]]:
    """The ``k`` chunks nearest to the question by the embedder (cosine), best first."""
    vector = embedder.embed([question])[0]
    out: dict[str, float] = {}
    for key, similarity in vectors.nearest("chunks", np.asarray([vector]), k)[0]:
        out.setdefault(str(key), float(similarity))
    return list(out.items())


def text_chunks(vectors: VectorSearch | None, embedder: Embedder, lexical: BM25Index | None, question: str,
                k: int, how: str) -> list[tuple[str, float]]:
    """Chunks for the question text by ``how``: "vector", "bm25", or "hybrid" (RRF of both; the vector list
    only with a semantic embedder, see :func:`is_semantic`). Scores: cosine, BM25, or RRF score."""
    if how == "vector" or (how == "hybrid" and lexical is None):
        assert vectors is not None
        return dense_chunks(vectors, embedder, question, k)
    assert lexical is not None
    lex = lexical.search(question, k)
    if how == "bm25" or not is_semantic(embedder) or vectors is None:
        return lex
    dense = dense_chunks(vectors, embedder, question, k)
    fused = rrf([[c for c, _ in dense], [c for c, _ in lex]], limit=k)
    return [(c, 0.0) for c in fused]


def naive_context(vectors: VectorSearch | None, embedder: Embedder, question: str, top_n: int = DEFAULT_TOP_N,
                  *, how: str = "vector", lexical: BM25Index | None = None) -> ModeContext:
    """LightRAG ``naive``: the chunks nearest to the question text (``how="vector"``), or by BM25 or both
    fused (:func:`text_chunks`)."""
    if top_n < 1:
        raise ValueError(f"top_n={top_n} must be at least 1")
    ctx = ModeContext()
    for key, score in text_chunks(vectors, embedder, lexical, question, top_n, how):
        if key not in ctx.chunk_scores:
            ctx.chunk_ids.append(key)
            ctx.chunk_scores[key] = score
    return ctx


def _rank_chunks(groups: Iterable[tuple[str, ...]], support: dict[str, int]) -> list[str]:
    """Chunks in order of the first (best) item citing them; among one item's chunks, those cited by more
    items of the context come first (LightRAG's "related text units" order)."""
    order: list[str] = []
    seen: set[str] = set()
    for chunks in groups:
        for chunk in sorted(chunks, key=lambda c: -support.get(c, 0)):
            if chunk not in seen:
                seen.add(chunk)
                order.append(chunk)
    return order


def local_context(snapshot: GraphSnapshot, nodes: list[RetrievedNode], max_relations: int | None = None) -> ModeContext:
    """LightRAG ``local``: the retrieved entities, every relation touching them, and their source chunks."""
    rows: list[int] = []
    seen: set[int] = set()
    for n in nodes:
        for row in snapshot.incident_relations(n.node):
            if row not in seen:
                seen.add(row)
                rows.append(row)
    degree = snapshot.view.degree
    rows.sort(key=lambda r: (-(degree(snapshot.relation_src[r]) + degree(snapshot.relation_tgt[r])),
                             -snapshot.relation_strengths[r]))
    if max_relations is not None:
        rows = rows[:max_relations]
    support: dict[str, int] = {}
    for row in rows:
        for chunk in snapshot.relation_chunks[row]:
            support[chunk] = support.get(chunk, 0) + 1
    chunk_ids = _rank_chunks((snapshot.entity_chunks[n.node] for n in nodes), support)
    return ModeContext(nodes=list(nodes), relations=rows, chunk_ids=chunk_ids)


def global_context(snapshot: GraphSnapshot, relations: list[RetrievedRelation]) -> ModeContext:
    """LightRAG ``global``: the retrieved relations, their endpoint entities and their source chunks."""
    nodes: list[RetrievedNode] = []
    seen: set[int] = set()
    for rel in relations:
        for node in (snapshot.relation_src[rel.row], snapshot.relation_tgt[rel.row]):
            if node not in seen:
                seen.add(node)
                nodes.append(RetrievedNode(len(nodes), rel.keyword, node, snapshot.entity_keys[node],
                                           snapshot.entity_names[node], rel.similarity))
    support: dict[str, int] = {}
    for rel in relations:
        for chunk in snapshot.relation_chunks[rel.row]:
            support[chunk] = support.get(chunk, 0) + 1
    chunk_ids = _rank_chunks((snapshot.relation_chunks[r.row] for r in relations), support)
    return ModeContext(nodes=nodes, relations=[r.row for r in relations], chunk_ids=chunk_ids)


def _interleave(a: Sequence[Any], b: Sequence[Any], key=lambda x: x) -> list[Any]:
    out: list[Any] = []
    seen: set[Any] = set()
    for i in range(max(len(a), len(b))):
        for seq in (a, b):
            if i < len(seq) and key(seq[i]) not in seen:
                seen.add(key(seq[i]))
                out.append(seq[i])
    return out


def hybrid_context(local: ModeContext, global_: ModeContext) -> ModeContext:
    """LightRAG ``hybrid``: local and global contexts merged alternately, duplicates dropped."""
    nodes = _interleave(local.nodes, global_.nodes, key=lambda n: n.node)
    nodes = [RetrievedNode(i, n.keyword, n.node, n.entity_key, n.entity_name, n.similarity) for i, n in enumerate(nodes)]
    return ModeContext(
        nodes=nodes,
        relations=_interleave(local.relations, global_.relations),
        chunk_ids=_interleave(local.chunk_ids, global_.chunk_ids),
    )



# Weight of path evidence against seed-entity evidence when ranking passages, and how many of a path's
# provenance chunks (its edges' first) count. Chosen on musique-100 (see docs/benchmarks.md).
PATH_PASSAGE_WEIGHT = 0.5
PATH_PASSAGE_CHUNKS = 3


def rank_passages(seeds: Sequence[tuple[int, Sequence[str]]],
                  paths: Sequence[tuple[int, float, Sequence[str]]], limit: int) -> list[str]:
    """Passages (chunk ids) ranked for a path-mode query, best first.

    ``seeds`` = (retrieval rank from 0, source chunks of that entity); ``paths`` = (rank from 1, reliability,
    provenance chunks). A seed adds 1/(1+rank), spread over its chunks by 1/sqrt(1+chunks) so a hub entity
    mentioned everywhere does not flood the ranking; a path adds PATH_PASSAGE_WEIGHT x (reliability / best
    reliability) / sqrt(rank) to the first PATH_PASSAGE_CHUNKS of its provenance. Ties keep first appearance.
    This orders the evidence for reading and evaluation; the prompt's path order is unaffected.
    """
    score: dict[str, float] = {}
    for rank, chunks in seeds:
        share = 1.0 / (1 + rank) / math.sqrt(1 + len(chunks))
        for chunk in chunks:
            score[chunk] = score.get(chunk, 0.0) + share
    best = max((reliability for _, reliability, _ in paths), default=0.0)
    for rank, reliability, chunks in paths:
        share = PATH_PASSAGE_WEIGHT * (reliability / best if best > 0 else 1.0) / math.sqrt(max(rank, 1))
        for chunk in list(dict.fromkeys(chunks))[:PATH_PASSAGE_CHUNKS]:
            score[chunk] = score.get(chunk, 0.0) + share
    order = {chunk: i for i, chunk in enumerate(score)}
    return sorted(score, key=lambda c: (-score[c], order[c]))[:limit]
