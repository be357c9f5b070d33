import itertools

import numpy as np
import pytest

from pathrag_lab.bench.pruning import generate_graph, generate_seeds
from pathrag_pipeline.query.graph_view import GraphView
from pathrag_pipeline.query.pruning import prune_paths, propagate
from pathrag_pipeline.query.reference_pruning import _enumerate_simple_paths

# A diamond with a tail:  s - a, s - b, a - c, b - c, c - d
# degrees: s 2, a 2, b 2, c 3, d 1
DIAMOND = [("s", "a"), ("s", "b"), ("a", "c"), ("b", "c"), ("c", "d")]


def _view(pairs):
    return GraphView.from_name_pairs(pairs)


def _by_name(view, flow):
    return {view.names[v]: r for v, r in flow.resource.items()}


def test_flow_resource_values_by_hand():
    view = _view(DIAMOND)
    flow = propagate(view, view.index["s"], alpha=0.8, theta=0.01, max_hops=4)
    # S(s) = 1; s passes 0.8 * 1 / 2 = 0.4 to a and to b.
    # a and b each pass 0.8 * 0.4 / 2 = 0.16 to c (the share towards s is lost: s already has resource);
    # c is reached by two parents in the same layer, so S(c) = 0.16 + 0.16 = 0.32 (Eq. 3 sums).
    # c passes 0.8 * 0.32 / 3 = 0.085333 to d.
    expected = {"s": 1.0, "a": 0.4, "b": 0.4, "c": 0.32, "d": 0.8 * 0.32 / 3}
    got = _by_name(view, flow)
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == pytest.approx(value)
    assert {view.names[v]: k for v, k in flow.layer.items()} == {"s": 0, "a": 1, "b": 1, "c": 2, "d": 3}


def test_early_stop_prunes():
    view = _view(DIAMOND)
    s = view.index["s"]
    # theta 0.15: a and b propagate (0.4 / 2 = 0.2), c does not (0.32 / 3 = 0.107): d is never reached
    assert set(_by_name(view, propagate(view, s, alpha=0.8, theta=0.15, max_hops=4))) == {"s", "a", "b", "c"}
    # theta 0.25: a and b (0.2) stop too, so c is never reached
    assert set(_by_name(view, propagate(view, s, alpha=0.8, theta=0.25, max_hops=4))) == {"s", "a", "b"}
    # the hop cap stops the flow as well
    assert set(_by_name(view, propagate(view, s, alpha=0.8, theta=0.0, max_hops=1))) == {"s", "a", "b"}


def test_hub_never_fans_out():
    pairs = [("hub", f"leaf{i}") for i in range(100)] + [("leaf0", "x")]
    view = _view(pairs)
    flow = propagate(view, view.index["hub"], alpha=0.8, theta=0.05, max_hops=4)
    assert flow.resource == {view.index["hub"]: 1.0}  # 1 / 100 < theta: the start itself stops
    # from a leaf, the hub receives resource (it can end a path) but does not pass it on
    flow = propagate(view, view.index["x"], alpha=0.8, theta=0.05, max_hops=4)
    assert set(_by_name(view, flow)) == {"x", "leaf0", "hub"}


def test_visited_edges_stay_within_paper_bound():
    view = generate_graph(20_000, m=3, seed=5)
    alpha, theta = 0.8, 0.05
    bound = 1 / ((1 - alpha) * theta)
    for start in range(0, view.node_count, 97):
        flow = propagate(view, start, alpha=alpha, theta=theta, max_hops=10)
        fanned = [v for v, r in flow.resource.items()
                  if flow.layer[v] < 10 and view.degree(v) and r / view.degree(v) >= theta]
        assert sum(view.degree(v) for v in fanned) <= bound + 1e-9


def test_best_path_and_score_follow_eq4():
    view = _view(DIAMOND)
    s, d = view.index["s"], view.index["d"]
    paths = prune_paths(view, [s, d], alpha=0.8, theta=0.05)
    assert len(paths) == 1
    p = paths[0]
    # From s: path s-a-c-d scores (1 + 0.4 + 0.32 + 0.0853) / 3 = 0.602.
    # From d (degree 1): S(c) = 0.8, S(a) = S(b) = 0.8 * 0.8 / 3 = 0.2133, S(s) = 2 * 0.8 * 0.2133 / 2 = 0.1707;
    # path d-c-a-s scores (1 + 0.8 + 0.2133 + 0.1707) / 3 = 0.728, the better direction.
    assert [view.names[v] for v in p.nodes] == ["d", "c", "a", "s"]  # a before b: first parent wins ties
    assert p.score == pytest.approx((1 + 0.8 + 0.64 / 3 + 0.512 / 3) / 3)
    assert (p.source, p.target, p.hops) == (d, s, 3)
    assert [view.edge_between(u, v) for u, v in zip(p.nodes, p.nodes[1:])] == list(p.edges)


