"""`pathrag bench pruning`: per-query latency of flow-based path pruning, on a given graph or on
synthetic preferential-attachment graphs of growing size.

The claim being measured is the paper's: pruning cost depends on the pruned neighbourhood
(about ``1/((1-alpha)*theta)`` edge visits per retrieved node, O(N^2/((1-alpha)*theta)) node updates for
N retrieved nodes), not on graph size. Synthetic graphs are igraph Barabasi-Albert graphs (heavy-tailed
degrees, like entity graphs with a few hub entities).

Two kinds of seed sets (``SEED_KINDS``): ``"random"`` mimics what keyword retrieval returns, a few related
clusters plus unrelated stragglers, drawn uniformly over nodes so they are mostly ordinary nodes; ``"hub"``
is the graph's highest-degree nodes, what a question naming countries or nationalities retrieves from an
entity graph. Two pruning rules (``RULES``): ``"literal"`` is the paper's early stop and ``"seed_pass"`` our
departure where every seed passes its first hop, which scans the seed's whole degree, so on hub seeds it
costs what the bound above does not cover. ``"default"`` names whichever rule queries use
(``QueryParams().seed_pass``), so the benchmark measures the code as it runs.
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
from pathrag_pipeline.query.params import QueryParams
from pathrag_pipeline.query.pruning import prune_paths

DEFAULT_EDGE_COUNTS = (1_000, 10_000, 100_000, 1_000_000)
SEED_KINDS = ("random", "hub")
RULES = {"literal": False, "seed_pass": True}  # rule name -> prune_paths(seed_pass=...)


def default_rule() -> str:
    """The rule a query uses when it does not choose: the name of ``QueryParams().seed_pass``."""
    return "seed_pass" if QueryParams().seed_pass else "literal"


def resolve_rules(choice: str) -> tuple[str, ...]:
    """``"default"`` (the query default), ``"literal"``, ``"seed_pass"`` or ``"both"`` as rule names, the
    query default first."""
    if choice == "default":
        return (default_rule(),)
    if choice == "both":
        return tuple(sorted(RULES, key=lambda r: r != default_rule()))
    if choice in RULES:
        return (choice,)
    raise ValueError(f"rules={choice!r} is not one of default, literal, seed_pass, both")


def resolve_seed_kinds(choice: str) -> tuple[str, ...]:
    """``"random"``, ``"hub"`` or ``"both"`` as seed kinds."""
    if choice == "both":
        return SEED_KINDS
    if choice in SEED_KINDS:
        return (choice,)
    raise ValueError(f"seed kind {choice!r} is not one of random, hub, both")


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


def hub_seeds(view: GraphView, n_seeds: int = 40) -> list[str]:
    """The ``n_seeds`` highest-degree nodes of ``view``, highest first (ties: lower node id first), so the
    set depends only on the graph."""
    order = np.argsort(-view.degrees, kind="stable")[:min(n_seeds, view.node_count)]
    return [view.names[int(i)] for i in order]


def seed_sets_for(view: GraphView, kind: str, n_queries: int, n_seeds: int = 40, seed: int = 0) -> list[list[str]]:
    """``n_queries`` seed sets of one kind: ``generate_seeds`` for ``"random"``; for ``"hub"`` the same
    :func:`hub_seeds` set each time (timing one deterministic input repeatedly)."""
    if kind == "random":
        return generate_seeds(view, n_queries, n_seeds=n_seeds, seed=seed)
    if kind == "hub":
        hubs = hub_seeds(view, n_seeds)
        return [list(hubs) for _ in range(n_queries)]
    raise ValueError(f"seed kind {kind!r} is not one of {', '.join(SEED_KINDS)}")


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
                  seed_kinds: Sequence[str] = ("random",), rules: Sequence[str] = ("default",),
                  **params) -> list[dict]:
    """One row per synthetic graph size, seed kind and rule: graph size, generation and build time, latency
    percentiles, mean number of paths returned, the largest seed degree.

    ``rules`` are names of ``RULES`` or ``"default"`` (the query default); the reference variant has no early
    stop to vary, so it gets one row per size and seed kind with rule ``"reference"``.
    """
    names = ["reference"] if variant == "reference" else [default_rule() if r == "default" else r for r in rules]
    for name in names:
        if name != "reference" and name not in RULES:
            raise ValueError(f"rule {name!r} is not one of default, {', '.join(RULES)}")
    rows: list[dict] = []
    for count in edge_counts:
        t0 = time.perf_counter()
        view = generate_graph(int(count), m=m, seed=seed)
        generate_s = time.perf_counter() - t0
        for kind in seed_kinds:
            seed_sets = seed_sets_for(view, kind, n_queries, n_seeds=n_seeds, seed=seed)
            max_degree = max(view.degree_list[view.index[name]] for names_ in seed_sets for name in names_)
            for rule in names:
                extra = {} if rule == "reference" else {"seed_pass": RULES[rule]}
                result = run_bench(view, seed_sets, variant=variant, time_budget_s=time_budget_s, **params, **extra)
                rows.append({
                    "variant": variant,
                    "rule": rule,
                    "default_rule": rule == default_rule(),
                    "seeds": kind,
                    "nodes": result["nodes"],
                    "edges": result["edges"],
                    "n_seeds": n_seeds,
                    "max_seed_degree": max_degree,
                    "n_queries": result["n_queries"],
                    "generate_s": round(generate_s, 2),
                    "build_ms": result["build_ms"],
                    "p50_ms": result["p50_ms"],
                    "p95_ms": result["p95_ms"],
                    "cpu_p95_ms": result["cpu_p95_ms"],
                    "mean_paths": round(float(np.mean([len(q["paths"]) for q in result["queries"]])), 2),
                })
    return rows


def rule_label(row: dict) -> str:
    """How a row's rule reads in a table: ``literal (default)``, ``seed_pass``, ``reference``."""
    rule = row.get("rule", "literal")
    return f"{rule} (default)" if row.get("default_rule") and rule != "reference" else rule


def plot_scaling(rows: Sequence[dict], png_path: str | Path) -> Path:
    """Log-log plot of p50/p95 query latency against edge count (matplotlib, optional extra): the paper
    variant under the query-default rule, one pair of lines per seed kind."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
    except ImportError:
        raise RuntimeError("plotting needs matplotlib: pip install 'pathrag-pipeline[bench]'") from None
    png_path = Path(png_path)
    shown = [r for r in rows if r.get("default_rule", True)] or list(rows)
    kinds = list(dict.fromkeys(r.get("seeds", "random") for r in shown))
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, kind in enumerate(kinds):
        sel = [r for r in shown if r.get("seeds", "random") == kind]
        edges = [r["edges"] for r in sel]
        colour = f"C{i}"
        ax.plot(edges, [r["p50_ms"] for r in sel], marker="o", color=colour, label=f"p50, {kind} seeds")
        ax.plot(edges, [r["p95_ms"] for r in sel], marker="s", color=colour, linestyle="--",
                label=f"p95, {kind} seeds")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("edges")
    ax.set_ylabel("ms per query")
    variant = shown[0]["variant"] if shown else ""
    rule = rule_label(shown[0]) if shown else ""
    n_seeds = shown[0]["n_seeds"] if shown else ""
    ax.set_title(f"Path pruning latency ({variant}, {rule}, N={n_seeds} seeds)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    plt.close(fig)
    return png_path
