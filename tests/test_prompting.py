"""Path rendering and the prompts: ascending reliability, token budget, flat ablation, LightRAG context."""

from __future__ import annotations

import dataclasses
import re

import pytest

from pathrag_pipeline.query import graph_cache
from pathrag_pipeline.query.graph_cache import load_graph
from pathrag_pipeline.query.prompting import (
    Excerpt,
    PATHS_LT,
    Passage,
    Section,
    flat_prompt,
    lightrag_prompt,
    path_prompt,
    render_paths,
)
from pathrag_pipeline.query.pruning import ScoredPath
from pathrag_pipeline.storage.store import Store
from pathrag_pipeline.text.tokenizer import count_tokens
from tests.query_fixtures import build_tiny_index, chunk_id

QUESTION = "Where was the founder of Aldermere University born?"


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    graph_cache.clear_cache()
    settings = build_tiny_index(tmp_path_factory.mktemp("prompting"))
    return load_graph(Store(settings.duckdb_path))


def _path(snapshot, keys: list[str], score: float) -> ScoredPath:
    nodes = tuple(snapshot.node_of(k) for k in keys)
    edges = tuple(snapshot.view.edge_between(a, b) for a, b in zip(nodes, nodes[1:]))
    assert None not in edges, keys
    return ScoredPath(nodes, edges, score, len(edges), nodes[0], nodes[-1])


@pytest.fixture(scope="module")
def paths(snapshot):
    return [  # best first, as pruning returns them
        _path(snapshot, ["aldermere university", "helena voss", "lindenholm"], 0.9),
        _path(snapshot, ["aldermere university", "brackwater", "varne river"], 0.5),
        _path(snapshot, ["tomas arden", "helena voss"], 0.2),
    ]


def test_render_paths_alternates_node_and_edge_descriptions(snapshot, paths):
    traces = render_paths(snapshot, paths)
    assert [t.rank for t in traces] == [1, 2, 3]
    first = traces[0]
    assert first.nodes == ("Aldermere University", "Helena Voss", "Lindenholm")
    assert first.edge_ids == ("aldermere university<|>helena voss", "helena voss<|>lindenholm")
    lines = first.text.splitlines()
    assert len(lines) == 5
    assert lines[0].startswith("Aldermere University (organization): A university founded in 1852")
    assert "Helena Voss founded Aldermere University in 1852." in lines[1]
    assert lines[2].startswith("Helena Voss (person)")
    assert "Helena Voss was born in Lindenholm." in lines[3] and "[born in]" in lines[3]
    assert lines[4].startswith("Lindenholm (location)")
    # Edge provenance first: the founding relation comes from the Aldermere document, the birth from Voss's.
    assert first.chunk_ids == (chunk_id("aldermere.md"), chunk_id("voss.md"))
    assert first.document_ids == ("aldermere.md", "voss.md")


def test_path_prompt_puts_most_reliable_path_last_then_the_question(snapshot, paths):
    traces = render_paths(snapshot, paths)
    prompt = path_prompt(QUESTION, traces, token_budget=4000)
    user = prompt.user
    assert user.endswith(f"Question: {QUESTION}") and user.count(QUESTION) == 1   # asked last, once
    positions = [user.index(f"Path rank {r} ") for r in (3, 2, 1)]
    assert positions == sorted(positions)
    # The best path is the last block before the closing instruction.
    assert user.rindex("Path rank") == positions[-1]
    assert "Helena Voss was born in Lindenholm." in user[positions[-1]:]
    assert prompt.included == (1, 2, 3) and prompt.dropped == 0
    assert prompt.tokens == count_tokens(prompt.system) + count_tokens(user)
    assert prompt.messages()[1] == {"role": "user", "content": user}


def test_budget_drops_least_reliable_paths_first(snapshot, paths):
    traces = render_paths(snapshot, paths)
    full = path_prompt(QUESTION, traces, token_budget=4000)
    one_path = path_prompt(QUESTION, traces[:1], token_budget=4000)
    budget = one_path.tokens + 10  # room for the best path only
    assert budget < full.tokens
    prompt = path_prompt(QUESTION, traces, token_budget=budget)
    assert prompt.tokens <= budget
    assert prompt.included == (1,) and prompt.dropped == 2
    assert "Path rank 1 " in prompt.user and "Path rank 2 " not in prompt.user and "Path rank 3 " not in prompt.user


def test_best_path_alone_over_budget_is_truncated_not_dropped(snapshot, paths):
    traces = render_paths(snapshot, paths)
    head_only = path_prompt(QUESTION, [], token_budget=4000)
    budget = head_only.tokens + 40
    prompt = path_prompt(QUESTION, traces, token_budget=budget)
    assert prompt.tokens <= budget + 2
    assert "Path rank 1 " in prompt.user and prompt.included == (1,)


def test_budget_too_small_for_the_question_is_an_error(snapshot, paths):
    with pytest.raises(ValueError, match="token_budget=50"):
        path_prompt(QUESTION * 10, render_paths(snapshot, paths), token_budget=50)


