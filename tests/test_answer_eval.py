"""Answer evaluation (`pathrag eval answers`) against the scripted OpenAI-compatible server: scoring against the
gold answers, the stored rows and runs, resumption after a kill, the paired intervals and the CLI's JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli.eval import eval_group
from pathrag_pipeline.config import Settings
from pathrag_pipeline.evaluation.answer_eval import SHORT_ANSWER_TOKENS, evaluate_answers
from pathrag_pipeline.evaluation.answer_scoring import answer_in_context
from pathrag_pipeline.query import graph_cache
from pathrag_pipeline.query.answering import SHORT_ANSWER
from pathrag_pipeline.query.params import QueryParams
from tests.test_evaluation import QUESTIONS, write_dataset

GOLD = {q["id"]: q["answers"] for q in QUESTIONS}
MODES = ["path", "path:paper", "naive", "bm25"]


def reader(request: dict) -> str:
    """A scripted model that answers what it can read: keywords as JSON for the keyword prompt; for an answer,
    the first gold answer that occurs in the prompt it was sent, else "unknown"."""
    system = request["messages"][0]["content"]
    user = request["messages"][-1]["content"]
    if ("keywords" in system.lower() or "named entities" in system) and "Question:" in user:
        words = re.findall(r"[A-Z][a-z]+(?: [A-Z][a-z]+)*", user.split("Question:", 1)[1])
        if "named entities" in system:   # NeuroPath's key-entity prompt (the paper's Figure 13)
            return json.dumps({"named_entities": words[:3]})
        return json.dumps({"low_level": words[:3], "high_level": ["location"]})
    line = re.search(r"Question: (.*)", user).group(1).strip()
    gold = next(q for q in QUESTIONS if q["question"] == line)["answers"][0]
    return gold if gold != "x" and answer_in_context(user, [gold]) else "unknown"


@pytest.fixture
def dataset(tmp_path) -> Path:
    graph_cache.clear_cache()
    return write_dataset(tmp_path / "tiny-qa")


def _settings(tmp_path: Path, server=None) -> Settings:
    env = {"PATHRAG_HOME": str(tmp_path / "home")}
    if server is not None:
        env.update(PATHRAG_LLM_BASE_URL=server.base_url, PATHRAG_LLM_MODEL="fake-reader")
    return Settings.from_env(env=env)


def _rows(settings: Settings, sql: str):
    with duckdb.connect(str(settings.duckdb_path), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.mark.e2e
def test_answers_are_scored_against_gold_stored_and_compared_with_intervals(tmp_path, dataset, openai_server):
    openai_server.chat_responder = reader
    settings = _settings(tmp_path, openai_server)
    e = evaluate_answers(settings, dataset, modes=MODES, use_triples=True, budget=600)

    rows = _rows(settings, "SELECT mode, question_id, answer, exact_match, f1, answer_in_context, prompt, llm_calls, "
                           "prompt_tokens, error FROM eval_answers ORDER BY question_id, mode")
    assert len(rows) == len(QUESTIONS) * len(MODES)
    for mode, qid, answer, em, f1, aic, prompt, calls, ptok, error in rows:
        assert error is None
        assert aic == answer_in_context(prompt, GOLD[qid])     # the stored prompt is the one scored
        expected = GOLD[qid][0] if aic and GOLD[qid][0] != "x" else "unknown"
        assert answer == expected and f1 == em == float(expected in GOLD[qid])
        assert 0 < ptok <= 600
        # the keyword call is counted in each mode that makes it (path takes the offline rules, path:paper
        # PathRAG's keyword call), the answer call in every mode
        assert calls == (2 if mode == "path:paper" else 1)

    # keywords are asked once per question (by path:paper), answers once per row
    asks = [body for endpoint, body in openai_server.calls if endpoint == "chat"]
    answer_asks = [b for b in asks if SHORT_ANSWER in b["messages"][0]["content"]]
    assert len(answer_asks) == len(rows)
    assert len(asks) - len(answer_asks) == len(QUESTIONS)
    assert all(b["max_tokens"] == SHORT_ANSWER_TOKENS for b in answer_asks)

    summary = e.summary()
    f1 = {m: sum(r[4] for r in rows if r[0] == m) / len(QUESTIONS) for m in MODES}
    assert {m: s.scores["f1"] for m, s in summary.items()} == pytest.approx(f1, abs=1e-4)
    for mode, figures in summary.items():    # how well the model reads what the prompt held
        held = [r[4] for r in rows if r[0] == mode and r[5]]
        assert figures.f1_in_context == (pytest.approx(sum(held) / len(held)) if held else None)
    assert summary["bm25"].vs == "path" and summary["path"].vs is None
    assert summary["bm25"].delta["f1"].diff == pytest.approx(f1["bm25"] - f1["path"], abs=1e-9)
    verdict = e.verdict()
    assert verdict and "strongest flat chunk prompt" in verdict and "fake-reader" in verdict
    run = _rows(settings, "SELECT run_id, questions, planned, answered, resumed, stopped, verdict, budget "
                          "FROM eval_answer_runs")
    assert run == [(e.run_id, 3, 3, 12, 0, None, verdict, 600)]


@pytest.mark.e2e
def test_a_killed_run_resumes_with_the_answers_it_had(tmp_path, dataset, openai_server):
    openai_server.chat_responder = reader
    settings = _settings(tmp_path, openai_server)

    class Killed(BaseException):
        pass

    def kill_after_five(mode: str, done: int, total: int) -> None:
        if done == 5:
            raise Killed()

    with pytest.raises(Killed):
        evaluate_answers(settings, dataset, modes=MODES, use_triples=True, budget=600, on_answer=kill_after_five)
    assert _rows(settings, "SELECT count(*) FROM eval_answers")[0][0] == 5
    before = openai_server.count("chat")

    e = evaluate_answers(settings, dataset, modes=MODES, use_triples=True, budget=600)
    assert (e.resumed, e.answered) == (5, 7)
    assert len({r[0] for r in _rows(settings, "SELECT run_id FROM eval_answers")}) == 1   # the same run
    assert len(e.complete_questions) == 3
    answers_asked = sum(SHORT_ANSWER in body["messages"][0]["content"]
                        for endpoint, body in openai_server.calls[before:] if endpoint == "chat")
    assert answers_asked == 7

    # another budget is another configuration: a new run, nothing resumed; --fresh starts over too
    other = evaluate_answers(settings, dataset, modes=["naive"], use_triples=True, budget=700)
    assert other.run_id != e.run_id and other.resumed == 0
    again = evaluate_answers(settings, dataset, modes=["naive"], use_triples=True, budget=700, fresh=True)
    assert again.run_id != other.run_id and again.resumed == 0


@pytest.mark.e2e
def test_an_endpoint_that_stops_answering_stops_the_run_and_failed_rows_are_retried(tmp_path, dataset,
                                                                                    openai_server):
    from pathrag_pipeline.evaluation.answer_eval import EndpointDown

    openai_server.chat_responder = reader
    settings = _settings(tmp_path, openai_server)
    openai_server.inject("404_model", times=100)
    with pytest.raises(EndpointDown, match="run the same command again"):
        evaluate_answers(settings, dataset, modes=["naive"], use_triples=True, budget=600)
    failed = _rows(settings, "SELECT error FROM eval_answers")
    assert len(failed) == 3 and all(error for (error,) in failed)

    openai_server.reset()
    openai_server.chat_responder = reader
    e = evaluate_answers(settings, dataset, modes=["naive"], use_triples=True, budget=600)
    assert e.resumed == 0 and e.answered == 3 and not e.stopped
    assert _rows(settings, "SELECT count(*) FROM eval_answers WHERE error IS NULL")[0][0] == 3


@pytest.mark.e2e
def test_offline_answers_are_the_extractive_ones_and_say_so(tmp_path, dataset):
    settings = _settings(tmp_path)
    e = evaluate_answers(settings, dataset, modes=["path", "bm25", "bm25+dense"], use_triples=True, budget=600)
    assert e.llm == "offline"
    # without a semantic embedder the fused baseline is BM25 alone, and its row says so
    assert e.summary()["bm25+dense"].note == "bm25+dense = bm25 offline (embedder not semantic)"
    answers = _rows(settings, "SELECT answer, llm_calls FROM eval_answers")
    assert answers and all(a.startswith("Extractive answer") and calls == 0 for a, calls in answers)


def test_questions_without_gold_answers_are_refused_with_the_file_named(tmp_path, dataset):
    lines = (dataset / "questions.jsonl").read_text().splitlines()
    row = json.loads(lines[0])
    del row["answers"]
    (dataset / "questions.jsonl").write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n")
    with pytest.raises(ValueError, match=r"questions.jsonl.*'q1'.*answers"):
        evaluate_answers(_settings(tmp_path), dataset, modes=["naive"], use_triples=True)


@pytest.mark.e2e
def test_cli_json_and_table(tmp_path, dataset, openai_server, monkeypatch):
    openai_server.chat_responder = reader
    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-reader")
    runner = CliRunner()
    result = runner.invoke(eval_group, ["answers", "--dataset", str(dataset), "--use-triples", "--modes",
                                        "path,bm25", "--budget", "600", "--json", "--per-question"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["llm"] == "fake-reader" and data["questions"] == 3 and data["budget"] == 600
    assert set(data["modes"]) == {"path", "path:paper", "bm25"}   # the paper's PathRAG beside the default, always
    assert data["graph"] == "triples" and data["index_seconds"] >= 0
    assert data["modes"]["bm25"]["vs"] == "path" and "f1" in data["modes"]["bm25"]["delta"]
    assert len(data["modes"]["path"]["per_question"]) == 3
    assert "prompt" not in data["modes"]["path"]["per_question"][0]
    # the same command again resumes everything and asks nothing
    before = openai_server.count("chat")
    table = runner.invoke(eval_group, ["answers", "--dataset", str(dataset), "--use-triples", "--modes",
                                       "path,bm25", "--budget", "600"])
    assert table.exit_code == 0, table.output
    assert openai_server.count("chat") == before
    assert "9 answers resumed, 0 reused, 0 new" in table.output and "strongest flat chunk prompt" in table.output


def test_new_query_options_are_validated_and_the_python_api_defaults_to_the_cli_prompt():
    import inspect

    from pathrag_pipeline.query.engine import PathRAG
    from pathrag_pipeline.query.params import QueryParams

    for field, value in (("response", "long"), ("keywords", "llm-only"), ("np_tracker", "human")):
        with pytest.raises(ValueError, match=f"{field}='{value}' is not one of"):
            QueryParams(**{field: value}).resolved()
    # the Python API declares no setting of its own: every default is QueryParams' (issue 60, item 2)
    parameters = inspect.signature(PathRAG.query).parameters
    assert not set(parameters) & set(QueryParams.__dataclass_fields__) and "settings" in parameters


@pytest.mark.e2e
def test_llm_keywords_are_measured_against_the_offline_rules_on_the_same_questions(tmp_path, dataset,
                                                                                    openai_server):
    from pathrag_pipeline.evaluation.retrieval_eval import evaluate_retrieval

    openai_server.chat_responder = reader
    e = evaluate_retrieval(_settings(tmp_path, openai_server), dataset,
                           modes=["path", "path:llm_keywords", "hybrid"], use_triples=True, budgets=())
    rules, llm = e.modes["path"], e.modes["path:llm_keywords"]
    assert llm.llm_calls == 1.0 and rules.llm_calls == 0.0           # one keyword call per question, or none
    # hybrid reuses path:llm_keywords' keyword call (asked once per question) but counts it, as it would alone
    assert e.modes["hybrid"].llm_calls == 1.0 and e.modes["hybrid"].llm_tokens == llm.llm_tokens
    assert llm.vs == "path" and set(llm.delta) >= {"recall@2", "mean_recall"}
    assert openai_server.count("chat") == len(QUESTIONS)
    assert not llm.note

    graph_cache.clear_cache()
    offline = evaluate_retrieval(_settings(tmp_path / "off"), dataset, modes=["path", "path:llm_keywords"],
                                 use_triples=True, budgets=())
    assert offline.modes["path:llm_keywords"].note == "path:llm_keywords = path without an LLM " \
                                                      "(offline keywords and tracker either way)"
    assert offline.modes["path:llm_keywords"].recall == offline.modes["path"].recall


def _answers_asked(server, since: int = 0) -> int:
    return sum(SHORT_ANSWER in body["messages"][0]["content"] for endpoint, body in server.calls[since:]
               if endpoint == "chat")


@pytest.mark.e2e   # two full answer runs: run by .ci/run (pytest -m e2e)
def test_a_changed_default_reuses_every_answer_whose_mode_does_not_read_it(tmp_path, dataset, openai_server):
    """Changing path mode's prompt layout is a new run (a new config hash), but naive and bm25 do not read the
    layout, and the new default's answers already exist under the layout's own mode name: nothing is asked
    again. Another model is another configuration: everything is asked."""
    openai_server.chat_responder = reader
    settings = _settings(tmp_path, openai_server)
    first = evaluate_answers(settings, dataset, modes=[*MODES, "path:passages_prompt"], use_triples=True, budget=600)
    assert first.answered == 15 and first.reused == 0
    before = len(openai_server.calls)

    changed = evaluate_answers(settings, dataset, modes=MODES, use_triples=True, budget=600,
                               params=QueryParams(prompt="passages"))
    assert changed.run_id != first.run_id and changed.config_hash != first.config_hash
    # path under the new default is the first run's path:passages_prompt, path:paper (the preset) is "paths" either
    # way, naive and bm25 do not read the layout: every answer exists already
    assert (changed.resumed, changed.reused, changed.answered) == (0, 12, 0) and _answers_asked(openai_server, before) == 0
    for q in changed.complete_questions:
        assert changed.rows["path"][q].answer == first.rows["path:passages_prompt"][q].answer
        assert changed.rows["path"][q].prompt == first.rows["path:passages_prompt"][q].prompt
        assert changed.rows["path"][q].reused_from == first.run_id
        assert changed.rows["naive"][q].prompt == first.rows["naive"][q].prompt
    stored = _rows(settings, f"SELECT count(*), count(DISTINCT answer_key) FROM eval_answers "
                             f"WHERE run_id = '{changed.run_id}' AND reused_from = '{first.run_id}'")
    assert stored == [(12, 4)]
    assert _rows(settings, f"SELECT reused FROM eval_answer_runs WHERE run_id = '{changed.run_id}'") == [(12,)]

    # a knob path mode reads (top_k): its two layouts are asked again, the flat prompts still are not
    before = len(openai_server.calls)
    narrower = evaluate_answers(settings, dataset, modes=MODES, use_triples=True, budget=600,
                                params=QueryParams(top_k=2))
    assert (narrower.reused, narrower.answered) == (6, 6) and _answers_asked(openai_server, before) == 6
    assert all(narrower.rows[m][q].reused_from is None for m in ("path", "path:paper")
               for q in narrower.complete_questions)

    # rows stored before answer keys existed count too when their run's configuration checks out ...
    with duckdb.connect(str(settings.duckdb_path)) as con:
        con.execute("UPDATE eval_answers SET answer_key = NULL, reused_from = NULL")
    again = evaluate_answers(settings, dataset, modes=["naive", "bm25"], use_triples=True, budget=600,
                             params=QueryParams(prompt="paths"))
    assert again.reused == 6 and again.answered == 0
    # ... and never across models
    other = Settings(**{**settings.__dict__, "llm_model": "another-reader"})
    before = len(openai_server.calls)
    moved = evaluate_answers(other, dataset, modes=["naive"], use_triples=True, budget=600)
    assert moved.reused == 0 and moved.answered == 3 and _answers_asked(openai_server, before) == 3


# ---- issue 59: the evaluation commands a researcher trusts ---------------------------------------------------

def test_an_llm_endpoint_answers_but_does_not_extract_the_dataset_unless_asked(tmp_path, dataset, openai_server):
    """With an endpoint set and no triples asked for, the dataset's graph comes from the offline rules (as
    `eval retrieval` builds it), not from about two LLM calls a passage; the run stores and prints the source."""
    from pathrag_pipeline.evaluation.retrieval_eval import DatasetError
    from pathrag_pipeline.index.offline_extraction import OFFLINE_EXTRACTOR_ID

    openai_server.chat_responder = reader
    settings = _settings(tmp_path, openai_server)
    e = evaluate_answers(settings, dataset, modes=["naive"], budget=600)
    assert e.graph == "offline" and e.extractor == OFFLINE_EXTRACTOR_ID
    assert openai_server.count("chat") == _answers_asked(openai_server) == len(QUESTIONS)   # answers, nothing else
    assert _rows(settings, "SELECT graph, extractor FROM eval_answer_runs") == [("offline", OFFLINE_EXTRACTOR_ID)]
    assert e.to_dict()["graph"] == "offline"
    with pytest.raises(DatasetError, match="--graph llm.*none is set"):
        evaluate_answers(_settings(tmp_path / "no-llm"), dataset, modes=["naive"], graph="llm")


def test_the_time_limit_counts_answering_not_indexing(tmp_path, dataset, monkeypatch):
    """An index that takes longer than --time-limit still leaves the whole limit for answers."""
    import pathrag_pipeline.evaluation.answer_eval as answer_eval

    clock = {"now": 0.0}

    class FakeTime:
        @staticmethod
        def perf_counter() -> float:
            return clock["now"]

    real_prepare = answer_eval.prepare_index

    def slow_index(*args, **kwargs):
        clock["now"] += 1000.0          # the index "took" 1000 s
        return real_prepare(*args, **kwargs)

    monkeypatch.setattr(answer_eval, "time", FakeTime)
    monkeypatch.setattr(answer_eval, "prepare_index", slow_index)
    e = evaluate_answers(_settings(tmp_path), dataset, modes=["naive"], use_triples=True, time_limit=60.0)
    assert not e.stopped and len(e.complete_questions) == len(QUESTIONS)
    assert e.index_seconds == pytest.approx(1000.0)


@pytest.mark.e2e
def test_every_mode_is_compared_with_path_naive_included(tmp_path, dataset, openai_server):
    openai_server.chat_responder = reader
    e = evaluate_answers(_settings(tmp_path, openai_server), dataset, modes=["path", "naive", "hybrid"],
                         use_triples=True, budget=600)
    summary = e.summary()
    assert summary["naive"].vs == summary["hybrid"].vs == summary["path:paper"].vs == "path"
    assert set(summary["naive"].delta) == {"f1", "exact_match", "answer_in_context"}
    assert summary["path"].vs is None


@pytest.mark.e2e
def test_a_reply_that_adds_to_the_answer_is_cut_to_it_and_the_reply_kept(tmp_path, dataset, openai_server):
    """Issue 59: "Yes, Lindenholm. It lies on ..." where a name was asked is scored as "Lindenholm"; the reply
    as it came stays in eval_answers.raw_answer."""
    def chatty(request: dict) -> str:
        answer = reader(request)
        if SHORT_ANSWER not in request["messages"][0]["content"]:
            return answer
        return f"Yes, {answer}. It is what the passages say."

    openai_server.chat_responder = chatty
    settings = _settings(tmp_path, openai_server)
    evaluate_answers(settings, dataset, modes=["naive"], use_triples=True, budget=600)
    rows = dict((qid, (answer, raw, em)) for qid, answer, raw, em in _rows(
        settings, "SELECT question_id, answer, raw_answer, exact_match FROM eval_answers"))
    assert rows["q1"] == ("Lindenholm", "Yes, Lindenholm. It is what the passages say.", 1.0)


@pytest.mark.e2e
def test_own_questions_are_answered_over_the_indexed_home(tmp_path, openai_server):
    """`eval answers --questions FILE`: a user's QA set over the home as it is indexed, no dataset folder."""
    from pathrag_pipeline.config import SAMPLE_DOCS
    from pathrag_pipeline.evaluation.retrieval_eval import DatasetError
    from pathrag_pipeline.index.pipeline import run_indexing

    graph_cache.clear_cache()
    offline = Settings.from_env(env={"PATHRAG_HOME": str(tmp_path / "home")})
    run_indexing(offline, folder=SAMPLE_DOCS)
    questions = tmp_path / "mine.jsonl"
    questions.write_text(json.dumps({"id": "a", "question": "Who founded Aldermere University?",
                                     "answers": ["Agnes Morrow"], "source": "aldermere_university.md"}) + "\n"
                         + json.dumps({"question": "Which river floods Pellingham?", "answers": ["Lode"]}) + "\n")
    openai_server.chat_responder = lambda request: "Agnes Morrow" if SHORT_ANSWER in request["messages"][0][
        "content"] else json.dumps({"low_level": ["Aldermere University"], "high_level": ["founder"]})
    settings = _settings(tmp_path, openai_server)
    e = evaluate_answers(settings, questions_file=questions, modes=["path", "naive"], budget=800)
    assert e.graph == "home" and e.dataset == "mine" and e.question_order == ["a", "line-2"]
    assert e.rows["naive"]["a"].exact_match == 1.0 and e.rows["naive"]["line-2"].exact_match == 0.0
    assert _rows(settings, "SELECT DISTINCT graph FROM eval_answer_runs") == [("home",)]
    again = evaluate_answers(settings, questions_file=questions, modes=["path", "naive"], budget=800)
    assert again.resumed == 6 and again.answered == 0          # the same home, the same questions: resumed

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "Who?"}) + "\n")
    with pytest.raises(DatasetError, match=r"bad.jsonl:1.*answers"):
        evaluate_answers(settings, questions_file=bad, modes=["naive"])
    with pytest.raises(ValueError, match="one of the two"):
        evaluate_answers(settings, dataset_dir=tmp_path, questions_file=questions)
