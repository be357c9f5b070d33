"""End to end: PathRAG.query offline and over a real OpenAI-compatible server, the query log, the CLI."""

from __future__ import annotations

import json
import time
import re

import pytest
from click.testing import CliRunner

from pathrag_pipeline.query import graph_cache
from pathrag_pipeline.query.answering import EXTRACTIVE_LABEL
from pathrag_pipeline.cli.ask import ask
from pathrag_pipeline.config import SAMPLE_DOCS, Settings
from pathrag_pipeline.query.keywords import Keywords
from pathrag_pipeline.query.prompting import PATHS_LT
from pathrag_pipeline.query.engine import PathRAG, load_questions, run_questions
from pathrag_pipeline.storage.store import Store
from tests.query_fixtures import build_tiny_index, chunk_id, sync_vectors

QUESTION = "Where was the founder of Aldermere University born?"


@pytest.fixture
def settings(tmp_path):
    graph_cache.clear_cache()
    return build_tiny_index(tmp_path / "home")


def _rows(settings: Settings, sql: str, params=None):
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def _path_ranks_in_prompt(text: str) -> list[int]:
    return [int(m) for m in re.findall(r"Path rank (\d+) ", text)]


def test_offline_path_query_answers_from_the_best_path(settings):
    result = PathRAG(settings).query(QUESTION)
    assert result.mode == "path" and result.answer_kind == "extractive"
    assert result.provider == "offline" and result.model == "offline"
    assert result.answer.startswith(EXTRACTIVE_LABEL)
    assert "born in Lindenholm" in result.answer
    assert any({"Aldermere University", "Helena Voss", "Lindenholm"} <= set(p.nodes) for p in result.paths)
    reliabilities = [p.reliability for p in result.paths]
    assert reliabilities == sorted(reliabilities, reverse=True)
    assert [p.rank for p in result.paths] == list(range(1, len(result.paths) + 1))
    assert len(result.paths) <= 15
    # Passages are ranked through path provenance; the Rye Bread component plays no part in this question.
    assert chunk_id("voss.md") in result.chunk_ids and chunk_id("aldermere.md") in result.chunk_ids
    assert result.document_ids[0] in {"voss.md", "aldermere.md"}
    assert set(result.timings_ms) == {"keywords", "graph", "retrieval", "pruning", "sources", "prompt", "answer"}
    assert result.tokens["keywords"]["calls"] == 0 and result.tokens["prompt"]["prompt_tokens"] > 0
    assert result.keywords["low_level"][0] == "Aldermere University"
    # The prompt lists the paths in ascending reliability: rank 1 (best) last.
    ranks = _path_ranks_in_prompt(result.prompt)
    # the default layout shows PathRAG-lt's 5 most reliable of the kept paths, least reliable first, rank 1 last
    assert ranks == sorted(ranks, reverse=True) and ranks[-1] == 1 and len(ranks) == min(len(result.paths), PATHS_LT)


def test_json_shape(settings):
    data = json.loads(PathRAG(settings).query(QUESTION, top_k=3).to_json())
    assert {"query_id", "mode", "answer", "paths", "retrieved_nodes", "chunk_ids", "document_ids", "timings_ms",
            "tokens", "provider", "model", "params"} <= set(data)
    assert 1 <= len(data["paths"]) <= 3
    for path in data["paths"]:
        assert {"rank", "reliability", "nodes", "text", "chunk_ids", "hops", "edge_ids"} <= set(path)
        assert isinstance(path["nodes"], list) and path["text"]
    assert data["params"]["theta"] == 0.05 and data["params"]["max_hops"] == 4
    assert data["params"]["embedder"].startswith("offline:")


def test_path_queries_prune_by_the_literal_rule_unless_asked_and_record_which(settings):
    rag = PathRAG(settings)
    default = rag.query(QUESTION)
    seed_pass = rag.query(QUESTION, seed_pass=True)
    assert default.params["seed_pass"] is False and seed_pass.params["seed_pass"] is True
    stored = {qid: json.loads(params)["seed_pass"]
              for qid, params in _rows(settings, "SELECT query_id, params FROM queries")}
    assert stored == {default.query_id: False, seed_pass.query_id: True}