def _flow_paths(view, flow, target, theta, max_hops):
    """All paths along which resource reached ``target`` (brute force over the layered flow)."""
    out = []

    def walk(v, path):
        if v == target:
            out.append(tuple(path))
            return
        d = view.degree(v)
        if flow.layer[v] >= max_hops or flow.resource[v] / d < theta:
            return
        for u in view.neighbors(v).tolist():
            if flow.layer.get(u) == flow.layer[v] + 1:
                walk(u, path + [u])

    walk(flow.start, [flow.start])
    return out


def test_pair_paths_are_the_best_flow_paths_by_eq4():
    view = generate_graph(600, m=2, seed=11)
    seeds = generate_seeds(view, 1, n_seeds=12, seed=2)[0]
    ids, _ = view.ids_for(seeds)
    theta, max_hops = 0.02, 4
    paths = prune_paths(view, ids, theta=theta, max_hops=max_hops, top_k=1000)
    assert paths, "expected some connected seed pairs"
    flows = {s: propagate(view, s, alpha=0.8, theta=theta, max_hops=max_hops) for s in ids}
    found = {frozenset((p.source, p.target)): p for p in paths}
    for a, b in itertools.combinations(ids, 2):
        best = None
        for start, end in ((a, b), (b, a)):
            flow = flows[start]
            for nodes in _flow_paths(view, flow, end, theta, max_hops) if end in flow.resource else []:
                score = sum(flow.resource[v] for v in nodes) / (len(nodes) - 1)
                best = score if best is None else max(best, score)
        if best is None:
            assert frozenset((a, b)) not in found
        else:
            p = found[frozenset((a, b))]
            assert p.score == pytest.approx(best)
            flow = flows[p.source]
            assert p.score == pytest.approx(sum(flow.resource[v] for v in p.nodes) / p.hops)


def test_top_k_and_orderings():
    view = generate_graph(2_000, m=2, seed=1)
    ids, _ = view.ids_for(generate_seeds(view, 1, n_seeds=30, seed=4)[0])
    everything = prune_paths(view, ids, theta=0.02, top_k=1000)
    assert len(everything) > 5
    scores = [p.score for p in everything]
    assert scores == sorted(scores, reverse=True)
    assert prune_paths(view, ids, theta=0.02, top_k=5) == everything[:5]
    assert prune_paths(view, ids, theta=0.02, top_k=0) == []

    hop_first = prune_paths(view, ids, theta=0.02, top_k=1000, ordering="hop_first")
    assert sorted(hop_first, key=lambda p: (p.source, p.target)) == sorted(everything, key=lambda p: (p.source, p.target))
    keys = [(p.hops, -p.score) for p in hop_first]
    assert keys == sorted(keys)

    shuffled = prune_paths(view, ids, theta=0.02, top_k=1000, ordering="random", rng_seed=7)
    assert shuffled == prune_paths(view, ids, theta=0.02, top_k=1000, ordering="random", rng_seed=7)
    assert sorted(shuffled, key=lambda p: (p.source, p.target)) == sorted(everything, key=lambda p: (p.source, p.target))
    assert shuffled != everything


def test_results_are_deterministic():
    view = generate_graph(5_000, m=3, seed=2)
    for seeds in generate_seeds(view, 5, n_seeds=40, seed=9):
        ids, _ = view.ids_for(seeds)
        first = prune_paths(view, ids)
        assert first == prune_paths(view, ids)
        assert first == prune_paths(view, ids + ids[:5])  # repeated seeds are ignored
    rebuilt = generate_graph(5_000, m=3, seed=2)
    ids, _ = rebuilt.ids_for(seeds)
    assert prune_paths(rebuilt, ids) == first


