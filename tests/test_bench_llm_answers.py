"""`pathrag bench answers`: what it says without the local server, and the section it writes, run against the
scripted OpenAI-compatible server through --base-url (the real server is tests/test_real_llm_server.py)."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

import pytest

from pathrag_lab.bench import llm_answers
from pathrag_lab.bench.local_models import BenchSetupError, LocalModel, assemble_model
from pathrag_lab.cli import bench
from pathrag_pipeline.query import graph_cache
from pathrag_pipeline.query.answering import SHORT_ANSWER
from tests.test_answer_eval import reader
from tests.test_judging import always_first


from tests.test_evaluation import write_dataset


def reader_and_judge(request: dict) -> str:
    """The scripted reader, a judge that prefers the first answer, and a NeuroPath tracker that keeps the first
    candidate path and stops."""
    if "evaluating two answers" in request["messages"][0]["content"]:
        return always_first(request)
    if "tracking reasoning paths" in json.dumps(request["messages"]):
        first = re.search(r"^\[(\d+)\] ", request["messages"][-1]["content"], re.M)
        return json.dumps({"reasoning_chain": "the first path", "valid_paths": [int(first.group(1))] if first else [],
                           "paths_to_expand": [], "expansion_requirement": "", "continue_tracking": False})
    if "select a set of valid clue paths" in request["messages"][0]["content"]:   # the paper's prompt, ids from 0
        first = re.search(r"^(\d+): ", request["messages"][1]["content"], re.M)
        return json.dumps({"current_chain": "the first path", "valid_ids": [int(first.group(1))] if first else [],
                           "expansion_requirements": "", "need_expand_ids": [], "continue": 0})
    return reader(request)


def test_without_the_server_or_model_it_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(llm_answers, "server_installed", lambda: False)
    monkeypatch.setattr(LocalModel, "parts", lambda self: None)
    result = CliRunner().invoke(bench, ["answers", "--workdir", str(tmp_path)])
    assert result.exit_code != 0
    assert "llama_cpp_python-0.3.36" in result.output and "[local-llm-model]" in result.output
    for command in ("answers", "winrate", "neuropath-llm", "pooling-llm"):   # every LLM bench passes the choice on
        larger = CliRunner().invoke(bench, [command, "--workdir", str(tmp_path), "--local-model", "qwen2.5-coder-1.5b"])
        assert larger.exit_code != 0, command
        assert "[local-llm-model-1-5b]" in larger.output and "1.5B" in larger.output, (command, larger.output)


def test_a_model_is_joined_from_its_installed_parts_in_order(tmp_path, monkeypatch):
    """Parts found as packages on the path, joined in package order (not name order: part10 after part9), checked
    for GGUF's magic bytes, and reused while its size matches."""
    site = tmp_path / "site"
    chunks = [b"GGUF" + b"a" * 6] + [bytes([65 + i]) * 10 for i in range(1, 11)]
    for i, chunk in enumerate(chunks, start=1):
        data = site / f"fakepart{i}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("")
        (data / f"part{i:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(site))
    fake = LocalModel("fake", "Fake 1B", "fake.gguf", tuple(f"fakepart{i}" for i in range(1, 12)), "fake-extra")
    joined = assemble_model(tmp_path / "models", fake)
    assert joined.read_bytes() == b"".join(chunks)
    joined.write_bytes(b"GGUF" + b"z" * (len(b"".join(chunks)) - 4))   # same size: reused, not joined again
    assert assemble_model(tmp_path / "models", fake).read_bytes().startswith(b"GGUFzzz")
    (site / "fakepart1" / "data" / "part01.bin").write_bytes(b"XXXX" + b"a" * 7)   # a wrong part 1
    joined.unlink()
    with pytest.raises(BenchSetupError, match="magic bytes"):
        assemble_model(tmp_path / "models", fake)
    (site / "fakepart5" / "data" / "part05.bin").unlink()
    assert fake.parts() is None
    with pytest.raises(BenchSetupError, match=r"fake-extra"):
        assemble_model(tmp_path / "models", fake)


def test_base_url_and_model_go_together(tmp_path):
    result = CliRunner().invoke(bench, ["answers", "--workdir", str(tmp_path), "--base-url", "http://x/v1"])
    assert result.exit_code != 0 and "--base-url and --model together" in result.output


@pytest.mark.e2e   # a benchmark writing its docs section (lab): run by .ci/run (pytest -m e2e)
def test_against_a_running_endpoint_it_writes_its_section(tmp_path, openai_server, monkeypatch):
    graph_cache.clear_cache()
    monkeypatch.setattr("pathrag_lab.bench.embedding_runtime.minilm_available", lambda: False)
    openai_server.chat_responder = reader_and_judge
    dataset = write_dataset(tmp_path / "tiny-qa")
    # MuSiQue-style hops (the last hop's passage holds the answer), so the section carries the hop diagnosis
    rows = [json.loads(line) for line in (dataset / "questions.jsonl").read_text().splitlines()]
    for row in rows:
        row["hops"] = [{"answer": f"bridge {i}", "gold_id": g} for i, g in enumerate(row["gold_ids"][:-1])] + [
            {"answer": row["answers"][0], "gold_id": row["gold_ids"][-1]}]
    (dataset / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\n## Scale\n\nold scale text\n")
    args = ["answers", "--dataset", str(dataset), "--workdir", str(tmp_path / "bench"), "--base-url",
            openai_server.base_url, "--model", "fake-reader", "--modes", "path,naive,bm25", "--limit", "2",
            "--update-docs", str(docs)]
    result = CliRunner().invoke(bench, args)
    assert result.exit_code == 0, result.output
    text = docs.read_text()
    section = text.split("## Answers through a local LLM", 1)[1].split("## Scale", 1)[0]
    assert "2 questions of tiny-qa" in section and "fake-reader" in section and "--base-url" in section
    assert "**What the LLM adds besides the answer**" in section and "| `path:llm_keywords` |" in section
    # NeuroPath's LLM tracker against its offline tracker, with what tracking costs beyond the keyword call
    assert "| `neuropath:offline_tracker` |" in section and "vs `neuropath` |" in section
    assert float(re.search(r"NeuroPath's LLM tracker costs ([\d.]+) calls", section).group(1)) >= 1.0
    for mode in ("`path`", "`naive`", "`bm25`"):
        assert f"| {mode}" in section
    assert "**Verdict on 2 questions:**" in section and "old scale text" in text
    # the verdict again on every question: path and the best flat prompt, the grid's answers reused
    study = section.split("**The verdict on 3 questions.**", 1)[1]
    assert "| `path` |" in study and "**Verdict on 3 questions:**" in study and "picked on the first 2" in study
    # where the evidence went, over the verdict's questions: one row per mode and the sentence path vs its baseline
    diagnosis = study.split("**Where the evidence went** (3 questions", 1)[1].split("**What the LLM adds", 1)[0]
    assert "| `path` | 3 |" in diagnosis and "| `naive` | 3 |" in diagnosis
    assert re.search(r"`path`'s prompts quoted [\d.]+ passages per question against `\w+`'s [\d.]+", diagnosis)
    assert "Win rates" not in section      # `pathrag bench winrate`'s own section
    # the same command again resumes: no answer is asked twice (the keyword recall is measured again)
    def answers_asked() -> int:
        return sum(SHORT_ANSWER in body["messages"][0]["content"] for e, body in openai_server.calls if e == "chat")

    asked = answers_asked()
    again = CliRunner().invoke(bench, args)
    assert again.exit_code == 0, again.output
    assert answers_asked() == asked
    assert "(8 from earlier invocations of the run, 0 in the last)" in docs.read_text()   # path:paper beside path


def test_its_own_server_is_asked_one_request_at_a_time_with_a_long_timeout(tmp_path, monkeypatch):
    """llama.cpp's server answers one request at a time: the judge's four parallel calls queued there past the
    120 s timeout and stopped the run. Against its own server the bench sends one at a time (600 s each); a
    user's own PATHRAG_LLM_TIMEOUT still wins."""
    seen = {}

    class FakeServer:
        base_url, threads, command = "http://127.0.0.1:9/v1", 2, ["python", "-m", "llama_cpp.server"]

        def __init__(self, *args):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    class Stop(Exception):
        pass

    def capture(settings, *args):
        seen["settings"] = settings
        raise Stop()

    monkeypatch.setattr(llm_answers, "missing", lambda local: None)
    monkeypatch.setattr(llm_answers, "assemble_model", lambda folder, local: tmp_path / local.file)
    monkeypatch.setattr(llm_answers, "LocalServer", FakeServer)
    monkeypatch.setattr(llm_answers, "answer_all", capture)
    monkeypatch.setattr("pathrag_lab.bench.embedding_runtime.minilm_available", lambda: False)
    monkeypatch.delenv("PATHRAG_LLM_TIMEOUT", raising=False)
    monkeypatch.delenv("PATHRAG_LLM_MAX_CONCURRENCY", raising=False)
    dataset = write_dataset(tmp_path / "tiny-qa")
    with pytest.raises(Stop):
        llm_answers.run_llm_answers_bench(dataset, tmp_path / "w", log=lambda _: None)
    s = seen["settings"]
    assert (s.llm_max_concurrency, s.llm_timeout, s.llm_base_url) == (1, 600, FakeServer.base_url)
    monkeypatch.setenv("PATHRAG_LLM_TIMEOUT", "900")
    with pytest.raises(Stop):
        llm_answers.run_llm_answers_bench(dataset, tmp_path / "w", log=lambda _: None)
    assert seen["settings"].llm_timeout == 900
    assert seen["settings"].llm_model == "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    with pytest.raises(Stop):   # --local-model: the server serves the other model, under its own file name
        llm_answers.run_llm_answers_bench(dataset, tmp_path / "w", local="qwen2.5-coder-1.5b", log=lambda _: None)
    assert seen["settings"].llm_model == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def test_win_rates_are_not_published_when_no_judgment_succeeded():
    """The 30-question rerun once had every judgment fail and printed 0% everywhere; now it says why instead."""
    from pathrag_lab.bench.llm_winrate import _winrate_parts
    from pathrag_pipeline.evaluation.judging import DIMENSIONS, OVERALL

    zero = {d: {"a": 0.0, "b": 0.0, "wins_a": 0, "wins_b": 0} for d in [*DIMENSIONS, OVERALL]}
    run = {"a": "mode:path", "b": "mode:hybrid", "judge": "m", "questions": 30, "judgments": 0, "failed": 30,
           "win_rates": zero, "first_error": "LLM stage 'judge': output still invalid after 3 request(s)"}
    [text] = _winrate_parts([run], 1000)
    assert "no judgment succeeded, so no rate is given" in text and "30 of 30 judgments" in text
    assert "output still invalid" in text and "%" not in text
    some = {**run, "judgments": 20, "failed": 10,
            "win_rates": {d: {"a": 0.6, "b": 0.4, "wins_a": 12, "wins_b": 8} for d in zero}}
    parts = _winrate_parts([some, run], 1000)
    table = next(p for p in parts if p.startswith("| pair"))
    assert "| 60% |" in table and "n/a" in table
    assert any("left out of the rates: 10 of 30" in p for p in parts)
    # a criterion only some judgments decided shows how many did
    partly = {**some, "win_rates": {**some["win_rates"], "diversity": {"a": 0.75, "b": 0.25, "wins_a": 3, "wins_b": 1}}}
    table = next(p for p in _winrate_parts([partly], 1000) if p.startswith("| pair"))
    assert "| 75% of 4 |" in table and "| 60% |" in table


@pytest.mark.e2e   # a benchmark writing its docs section (lab): run by .ci/run (pytest -m e2e)
def test_winrate_against_a_running_endpoint_writes_its_own_section(tmp_path, openai_server, monkeypatch):
    """`pathrag bench winrate`: path, hybrid and naive answer; path is judged against each by the same model,
    which the section says; the rates sit in their own section before Scale."""
    graph_cache.clear_cache()
    monkeypatch.setattr("pathrag_lab.bench.embedding_runtime.minilm_available", lambda: False)
    openai_server.chat_responder = reader_and_judge
    dataset = write_dataset(tmp_path / "tiny-qa")
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\n## Scale\n\nold scale text\n")
    result = CliRunner().invoke(bench, ["winrate", "--dataset", str(dataset), "--workdir", str(tmp_path / "bench"),
                                        "--base-url", openai_server.base_url, "--model", "fake-reader",
                                        "--questions", "2", "--update-docs", str(docs)])
    assert result.exit_code == 0, result.output
    text = docs.read_text()
    section = text.split("## Win rates through a local LLM", 1)[1].split("## Scale", 1)[0]
    assert "Reproduce: `pathrag bench winrate --questions 2 --dataset" in section and "old scale text" in text
    # always_first prefers "Answer 1", and path is Answer 1 on every other question: half of each pair
    assert "| `path` vs `hybrid` | 2 | 2 | 0 | 50% |" in section and "| `path` vs `naive` | 2 | 2 | 0 | 50% |" in section
    assert "The judge is fake-reader, the same small model that wrote both answers: a weak judge" in section
    assert ("`path` vs `naive`: the overall winner was the answer shown first in 2 of 2 judgments. Every verdict "
            "went to the same position") in section
    judged = sum("evaluating two answers" in body["messages"][0]["content"] for e, body in openai_server.calls
                 if e == "chat")
    assert judged == 4