def test_excerpts_are_quoted_under_their_path(snapshot, paths):
    traces = render_paths(snapshot, paths)
    prompt = path_prompt(QUESTION, traces, excerpts={1: [Excerpt("Helena Voss", "Helena Voss was a chemist born in Lindenholm.")]})
    block = prompt.user[prompt.user.index("Path rank 1 "):]
    assert "Source excerpts:\n- [Helena Voss] Helena Voss was a chemist born in Lindenholm." in block
    assert "Source excerpts" not in prompt.user[:prompt.user.index("Path rank 1 ")]


def test_no_paths_falls_back_to_retrieved_entities(snapshot):
    prompt = path_prompt(QUESTION, [], fallback_nodes=["Oldport (location): A town.", "Lindenholm (location): x"])
    assert "No relational path" in prompt.user
    assert prompt.user.index("Entity: Lindenholm") < prompt.user.index("Entity: Oldport")  # best last


def test_flat_prompt_lists_each_node_and_edge_once_without_paths(snapshot, paths):
    prompt = flat_prompt(QUESTION, snapshot, paths)
    user = prompt.user
    assert "Path rank" not in user
    assert user.count("Entity: Helena Voss (person)") == 1  # on two paths, listed once
    assert user.count("Entity: Aldermere University (organization)") == 1
    assert user.count("Relation: ") == 5
    # Elements of the best path come last.
    assert user.index("Entity: Tomas Arden") < user.index("Entity: Lindenholm")
    assert user.index("Entity: Varne River") < user.index("Entity: Aldermere University")


def test_lightrag_prompt_fills_sections_within_budget():
    rows = [[str(i), f"passage number {i} " + "word " * 40] for i in range(50)]
    sections = [Section("Entities", ["id", "entity"], [["0", "Helena Voss"]]), Section("Sources", ["id", "content"], rows)]
    prompt = lightrag_prompt(QUESTION, sections, token_budget=600)
    assert prompt.tokens <= 600
    assert "-----Entities-----\n```csv\nid,entity\n0,Helena Voss\n```" in prompt.user
    assert "passage number 0 " in prompt.user and "passage number 49 " not in prompt.user
    assert prompt.dropped > 0
    assert prompt.dropped + prompt.user.count("passage number") == 50
    with pytest.raises(ValueError, match="shares"):
        lightrag_prompt(QUESTION, sections, shares=[0.5, 0.6])


# ---- passage-quoting layouts (QueryParams.prompt) ---------------------------------------------------------

def _passages(n: int, words: int = 40) -> list[Passage]:
    return [Passage(f"c{i}", f"Title {i}", f"passage number {i} " + "word " * words) for i in range(n)]


def test_paths_passages_quotes_passages_best_first_then_paths_best_last(snapshot, paths):
    traces = render_paths(snapshot, paths)
    prompt = path_prompt(QUESTION, traces, token_budget=4000, passages=_passages(3))
    user = prompt.user
    assert user.index("[Title 0] passage number 0") < user.index("[Title 1]")
    assert user.index("[Title 2]") < user.index("Path rank 3 ") < user.index("Path rank 1 ") < user.index("Question:")
    assert user.endswith(f"giving most weight to the most reliable (last) paths.\n\nQuestion: {QUESTION}")
    assert prompt.quoted == ("c0", "c1", "c2")
    assert prompt.included == (1, 2, 3) and prompt.dropped == 0


@pytest.mark.parametrize("budget", [700, 1500, 4000])
def test_passages_last_quotes_the_same_blocks_with_paths_first_and_the_best_passage_last(snapshot, paths, budget):
    traces = render_paths(snapshot, paths)
    passages = _passages(40)
    default = path_prompt(QUESTION, traces, token_budget=budget, passages=passages)
    last = path_prompt(QUESTION, traces, token_budget=budget, passages=passages, passages_last=True)
    # the same paths and passages, chosen by the same shares: only the order (and a few words) differ
    assert last.included == default.included and last.tokens <= budget
    assert last.quoted == default.quoted[:len(last.quoted)] and len(last.quoted) >= len(default.quoted) - 1
    user = last.user
    shown = [int(i) for i in re.findall(r"\[Title (\d+)\]", user)]
    assert shown == sorted(shown, reverse=True) and shown[-1] == 0          # ascending relevance: best last
    assert user.index("Path rank 1 ") < user.index("Source passages follow")   # the paths come first
    assert user.index("Path rank 3 ") < user.index("Path rank 1 ")             # still in ascending reliability
    assert user.index("[Title 0]") < user.index("Question:") and user.endswith(f"Question: {QUESTION}")
    assert user.index("[Title 0]") > user.rindex("Path rank")