def test_invalid_arguments_are_named():
    view = _view(DIAMOND)
    with pytest.raises(ValueError, match="variant='fast'"):
        prune_paths(view, [0, 1], variant="fast")
    with pytest.raises(ValueError, match="ordering='best'"):
        prune_paths(view, [0, 1], ordering="best")
    with pytest.raises(ValueError, match="seed node id 99"):
        prune_paths(view, [0, 99])
    with pytest.raises(ValueError, match="alpha"):
        prune_paths(view, [0, 1], alpha=1.5)
    with pytest.raises(ValueError, match="paper variant only"):
        prune_paths(view, [0, 1], variant="reference", ordering="hop_first")


# ---- reference variant (public PathRAG code) ----------------------------------------------------

# Edges in insertion order (a networkx.Graph built from them lists neighbours in this order):
#   e0 A-B, e1 B-D, e2 A-C, e3 C-D, e4 C-E, e5 E-D, e6 A-F
REFERENCE_GRAPH = [("A", "B"), ("B", "D"), ("A", "C"), ("C", "D"), ("C", "E"), ("E", "D"), ("A", "F")]


def test_reference_variant_matches_hand_checked_public_code():
    """Expected output worked out by hand from PathRAG/operate.py (find_paths_and_edges_with_stats,
    bfs_weighted_paths, _find_most_related_edges_from_entities3) with retrieved nodes [D, A].

    DFS per ordered pair (neighbours in insertion order, <= 3 hops, simple):
      (D, A): D-B-A, D-C-A, D-E-C-A        (A, D): A-B-D, A-C-D, A-C-E-D
      hop counts: 1-hop 0, 2-hop 4, 3-hop 2  ->  keep min(15, 0//2 + 4//2 + 2//2) = 3 paths
    bfs_weighted_paths for (D, A): follow D->{B,C,E}, B->{A}, C->{A}, E->{C}
      w(D,B) = w(D,C) = w(D,E) = 1/3 > 0.3, so each spreads 1/3 * 0.8 / 1 = 0.2667:
      w(B,A) = w(C,A) = w(E,C) = 0.2667; E-C is not the target and 0.2667 <= 0.3, so it stops.
      D-B-A: (1/3 + 0.2667) / 2 = 0.3   D-C-A: 0.3   D-E-C-A: (1/3 + 0.2667 + 0.2667) / 3 = 0.2889
    bfs_weighted_paths for (A, D): follow A->{B,C}, B->{D}, C->{D,E}, E->{D}
      w(A,B) = w(A,C) = 0.5 > 0.3: w(B,D) = 0.5 * 0.8 / 1 = 0.4; w(C,D) = w(C,E) = 0.5 * 0.8 / 2 = 0.2;
      C-E: 0.2 <= 0.3 so E never spreads and w(E,D) stays 0.
      A-B-D: (0.5 + 0.4) / 2 = 0.45   A-C-D: (0.5 + 0.2) / 2 = 0.35   A-C-E-D: (0.5 + 0.2 + 0) / 3 = 0.2333
    Stable sort by score, descending: A-B-D .45, A-C-D .35, D-B-A .3, D-C-A .3, D-E-C-A .2889, A-C-E-D .2333
    Drop repeated node sets ({A,B,D}, {A,C,D}, {A,C,D,E} already seen): A-B-D, A-C-D, D-E-C-A; keep 3.
    """
    view = _view(REFERENCE_GRAPH)
    ids, _ = view.ids_for(["D", "A"])
    paths = prune_paths(view, ids, variant="reference")
    assert [("-".join(view.names[v] for v in p.nodes), round(p.score, 4)) for p in paths] == [
        ("A-B-D", 0.45),
        ("A-C-D", 0.35),
        ("D-E-C-A", round((1 / 3 + 0.8 / 3 + 0.8 / 3) / 3, 4)),
    ]
    assert [view.edge_between(u, v) for u, v in zip(paths[2].nodes, paths[2].nodes[1:])] == list(paths[2].edges)
    # top_k truncates the same list
    assert prune_paths(view, ids, variant="reference", top_k=2) == paths[:2]


