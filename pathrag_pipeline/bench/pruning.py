"""`pathrag bench pruning`: per-query latency of flow-based path pruning, on a given graph or on
synthetic preferential-attachment graphs of growing size.

The claim being measured is the paper's: pruning cost depends on the pruned neighbourhood
(about ``1/((1-alpha)*theta)`` edge visits per retrieved node), not on graph size. Synthetic graphs
are igraph Barabasi-Albert graphs (heavy-tailed degrees, like entity graphs with a few hub
entities); seed sets mimic what keyword retrieval returns: a few related clusters plus unrelated
stragglers, drawn uniformly over nodes so they are mostly ordinary nodes rather than hubs.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from pathlib import Path

import igraph as ig
import numpy as np

from pathrag_pipeline.query.graph_view import GraphView
from pathrag_pipeline.query.pruning import prune_paths

DEFAULT_EDGE_COUNTS = (1_000, 10_000, 100_000, 1_000_000)


# ---- inputs ----------------------------------------------------------------------------------------

def load_edges_tsv(path: str | Path) -> GraphView:
    """Read an undirected graph from ``source<TAB>target`` lines.

    Blank lines and lines starting with ``#`` are skipped. Any other line must hold exactly two
    non-empty tab-separated names; otherwise a ValueError names the file and line.
    """
    path = Path(path)
    started = time.perf_counter()
    index: dict[str, int] = {}
    src: list[int] = []
    dst: list[int] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            line = line.rstrip("\r\n")
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
                raise ValueError(f"{path}:{lineno}: expected 'source<TAB>target' (two non-empty tab-separated "
                                 f"names), got {line[:80]!r}")
            src.append(index.setdefault(fields[0].strip(), len(index)))
            dst.append(index.setdefault(fields[1].strip(), len(index)))
    if not src:
        raise ValueError(f"{path}: no edges found; expected 'source<TAB>target' lines")
    view = GraphView.from_edges(list(index), np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
                                version=str(path))
    view.build_ms = (time.perf_counter() - started) * 1000.0  # include parsing: that is the real build
    return view


def load_seeds_jsonl(path: str | Path) -> list[list[str]]:
    """Read one seed set per line: a JSON list of node names.

    Names are not checked against a graph here; :func:`run_bench` skips names the graph lacks and
    reports how many it skipped (retrieval can legitimately return entities missing from a graph
    snapshot). Malformed lines raise a ValueError naming the file and line.
    """
    path = Path(path)
    seed_sets: list[list[str]] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg}); expected a list of node names") from None
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{path}:{lineno}: expected a JSON list of node-name strings, got {line.strip()[:80]}")
            seed_sets.append(value)
    if not seed_sets:
        raise ValueError(f"{path}: no seed sets found; expected one JSON list of node names per line")
    return seed_sets


# ---- synthetic data ----------------------------------------------------------------------------

def generate_graph(n_edges: int, m: int = 10, seed: int = 0) -> GraphView:
    """Preferential-attachment graph with about ``n_edges`` edges (``n_edges / m`` nodes, ``m`` edges
    per new node), node names ``n0, n1, ...``. Deterministic for a given seed."""
    if n_edges < m:
        raise ValueError(f"n_edges={n_edges} must be at least m={m}")
    n_nodes = max(m + 1, round(n_edges / m))
    ig.set_random_number_generator(random.Random(seed))
    try:
        g = ig.Graph.Barabasi(n_nodes, m)
    finally:
        ig.set_random_number_generator(random)
    edges = np.array(g.get_edgelist(), dtype=np.int64).reshape(-1, 2)
    names = [f"n{i}" for i in range(n_nodes)]
    return GraphView.from_edges(names, edges[:, 0], edges[:, 1], version=f"barabasi-n{n_nodes}-m{m}-seed{seed}")


def generate_seeds(view: GraphView, n_queries: int, n_seeds: int = 40, seed: int = 0,
                   local_share: float = 0.6) -> list[list[str]]:
    """Seed sets shaped like retrieval output: ``local_share`` of each set comes from short random
    walks (1-3 steps) around 2-4 random anchor nodes, the rest are uniform random nodes."""
    rng = np.random.default_rng(seed)
    n = view.node_count
    n_seeds = min(n_seeds, n)
    indptr = view.indptr_list
    out: list[list[str]] = []
    for _ in range(n_queries):
        chosen: dict[int, None] = {}
        anchors = rng.integers(0, n, size=int(rng.integers(2, 5))).tolist()
        n_local = int(round(n_seeds * local_share))
        attempts = 0
        while len(chosen) < n_local and attempts < 20 * n_seeds:
            attempts += 1
            v = anchors[attempts % len(anchors)]
            for _step in range(int(rng.integers(0, 4))):
                d = indptr[v + 1] - indptr[v]
                if d == 0:
                    break
                v = int(view.indices[indptr[v] + int(rng.integers(0, d))])
            chosen[v] = None
        while len(chosen) < n_seeds:
            chosen[int(rng.integers(0, n))] = None
        out.append([view.names[i] for i in chosen])
    return out


# ---- measurements ------------------------------------------------------------------------------

def run_bench(view: GraphView, seed_sets: Sequence[Sequence[str]], variant: str = "paper",
              time_budget_s: float | None = None, **params) -> dict:
    """Time :func:`prune_paths` (name lookup included) once per seed set.

    Returns ``{"variant", "params", "nodes", "edges", "build_ms", "p50_ms", "p95_ms", "mean_ms",
    "cpu_p50_ms", "cpu_p95_ms", "n_queries", "unknown_seeds",
    "queries": [{"ms", "cpu_ms", "paths": [{"nodes": [names], "score"}]}]}``. Wall-clock ``ms`` is the
    figure that matters; process CPU time is reported too because on a busy machine preemption
    inflates the wall-clock tail.
    Unknown seed names are skipped and counted in ``unknown_seeds``. With ``time_budget_s`` the run
    stops after the query that crosses the budget (for the exhaustive reference variant).
    One untimed warm-up query runs first.
    """
    if not seed_sets:
        raise ValueError("run_bench needs at least one seed set")
    warm_ids, _ = view.ids_for(seed_sets[0])
    prune_paths(view, warm_ids, variant=variant, **params)
    queries: list[dict] = []
    unknown = 0
    started = time.perf_counter()
    for names in seed_sets:
        t0, c0 = time.perf_counter(), time.process_time()
        ids, missing = view.ids_for(names)
        paths = prune_paths(view, ids, variant=variant, **params)
        ms = (time.perf_counter() - t0) * 1000.0
        cpu_ms = (time.process_time() - c0) * 1000.0
        unknown += len(missing)
        queries.append({"ms": round(ms, 3), "cpu_ms": round(cpu_ms, 3),
                        "paths": [{"nodes": [view.names[i] for i in p.nodes], "score": p.score} for p in paths]})
        if time_budget_s is not None and time.perf_counter() - started > time_budget_s:
            break
    times = np.array([q["ms"] for q in queries])
    cpu = np.array([q["cpu_ms"] for q in queries])
    return {
        "variant": variant,
        "params": params,
        "nodes": view.node_count,
        "edges": view.edge_count,
        "build_ms": round(view.build_ms, 1),
        "p50_ms": round(float(np.percentile(times, 50)), 3),
        "p95_ms": round(float(np.percentile(times, 95)), 3),
        "mean_ms": round(float(times.mean()), 3),
        "cpu_p50_ms": round(float(np.percentile(cpu, 50)), 3),
        "cpu_p95_ms": round(float(np.percentile(cpu, 95)), 3),
        "n_queries": len(queries),
        "unknown_seeds": unknown,
        "queries": queries,
    }


def scaling_bench(edge_counts: Sequence[float] = DEFAULT_EDGE_COUNTS, n_queries: int = 100, n_seeds: int = 40,
                  variant: str = "paper", m: int = 10, seed: int = 0, time_budget_s: float | None = None,
                  **params) -> list[dict]:
    """One row per synthetic graph size: graph size, generation and build time, latency percentiles,
    mean number of paths returned."""
    rows: list[dict] = []
    for count in edge_counts:
        t0 = time.perf_counter()
        view = generate_graph(int(count), m=m, seed=seed)
        generate_s = time.perf_counter() - t0
        seed_sets = generate_seeds(view, n_queries, n_seeds=n_seeds, seed=seed)
        result = run_bench(view, seed_sets, variant=variant, time_budget_s=time_budget_s, **params)
        rows.append({
            "variant": variant,
            "nodes": result["nodes"],
            "edges": result["edges"],
            "n_seeds": n_seeds,
            "n_queries": result["n_queries"],
            "generate_s": round(generate_s, 2),
            "build_ms": result["build_ms"],
            "p50_ms": result["p50_ms"],
            "p95_ms": result["p95_ms"],
            "cpu_p95_ms": result["cpu_p95_ms"],
            "mean_paths": round(float(np.mean([len(q["paths"]) for q in result["queries"]])), 2),
        })
    return rows


def plot_scaling(rows: Sequence[dict], png_path: str | Path) -> Path:
    """Log-log plot of p50/p95 query latency against edge count (matplotlib, optional extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
    except ImportError:
        raise RuntimeError("plotting needs matplotlib: pip install 'pathrag-pipeline[bench]'") from None
    png_path = Path(png_path)
    edges = [r["edges"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(edges, [r["p50_ms"] for r in rows], marker="o", label="p50")
    ax.plot(edges, [r["p95_ms"] for r in rows], marker="s", label="p95")
    ax.set_xscale("log")
    if any("cpu_p95_ms" in r for r in rows):
        ax.plot(edges, [r.get("cpu_p95_ms") for r in rows], marker="^", linestyle="--", label="p95 CPU time")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("edges")
    ax.set_ylabel("ms per query")
    variant = rows[0]["variant"] if rows else ""
    n_seeds = rows[0]["n_seeds"] if rows else ""
    ax.set_title(f"Path pruning latency ({variant}, N={n_seeds} seeds)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    plt.close(fig)
    return png_path