def test_paths_passages_splits_the_budget_and_passes_unused_share_on(snapshot, paths):
    traces = render_paths(snapshot, paths)
    many = _passages(60)
    prompt = path_prompt(QUESTION, traces, token_budget=1500, passages=many)
    assert prompt.tokens <= 1500
    # the three short paths take far less than their 5/9 share: the passages get the rest
    assert prompt.included == (1, 2, 3)
    passage_tokens = sum(count_tokens(f"[{p.title}] {' '.join(p.text.split())}") for p in many[:len(prompt.quoted)])
    assert passage_tokens > 1500 * 4 / 9
    assert prompt.quoted == tuple(f"c{i}" for i in range(len(prompt.quoted)))   # a best-first prefix
    # with no passages the layout is the paper's, unchanged
    assert path_prompt(QUESTION, traces, token_budget=1500) == path_prompt(QUESTION, traces, token_budget=1500,
                                                                            passages=())


def test_paths_passages_gives_paths_their_share_when_passages_are_plentiful(snapshot, paths):
    traces = render_paths(snapshot, paths)
    prompt = path_prompt(QUESTION, traces, token_budget=700, passages=_passages(60))
    assert prompt.tokens <= 700
    assert 1 in prompt.included          # the most reliable path is never crowded out by passages
    assert prompt.quoted                 # and passages still get the rest


def test_passages_paths_shows_at_most_the_light_configurations_paths_and_no_path_weighting(snapshot, paths):
    traces = render_paths(snapshot, paths)
    many = [*traces, *[dataclasses.replace(t, rank=t.rank + 3 * k) for k in (1, 2) for t in traces]]   # 9 paths
    prompt = path_prompt(QUESTION, many, token_budget=4000, passages=_passages(5), max_paths=PATHS_LT)
    assert prompt.included == tuple(range(1, PATHS_LT + 1))      # the most reliable K, best last
    ranks = [int(r) for r in re.findall(r"Path rank (\d+) ", prompt.user)]
    assert ranks == list(range(PATHS_LT, 0, -1))
    assert prompt.user.index("[Title 4]") < prompt.user.index("Path rank")   # the passages come first
    assert prompt.user.endswith(f"using the passages and the paths above.\n\nQuestion: {QUESTION}")
    # the paths' unused share goes to the passages: more of them fit than beside all nine paths
    tight = dict(token_budget=700, passages=_passages(60))
    assert len(path_prompt(QUESTION, many, max_paths=PATHS_LT, **tight).quoted) > len(
        path_prompt(QUESTION, many, **tight).quoted)


def test_excerpt_sources_count_as_quoted(snapshot, paths):
    traces = render_paths(snapshot, paths)
    prompt = path_prompt(QUESTION, traces, excerpts={1: [Excerpt("Helena Voss", "Helena Voss was born there.", "cv")]})
    assert prompt.quoted == ("cv",)
    assert path_prompt(QUESTION, traces).quoted == ()


def test_lightrag_prompt_names_the_passages_it_quotes_and_ascending_sections_show_best_last():
    rows = [[str(i), f"passage number {i} " + "word " * 40] for i in range(50)]
    sources = Section("Sources", ["id", "content"], rows, ids=[f"c{i}" for i in range(50)])
    paths = Section("Paths", ["id", "context"], [["1", "best path"], ["2", "second path"]], ascending=True)
    prompt = lightrag_prompt(QUESTION, [paths, sources], token_budget=600)
    assert prompt.quoted == tuple(f"c{i}" for i in range(len(prompt.quoted))) and 0 < len(prompt.quoted) < 50
    assert prompt.user.index("2,second path") < prompt.user.index("1,best path")


def test_paths_next_to_quoted_passages_are_chains_without_the_descriptions_drawn_from_them(snapshot, paths):
    traces = render_paths(snapshot, paths)
    assert traces[0].keywords[1] == "born in"
    both = path_prompt(QUESTION, traces, token_budget=4000, passages=_passages(2)).user
    assert ("Path rank 1 (reliability 0.9000, 2 hops): Aldermere University --[" in both
            and "]-- Helena Voss --[born in]-- Lindenholm" in both)
    assert "Helena Voss was born in Lindenholm." not in both          # the edge's description is left to the passage
    paper = path_prompt(QUESTION, traces, token_budget=4000).user
    assert "Helena Voss was born in Lindenholm." in paper and "--[" not in paper


def test_joined_tokens_counts_as_the_joined_text_would():
    """A prompt's tokens are summed from its blocks' remembered counts; a blank line between two blocks adds two
    tokens and changes neither, so the sum is the joined text's count (blocks with edge whitespace, or empty
    ones, are counted joined)."""
    import random

    from pathrag_pipeline.query.prompting import joined_tokens

    rng = random.Random(7)
    pieces = ["Ada", " Lovelace", "'s", "1852", "...", "pneumonoultramicroscopic", "\n", " ", "\t", "é", "—", "x2",
              "[Title]", "?", "don't", ""]
    for _ in range(3000):
        blocks = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 5))]
        assert joined_tokens(blocks) == count_tokens("\n\n".join(blocks)), blocks
