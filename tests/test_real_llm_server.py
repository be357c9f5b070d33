"""The whole answer chain against a real local LLM server (slow, optional).

Starts llama-cpp-python's server with the GGUF of the [local-llm-model] extra (what `pathrag bench answers`
starts), indexes a three-question dataset from its triples, and runs `evaluate_answers` through the server:
LLM keywords, retrieval, each mode's prompt, the model's answer, scoring and storage. Skipped, with what to
install, when the server or the model is not installed; the default test run uses the scripted server instead.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from pathrag_lab.bench.llm_answers import LocalServer, assemble_model, missing
from pathrag_pipeline.config import Settings
from pathrag_pipeline.evaluation.answer_eval import evaluate_answers
from pathrag_pipeline.query import graph_cache
from tests.test_evaluation import write_dataset

QUESTIONS = [
    {"id": "q1", "question": "Where was Helena Voss born?", "answers": ["Lindenholm"], "gold_ids": ["p1"]},
    {"id": "q2", "question": "Which sea does the river at Brackwater flow into?", "answers": ["Grey Sea"],
     "gold_ids": ["p2", "p3"]},
    {"id": "q3", "question": "In which town is the Copper Kettle bakery?", "answers": ["Oldport"],
     "gold_ids": ["p4"]},
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    need = missing()
    if need:
        pytest.skip(f"no local LLM server: install {need}")
    folder = tmp_path_factory.mktemp("llm")
    with LocalServer(assemble_model(folder), folder / "server.log") as running:
        yield running


def test_three_questions_answered_end_to_end_through_the_real_server(tmp_path, server):
    graph_cache.clear_cache()
    dataset = write_dataset(tmp_path / "tiny-qa")
    (dataset / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    settings = Settings.from_env(env={"PATHRAG_HOME": str(tmp_path / "home"),
                                      "PATHRAG_LLM_BASE_URL": server.base_url,
                                      "PATHRAG_LLM_MODEL": server.model.name})
    e = evaluate_answers(settings, dataset, modes=["path", "naive"], use_triples=True, budget=600)
    assert e.llm == server.model.name and len(e.complete_questions) == len(QUESTIONS)
    with duckdb.connect(str(settings.duckdb_path), read_only=True) as con:
        rows = con.execute("SELECT mode, answer, llm_calls, error, answer_ms FROM eval_answers").fetchall()
        q1 = con.execute("SELECT answer FROM eval_answers WHERE mode = 'naive' AND question_id = 'q1'").fetchone()[0]
    assert len(rows) == 2 * len(QUESTIONS)
    for mode, answer, calls, error, answer_ms in rows:
        assert error is None and answer.strip() and answer_ms > 0
        assert calls == (2 if mode == "path" else 1)    # keywords + answer, or the answer alone
    # q1's answer is one sentence of a six-passage prompt: even a 0.5B instruct model reads it off
    assert "lindenholm" in q1.lower()
    assert e.verdict() is not None
