"""NeuroPath mode: offline tracker, LLM tracking over the OpenAI-compatible test server, failures, cost, log."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import duckdb
import numpy as np
import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli.ask import ask
from pathrag_pipeline.config import Settings
from pathrag_pipeline.query import graph_cache, neuropath
from pathrag_pipeline.query.engine import PathRAG
from pathrag_pipeline.query.keywords import Keywords
from pathrag_pipeline.query.neuropath_tracker import OFFLINE_TRACKER, TrackerStep, remaining_terms, step_model
from pathrag_pipeline.query.params import QueryParams
from pathrag_pipeline.storage.store import Store
from pathrag_lab.testing.openai_server import _word_count
from pathrag_pipeline.text.names import name_key
from tests.query_fixtures import build_tiny_index, chunk_id

QUESTION = "Where was the founder of Aldermere University born?"
OTHER = "Which sea does the Varne River flow into?"


@pytest.fixture
def settings(tmp_path):
    graph_cache.clear_cache()
    neuropath.clear_cache()
    return build_tiny_index(tmp_path / "home")


def _rows(settings: Settings, sql: str):
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        return con.execute(sql).fetchall()


def _llm_settings(settings: Settings, server) -> Settings:
    return Settings(home=settings.home, docs=settings.docs, llm_base_url=server.base_url, llm_model="fake-chat")


def _kind(request) -> str:
    text = json.dumps(request["messages"])
    if "tracking reasoning paths" in text or "select a set of valid clue paths" in text:
        return "tracker"
    if "keywords of a user" in text:
        return "keywords"
    if "extract all named entities" in text:
        return "entities"
    return "answer"


def _candidates(request) -> dict[int, str]:
    """The numbered paths of a tracker request: ``[1] ...`` (ours) or ``0: ...`` (the paper's)."""
    user = request["messages"][1]["content"]
    ours = {int(i): line for i, line in re.findall(r"^\[(\d+)\] (.*)$", user, re.M)}
    return ours or {int(i): line for i, line in re.findall(r"^(\d+): (.*)$", user, re.M)}


def _id_of(request, *names: str) -> int:
    """The id of the first candidate whose chain line names every one of ``names``."""
    for cid, line in _candidates(request).items():
        if all(n in line for n in names):
            return cid
    raise AssertionError(f"no candidate names {names}: {_candidates(request)}")


class Scripted:
    """A chat responder playing keywords, tracker steps (functions of the request) and the answer."""

    def __init__(self, steps, keywords=("Aldermere University",)) -> None:
        self.steps = list(steps)
        self.keywords = list(keywords)
        self.replies: list[str] = []
        self.kinds: list[str] = []

    def __call__(self, request) -> str:
        kind = _kind(request)
        self.kinds.append(kind)
        if kind == "keywords":
            reply = Keywords(low_level=self.keywords, high_level=["founder"]).model_dump_json()
        elif kind == "entities":
            reply = json.dumps({"named_entities": self.keywords})
        elif kind == "tracker":
            reply = self.steps.pop(0)(request)
        else:
            reply = "Helena Voss was born in Lindenholm."
        self.replies.append(reply)
        return reply


def _step(valid, expand, requirement, go, chain="chain") -> Callable[[dict], str]:
    def make(request) -> str:
        return json.dumps({"reasoning_chain": chain, "valid_paths": valid(request), "paths_to_expand": expand(request),
                           "expansion_requirement": requirement, "continue_tracking": go})
    return make


def _paper_step(valid, expand, requirement, go, chain="chain") -> Callable[[dict], str]:
    """A reply in the paper's JSON object (Figure 14): ids from 0."""
    def make(request) -> str:
        return json.dumps({"current_chain": chain, "valid_ids": valid(request), "expansion_requirements": requirement,
                           "need_expand_ids": expand(request), "continue": int(go)})
    return make


OURS = {"np_variant": "ours"}   # the tests of our earlier tracker prompt (np_variant="ours")


# ---- offline ------------------------------------------------------------------------------------------

def test_offline_tracker_tracks_two_hops_and_is_labelled_everywhere(settings):
    result = PathRAG(settings).query(QUESTION, "neuropath")
    assert result.mode == "neuropath" and result.provider == "offline" and result.answer_kind == "extractive"
    assert result.params["tracker"] == OFFLINE_TRACKER and result.tracking["tracker"] == OFFLINE_TRACKER
    assert result.tracking["seeds"][0] == "Aldermere University"
    hops = result.tracking["hops"]
    assert [h["hop"] for h in hops] == [1, 2] and result.tracking["stop_reason"] == "hop_cap"
    assert all(h["calls"] == 0 and h["prompt_tokens"] == 0 for h in hops)
    # the 2-hop chain to the answer is tracked, deepest paths first, and its passages lead the ranking
    assert result.paths[0].nodes == ("Aldermere University", "Helena Voss", "Lindenholm")
    assert [p.hops for p in result.paths] == sorted((p.hops for p in result.paths), reverse=True)
    assert set(result.chunk_ids[:2]) == {chunk_id("aldermere.md"), chunk_id("voss.md")}
    assert "born in Lindenholm" in result.answer
    assert result.llm_calls == 0 and result.llm_tokens == 0 and result.error is None
    assert "tracking" in result.timings_ms and "pruning" not in result.timings_ms

    stored = _rows(settings, "SELECT mode, tracking::VARCHAR, llm_calls, llm_tokens, error FROM queries")
    assert stored[0][0] == "neuropath" and stored[0][2:] == (0, 0, None)
    assert json.loads(stored[0][1])["tracker"] == OFFLINE_TRACKER
    traces = _rows(settings, "SELECT rank, hops, node_names FROM path_traces ORDER BY rank")
    assert traces[0] == (1, 2, ["Aldermere University", "Helena Voss", "Lindenholm"])
    assert len(traces) == len(result.paths)


def test_offline_requirement_is_what_the_kept_paths_do_not_name():
    assert remaining_terms(QUESTION, "Aldermere University founded by Helena Voss") == ["founder", "born"]
    assert remaining_terms("Who founded Aldermere?", "Aldermere founded") == []


def test_passage_ablations_rank_one_side_of_the_merge(settings):
    rag = PathRAG(settings, record=False)
    tracked = rag.query(QUESTION, "neuropath", np_passages="tracked")
    completion = rag.query(QUESTION, "neuropath", np_passages="completion")
    fused = rag.query(QUESTION, "neuropath", np_passages="fused")
    # the tracked paths never reach the bakery; the completion retrieval ranks every passage sharing a word
    assert chunk_id("kettle.md") not in tracked.chunk_ids and set(tracked.chunk_ids) <= set(fused.chunk_ids)
    assert set(completion.chunk_ids) <= set(fused.chunk_ids) and completion.params["np_passages"] == "completion"


def test_hop_cap_one_stops_after_the_first_hop(settings):
    result = PathRAG(settings).query(QUESTION, "neuropath", np_max_hops=1)
    assert [h["hop"] for h in result.tracking["hops"]] == [1]
    assert result.tracking["stop_reason"] == "hop_cap" and max(p.hops for p in result.paths) == 1


def test_coreference_sets_and_name_seeds():
    names = neuropath._unit(np.array([[1.0, 0.0], [0.95, 0.05], [0.0, 1.0], [0.7, 0.7]], dtype=np.float32))
    assert neuropath.coreference_set(names, 0, 0.9) == [1]
    assert neuropath.coreference_set(names, 0, 0.999) == []  # cosine 0.9986
    assert neuropath.coreference_set(names, 0, 0.5) == [1, 3]


def test_neuropath_parameters_are_validated():
    for field, value in (("np_max_hops", 0), ("np_max_hops", 11), ("np_candidates", 0), ("np_token_budget", 0),
                         ("np_coref_threshold", 0.0), ("np_coref_threshold", 1.5), ("np_passages", "all")):
        with pytest.raises(ValueError, match=field):
            QueryParams(**{field: value}).resolved()


def test_step_model_rejects_ids_not_on_the_list():
    model = step_model(3)
    ok = model.model_validate({"reasoning_chain": "x", "valid_paths": [1, 3, 3], "paths_to_expand": [1],
                               "expansion_requirement": "", "continue_tracking": False})
    assert ok.valid_paths == [1, 3] and issubclass(model, TrackerStep)
    with pytest.raises(ValueError, match="between 1 and 3"):
        model.model_validate({"reasoning_chain": "x", "valid_paths": [4], "continue_tracking": True})


# ---- LLM tracker over the OpenAI-compatible test server -----------------------------------------------

def test_scripted_two_hop_tracking_stops_when_told_and_counts_match_the_server(settings, openai_server):
    script = Scripted([
        _step(lambda r: [_id_of(r, "Helena Voss")], lambda r: [_id_of(r, "Helena Voss")],
              "where Helena Voss was born", True, "Aldermere University was founded by Helena Voss"),
        _step(lambda r: [_id_of(r, "Lindenholm")], lambda r: [], "", False,
              "Helena Voss founded Aldermere University and was born in Lindenholm"),
    ])
    openai_server.chat_responder = script
    result = PathRAG(_llm_settings(settings, openai_server)).query(QUESTION, "neuropath", **OURS)

    assert script.kinds == ["keywords", "tracker", "tracker", "answer"]
    assert openai_server.count("chat") == 4 and result.error is None
    assert result.answer == "Helena Voss was born in Lindenholm." and result.answer_kind == "llm"
    tracking = result.tracking
    assert tracking["tracker"] == "llm:fake-chat" and tracking["stop_reason"] == "tracker_stop"
    assert [h["hop"] for h in tracking["hops"]] == [1, 2]
    assert tracking["hops"][0]["expansion_requirement"] == "where Helena Voss was born"
    assert tracking["hops"][1]["reasoning_chain"].endswith("born in Lindenholm")
    assert [p.nodes for p in result.paths] == [("Aldermere University", "Helena Voss", "Lindenholm"),
                                               ("Aldermere University", "Helena Voss")]
    # hop 2 was pruned against hop 1's expansion requirement, and the completion query carries the chain
    assert "where Helena Voss was born" in openai_server.requests_for("chat")[2].body["messages"][-1]["content"]
    assert tracking["completion_query"].startswith(QUESTION) and "born in Lindenholm" in tracking["completion_query"]

    # calls and tokens: per hop, per stage and in total, exactly what the server received and answered
    requests = openai_server.requests_for("chat")
    prompt = [sum(_word_count(m.get("content")) for m in r.body["messages"]) for r in requests]
    completion = [_word_count(reply) for reply in script.replies]
    for i, hop in enumerate(tracking["hops"], start=1):
        assert (hop["calls"], hop["prompt_tokens"], hop["completion_tokens"]) == (1, prompt[i], completion[i])
    assert result.tokens["keywords"] == {"calls": 1, "prompt_tokens": prompt[0], "completion_tokens": completion[0]}
    assert result.tokens["tracking"] == {"calls": 2, "prompt_tokens": prompt[1] + prompt[2],
                                         "completion_tokens": completion[1] + completion[2]}
    assert result.tokens["answer"]["calls"] == 1 and result.tokens["answer"]["prompt_tokens"] == prompt[3]
    assert result.llm_calls == 4 and result.llm_tokens == sum(prompt) + sum(completion)
    stored = _rows(settings, "SELECT llm_calls, llm_tokens, tracking->>'stop_reason' FROM queries")
    assert stored == [(4, sum(prompt) + sum(completion), "tracker_stop")]


def test_a_tracker_asking_to_continue_past_the_cap_is_stopped_at_the_cap(settings, openai_server):
    go_on = _step(lambda r: [1], lambda r: list(_candidates(r)), "more", True)
    script = Scripted([go_on, go_on, go_on])
    openai_server.chat_responder = script
    result = PathRAG(_llm_settings(settings, openai_server)).query(QUESTION, "neuropath", np_max_hops=2, **OURS)
    assert script.kinds.count("tracker") == 2 and len(script.steps) == 1
    assert result.tracking["stop_reason"] == "hop_cap" and len(result.tracking["hops"]) == 2
    assert result.tracking["hops"][-1]["continue"] is True


def test_token_budget_stops_tracking_before_the_next_call(settings, openai_server):
    script = Scripted([_step(lambda r: [1], lambda r: [1], "more", True)] * 3)
    openai_server.chat_responder = script
    # the keyword call alone spends more than 5 tokens: no tracker call is made
    result = PathRAG(_llm_settings(settings, openai_server)).query(QUESTION, "neuropath", np_token_budget=5, **OURS)
    assert script.kinds == ["keywords", "answer"]
    assert result.tracking["stop_reason"] == "token_budget" and result.tracking["hops"] == []
    assert result.chunk_ids  # the completion retrieval still ranks passages


def test_malformed_tracker_output_is_reasked_once_then_fails_that_query_only(settings, openai_server):
    bad = [lambda r: "this is not JSON", lambda r: json.dumps({"reasoning_chain": "x", "valid_paths": [99],
                                                                "continue_tracking": True})]
    good = _step(lambda r: [1], lambda r: [], "", False)
    script = Scripted([*bad, good])
    openai_server.chat_responder = script
    rag = PathRAG(_llm_settings(settings, openai_server))
    failed, ok = rag.query_many([QUESTION, OTHER], "neuropath", **OURS)

    assert script.kinds == ["keywords", "tracker", "tracker", "keywords", "tracker", "answer"]
    assert failed.answer_kind == "failed" and failed.answer == "" and failed.chunk_ids == []
    assert "hop 1" in failed.error and "invalid" in failed.error and "1 re-ask" in failed.error
    assert failed.tracking["stop_reason"] == "failed" and failed.tracking["hops"][0]["calls"] == 2
    assert failed.tokens["tracking"]["calls"] == 2 and failed.tokens["answer"]["calls"] == 0
    assert ok.error is None and ok.answer_kind == "llm"
    stored = _rows(settings, "SELECT answer_kind, error IS NOT NULL, llm_calls FROM queries ORDER BY asked_at")
    assert stored == [("failed", True, 3), ("llm", False, 3)]


def test_cli_ask_neuropath_json_and_failure_exit(settings, openai_server, monkeypatch):
    monkeypatch.setenv("PATHRAG_HOME", str(settings.home))
    out = CliRunner().invoke(ask, [QUESTION, "--mode", "neuropath", "--json", "--np-max-hops", "1"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["tracking"]["tracker"] == OFFLINE_TRACKER and data["params"]["np_max_hops"] == 1
    text = CliRunner().invoke(ask, [QUESTION, "--mode", "neuropath"])
    assert text.exit_code == 0 and f"NeuroPath tracker {OFFLINE_TRACKER}" in text.output

    openai_server.chat_responder = Scripted([lambda r: "nope", lambda r: "still nope"] * 2)
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    failed = CliRunner().invoke(ask, [QUESTION, "--mode", "neuropath", "--np-variant", "ours"])
    assert failed.exit_code == 1 and "failed: NeuroPath tracker output at hop 1" in failed.output
    # the paper's variant goes on as its reference code does: no path, the completion's passages, an answer
    paper = CliRunner().invoke(ask, [QUESTION, "--mode", "neuropath"])
    assert paper.exit_code == 0, paper.output
    assert "(stopped: tracker_invalid)" in paper.output and "stayed invalid" in paper.output


# ---- the log tables of older homes --------------------------------------------------------------------

def test_an_existing_home_gains_the_new_query_columns(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("""CREATE TABLE queries (query_id VARCHAR NOT NULL, asked_at TIMESTAMP NOT NULL, question VARCHAR NOT NULL,
                   mode VARCHAR NOT NULL, params JSON NOT NULL, keywords JSON, provider VARCHAR NOT NULL,
                   model VARCHAR NOT NULL, answer_kind VARCHAR NOT NULL, tokens JSON NOT NULL, ms JSON NOT NULL,
                   total_ms DOUBLE NOT NULL, answer VARCHAR NOT NULL, chunk_ids VARCHAR[] NOT NULL,
                   document_ids VARCHAR[] NOT NULL)""")
    con.execute("INSERT INTO queries VALUES ('old', now(), 'q', 'path', '{}', NULL, 'offline', 'offline', "
                "'extractive', '{}', '{}', 1.0, 'a', [], [])")
    con.close()
    with Store(path).connect() as con:
        columns = [r[0] for r in con.execute("DESCRIBE queries").fetchall()]
        assert columns[-7:] == ["tracking", "llm_calls", "llm_tokens", "error", "asked_from", "process", "citations"]
        assert con.execute("SELECT query_id, tracking, error FROM queries").fetchall() == [("old", None, None)]


# ---- evaluation and the benchmark section --------------------------------------------------------------

def test_eval_retrieval_runs_neuropath_and_stores_its_cost(tmp_path):
    from pathrag_lab.bench.neuropath import markdown_section
    from pathrag_lab.bench.report_sections import splice
    from pathrag_pipeline.evaluation.retrieval_eval import evaluate_retrieval, save_evaluation
    from tests.test_evaluation import write_dataset

    graph_cache.clear_cache()
    settings = Settings.from_env(env={"PATHRAG_HOME": str(tmp_path / "home")})
    evaluation = evaluate_retrieval(settings, write_dataset(tmp_path / "tiny-qa"), modes=["neuropath", "path", "bm25"],
                                    ks=[1, 5], use_triples=True)
    outcome = evaluation.modes["neuropath"]
    assert outcome.failed == 0 and outcome.llm_tokens == 0.0 and outcome.llm_calls == 0.0
    assert 0.0 < outcome.recall["recall@1"] <= outcome.recall["recall@5"] <= 1.0
    save_evaluation(Store(settings.duckdb_path), evaluation)
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        assert con.execute("SELECT DISTINCT llm_tokens FROM eval_results WHERE mode = 'neuropath'").fetchall() == [(0.0,)]

    run = {**evaluation.to_dict(), "command": "pathrag eval retrieval --modes neuropath,path,bm25",
           "load_average": [1.0, 2.0]}
    section = markdown_section([run])
    assert section.startswith("## NeuroPath retrieval") and "neuropath (heuristic tracker)" in section
    assert "load average 1.0 at start, 2.0 at end" in section and "vs" in section
    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n\n## NeuroPath retrieval\n\nold figures\n\n## Other\n\nkept\n")
    splice(report, "NeuroPath retrieval", section)
    text = report.read_text()
    assert "old figures" not in text and text.count("## NeuroPath retrieval") == 1 and "## Other\n\nkept" in text


def test_offline_answer_reads_tracked_paths_as_paths(settings, monkeypatch):
    """The extractive answer's final-hop rule (query/answering.py) applies to NeuroPath's tracked paths as to
    path mode's: they reach it marked as paths, deepest first, before the ranked passages."""
    from pathrag_pipeline.query import engine

    seen = []
    real = engine.extractive_answer

    def spy(question, keywords, evidence, texts, **options):
        seen.extend(evidence)
        return real(question, keywords, evidence, texts, **options)

    monkeypatch.setattr(engine, "extractive_answer", spy)
    result = PathRAG(settings).query(QUESTION, "neuropath")
    tracked = [e for e in seen if e.path]
    assert len(tracked) == len(result.paths) > 0
    assert tuple(tracked[0].entity_names) == ("Aldermere University", "Helena Voss", "Lindenholm")
    assert [e for e in seen if not e.path] and all(not e.entity_names for e in seen if not e.path)



def test_union_merge_puts_every_tracked_passage_before_the_completion(settings):
    """The paper's D_ret = D_p ∪ D_e (np_passages="union"): the path documents, then the completion's."""
    rag = PathRAG(settings)
    tracked = rag.query(QUESTION, "neuropath", np_passages="tracked")
    completion = rag.query(QUESTION, "neuropath", np_passages="completion")
    union = rag.query(QUESTION, "neuropath", np_passages="union")
    assert tracked.chunk_ids and completion.chunk_ids
    assert union.chunk_ids == list(dict.fromkeys([*tracked.chunk_ids, *completion.chunk_ids]))
    assert union.params["np_passages"] == "union"   # the paper variant's own merge, the default
    fused = rag.query(QUESTION, "neuropath", np_passages="fused")   # our RRF merge interleaves them instead
    assert set(fused.chunk_ids) == set(union.chunk_ids)


def test_a_tracker_answer_cut_at_the_cap_is_asked_again_briefly_and_counted(settings, openai_server):
    """Issue 27: a small model's long reasoning ran into the tracker's cap at hop 1 and the query failed, reported
    as 0 tokens. Now it is asked once more for fewer words, and the cut answer's tokens count."""
    long = _step(lambda r: [1], lambda r: [], "", False, chain="because " * 1100)   # past the 1024-token cap
    script = Scripted([long, _step(lambda r: [1], lambda r: [], "", False)])
    openai_server.chat_responder = script
    result = PathRAG(_llm_settings(settings, openai_server)).query(QUESTION, "neuropath", **OURS)

    assert result.error is None and result.answer_kind == "llm"
    assert script.kinds == ["keywords", "tracker", "tracker", "answer"]
    trackers = [r.body for r in openai_server.requests_for("chat") if _kind(r.body) == "tracker"]
    assert "at most 40 words" not in json.dumps(trackers[0]["messages"])
    assert "at most 40 words" in trackers[1]["messages"][-1]["content"]
    hop = result.tracking["hops"][0]
    assert hop["calls"] == 2 and hop["completion_tokens"] >= 1024


# ---- the paper's NeuroPath (np_variant="paper", the default; issue 24) ------------------------------------

def _paper_request(openai_server, hop: int) -> str:
    return [r.body for r in openai_server.requests_for("chat") if _kind(r.body) == "tracker"][hop - 1]["messages"][1]["content"]


def test_paper_prompts_are_sent_verbatim_and_ids_count_from_zero(settings, openai_server):
    from pathrag_pipeline.query.prompting import NEUROPATH_NER_PROMPT, NEUROPATH_PAPER_TRACKER_PROMPT

    script = Scripted([_paper_step(lambda r: [_id_of(r, "Helena Voss")], lambda r: [], "", False)])
    openai_server.chat_responder = script
    result = PathRAG(_llm_settings(settings, openai_server)).query(QUESTION, "neuropath")
    assert script.kinds == ["entities", "tracker", "answer"] and result.error is None
    requests = openai_server.requests_for("chat")
    # instructor's JSON mode appends the response schema to the system message, after the paper's text
    assert requests[0].body["messages"][0]["content"].startswith(NEUROPATH_NER_PROMPT)
    assert requests[0].body["messages"][1]["content"] == f"Question: {QUESTION}\nOutput:"
    tracker = requests[1].body["messages"]
    assert tracker[0]["content"].startswith(NEUROPATH_PAPER_TRACKER_PROMPT)
    user = tracker[1]["content"]
    assert user.startswith(f"Query: {QUESTION}\nPaths:\n0: ") and user.endswith("\nOutput:\n")
    # every hop-1 path is new, so expandable, its tag naming the path's far end
    lines = _candidates(requests[1].body)
    assert min(lines) == 0 and all("<expandable>: [" in line for line in lines.values())
    founded = lines[_id_of(requests[1].body, "Helena Voss")]
    assert "Aldermere University->" in founded and founded.endswith("<expandable>: [Helena Voss]")
    assert result.params["np_variant"] == "paper" and result.keywords["low_level"] == ["Aldermere University"]
    assert [p.nodes for p in result.paths] == [("Aldermere University", "Helena Voss")]


def test_paper_tracker_rejudges_earlier_paths_and_keeps_only_the_last_valid_set(settings, openai_server):
    """Eq. 4: the kept paths are shown again (first, untagged) with the new ones; a path the tracker does not
    mark valid again at hop 2 is dropped, and the path documents are the last hop's valid paths'."""
    script = Scripted([
        _paper_step(lambda r: [_id_of(r, "Helena Voss"), _id_of(r, "Brackwater")], lambda r: [_id_of(r, "Helena Voss")],
                    "where Helena Voss was born", True, "Aldermere University was founded by Helena Voss"),
        _paper_step(lambda r: [_id_of(r, "Lindenholm")], lambda r: [], "", False, "born in Lindenholm"),
    ])
    openai_server.chat_responder = script
    result = PathRAG(_llm_settings(settings, openai_server)).query(QUESTION, "neuropath", np_passages="tracked")
    assert script.kinds == ["entities", "tracker", "tracker", "answer"] and result.error is None
    hop2 = _candidates(openai_server.requests_for("chat")[2].body)
    # the two kept paths come first, without a tag; the new ones extend the path marked to expand, tagged
    assert "<expandable>" not in hop2[0] and "<expandable>" not in hop2[1]
    assert any("Brackwater" in line for line in (hop2[0], hop2[1]))
    assert all("<expandable>" in line and line.startswith("Aldermere University->") for i, line in hop2.items() if i > 1)
    # Brackwater was valid at hop 1 and not marked at hop 2: gone from the paths and the path documents
    assert [p.nodes for p in result.paths] == [("Aldermere University", "Helena Voss", "Lindenholm")]
    assert chunk_id("brackwater.md") not in result.chunk_ids
    assert set(result.chunk_ids) == {chunk_id("aldermere.md"), chunk_id("voss.md")}
    assert result.tracking["completion_query"] == f"{QUESTION} born in Lindenholm"


def test_paper_expands_the_coreference_set_of_an_expandable_node_at_hop_2():
    """Eq. 3: at hop 2 the expandable node's coreferent entities (name cosine >= threshold) are expanded too."""
    from types import SimpleNamespace

    # 0 Aldermere -(r0)- 1 Helena Voss ; 2 "H. Voss" -(r1)- 3 Lindenholm ; 1 -(r2)- 4 Tomas
    src, tgt = [0, 2, 1], [1, 3, 4]
    incident = {0: [0], 1: [0, 2], 2: [1], 3: [1], 4: [2]}
    snapshot = SimpleNamespace(relation_src=src, relation_tgt=tgt, incident_relations=lambda n: incident[n])
    names = neuropath._unit(np.array([[1, 0, 0], [0, 1, 0], [0, 0.99, 0.1], [0, 0, 1], [1, 1, 1]], dtype=np.float32))
    start = neuropath._paper_start(snapshot, [0])
    assert [p.steps for p in start] == [((0, 0, 1),)]
    grown = neuropath._paper_expand(snapshot, start, names, 0.9, {p.rows for p in start})
    assert {p.steps for p in grown} == {((0, 0, 1), (2, 1, 4)), ((0, 0, 1), (1, 2, 3))}
    # without the coreference set (threshold above the pair's cosine) the join through "H. Voss" is not made
    alone = neuropath._paper_expand(snapshot, start, names, 0.999, set())
    assert {p.steps for p in alone} == {((0, 0, 1), (2, 1, 4))}


def test_paper_pruning_ranks_new_paths_by_whole_path_similarity(settings, monkeypatch):
    """Eq. 5: the top-k new paths by the cosine of the embedded whole path (not its newest triple) with the
    requirement: a relation vector table that favours other triples must not change what is shown."""
    from pathrag_pipeline.query import neuropath as np_mod

    seen = []

    class Spy(np_mod.OfflineTracker):
        def judge(self, question, hop, reasoning, requirement, candidates, covered=()):
            seen.append((requirement, list(candidates)))
            return super().judge(question, hop, reasoning, requirement, candidates, covered)

    monkeypatch.setattr(np_mod, "OfflineTracker", Spy)
    monkeypatch.setattr(np_mod, "relation_vectors", lambda snap, keys, matrix, identity:
                        np.random.default_rng(0).normal(size=(len(snap.relation_keys), matrix.shape[1])).astype(np.float32))
    result = PathRAG(settings, record=False).query(QUESTION, "neuropath", np_candidates=1)
    assert result.error is None and seen
    rag = PathRAG(settings, record=False)

    def similarities(requirement, texts):
        vectors = np_mod._unit(np.asarray(rag.embedder.embed([requirement, *texts]), dtype=np.float32))
        return vectors[1:] @ vectors[0]

    for requirement, shown in seen:
        new = [c for c in shown if c.expandable]
        assert len(new) == 1
        assert np.allclose(similarities(requirement, [c.text.replace("->", " ") for c in new]),
                           [c.requirement_similarity for c in new], atol=1e-5)
    # hop 1 had more new paths than the one shown: it is the most similar of all of them, path as a whole
    hop1 = result.tracking["hops"][0]
    assert hop1["candidates"] > 1 and hop1["shown"] == 1
    snapshot = graph_cache.load_graph(Store(settings.duckdb_path))
    seeds = [snapshot.node_of(name_key(n)) for n in result.tracking["seeds"]]
    every = np_mod._paper_start(snapshot, seeds)
    sims = similarities(QUESTION, [np_mod._similarity_text(snapshot, p) for p in every])
    assert len(every) == hop1["candidates"]
    assert seen[0][1][0].text == np_mod._paper_text(snapshot, every[int(np.argmax(sims))])


def test_ours_variant_stays_reachable_with_its_own_defaults(settings):
    rag = PathRAG(settings, record=False)
    ours = rag.query(QUESTION, "neuropath", np_variant="ours")
    paper = rag.query(QUESTION, "neuropath")
    assert ours.params["np_variant"] == "ours" and ours.params["np_passages"] == "fused"
    assert paper.params["np_variant"] == "paper" and paper.params["np_passages"] == "union"
    # ours keeps every hop's valid paths (1- and 2-hop); the paper's keeps the last hop's valid set
    assert {p.hops for p in ours.paths} == {1, 2}
    with pytest.raises(ValueError, match="np_variant"):
        QueryParams(np_variant="neuro").resolved()


def test_the_path_embedding_cap_preselects_by_the_newest_triple_and_counts_every_candidate(settings, monkeypatch):
    """Beyond PATH_EMBED_CAP new paths at a hop, only that many (by their newest triple's index vector) are
    embedded whole; the hop record still counts every path generated."""
    embedded = []
    real = neuropath._similarity_text

    def spy(snapshot, path):
        embedded.append(path.rows)
        return real(snapshot, path)

    monkeypatch.setattr(neuropath, "_similarity_text", spy)
    full = PathRAG(settings, record=False).query(QUESTION, "neuropath", np_max_hops=1)
    generated = full.tracking["hops"][0]["candidates"]
    assert generated > 1 and len(set(embedded)) == generated   # (the heuristic tracker reads the same text)
    embedded.clear()
    monkeypatch.setattr(neuropath, "PATH_EMBED_CAP", 1)
    neuropath.clear_cache()
    capped = PathRAG(settings, record=False).query(QUESTION, "neuropath", np_max_hops=1)
    assert capped.tracking["hops"][0]["candidates"] == generated and len(set(embedded)) == 1
    assert capped.tracking["hops"][0]["shown"] == 1


def test_an_invalid_key_entity_answer_falls_back_to_the_offline_rules(settings, openai_server, caplog):
    """The paper's NER call (Figure 13) answered with something that is not its JSON: the query keeps going with
    the offline keyword rules' entities, says so in a warning, and counts the calls the NER stage spent."""
    from pathrag_pipeline.query.keywords import extract_keywords_offline

    def responder(request) -> str:
        kind = _kind(request)
        if kind == "entities":
            return "Aldermere University, I think"
        if kind == "tracker":
            return _paper_step(lambda r: [0], lambda r: [], "", False)(request)
        return "Helena Voss was born in Lindenholm."

    openai_server.chat_responder = responder
    result = PathRAG(_llm_settings(settings, openai_server)).query(QUESTION, "neuropath")
    assert result.error is None and result.answer_kind == "llm"
    assert result.keywords["low_level"] == extract_keywords_offline(QUESTION).low_level
    assert result.tokens["keywords"]["calls"] >= 2          # the call and its re-ask(s), all counted
    assert "NeuroPath key entities failed" in caplog.text


def test_paper_variant_answers_from_the_completion_when_the_tracker_stays_invalid(settings, openai_server):
    """The reference code's failure path: an answer that does not parse (here ids that are years, as a 0.5B model
    wrote) drops every path and the chain; the completion retrieval alone ranks the passages, the query answers,
    and the log keeps the error. Earlier hops' valid paths go too."""
    script = Scripted([
        _paper_step(lambda r: [_id_of(r, "Helena Voss")], lambda r: [_id_of(r, "Helena Voss")], "born", True, "c1"),
        lambda r: json.dumps({"current_chain": "x", "valid_ids": [1852], "continue": 0}),
        lambda r: json.dumps({"current_chain": "x", "valid_ids": [1852, 1901], "continue": 0}),
    ])
    openai_server.chat_responder = script
    result = PathRAG(_llm_settings(settings, openai_server)).query(QUESTION, "neuropath")
    assert script.kinds == ["entities", "tracker", "tracker", "tracker", "answer"]
    assert result.error is None and result.answer_kind == "llm" and result.chunk_ids
    assert result.paths == [] and result.tracking["stop_reason"] == "tracker_invalid"
    assert "not candidate path ids" in result.tracking["tracker_error"] and result.tracking["error"] is None
    assert result.tracking["completion_query"] == QUESTION and result.tracking["hops"][1]["calls"] == 2
    stored = _rows(settings, "SELECT error IS NULL, tracking->>'stop_reason' FROM queries")
    assert stored == [(True, "tracker_invalid")]