def test_queries_are_appended_to_the_log_tables(settings):
    rag = PathRAG(settings)
    first = rag.query(QUESTION)
    second = rag.query("Which sea does the Varne River flow into?")
    rows = _rows(settings, "SELECT query_id, question, mode, answer_kind, provider, total_ms, answer FROM queries ORDER BY asked_at")
    assert [r[0] for r in rows] == [first.query_id, second.query_id]
    assert rows[0][1] == QUESTION and rows[0][2] == "path" and rows[0][3] == "extractive" and rows[0][6] == first.answer
    traces = _rows(settings, "SELECT rank, reliability, node_names, chunk_ids FROM path_traces WHERE query_id = ? ORDER BY rank",
                   [first.query_id])
    assert [(t[0], t[2]) for t in traces] == [(p.rank, list(p.nodes)) for p in first.paths]
    nodes = _rows(settings, "SELECT keyword, rank, entity_key FROM retrieved_nodes WHERE query_id = ? ORDER BY rank",
                  [first.query_id])
    assert [(n[1], n[2]) for n in nodes] == [(n.rank, n.entity_key) for n in first.retrieved]
    ms = json.loads(_rows(settings, "SELECT ms FROM queries WHERE query_id = ?", [first.query_id])[0][0])
    assert ms == first.timings_ms
    asked_at, chunk_ids, reliability = _rows(
        settings, "SELECT q.asked_at, q.chunk_ids, (SELECT max(reliability) FROM path_traces t WHERE t.query_id = "
                  "q.query_id) FROM queries q WHERE query_id = ?", [first.query_id])[0]
    assert (asked_at, chunk_ids) == (first.asked_at, list(first.chunk_ids))
    assert reliability == max(p.reliability for p in first.paths)


def test_injection_looking_question_is_stored_verbatim(settings):
    question = "Robert'); DROP TABLE queries; -- who founded \"Aldermere University\"?"
    result = PathRAG(settings).query(question)
    stored = _rows(settings, "SELECT question FROM queries WHERE query_id = ?", [result.query_id])
    assert stored == [(question,)]
    assert _rows(settings, "SELECT count(*) FROM queries") == [(1,)]


def test_graph_is_loaded_once_per_version(settings, monkeypatch):
    loads = []
    real = graph_cache._read_snapshot
    monkeypatch.setattr(graph_cache, "_read_snapshot", lambda con, version: loads.append(version) or real(con, version))
    rag = PathRAG(settings)
    results = rag.query_many([QUESTION, "Who taught Helena Voss?", "What does the Copper Kettle sell?"])
    assert len(loads) == 1
    assert len({r.params["graph_version"] for r in results}) == 1
    assert _rows(settings, "SELECT count(*) FROM queries") == [(3,)]


@pytest.mark.parametrize("mode", ["naive", "local", "global", "hybrid"])
def test_lightrag_modes(settings, mode):
    result = PathRAG(settings).query("Which bakery sells rye bread in Oldport?", mode)
    assert result.mode == mode and result.paths == []
    assert result.answer.startswith(EXTRACTIVE_LABEL) and "rye bread" in result.answer
    assert chunk_id("kettle.md") in result.chunk_ids[:2]
    assert "-----Sources-----" in result.prompt
    assert ("-----Entities-----" in result.prompt) == (mode != "naive")
    assert (result.retrieved == []) == (mode == "naive")
    assert _rows(settings, "SELECT mode FROM queries") == [(mode,)]


def test_flat_prompt_and_reference_variant(settings):
    rag = PathRAG(settings)
    flat = rag.query(QUESTION, prompt="flat")
    assert "Path rank" not in flat.prompt and "Entity: Helena Voss" in flat.prompt
    ref = rag.query(QUESTION, variant="reference")
    assert ref.params["theta"] == 0.3 and ref.params["max_hops"] == 3
    assert ref.paths


