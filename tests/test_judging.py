"""Pairwise judging over a real OpenAI-compatible test server: order alternation, un-swapping, rates, storage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pathrag_pipeline.query import graph_cache
from pathrag_pipeline.cli.eval import eval_group
from pathrag_pipeline.evaluation.judging import (
    DIMENSIONS,
    OVERALL,
    AnswerPair,
    AnswerRecord,
    DimensionVerdict,
    JudgingError,
    judge_pairs,
    match_answers,
    schedule,
)
from pathrag_pipeline.query.keywords import Keywords
from pathrag_pipeline.llm.client import LLMClient
from pathrag_pipeline.storage.store import Store
from tests.query_fixtures import build_tiny_index

ALL = (*DIMENSIONS, OVERALL)


def _answers(request: dict) -> tuple[str, str]:
    user = next(m["content"] for m in request["messages"] if "\nAnswer 1:\n" in str(m.get("content")))
    first = user.split("Answer 1:\n", 1)[1].split("\n\nAnswer 2:\n", 1)[0]
    second = user.split("\n\nAnswer 2:\n", 1)[1]
    return first, second


def _verdict(winners: dict[str, str]) -> str:
    return json.dumps({dim: {"winner": winners[dim], "explanation": "because"} for dim in ALL})


def prefers(marker: str):
    """A judge that picks, on every dimension, whichever answer contains ``marker``."""
    def responder(request: dict) -> str:
        first, _ = _answers(request)
        return _verdict({dim: "Answer 1" if marker in first else "Answer 2" for dim in ALL})
    return responder


def path_favouring_chat(entity: str, concept: str):
    """One model for answering and judging: keywords (``entity``, ``concept``), "PATH-ANSWER" for a prompt with
    paths and "Some answer." otherwise, and as judge always the answer carrying "PATH-ANSWER"."""
    judge_by_marker = prefers("PATH-ANSWER")

    def responder(request: dict) -> str:
        text = json.dumps(request["messages"])
        if "evaluating two answers" in text:
            return judge_by_marker(request)
        if "keywords" in request["messages"][0]["content"].lower():
            return Keywords(low_level=[entity], high_level=[concept]).model_dump_json()
        return "PATH-ANSWER" if "Path rank" in text else "Some answer."
    return responder


def always_first(request: dict) -> str:
    return _verdict({dim: "Answer 1" for dim in ALL})


def _pairs(n: int, good_side: str = "a") -> list[AnswerPair]:
    good, bad = "A GOOD answer with detail.", "A weak answer."
    return [AnswerPair(f"q{i}", f"Question {i}?", *((good, bad) if good_side == "a" else (bad, good)))
            for i in range(n)]


@pytest.fixture
def judge(openai_server) -> LLMClient:
    return LLMClient(openai_server.base_url, "fake-judge", max_concurrency=2)


@pytest.mark.parametrize("good_side", ["a", "b"])
def test_content_preference_survives_alternation(judge, openai_server, good_side):
    openai_server.chat_responder = prefers("GOOD")
    run = judge_pairs(judge, _pairs(5, good_side))
    assert openai_server.count("chat") == 5
    assert [j.a_position for j in run.judgments] == ["Answer 1", "Answer 2", "Answer 1", "Answer 2", "Answer 1"]
    for dim in ALL:
        rate = run.rates[dim]
        assert (rate.rate_a, rate.rate_b) == ((1.0, 0.0) if good_side == "a" else (0.0, 1.0))
    assert run.first_shown_wins == (3 if good_side == "a" else 2)   # content, not position, decided
    # The judge saw GOOD in both positions, so un-swapping did real work.
    seen_first = {"GOOD" in _answers(r.body)[0] for r in openai_server.requests if r.endpoint == "chat"}
    assert seen_first == {True, False}


def test_position_bias_cancels_to_half(judge, openai_server):
    openai_server.chat_responder = always_first
    run = judge_pairs(judge, _pairs(4))
    assert all((r.wins_a, r.wins_b) == (2, 2) for r in run.rates.values())
    assert run.to_dict()["first_shown_wins"] == 4       # and the run says the judge only ever read position
    both = judge_pairs(judge, _pairs(3), both_orders=True)
    assert len(both.judgments) == 6 and both.orders == "both"
    assert all(r.rate_a == 0.5 == r.rate_b for r in both.rates.values())


def test_dimensions_are_counted_separately_and_loose_winner_spellings_accepted(judge, openai_server):
    def responder(request):
        first, _ = _answers(request)
        good = "1" if "GOOD" in first else "answer 2"
        return _verdict({"comprehensiveness": good, "diversity": "Answer2", "logicality": good,
                         "relevance": good, "coherence": good, "overall": good})
    openai_server.chat_responder = responder
    run = judge_pairs(judge, _pairs(4))
    assert (run.rates["comprehensiveness"].wins_a, run.rates["overall"].wins_a) == (4, 4)
    assert (run.rates["diversity"].wins_a, run.rates["diversity"].wins_b) == (2, 2)
    assert DimensionVerdict(winner="answer 1").winner == "Answer 1"


def test_small_model_sentences_count_where_they_name_one_answer_and_are_undecided_otherwise(judge, openai_server):
    """Qwen2.5-Coder-0.5B through llama.cpp answered the judging prompt with a sentence per criterion instead of
    an object (every one of 60 judgments failed validation). A sentence naming one answer is that answer's win;
    one naming neither or both is undecided, counted for neither side; the overall winner stays required."""
    def responder(request):
        first, _ = _answers(request)
        good = "Answer 1" if "GOOD" in first else "Answer 2"
        other = "Answer 2" if good == "Answer 1" else "Answer 1"
        return json.dumps({
            "Comprehensiveness": f"Comprehensiveness: {good} covers the question in more detail.",
            "Diversity": "Diversity: The answer is brief and names the association.",          # neither
            "Logicality": f"{good} is more logical than {other}.",                              # both: undecided
            "Relevance": {"Winner": f"{good} (GraphRAG)", "Explanation": "on topic"},          # the papers' shape
            "Coherence": f'"Winner": "{good}", "Explanation": "{other} is shorter"',
            "Overall Winner": f"{good} is better on the whole.",
        })
    openai_server.chat_responder = responder
    run = judge_pairs(judge, _pairs(4))
    assert run.failed == 0 and run.judged == 4
    for dim in ("comprehensiveness", "relevance", "coherence", "overall"):
        assert (run.rates[dim].wins_a, run.rates[dim].wins_b) == (4, 0), dim
    for dim in ("diversity", "logicality"):
        assert (run.rates[dim].wins_a, run.rates[dim].wins_b) == (0, 0), dim
    assert run.judgments[0].verdict.undecided == ("diversity", "logicality")


def test_a_single_verdict_without_criteria_is_the_overall_winner(judge, openai_server):
    def responder(request):
        first, _ = _answers(request)
        return json.dumps({"winner": "Answer 1" if "GOOD" in first else "Answer 2", "explanation": "more detail"})
    openai_server.chat_responder = responder
    run = judge_pairs(judge, _pairs(2))
    assert run.judged == 2 and (run.rates["overall"].wins_a, run.rates["overall"].wins_b) == (2, 0)
    assert all((run.rates[d].wins_a, run.rates[d].wins_b) == (0, 0) for d in DIMENSIONS)


def test_a_verdict_without_an_overall_winner_is_still_invalid(judge, openai_server):
    openai_server.chat_responder = lambda request: json.dumps(
        {dim: "Both answers are fine." for dim in ALL})
    run = judge_pairs(judge, _pairs(1))
    assert run.failed == 1 and "overall" in run.judgments[0].error


def test_invalid_verdicts_are_recorded_as_failed_and_left_out(judge, openai_server):
    good = prefers("GOOD")

    def responder(request):
        return '{"comprehensiveness": "no idea"}' if "Question 1?" in json.dumps(request["messages"]) else good(request)
    openai_server.chat_responder = responder
    run = judge_pairs(judge, _pairs(3))
    assert run.failed == 1 and run.judged == 2
    assert run.rates["overall"].wins_a == 2 and run.rates["overall"].wins_b == 0
    failed = [j for j in run.judgments if j.winners is None]
    assert failed[0].pair.question_id == "q1" and "invalid" in failed[0].error


def test_schedule_and_matching():
    pairs = _pairs(3)
    assert [pos for _, pos in schedule(pairs, both_orders=False)] == ["Answer 1", "Answer 2", "Answer 1"]
    assert len(schedule(pairs, both_orders=True)) == 6
    a = [AnswerRecord("x1", "Who?", "a1"), AnswerRecord(None, "Where  is it?", "a2"), AnswerRecord(None, "Why?", "a3")]
    b = [AnswerRecord(None, "where is it?", "b2"), AnswerRecord("x1", "Who is it?", "b1")]
    assert [(p.answer_a, p.answer_b) for p in match_answers(a, b)] == [("a1", "b1"), ("a2", "b2")]
    with pytest.raises(JudgingError, match="no question"):
        match_answers(a, [AnswerRecord(None, "Unrelated?", "b")])


# ---- CLI ----------------------------------------------------------------------------------------

def _write_answers(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_cli_without_llm_names_the_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    a = _write_answers(tmp_path / "a.jsonl", [{"question": "Q?", "answer": "x"}])
    result = CliRunner().invoke(eval_group, ["winrate", "--answers-a", str(a), "--answers-b", str(a)])
    assert result.exit_code == 1
    assert "PATHRAG_LLM_BASE_URL" in result.output and "PATHRAG_LLM_MODEL" in result.output


def test_cli_answer_files_judged_and_stored(tmp_path, monkeypatch, openai_server):
    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-judge")
    monkeypatch.setenv("PATHRAG_LLM_API_KEY", "sk-test-secret")
    openai_server.chat_responder = prefers("GOOD")
    a = _write_answers(tmp_path / "a.jsonl", [{"question": f"Q{i}?", "answer": f"GOOD {i}"} for i in range(4)])
    b = _write_answers(tmp_path / "b.jsonl", [{"question": f"Q{i}?", "answer": f"meh {i}"} for i in reversed(range(4))])
    result = CliRunner().invoke(eval_group, ["winrate", "--answers-a", str(a), "--answers-b", str(b), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["questions"] == 4 and out["judgments"] == 4 and out["orders"] == "alternate"
    assert set(out["win_rates"]) == set(ALL) and all(r["a"] == 1.0 for r in out["win_rates"].values())

    with Store(tmp_path / "home" / "pathrag.duckdb").connect(read_only=True) as con:
        run = con.execute("SELECT label_a, label_b, judge, judgments, failed, params::VARCHAR FROM winrate_runs").fetchall()
        rates = con.execute("SELECT dimension, rate_a FROM winrate_results").fetchall()
        verdicts = con.execute("SELECT a_position, winners::VARCHAR FROM winrate_verdicts ORDER BY question_id").fetchall()
    assert run[0][:5] == ("a.jsonl", "b.jsonl", "fake-judge", 4, 0) and "sk-test-secret" not in run[0][5]
    assert dict(rates) == {dim: 1.0 for dim in ALL}
    assert [v[0] for v in verdicts] == ["Answer 1", "Answer 2", "Answer 1", "Answer 2"]
    assert all(json.loads(v[1])["overall"] == "A" for v in verdicts)


def test_cli_answers_two_modes_then_judges(tmp_path, monkeypatch, openai_server):
    graph_cache.clear_cache()
    settings = build_tiny_index(tmp_path / "home")
    monkeypatch.setenv("PATHRAG_HOME", str(settings.home))
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    openai_server.chat_responder = path_favouring_chat("Aldermere University", "founder")
    questions = _write_answers(tmp_path / "q.jsonl", [{"id": "a", "question": "Where was the founder of Aldermere "
                                                       "University born?"}, {"id": "b", "question": "Who founded it?"}])
    result = CliRunner().invoke(eval_group, ["winrate", "--questions", str(questions), "--mode-a", "hybrid",
                                             "--mode-b", "path", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["a"], out["b"]) == ("mode:hybrid", "mode:path")
    assert out["win_rates"]["overall"] == {"a": 0.0, "b": 1.0, "wins_a": 0, "wins_b": 2}
    # the judge wrote both answers: the output says it is a weak judge, and the run's params keep that
    assert "same model that wrote both answers" in out["judge_note"]


@pytest.mark.e2e
def test_cli_dataset_questions_judged_against_two_modes_with_side_a_answered_once(tmp_path, monkeypatch,
                                                                                 openai_server):
    from tests.test_evaluation import write_dataset

    graph_cache.clear_cache()
    dataset = write_dataset(tmp_path / "tiny-qa")
    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    openai_server.chat_responder = path_favouring_chat("Helena Voss", "birthplace")
    result = CliRunner().invoke(eval_group, ["winrate", "--dataset", str(dataset), "--use-triples", "--mode-b",
                                             "hybrid,naive", "--limit", "2", "--budget", "600", "--json"])
    assert result.exit_code == 0, result.output
    runs = json.loads(result.output)
    assert [(r["a"], r["b"], r["questions"]) for r in runs] == [("mode:path", "mode:hybrid", 2),
                                                                ("mode:path", "mode:naive", 2)]
    assert all(r["win_rates"]["overall"]["a"] == 1.0 and r["judge_note"] for r in runs)
    answer_calls = [b for e, b in openai_server.calls if e == "chat" and "evaluating two answers" not in
                    json.dumps(b["messages"]) and "keywords" not in b["messages"][0]["content"].lower()]
    assert len(answer_calls) == 2 * 3        # path once for both runs, then hybrid and naive
    with Store(tmp_path / "home" / "pathrag.duckdb").connect(read_only=True) as con:
        stored = con.execute("SELECT label_b, params->>'judge_note', params->'query_params'->>'token_budget' "
                             "FROM winrate_runs ORDER BY label_b").fetchall()
    assert [s[0] for s in stored] == ["mode:hybrid", "mode:naive"] and all("weak judge" in s[1] for s in stored)
    assert {s[2] for s in stored} == {"600"}

    bad = CliRunner().invoke(eval_group, ["winrate", "--dataset", str(dataset), "--mode-b", "hybrid,sideways"])
    assert bad.exit_code != 0 and "'sideways' is not one of" in bad.output