def test_reference_triangle_keeps_direct_edge_first():
    """Triangle A-B, B-C, A-C with retrieved [A, B]: paths A-B, A-C-B, B-A, B-C-A (2 one-hop, 2 two-hop:
    keep 1 + 1 = 2). w(A,B) = 0.5 (target), w(A,C) = 0.5 > 0.3 -> w(C,B) = 0.4: A-B 0.5, A-C-B 0.45;
    the (B, A) pair mirrors it. Sorted: A-B, B-A, A-C-B, B-C-A; node-set dedupe leaves A-B, A-C-B."""
    view = _view([("A", "B"), ("B", "C"), ("A", "C")])
    ids, _ = view.ids_for(["A", "B"])
    paths = prune_paths(view, ids, variant="reference")
    assert [("-".join(view.names[v] for v in p.nodes), p.score) for p in paths] == [
        ("A-B", pytest.approx(0.5)), ("A-C-B", pytest.approx(0.45))]


def _naive_pair_dfs(view, seeds, max_hops):
    """One DFS per ordered pair, returning at the target, as find_paths_and_edges_with_stats does."""
    out = {}
    for s in seeds:
        for t in seeds:
            if s == t:
                continue

            def dfs(cur, path):
                if len(path) - 1 > max_hops:
                    return
                if cur == t:
                    out.setdefault((s, t), []).append(tuple(path))
                    return
                for x in view.neighbors(cur).tolist():
                    if x not in path:
                        dfs(x, path + [x])

            dfs(s, [s])
    return out


@pytest.mark.parametrize("max_hops", [1, 2, 3, 4])
def test_reference_enumeration_equals_per_pair_dfs(max_hops):
    view = generate_graph(400, m=2, seed=max_hops)
    ids, _ = view.ids_for(generate_seeds(view, 1, n_seeds=8, seed=1)[0])
    fast, hop_counts = _enumerate_simple_paths(view, ids, max_hops)
    naive = _naive_pair_dfs(view, ids, max_hops)
    assert {k: [nodes for nodes, _ in v] for k, v in fast.items()} == naive
    assert sum(hop_counts) == sum(len(v) for v in naive.values())
    for v in fast.values():
        for nodes, edges in v:
            assert list(edges) == [view.edge_between(a, b) for a, b in zip(nodes, nodes[1:])]


def test_reference_is_deterministic_on_generated_graph():
    view = generate_graph(3_000, m=2, seed=3)
    ids, _ = view.ids_for(generate_seeds(view, 1, n_seeds=15, seed=3)[0])
    first = prune_paths(view, ids, variant="reference")
    assert first and first == prune_paths(view, ids, variant="reference")
    assert len(first) <= 15
    assert len({tuple(sorted(p.nodes)) for p in first}) == len(first)
    assert all(np.diff([p.score for p in first]) <= 0)


# ---- benchmark loaders, runner and CLI ----------------------------------------------------------

def test_load_edges_tsv_and_line_numbered_errors(tmp_path):
    from pathrag_lab.bench.pruning import load_edges_tsv

    good = tmp_path / "g.tsv"
    good.write_text("# comment\nA\tB\n\nB\tC\nC\tA\n", encoding="utf-8")
    view = load_edges_tsv(good)
    assert view.names == ["A", "B", "C"] and view.edge_count == 3
    bad = tmp_path / "bad.tsv"
    bad.write_text("A\tB\nB C\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.tsv:2: expected 'source<TAB>target'"):
        load_edges_tsv(bad)
    bad.write_text("A\tB\tC\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.tsv:1:"):
        load_edges_tsv(bad)