@pytest.mark.parametrize("layout", ["paths", "paths_passages", "passages_last", "public", "passages"])
def test_prompt_layouts_and_prompts_at_budgets(settings, layout):
    """Each layout renders from the same retrieval; ``budgets`` renders it again at each budget, naming the
    documents whose passages it quotes (what an evaluation scores without an LLM)."""
    result = PathRAG(settings).query_many([QUESTION], "path", prompt=layout, budgets=(300, 2000))[0]
    assert sorted(result.prompts) == [300, 2000]
    small, large = result.prompts[300], result.prompts[2000]
    assert small.tokens <= 300 and small.tokens <= large.tokens <= 2000 and large.text.startswith(result.prompt[:40])
    assert ("Path rank" in large.text) == (layout in ("paths", "paths_passages", "passages_last"))
    assert ("-----Relational paths" in large.text) == (layout == "public")
    if layout == "paths":
        assert large.document_ids == ()                      # the paper's prompt quotes no passage
    else:
        # the quoted passages are the ranked ones, best first, and the best is the founder's or the university's
        assert large.document_ids and set(large.document_ids) <= set(result.document_ids)
        assert large.document_ids[0] == result.document_ids[0]
        assert "chemist born in Lindenholm" in large.text
    assert set(small.document_ids) <= set(large.document_ids)


@pytest.mark.parametrize("layout", ["passages", "passages_paths"])
def test_question_order_shows_the_ranked_passages_most_similar_to_the_question_first(settings, layout):
    """``passage_order="question"`` changes the order the prompt shows its passages in, never which ones: the
    ranker's choice, laid out by cosine to the question."""
    rag = PathRAG(settings)
    question = "What is Lindenholm known for?"    # a question whose ranking and cosine order differ here
    by_rank = rag.query_many([question], "path", prompt=layout, budgets=(300, 2000))[0]
    by_question = rag.query_many([question], "path", prompt=layout, passage_order="question", budgets=(300, 2000))[0]
    assert by_question.document_ids == by_rank.document_ids           # the ranking (and so recall) is unchanged
    for budget in (300, 2000):
        assert set(by_question.prompts[budget].document_ids) == set(by_rank.prompts[budget].document_ids)
    shown = list(by_question.prompts[2000].document_ids)
    assert shown != list(by_rank.prompts[2000].document_ids)
    sims = rag.vectors.similarities("chunks", rag.embedder.embed([question])[0], [chunk_id(d) for d in shown])
    assert [sims[chunk_id(d)] for d in shown] == sorted((sims[chunk_id(d)] for d in shown), reverse=True)
    if layout == "passages_paths":
        assert 0 < len(_path_ranks_in_prompt(by_question.prompt)) <= 5
    with pytest.raises(ValueError, match="passage_order='best'"):
        rag.query(QUESTION, passage_order="best")


def test_flat_baseline_prompts_at_budgets_quote_their_chunks(settings):
    result = PathRAG(settings).query_many([QUESTION], "naive", chunk_search="bm25", budgets=(2000,))[0]
    prompt = result.prompts[2000]
    assert prompt.document_ids == tuple(result.document_ids[:len(prompt.document_ids)]) and prompt.document_ids
    assert "-----Sources-----" in prompt.text


def test_bad_parameters_are_clear_errors(settings):
    rag = PathRAG(settings)
    with pytest.raises(ValueError, match="mode='graph'"):
        rag.query(QUESTION, "graph")
    with pytest.raises(ValueError, match="alpha=1.5"):
        rag.query(QUESTION, alpha=1.5)
    with pytest.raises(ValueError, match="question 0 is empty"):
        rag.query("   ")
    assert _rows(settings, "SELECT count(*) FROM queries") == [(0,)]


