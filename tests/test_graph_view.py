import numpy as np
import pytest

from pathrag_pipeline.query.graph_view import GraphView


def test_name_pairs_dedupe_self_loops_and_insertion_order():
    view = GraphView.from_name_pairs([("a", "b"), ("b", "c"), ("a", "a"), ("b", "a"), ("d", "b"), ("c", "b")],
                                     version="v1")
    assert view.names == ["a", "b", "c", "d"]
    assert view.index == {"a": 0, "b": 1, "c": 2, "d": 3}
    assert view.version == "v1"
    assert view.edge_count == 3  # a-b, b-c, d-b; the self-loop and both reversed repeats are gone
    assert [view.degree(i) for i in range(4)] == [1, 3, 1, 1]
    # neighbours of b in the order their edges were first inserted: a (edge 0), c (edge 1), d (edge 2)
    assert view.neighbors(1).tolist() == [0, 2, 3]
    assert view.edge_between(1, 3) == 2
    assert view.edge_between(3, 1) == 2
    assert view.edge_between(0, 2) is None


def test_from_edges_keeps_first_id_and_sums_weights():
    names = ["x", "y", "z"]
    src = np.array([0, 1, 1, 2, 0])
    dst = np.array([1, 0, 2, 2, 1])
    view = GraphView.from_edges(names, src, dst, edge_ids=["r1", "r2", "r3", "loop", "r5"],
                                edge_weights=[1.0, 2.0, 0.5, 9.0, 4.0], node_weights=[1, 2, 3])
    assert view.edge_ids == ["r1", "r3"]
    assert view.edge_weights.tolist() == [7.0, 0.5]
    assert (view.edge_src.tolist(), view.edge_dst.tolist()) == ([0, 1], [1, 2])
    g = view.graph
    assert g.vcount() == 3 and g.ecount() == 2
    assert g.vs["name"] == names
    assert g.es["id"] == ["r1", "r3"]
    assert g.es["weight"] == [7.0, 0.5]
    assert g.vs["weight"] == [1.0, 2.0, 3.0]
    assert sorted(tuple(sorted(e)) for e in g.get_edgelist()) == [(0, 1), (1, 2)]
    assert view.graph is g  # built once, then reused


def test_csr_matches_igraph_on_random_graph():
    rng = np.random.default_rng(3)
    n = 60
    src, dst = rng.integers(0, n, 300), rng.integers(0, n, 300)
    view = GraphView.from_edges([f"v{i}" for i in range(n)], src, dst)
    g = view.graph
    for i in range(n):
        assert sorted(view.neighbors(i).tolist()) == sorted(g.neighbors(i))
        assert view.degree(i) == g.degree(i)
        for j, e in zip(view.neighbors(i).tolist(), view.slot_edge[view.indptr[i]:view.indptr[i + 1]].tolist()):
            assert {int(view.edge_src[e]), int(view.edge_dst[e])} == {i, j}
            assert view.edge_between(i, j) == e


def test_ids_for_reports_unknown_names():
    view = GraphView.from_name_pairs([("a", "b")])
    assert view.ids_for(["b", "zz", "a"]) == ([1, 0], ["zz"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"names": ["a", "b"], "src": [0, 2], "dst": [1, 0]}, "edge endpoints"),
        ({"names": ["a", "b"], "src": [0], "dst": [1, 0]}, "same length"),
        ({"names": ["a", "a"], "src": [0], "dst": [1]}, "unique"),
        ({"names": ["a", "b"], "src": [0], "dst": [1], "edge_ids": ["e1", "e2"]}, "edge_ids"),
    ],
)
def test_bad_input_is_rejected_clearly(kwargs, message):
    kwargs = dict(kwargs)
    kwargs["src"], kwargs["dst"] = np.array(kwargs["src"]), np.array(kwargs["dst"])
    with pytest.raises(ValueError, match=message):
        GraphView.from_edges(**kwargs)