def test_load_seeds_jsonl_and_line_numbered_errors(tmp_path):
    from pathrag_lab.bench.pruning import load_seeds_jsonl

    good = tmp_path / "s.jsonl"
    good.write_text('["A", "B"]\n\n["C"]\n', encoding="utf-8")
    assert load_seeds_jsonl(good) == [["A", "B"], ["C"]]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('["A"]\n{"seeds": ["A"]}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: expected a JSON list"):
        load_seeds_jsonl(bad)
    bad.write_text('["A"]\n["B"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: not valid JSON"):
        load_seeds_jsonl(bad)


def test_generators_are_seeded_and_sized():
    view = generate_graph(1_000, m=10, seed=0)
    assert view.node_count == 100 and 900 <= view.edge_count <= 1_000
    assert generate_graph(1_000, m=10, seed=0).edge_src.tolist() == view.edge_src.tolist()
    sets = generate_seeds(view, 3, n_seeds=40, seed=1)
    assert len(sets) == 3 and all(len(s) == 40 == len(set(s)) for s in sets)
    assert sets == generate_seeds(view, 3, n_seeds=40, seed=1)


def test_run_bench_reports_documented_keys():
    from pathrag_lab.bench.pruning import run_bench

    view = _view(DIAMOND)
    result = run_bench(view, [["s", "d"], ["a", "d", "nope"]], variant="paper", top_k=5)
    assert {"build_ms", "p50_ms", "p95_ms", "queries", "unknown_seeds", "n_queries"} <= result.keys()
    assert result["unknown_seeds"] == 1 and result["n_queries"] == 2
    assert result["queries"][0]["paths"][0]["nodes"] == ["d", "c", "a", "s"]
    assert all({"ms", "paths"} <= q.keys() for q in result["queries"])


def test_cli_generate_and_edges(tmp_path):
    import json

    from click.testing import CliRunner

    from pathrag_lab.cli import pruning

    runner = CliRunner()
    png = tmp_path / "scaling.png"
    out = runner.invoke(pruning, ["--generate", "--edges-count", "500", "--edges-count", "2000", "--queries", "3",
                                  "--n-seeds", "10", "--json", "--plot", str(png)])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)["rows"]
    assert [r["edges"] > 0 for r in rows] == [True, True] and {"p50_ms", "p95_ms", "build_ms"} <= rows[0].keys()
    assert png.stat().st_size > 0

    edges = tmp_path / "g.tsv"
    edges.write_text("".join(f"{a}\t{b}\n" for a, b in DIAMOND), encoding="utf-8")
    seeds = tmp_path / "s.jsonl"
    seeds.write_text('["s", "d"]\n', encoding="utf-8")
    out = runner.invoke(pruning, ["--edges", str(edges), "--seeds", str(seeds), "--variant", "reference", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["variant"] == "reference"
    out = runner.invoke(pruning, ["--edges", str(edges), "--seeds", str(seeds)])
    assert out.exit_code == 0 and "p50_ms" in out.output

    assert runner.invoke(pruning, []).exit_code == 2
    edges.write_text("s d\n", encoding="utf-8")
    out = runner.invoke(pruning, ["--edges", str(edges), "--seeds", str(seeds)])
    assert out.exit_code == 1 and "g.tsv:1" in out.output


# ---- hub seeds, both rules, and the report's pruning section (no timings asserted) ---------------

def test_hub_seeds_are_the_highest_degree_nodes_deterministically():
    from pathrag_lab.bench.pruning import hub_seeds, seed_sets_for

    view = generate_graph(1_000, m=10, seed=0)
    hubs = hub_seeds(view, 40)
    degrees = view.degrees
    assert len(hubs) == 40 == len(set(hubs))
    ids = [view.index[h] for h in hubs]
    assert min(degrees[ids]) >= max(np.delete(degrees, ids))  # no node outside the set has a higher degree
    assert [(-degrees[i], i) for i in ids] == sorted((-degrees[i], i) for i in ids)  # highest first, ties by id
    assert hub_seeds(generate_graph(1_000, m=10, seed=0), 40) == hubs
    # ties: equal degrees keep node order
    star = _view([("a", "b"), ("c", "d"), ("e", "hub"), ("f", "hub")])
    assert hub_seeds(star, 3) == ["hub", "a", "b"]
    assert seed_sets_for(view, "hub", 3, n_seeds=40) == [hubs, hubs, hubs]
    assert seed_sets_for(view, "random", 2, n_seeds=40, seed=1) == generate_seeds(view, 2, n_seeds=40, seed=1)
    with pytest.raises(ValueError, match="seed kind"):
        seed_sets_for(view, "celebrities", 1)


def test_rules_resolve_to_the_query_default_first():
    from pathrag_lab.bench.pruning import default_rule, resolve_rules, resolve_seed_kinds
    from pathrag_pipeline.query.params import QueryParams

    assert default_rule() == ("seed_pass" if QueryParams().seed_pass else "literal") == "literal"
    assert resolve_rules("default") == ("literal",) and resolve_rules("seed_pass") == ("seed_pass",)
    assert resolve_rules("both") == ("literal", "seed_pass")
    assert resolve_seed_kinds("both") == ("random", "hub") and resolve_seed_kinds("hub") == ("hub",)
    with pytest.raises(ValueError):
        resolve_rules("loose")


def test_scaling_bench_rows_cover_each_rule_and_seed_kind():
    from pathrag_lab.bench.pruning import scaling_bench

    rows = scaling_bench((1_000,), n_queries=2, n_seeds=40, seed_kinds=("random", "hub"),
                         rules=("default", "seed_pass"))
    assert [(r["rule"], r["seeds"], r["default_rule"]) for r in rows] == [
        ("literal", "random", True), ("seed_pass", "random", False),
        ("literal", "hub", True), ("seed_pass", "hub", False)]
    hub = [r for r in rows if r["seeds"] == "hub"]
    assert hub[0]["max_seed_degree"] == hub[1]["max_seed_degree"] > 20  # the graph's largest degree
    # on 40 hub seeds of a 100-node graph the seed pass finds at least the paths the literal rule does
    assert hub[1]["mean_paths"] >= hub[0]["mean_paths"]
    ref = scaling_bench((1_000,), n_queries=1, n_seeds=10, variant="reference", rules=("seed_pass",))
    assert [r["rule"] for r in ref] == ["reference"]


@pytest.mark.e2e
def test_report_pruning_section_has_both_rules_and_both_seed_kinds(tmp_path):
    from dataclasses import replace

    from pathrag_lab.bench.pruning import SEED_KINDS, plot_scaling, resolve_rules, scaling_bench
    from pathrag_lab.bench.report import QUICK, pruning_section

    sizes = replace(QUICK, pruning_edges=(1_000,), pruning_queries=3, reference_edges=(1_000,))
    paper = scaling_bench(sizes.pruning_edges, n_queries=3, n_seeds=40, seed_kinds=SEED_KINDS,
                          rules=resolve_rules("both"))
    reference = scaling_bench(sizes.reference_edges, n_queries=1, n_seeds=40, variant="reference",
                              time_budget_s=0.1)
    plot = plot_scaling(paper, tmp_path / "pruning.png")
    assert plot.stat().st_size > 0
    text = pruning_section(paper, reference, sizes, plot)
    table = [line for line in text.splitlines() if line.startswith("| paper ")]
    assert {tuple(cell.strip() for cell in line.split("|")[2:4]) for line in table} == {
        ("literal (default)", "random"), ("seed_pass", "random"), ("literal (default)", "hub"), ("seed_pass", "hub")}
    assert "| reference | reference | random |" in text
    assert "--seed-kind both --rules both" in text and "--variant reference" in text
    assert "1/((1-alpha)*theta) = 100 edges" in text and "O(N^2/((1-alpha)*theta))" in text
    assert "Hub seeds at" in text and "with seed_pass" in text
    assert "/work/" not in text and "pruning.png" in text


def test_cli_selects_seed_kinds_and_rules(tmp_path):
    import json

    from click.testing import CliRunner

    from pathrag_lab.cli import pruning

    runner = CliRunner()
    out = runner.invoke(pruning, ["--generate", "--edges-count", "1000", "--queries", "2", "--seed-kind", "hub",
                                  "--rules", "both", "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)["rows"]
    assert [(r["rule"], r["seeds"]) for r in rows] == [("literal", "hub"), ("seed_pass", "hub")]
    out = runner.invoke(pruning, ["--generate", "--edges-count", "1000", "--queries", "2"])
    assert out.exit_code == 0 and "literal (default)" in out.output and "seed_pass" not in out.output

    edges = tmp_path / "g.tsv"
    edges.write_text("".join(f"{a}\t{b}\n" for a, b in DIAMOND), encoding="utf-8")
    out = runner.invoke(pruning, ["--edges", str(edges), "--seed-kind", "both", "--n-seeds", "3", "--queries", "2",
                                  "--json"])
    assert out.exit_code == 0, out.output
    assert [r["seeds"] for r in json.loads(out.output)["results"]] == ["random", "hub"]
    seeds = tmp_path / "s.jsonl"
    seeds.write_text('["s", "d"]\n', encoding="utf-8")
    bad = runner.invoke(pruning, ["--edges", str(edges), "--seeds", str(seeds), "--seed-kind", "hub"])
    assert bad.exit_code == 2 and "--seed-kind" in bad.output
    bad = runner.invoke(pruning, ["--generate", "--variant", "reference", "--rules", "seed_pass"])
    assert bad.exit_code == 2 and "--rules" in bad.output
    assert "--seed-kind" in runner.invoke(pruning, ["--help"]).output