def test_llm_keywords_then_answer_over_openai_server(settings, openai_server):
    seen = {}

    def responder(request):
        # The DuckDB file must be free while the model works: a writer can open it from inside the call.
        with Store(settings.duckdb_path).connect() as con:
            con.execute("SELECT 1")
        if request.get("response_format") or "keywords" in json.dumps(request["messages"][0]).lower():
            seen["keywords"] = request
            return Keywords(low_level=["Aldermere University"], high_level=["founder", "birthplace"]).model_dump_json()
        seen["answer"] = request
        return "Helena Voss was born in Lindenholm."

    openai_server.chat_responder = responder
    llm_settings = Settings(home=settings.home, docs=settings.docs, llm_base_url=openai_server.base_url,
                            llm_model="fake-chat", llm_api_key="sk-test-secret")
    result = PathRAG(llm_settings).query(QUESTION, keywords="llm")   # PathRAG's keyword call, then the answer
    assert openai_server.count("chat") == 2
    assert result.answer_kind == "llm" and result.answer == "Helena Voss was born in Lindenholm."
    assert result.model == "fake-chat" and result.provider == "openai-compatible"
    assert result.keywords == {"low_level": ["Aldermere University"], "high_level": ["founder", "birthplace"]}
    assert result.tokens["keywords"]["calls"] == 1 and result.tokens["answer"]["calls"] == 1
    assert result.tokens["answer"]["prompt_tokens"] > 0
    assert QUESTION in json.dumps(seen["keywords"]["messages"])
    user = seen["answer"]["messages"][-1]["content"]
    assert user.endswith(f"Question: {QUESTION}") and user.count(QUESTION) == 1   # asked last, once
    ranks = _path_ranks_in_prompt(user)
    assert len(ranks) == min(len(result.paths), PATHS_LT) >= 1 and ranks == sorted(ranks, reverse=True) and ranks[-1] == 1
    stored = _rows(settings, "SELECT provider, model, answer_kind, tokens::VARCHAR FROM queries")
    assert stored[0][:3] == ("openai-compatible", "fake-chat", "llm")
    assert "sk-test-secret" not in json.dumps(result.to_dict()) and "sk-test-secret" not in stored[0][3]


def test_path_mode_takes_the_offline_keywords_and_the_others_the_llms(settings, openai_server):
    """Path mode's keywords come from the offline rules by default (one model call a query: the answer), our
    departure measured on answers (docs/benchmarks.md, "Query keywords from the LLM or the offline rules"); PathRAG's
    keyword call is ``keywords="llm"`` and the paper preset; the LightRAG modes keep LightRAG's keyword call."""
    from pathrag_pipeline.query.keywords import extract_keywords_offline
    from pathrag_pipeline.query.params import PRESETS

    def responder(request):
        if request.get("response_format") or "keywords" in json.dumps(request["messages"][0]).lower():
            return Keywords(low_level=["Aldermere University"], high_level=["founder"]).model_dump_json()
        return "Helena Voss."

    openai_server.chat_responder = responder
    rag = PathRAG(Settings(home=settings.home, docs=settings.docs, llm_base_url=openai_server.base_url,
                           llm_model="fake-chat"), record=False)
    default = rag.query(QUESTION)
    assert openai_server.count("chat") == 1 and default.tokens["keywords"]["calls"] == 0
    assert default.keywords["low_level"] == list(extract_keywords_offline(QUESTION).low_level)
    assert default.answer == "Helena Voss." and default.params["keywords"] == "auto"
    paper = rag.query(QUESTION, **PRESETS["paper"])
    assert openai_server.count("chat") == 3 and paper.tokens["keywords"]["calls"] == 1
    assert paper.keywords["low_level"] == ["Aldermere University"]
    rag.query(QUESTION, mode="hybrid")   # LightRAG's keyword call, from the memo of the paper query: no new call
    rag.query("Where was Helena Voss born?", mode="local")
    assert openai_server.count("chat") == 6   # hybrid's answer; local's keywords and answer


def test_the_question_is_embedded_while_the_llm_finds_its_keywords(settings, openai_server):
    """The retrieval needs the question's vector and the keywords: the vector is asked for in a thread while the
    keyword call is in flight (issue 64), so an embedding endpoint's round trip hides behind the model's."""
    embedded_during_keywords = []

    def responder(request):
        if request.get("response_format") or "keywords" in json.dumps(request["messages"][0]).lower():
            deadline = time.monotonic() + 10
            while QUESTION not in rag.embedder._kept and time.monotonic() < deadline:
                time.sleep(0.01)
            embedded_during_keywords.append(QUESTION in rag.embedder._kept)
            return Keywords(low_level=["Aldermere University"], high_level=["founder"]).model_dump_json()
        return "Helena Voss."

    openai_server.chat_responder = responder
    rag = PathRAG(Settings(home=settings.home, docs=settings.docs, llm_base_url=openai_server.base_url,
                           llm_model="fake-chat"))
    result = rag.query(QUESTION, keywords="llm")
    assert embedded_during_keywords == [True] and result.answer == "Helena Voss."
    rag.query(QUESTION, mode="hybrid")   # keywords from the memo: no call to hide behind, nothing asked ahead
    assert openai_server.count("chat") == 3


