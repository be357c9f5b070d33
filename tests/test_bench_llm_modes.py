"""`pathrag bench neuropath-llm` and `pooling-llm` against the OpenAI-compatible test server: recall and answers
of the paper's method and our variant, each suite rendered as its own section."""

from __future__ import annotations

import pytest

import re

from click.testing import CliRunner

from pathrag_lab.cli import bench
from pathrag_pipeline.query import graph_cache, neuropath
from tests.test_bench_llm_answers import reader_and_judge
from tests.test_evaluation import write_dataset


def _run_suite(command: str, tmp_path, openai_server, monkeypatch) -> str:
    """`pathrag bench COMMAND` on a tiny dataset against the scripted server; the report it updated."""
    graph_cache.clear_cache()
    neuropath.clear_cache()
    monkeypatch.setattr("pathrag_lab.bench.embedding_runtime.minilm_available", lambda: False)
    openai_server.chat_responder = reader_and_judge
    dataset = write_dataset(tmp_path / "tiny-qa")
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\n## Scale\n\nold scale text\n")
    result = CliRunner().invoke(bench, [command, "--dataset", str(dataset), "--workdir", str(tmp_path / "b"),
                                        "--base-url", openai_server.base_url, "--model", "fake-reader", "--limit", "2",
                                        "--update-docs", str(docs)])
    assert result.exit_code == 0, result.output
    return docs.read_text()


@pytest.mark.e2e   # a benchmark writing its docs section (lab): run by .ci/run (pytest -m e2e)
def test_neuropath_llm_bench_measures_both_variants_on_the_same_questions(tmp_path, openai_server, monkeypatch):
    text = _run_suite("neuropath-llm", tmp_path, openai_server, monkeypatch)
    assert text.index("## NeuroPath with an LLM tracker") < text.index("## Scale") and "old scale text" in text
    section = text.split("## NeuroPath with an LLM tracker", 1)[1].split("## Scale", 1)[0]
    assert "fake-reader" in section and "tiny-qa, the first 2 questions" in section

    def row(table: str, mode: str) -> list[str]:
        line = next(li for li in table.splitlines() if li.startswith(f"| `{mode}`"))
        return [c.strip() for c in line.strip("|").split("|")]

    recall, answers = section.split("**Answers**", 1)
    # the LLM tracks: calls beyond the key-entity call; the heuristic tracker's row calls the LLM for entities only
    paper, ours, heuristic = row(recall, "neuropath"), row(recall, "neuropath:ours"), row(recall, "neuropath:offline_tracker")
    assert float(paper[-3]) >= 2.0 and float(ours[-3]) >= 2.0 and float(heuristic[-3]) == 1.0
    assert "heuristic tracker" in heuristic[0] and "heuristic" not in paper[0]
    assert "vs `neuropath`" in ours[5] and "vs `neuropath`" in heuristic[5]
    for mode in ("path", "neuropath", "neuropath:ours", "neuropath:offline_tracker"):
        assert re.match(r"\d\.\d{3}$", row(answers, mode)[1])
    # the paper's prompts went to the server: its NER prompt and its tracking prompt, ids from 0
    bodies = [r.body["messages"] for r in openai_server.requests_for("chat")]
    assert any("extract all named entities" in m[0]["content"] for m in bodies)
    assert any("select a set of valid clue paths" in m[0]["content"] and "\n0: " in m[1]["content"] for m in bodies)


@pytest.mark.e2e   # a benchmark writing its docs section (lab): run by .ci/run (pytest -m e2e)
def test_pooling_llm_bench_compares_each_pooling_variant_with_path(tmp_path, openai_server, monkeypatch):
    text = _run_suite("pooling-llm", tmp_path, openai_server, monkeypatch)
    section = text.split("## Path Pooling through a local LLM", 1)[1].split("## Scale", 1)[0]
    assert "pathrag bench pooling-llm --limit 2" in section and "NeuroPath" not in section
    recall, answers = section.split("**Answers**", 1)
    for mode in ("path:pool_rerank", "path:pool_reselect", "path:pool_rerank_ours", "path:pool_reselect_ours"):
        line = next(li for li in recall.splitlines() if li.startswith(f"| `{mode}`"))
        assert "vs `path`" in line
        assert re.search(rf"^\| `{re.escape(mode)}` \| \d\.\d{{3}} \|", answers, re.M)
