"""An undirected, query-ready view of the entity graph, built once and shared by every query.

Path pruning touches only a few hundred nodes per query, so per-query cost must not depend on
graph size: the view maps entity names to dense integer ids once, deduplicates edges, and keeps a
CSR adjacency (numpy ``indptr``/``indices`` plus the edge id of each adjacency slot) that the
pruning loop reads directly. An ``igraph.Graph`` of the same nodes and edges (same ids) is built on
first use, once per view, for analytics that want a library (components, centrality, drawing).

Neighbour order is part of the contract: a node's neighbours are listed in the order their edges
were first inserted. That is also the order a ``networkx.Graph`` built with ``add_edge`` over the same
edge list would report, which the reference variant of the pruning relies on to reproduce the
public PathRAG code exactly.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterable, Sequence

import numpy as np

from pathrag_pipeline.slim_imports import import_igraph

ig = import_igraph()   # without matplotlib, ~1 s of every query process (slim_imports)


class GraphView:
    """Undirected simple graph over entity names with O(1) id lookup and CSR adjacency.

    Attributes:
        names: node names; node ``i`` is ``names[i]``.
        index: name -> node id.
        graph: ``igraph.Graph`` with the same node ids and edge ids (vertex attribute ``name``,
            edge attributes ``id`` and ``weight`` when given, node attribute ``weight`` when given),
            built on first access.
        version: caller-chosen tag of the graph snapshot (e.g. a content hash) so caches can tell
            whether a view is stale.
        edge_src, edge_dst: endpoints of each deduplicated edge, in first-insertion order.
        edge_ids: external id of each edge (the first id seen for a duplicated pair), or None.
        edge_weights: summed weight of each edge over its duplicates, or None.
        node_weights: per-node weight, or None.
        indptr, indices, slot_edge: CSR adjacency; neighbours of ``i`` are
            ``indices[indptr[i]:indptr[i+1]]`` and ``slot_edge`` holds the edge id of each slot.
        build_ms: wall-clock time the constructor spent building the view (the lazy igraph excluded).
    """

    def __init__(
        self,
        names: list[str],
        edge_src: np.ndarray,
        edge_dst: np.ndarray,
        *,
        edge_ids: list[str] | None,
        node_weights: np.ndarray | None,
        edge_weights: np.ndarray | None,
        version: str,
        build_started: float,
    ) -> None:
        n = len(names)
        self.names = names
        self.index = {name: i for i, name in enumerate(names)}
        if len(self.index) != n:
            raise ValueError("GraphView names must be unique; deduplicate entity names before building the view")
        self.edge_src = edge_src
        self.edge_dst = edge_dst
        self.edge_ids = edge_ids
        self.edge_weights = edge_weights
        self.node_weights = node_weights
        self.version = version

        m = len(edge_src)
        heads = np.concatenate([edge_src, edge_dst])
        tails = np.concatenate([edge_dst, edge_src])
        slot_eid = np.concatenate([np.arange(m, dtype=np.int64), np.arange(m, dtype=np.int64)])
        order = np.lexsort((slot_eid, heads))  # by node, then by edge insertion order
        self.indices = tails[order]
        self.slot_edge = slot_eid[order]
        counts = np.bincount(heads, minlength=n) if m else np.zeros(n, dtype=np.int64)
        self.indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=self.indptr[1:])
        self.degrees = counts.astype(np.int64)
        # Python-side copies for the pruning inner loop: list indexing is far cheaper than numpy scalars.
        self.degree_list: list[int] = self.degrees.tolist()
        self.indptr_list: list[int] = self.indptr.tolist()

        self._graph: ig.Graph | None = None
        self.build_ms = (time.perf_counter() - build_started) * 1000.0

    # ---- constructors ---------------------------------------------------------------------------

    @classmethod
    def from_edges(
        cls,
        names: list[str],
        src: np.ndarray,
        dst: np.ndarray,
        edge_ids: list[str] | None = None,
        node_weights: Sequence[float] | np.ndarray | None = None,
        edge_weights: Sequence[float] | np.ndarray | None = None,
        version: str = "",
    ) -> GraphView:
        """Build from node names and integer endpoint arrays (``src[k]``-``dst[k]`` is edge k).

        Self-loops are dropped (they carry no relational path). Repeated edges between the same pair,
        in either direction, collapse to the first occurrence: its endpoints and id are kept and
        the weights of all copies are summed.
        """
        started = time.perf_counter()
        n = len(names)
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        if src.shape != dst.shape:
            raise ValueError(f"src and dst must have the same length, got {src.size} and {dst.size}")
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
            raise ValueError(f"edge endpoints must be node ids in [0, {n}); check src/dst against names")
        if edge_ids is not None and len(edge_ids) != src.size:
            raise ValueError(f"edge_ids has {len(edge_ids)} entries for {src.size} edges")
        ew = None if edge_weights is None else np.asarray(edge_weights, dtype=np.float64).ravel()
        if ew is not None and ew.size != src.size:
            raise ValueError(f"edge_weights has {ew.size} entries for {src.size} edges")
        nw = None if node_weights is None else np.asarray(node_weights, dtype=np.float64).ravel()
        if nw is not None and nw.size != n:
            raise ValueError(f"node_weights has {nw.size} entries for {n} nodes")

        keep = src != dst
        positions = np.flatnonzero(keep)
        s, d = src[keep], dst[keep]
        key = np.minimum(s, d) * max(n, 1) + np.maximum(s, d)
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # unique pairs in first-insertion order
        kept = first[order]
        if ew is not None:
            summed = np.bincount(inverse, weights=ew[keep], minlength=first.size)
            ew = summed[order]
        ids = None if edge_ids is None else [edge_ids[p] for p in positions[kept].tolist()]
        return cls(list(names), s[kept], d[kept], edge_ids=ids, node_weights=nw, edge_weights=ew,
                   version=version, build_started=started)

    @classmethod
    def from_name_pairs(cls, pairs: Iterable[tuple[str, str]], version: str = "") -> GraphView:
        """Build from (source name, target name) pairs; node ids follow first appearance."""
        started = time.perf_counter()
        index: dict[str, int] = {}
        src: list[int] = []
        dst: list[int] = []
        for a, b in pairs:
            src.append(index.setdefault(a, len(index)))
            dst.append(index.setdefault(b, len(index)))
        view = cls.from_edges(list(index), np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
                              version=version)
        view.build_ms = (time.perf_counter() - started) * 1000.0
        return view

    @property
    def graph(self) -> ig.Graph:
        """The igraph twin of this view, built on first access and then reused.

        Pruning never needs it (it reads the CSR arrays), so queries do not pay for it; at 1M edges
        it costs about a second, which only analytics that use igraph should spend.
        """
        if self._graph is None:
            # igraph ingests a list of int tuples about 2.5x faster than a numpy array (measured,
            # igraph 1.0); the collector is paused so a million fresh tuples trigger no full sweeps.
            gc_was_enabled = gc.isenabled()
            gc.disable()
            try:
                graph = ig.Graph(n=self.node_count, edges=list(zip(self.edge_src.tolist(), self.edge_dst.tolist())))
            finally:
                if gc_was_enabled:
                    gc.enable()
            graph.vs["name"] = self.names
            if self.edge_ids is not None:
                graph.es["id"] = self.edge_ids
            if self.edge_weights is not None:
                graph.es["weight"] = self.edge_weights.tolist()
            if self.node_weights is not None:
                graph.vs["weight"] = self.node_weights.tolist()
            self._graph = graph
        return self._graph

    # ---- queries --------------------------------------------------------------------------------

    @property
    def node_count(self) -> int:
        return len(self.names)

    @property
    def edge_count(self) -> int:
        return int(self.edge_src.size)

    def degree(self, i: int) -> int:
        """Number of distinct neighbours of node ``i``."""
        return self.degree_list[i]

    def neighbors(self, i: int) -> np.ndarray:
        """Neighbour ids of node ``i`` in edge-insertion order."""
        return self.indices[self.indptr_list[i]:self.indptr_list[i + 1]]

    def edge_between(self, i: int, j: int) -> int | None:
        """Edge id joining ``i`` and ``j``, or None; scans the smaller adjacency list."""
        if self.degree_list[j] < self.degree_list[i]:
            i, j = j, i
        lo, hi = self.indptr_list[i], self.indptr_list[i + 1]
        hits = np.flatnonzero(self.indices[lo:hi] == j)
        return int(self.slot_edge[lo + hits[0]]) if hits.size else None

    def ids_for(self, names: Iterable[str]) -> tuple[list[int], list[str]]:
        """Map names to node ids; returns (ids of known names in order, unknown names)."""
        ids: list[int] = []
        unknown: list[str] = []
        for name in names:
            i = self.index.get(name)
            if i is None:
                unknown.append(name)
            else:
                ids.append(i)
        return ids, unknown

    def __repr__(self) -> str:
        return f"GraphView(nodes={self.node_count}, edges={self.edge_count}, version={self.version!r})"