def test_retrieval_only_query_makes_no_answer_call(settings, openai_server):
    from pathrag_pipeline.query.engine import QueryParams

    openai_server.chat_responder = lambda request: Keywords(low_level=["Aldermere University"],
                                                            high_level=["founder"]).model_dump_json()
    llm_settings = Settings(home=settings.home, docs=settings.docs, llm_base_url=openai_server.base_url,
                            llm_model="fake-chat")
    [result] = PathRAG(llm_settings).query_many([QUESTION], "path", params=QueryParams(answer=False, keywords="llm"))
    assert openai_server.count("chat") == 1            # keywords only
    assert result.answer_kind == "none" and result.answer == "" and result.chunk_ids


def test_offline_extraction_index_end_to_end(tmp_path):
    """Index the bundled sample documents with the rule-based extractor, then ask across them."""
    from pathrag_pipeline.index.llm_extraction import OfflineExtractor
    from pathrag_pipeline.index.extraction_stage import run_extraction
    from pathrag_pipeline.ingest.folder_sync import sync_folder

    graph_cache.clear_cache()
    settings = Settings(home=tmp_path / "home", docs=SAMPLE_DOCS)
    sync_folder(settings, folder=SAMPLE_DOCS, trigger="test")
    run_extraction(Store(settings.duckdb_path), OfflineExtractor())
    sync_vectors(settings)
    result = PathRAG(settings).query("Who was the first chancellor of Aldermere University?")
    assert result.paths and result.answer.startswith(EXTRACTIVE_LABEL)
    assert "chancellor" in result.answer
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        known = {d for (d,) in con.execute("SELECT id FROM documents").fetchall()}
        assert result.document_ids and set(result.document_ids) <= known
        # Every quoted sentence is text of a retrieved source passage.
        texts = " ".join(" ".join(t.split()) for (t,) in con.execute(
            "SELECT text FROM chunks WHERE id IN (SELECT unnest(?::VARCHAR[]))", [result.chunk_ids]).fetchall())
    first_sentence = result.answer.removeprefix(EXTRACTIVE_LABEL).strip().split(". ")[0]
    assert first_sentence and first_sentence in texts

    # issue 25: a question about nothing in the index gets no paths, not the 15 that merely came nearest;
    # the paper's rule (always the top-N seeds) stays reachable
    off_topic = "What is the boiling point of mercury?"
    gated = PathRAG(settings, record=False).query(off_topic)
    assert gated.paths == [] and gated.retrieved == []
    from pathrag_pipeline.cli.ask import print_result
    from rich.console import Console

    console = Console(record=True, width=200)
    print_result(gated, console)
    assert "No entity of the index stands out for this question's terms" in console.export_text()
    paper = PathRAG(settings, record=False).query(off_topic, revert=("question_seed", "both_ends", "seed_gate"))
    assert paper.paths and paper.retrieved


    # path_seeds="standing": the paths run only between seeds that clear their own keyword's bar; the seeds and
    # the ranked passages stay the paper's top N
    import numpy as np
    from pathrag_pipeline.query.retrieval import query_keywords, standing_seeds

    rag = PathRAG(settings, record=False)
    question = "Who was the first chancellor of Aldermere University?"
    everyone, standing = rag.query(question), rag.query(question, path_seeds="standing")
    assert standing.retrieved == everyone.retrieved and standing.chunk_ids == everyone.chunk_ids
    low = query_keywords(everyone.keywords["low_level"], [], question)
    bar_cleared = {n.entity_key for n in standing_seeds(rag.vectors, np.asarray(rag.embedder.embed(low)), low,
                                                  everyone.retrieved)}
    assert len(bar_cleared) < len(everyone.retrieved)
    assert any(not {p.node_keys[0], p.node_keys[-1]} <= bar_cleared
               for p in everyone.paths)
    assert len(standing.paths) < len(everyone.paths)
    assert all({p.node_keys[0], p.node_keys[-1]} <= bar_cleared
               for p in standing.paths)

    # seed_query="joined": one entity search for the keywords joined, as the public PathRAG code's kg_query
    two = "Which river flows past Aldermere University and the Kestle Observatory?"
    # (without the seed gate: offline, the joined string names no entity exactly and its hashed vector stands out
    # of nothing, so the gate leaves no seed)
    ungated = ("question_seed", "both_ends", "seed_gate")
    each, joined = rag.query(two, revert=ungated), rag.query(two, seed_query="joined", revert=ungated)
    assert {n.keyword for n in each.retrieved} == {"Aldermere University", "Kestle Observatory"}
    assert {n.keyword for n in joined.retrieved} == {"Aldermere University, Kestle Observatory"}


