"""`pathrag bench pruning`: latency of flow-based path pruning on a given or generated graph.

Registered under the `bench` group by `pathrag_pipeline.cli`; all logic lives in
`pathrag_pipeline.bench_pruning`.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from pathrag_pipeline.bench_pruning import (
    DEFAULT_EDGE_COUNTS,
    generate_seeds,
    load_edges_tsv,
    load_seeds_jsonl,
    plot_scaling,
    run_bench,
    scaling_bench,
)
from pathrag_pipeline.terminal import make_console

ROW_LABELS = {"nodes": "nodes", "edges": "edges", "generate_s": "generate s", "build_ms": "build ms",
              "p50_ms": "p50 ms", "p95_ms": "p95 ms", "cpu_p95_ms": "cpu p95 ms", "mean_paths": "paths/query"}
SUMMARY_KEYS = ("variant", "nodes", "edges", "n_queries", "build_ms", "p50_ms", "p95_ms", "cpu_p95_ms",
                "unknown_seeds")


def _table(columns: list[str], rows: list[list], title: str) -> None:
    table = Table(title=title)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*[str(v) for v in row])
    make_console().print(table)


@click.command("pruning")
@click.option("--edges", "edges_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Graph as source<TAB>target lines (undirected).")
@click.option("--seeds", "seeds_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="One JSON list of node names per line (default: generated from the graph).")
@click.option("--generate", is_flag=True, help="Benchmark synthetic preferential-attachment graphs instead of --edges.")
@click.option("--edges-count", "edge_counts", type=int, multiple=True,
              help="Edge count of a generated graph; repeat for several sizes [default: 1e3 1e4 1e5 1e6].")
@click.option("--m", "m", default=10, show_default=True, help="Edges added per node by the generator.")
@click.option("--variant", type=click.Choice(["paper", "reference"]), default="paper", show_default=True)
@click.option("--queries", "n_queries", default=100, show_default=True, help="Generated seed sets per graph.")
@click.option("--n-seeds", default=40, show_default=True, help="Retrieved nodes per generated seed set (N).")
@click.option("--alpha", default=0.8, show_default=True, help="Decay rate.")
@click.option("--theta", type=float, default=None, help="Early-stop threshold [default: 0.05 paper, 0.3 reference].")
@click.option("--max-hops", type=int, default=None, help="Hop limit [default: 4 paper, 3 reference].")
@click.option("--top-k", default=15, show_default=True, help="Paths kept per query.")
@click.option("--time-budget", type=float, default=None,
              help="Stop timing a graph after this many seconds (useful for the exhaustive reference variant).")
@click.option("--seed", default=0, show_default=True, help="Random seed for generated graphs and seed sets.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a latency-vs-size PNG (with --generate; needs matplotlib).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def pruning(edges_path: Path | None, seeds_path: Path | None, generate: bool, edge_counts: tuple[int, ...], m: int,
            variant: str, n_queries: int, n_seeds: int, alpha: float, theta: float | None, max_hops: int | None,
            top_k: int, time_budget: float | None, seed: int, plot_path: Path | None, as_json: bool) -> None:
    """Time flow-based path pruning per query (p50/p95) on --edges, or on generated graphs with --generate."""
    params = {"alpha": alpha, "theta": theta, "max_hops": max_hops, "top_k": top_k}
    if generate == (edges_path is not None):
        raise click.UsageError("give exactly one of --edges EDGES.tsv or --generate")
    if edges_path is None and seeds_path is not None:
        raise click.UsageError("--seeds needs --edges (generated graphs get generated seed sets)")
    try:
        if generate:
            rows = scaling_bench(edge_counts or DEFAULT_EDGE_COUNTS, n_queries=n_queries, n_seeds=n_seeds,
                                 variant=variant, m=m, seed=seed, time_budget_s=time_budget, **params)
            if plot_path is not None:
                plot_scaling(rows, plot_path)
            if as_json:
                click.echo(json.dumps({"rows": rows}, indent=1))
            else:
                _table(list(ROW_LABELS.values()), [[r[k] for k in ROW_LABELS] for r in rows],
                       title=f"Path pruning, {variant} variant, N={n_seeds} seeds, {n_queries} queries per graph")
                if plot_path is not None:
                    click.echo(f"plot written to {plot_path}")
            return
        if plot_path is not None:
            raise click.UsageError("--plot needs --generate (it plots latency against graph size)")
        view = load_edges_tsv(edges_path)
        seed_sets = (load_seeds_jsonl(seeds_path) if seeds_path is not None
                     else generate_seeds(view, n_queries, n_seeds=n_seeds, seed=seed))
        result = run_bench(view, seed_sets, variant=variant, time_budget_s=time_budget, **params)
    except (ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result, indent=1))
        return
    _table(list(SUMMARY_KEYS), [[result[k] for k in SUMMARY_KEYS]], title=f"Path pruning on {edges_path}")
    if result["unknown_seeds"]:
        click.echo(f"note: {result['unknown_seeds']} seed names were not in the graph and were skipped")