def test_run_questions_and_load_questions(settings, tmp_path):
    (tmp_path / "q.jsonl").write_text('{"id": "a", "question": "Who taught Helena Voss?"}\n\n"Where is Brackwater?"\n')
    (tmp_path / "q.csv").write_text('id,question\n1,"Who taught Helena Voss?"\n2,\n')
    (tmp_path / "q.txt").write_text("# questions\nWho taught Helena Voss?\n\nWhere is Brackwater?\n")
    (tmp_path / "bad.csv").write_text("id,text\n1,x\n")
    (tmp_path / "bad.jsonl").write_text('{"question": "ok"}\n{"q": 1}\n')
    assert load_questions(tmp_path / "q.jsonl") == ["Who taught Helena Voss?", "Where is Brackwater?"]
    assert load_questions(tmp_path / "q.csv") == ["Who taught Helena Voss?"]
    assert load_questions(tmp_path / "q.txt") == ["Who taught Helena Voss?", "Where is Brackwater?"]
    with pytest.raises(ValueError, match="'question' column"):
        load_questions(tmp_path / "bad.csv")
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        load_questions(tmp_path / "bad.jsonl")
    results = run_questions(settings, load_questions(tmp_path / "q.txt"), "path", {"top_k": 5})
    assert [r.question for r in results] == ["Who taught Helena Voss?", "Where is Brackwater?"]
    assert all(r.params["top_k"] == 5 for r in results)
    assert _rows(settings, "SELECT count(*) FROM queries") == [(2,)]


def test_cli_ask(settings):
    env = {"PATHRAG_HOME": str(settings.home), "PATHRAG_LLM_BASE_URL": "", "PATHRAG_LLM_MODEL": "",
           "PATHRAG_LLM_API_KEY": "", "OPENAI_API_KEY": "", "PATHRAG_EMBED_MODEL": "", "PATHRAG_EMBED_BASE_URL": ""}
    runner = CliRunner()
    out = runner.invoke(ask, [QUESTION, "--json", "--top-k", "2"], env=env)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["mode"] == "path" and len(data["paths"]) <= 2 and data["answer"].startswith(EXTRACTIVE_LABEL)
    human = runner.invoke(ask, [QUESTION], env=env)
    assert human.exit_code == 0, human.output
    assert "Answer" in human.output and "Lindenholm" in human.output and "voss.md" in human.output
    bad = runner.invoke(ask, [QUESTION, "--mode", "graph"], env=env)
    assert bad.exit_code != 0 and "graph" in bad.output
    empty_home = runner.invoke(ask, [QUESTION], env={**env, "PATHRAG_HOME": str(settings.home / "nothing")})
    assert empty_home.exit_code == 1 and "pathrag index" in empty_home.output
    standing = runner.invoke(ask, [QUESTION, "--json", "--path-seeds", "standing", "--seed-query", "joined"], env=env)
    assert standing.exit_code == 0, standing.output
    assert {k: json.loads(standing.output)["params"][k] for k in ("path_seeds", "seed_query")} == {
        "path_seeds": "standing", "seed_query": "joined"}
    naive = runner.invoke(ask, [QUESTION, "--mode", "naive", "--path-seeds", "standing"], env=env)
    assert naive.exit_code == 2 and "--path-seeds shape path mode only" in naive.output


def test_path_pooling_rerank_and_reselect(settings):
    rag = PathRAG(settings)
    plain = rag.query(QUESTION, top_k=3)
    reranked = rag.query(QUESTION, top_k=3, path_pooling="rerank")
    # rerank keeps the same paths (reliabilities untouched) and may only reorder them
    assert sorted(p.reliability for p in reranked.paths) == sorted(p.reliability for p in plain.paths)
    assert sorted(p.nodes for p in reranked.paths) == sorted(p.nodes for p in plain.paths)
    assert reranked.params["path_pooling"] == "rerank"
    # the three most reliable paths miss the question's entity; reselect picks from a pool three times as
    # large and keeps paths that start at it (the kernels' first hops), the founder among them
    assert not any("Aldermere University" in p.nodes for p in plain.paths)
    reselected = rag.query(QUESTION, top_k=3, path_pooling="reselect")
    assert 0 < len(reselected.paths) <= 3
    assert "Aldermere University" in reselected.paths[0].nodes
    assert any({"Aldermere University", "Helena Voss"} <= set(p.nodes) for p in reselected.paths)
    with pytest.raises(ValueError, match="path_pooling='max'"):
        rag.query(QUESTION, path_pooling="max")


def test_a_keyword_answer_cut_at_the_cap_falls_back_to_the_offline_rules(settings, openai_server, caplog):
    """Issue 27: a small model's tool-call keyword answer ran to its 1024-token cap and the whole query failed."""
    from pathrag_pipeline.query.keywords import extract_keywords_offline

    def responder(request):
        if "keywords" in json.dumps(request["messages"][0]).lower():
            return "word " * 2000                # runs past the stage's cap: cut, never used
        return "Helena Voss founded it."

    openai_server.chat_responder = responder
    llm_settings = Settings(home=settings.home, docs=settings.docs, llm_base_url=openai_server.base_url,
                            llm_model="fake-chat", llm_answer_max_tokens=50)
    result = PathRAG(llm_settings).query(QUESTION, keywords="llm")
    assert result.error is None and result.answer == "Helena Voss founded it."
    offline = extract_keywords_offline(QUESTION)
    assert result.keywords == {"low_level": list(offline.low_level), "high_level": list(offline.high_level)}
    assert result.tokens["keywords"]["calls"] == 1 and result.tokens["keywords"]["completion_tokens"] == 50
    assert any("offline keyword rules are used" in r.getMessage() and "PATHRAG_LLM_ANSWER_MAX_TOKENS" in r.getMessage()
               for r in caplog.records)


def test_back_to_back_queries_open_each_vector_table_once_until_the_index_changes(tmp_path, monkeypatch):
    """The vector tables a query opened are kept with its DuckDB read connection (``VectorStore.pinned(keep_in=)``):
    the next query reuses them; after a write to the DuckDB file the next query opens them again."""
    from pathrag_pipeline.storage import store as store_module
    from pathrag_pipeline.storage.store import set_meta

    monkeypatch.setattr(store_module, "KEEP_READING_S", 3600.0)   # kept for the test's length, however slow
    settings = build_tiny_index(tmp_path / "home")
    graph_cache.clear_cache()
    with PathRAG(settings, record=False) as rag:
        opened: list[str] = []
        real = rag.vectors._db.open_table
        monkeypatch.setattr(rag.vectors._db, "open_table", lambda name, *a, **k: opened.append(name) or real(name, *a, **k))
        question = "Which sea does the Varne River flow into?"
        first = rag.query(question, mode="path", keywords="offline")
        assert first.paths and opened and len(opened) == len(set(opened))   # each table once within a query
        once = list(opened)
        assert rag.query(question, mode="path", keywords="offline").answer == first.answer
        assert opened == once                                              # the second query opened none
        with rag.store.connect() as con:                                   # a write: the kept reads are closed
            set_meta(con, "test_marker", "1")
        rag.query(question, mode="path", keywords="offline")
        assert opened == once + once
