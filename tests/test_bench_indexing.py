"""The indexing, query and report benchmarks at tiny sizes: structure and invariants, never timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pathrag_lab.bench.indexing import (
    STAGES,
    OfflineBackedModel,
    llm_bench,
    musique_bench,
    offline_bench,
    timed_index,
)
from pathrag_lab.bench.query import parse_question_table, run_query_bench
from pathrag_lab.bench.report import QUICK, build_report, machine_info, md_table, retrieval_section
from pathrag_pipeline.config import Settings
from pathrag_pipeline.index.llm_extraction import EXTRACTION_USER_PROMPT, GLEANING_PROMPT
from pathrag_pipeline.index.extraction_models import ChunkExtraction
from pathrag_pipeline.index.offline_extraction import extract_offline


@pytest.mark.e2e
def test_offline_bench_reextracts_only_the_edited_documents_changed_chunks(tmp_path: Path) -> None:
    result = offline_bench(n_docs=12, repeats=1, edits=2, workdir=tmp_path)
    assert result["documents"] == 12
    assert result["chunks"] >= result["documents"]
    for stages in result["full_runs"] + result["incremental_runs"]:
        assert set(stages) == {*STAGES, "total"}
        assert all(v >= 0 for v in stages.values())
    for edit in result["incremental"]:
        assert edit["files_changed"] == 1
        # Appending a sentence changes the last chunk of that one document only.
        assert 1 <= edit["chunks_reextracted"] <= edit["chunks_of_edited_document"]
        assert edit["rows_reembedded"]["chunks"] == edit["chunks_reextracted"]
    assert result["rows_embedded_full"]["chunks"] == result["chunks"]


@pytest.mark.e2e   # a benchmark writing its docs section (lab): run by .ci/run (pytest -m e2e)
def test_llm_bench_counts_calls_per_chunk_and_reindexes_only_the_edited_document(tmp_path: Path) -> None:
    result = llm_bench(n_docs=8, gleanings=(1, 0), workdir=tmp_path)
    glean1, glean0 = result["builds"]
    assert (glean1["gleaning"], glean0["gleaning"]) == (1, 0)
    for build in (glean1, glean0):
        assert build["failed"] == 0
        assert build["extraction_calls"] == (1 + build["gleaning"]) * build["chunks_extracted"]
        assert build["calls_server_received"] == build["calls_pipeline_counted"]
    assert glean1["prompt_tokens_per_chunk"] > glean0["prompt_tokens_per_chunk"]  # gleaning resends the dialogue
    inc = result["incremental"]
    assert inc["only_edited_document"] is True
    assert 1 <= inc["chunks_reextracted"] <= inc["chunks_of_edited_document"]
    assert inc["extraction_calls"] == 2 * inc["chunks_reextracted"]
    assert inc["calls_server_received"] == inc["extraction_calls"] + inc["summary_calls"]
    assert "not an LLM's quality or latency" in result["caveat"]


def _request(text: str, title: str, gleaning: bool = False) -> dict:
    messages = [{"role": "system", "content": "extract"},
                {"role": "user", "content": EXTRACTION_USER_PROMPT.format(title=title, text=text)}]
    if gleaning:
        messages += [{"role": "assistant", "content": "{}"}, {"role": "user", "content": GLEANING_PROMPT}]
    return {"messages": messages}


def test_offline_backed_model_splits_the_offline_extraction_between_first_pass_and_gleaning() -> None:
    text = ("Vera Quist moved to Carrick in 1901. Ada Halden founded the Farrow Museum after the flood of 1887. "
            "Hugo Brand studied at Valmere University.")
    model = OfflineBackedModel()
    first = ChunkExtraction.model_validate_json(model(_request(text, "Notes")))
    glean = ChunkExtraction.model_validate_json(model(_request(text, "Notes", gleaning=True)))
    expected = extract_offline(text, "Notes")
    assert {e.name for e in first.entities} | {e.name for e in glean.entities} == {e.name for e in expected.entities}
    assert first.entities and glean.entities
    assert len(first.relations) + len(glean.relations) == len(expected.relations)
    assert model.chunk_texts == [text]  # the gleaning pass is not a new chunk
    summary = model({"messages": [{"role": "user", "content": "x\nDescription list:\n- one.\n- two.\n- three."}]})
    assert summary == "one. two." and model.summaries == 1


def test_musique_bench_is_none_without_the_dataset(tmp_path: Path) -> None:
    assert musique_bench(tmp_path / "absent", workdir=tmp_path) is None


def test_timed_index_imports_triples(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "corpus.jsonl").write_text(
        json.dumps({"id": "p1", "title": "Lode", "text": "Agnes Morrow was born in Hesketh Mill."}) + "\n")
    triples = tmp_path / "triples.jsonl"
    triples.write_text(json.dumps({"doc_id": "p1", "subject": "Agnes Morrow", "predicate": "born in",
                                   "object": "Hesketh Mill"}) + "\n")
    settings = Settings.from_env(env={}, home=tmp_path / "home", docs=docs)
    report, stages = timed_index(settings, docs, triples=triples)
    assert report.triples is not None and report.triples.triples == 1
    assert report.graph["relations"] == 1
    assert stages["total"] >= stages["ingest"]


def test_question_table_parsing(tmp_path: Path) -> None:
    questions = parse_question_table()
    assert len(questions) == 9
    assert questions[0].startswith("On which river lies the birthplace")
    other = tmp_path / "q.md"
    other.write_text("intro\n\n| id | answer | Question |\n|---|---|---|\n| 1 | x | Who? |\n| 2 | y | Where? |\n\ntail\n")
    assert parse_question_table(other) == ["Who?", "Where?"]
    (tmp_path / "none.md").write_text("| a | b |\n|---|---|\n| 1 | 2 |\n")
    with pytest.raises(ValueError, match="Question"):
        parse_question_table(tmp_path / "none.md")


@pytest.mark.e2e   # a benchmark writing its docs section (lab): run by .ci/run (pytest -m e2e)
def test_query_bench_reports_median_stages_per_mode(tmp_path: Path) -> None:
    result = run_query_bench(modes=("path", "naive"), rounds=1, workdir=tmp_path)
    assert result["questions"] == 9 and result["documents"] > 0
    assert set(result["modes"]) == {"path", "naive"}
    path, naive = result["modes"]["path"], result["modes"]["naive"]
    assert path["queries"] == naive["queries"] == 9
    assert {"keywords", "pruning", "answer"} <= set(path["median_ms"])
    assert "pruning" not in naive["median_ms"] and "keywords" not in naive["median_ms"]
    assert path["total_p95_ms"] >= path["total_median_ms"]
    logged = result["logged"]   # the first mode's queries timed logged and unlogged; the logged ones are in the log
    assert logged["mode"] == "path" and logged["queries"] == 9
    assert logged["logged_wall_median_ms"] > 0 and logged["unlogged_wall_median_ms"] > 0
    from pathrag_pipeline.storage.store import Store

    with Store(tmp_path / "home" / "pathrag.duckdb").connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM queries WHERE mode = 'path'").fetchone()[0] == 9 + 1   # + warm-up


def test_markdown_helpers() -> None:
    assert md_table(["a", "b"], [[1, None], ["x|y", 2]]).splitlines() == [
        "| a | b |", "| --- | --- |", "| 1 |  |", "| x\\|y | 2 |"]
    info = machine_info()
    assert info["cores"] >= 1 and info["python"].count(".") == 2
    assert "Fill this section" in retrieval_section(None)


def _tiny_dataset(folder: Path) -> Path:
    """Three passages, two questions and their triples, in the benchmark format."""
    folder.mkdir()
    passages = [("p1", "Agnes Morrow", "Agnes Morrow was born in Hesketh Mill."),
                ("p2", "Hesketh Mill", "Hesketh Mill lies on the River Lode."),
                ("p3", "Kestle Observatory", "Rupert Hallam directed the Kestle Observatory.")]
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"id": i, "title": t, "text": x}) + "\n"
                                                 for i, t, x in passages))
    (folder / "questions.jsonl").write_text(
        json.dumps({"id": "q1", "question": "Where was Agnes Morrow born?", "answers": ["Hesketh Mill"],
                    "gold_ids": ["p1"]}) + "\n"
        + json.dumps({"id": "q2", "question": "Who directed the Kestle Observatory?", "answers": ["Rupert Hallam"],
                      "gold_ids": ["p3"]}) + "\n")
    (folder / "triples.jsonl").write_text(
        json.dumps({"doc_id": "p1", "subject": "Agnes Morrow", "predicate": "born in", "object": "Hesketh Mill"}) + "\n"
        + json.dumps({"doc_id": "p2", "subject": "Hesketh Mill", "predicate": "lies on", "object": "River Lode"}) + "\n")
    return folder


@pytest.mark.e2e   # every report section on a small corpus: end to end, run by .ci/run (pytest -m e2e)
def test_quick_report_writes_every_section(tmp_path: Path) -> None:
    from dataclasses import replace

    sizes = replace(QUICK, ingest_docs=24, index_docs=10, llm_docs=6, pruning_edges=(1_000,), pruning_queries=5, query_modes=("path",),
                    reference_budget_s=0.5, retrieval_dataset=_tiny_dataset(tmp_path / "tiny"), retrieval_limit=None)
    # the Scale section comes from its own half-hour benchmark: the report does not carry the old one over (its
    # figures came from older code), it says which command adds it
    (tmp_path / "benchmarks.md").write_text("# Benchmarks\n\n## Ingest\n\nstale ingest\n\n"
                                            "## Scale\n\nfigures of a long scale run\n\n## Retrieval recall\n\nstale\n")
    out = build_report(quick=True, out=tmp_path / "benchmarks.md", sizes=sizes, workdir=tmp_path / "work",
                       log=lambda _: None)
    text = out.read_text()
    for heading in ("# Benchmarks", "## Key figures", "## Ingest", "## Indexing, offline", "## Indexing, LLM mode",
                    "## Query latency per stage", "## Path pruning scaling", "## Retrieval recall",
                    "## Offline extractor rules", "## Sample questions answered offline",
                    "## Local embedder: torch versus onnxruntime"):
        assert heading in text
    assert "## Local embedder: torch versus onnxruntime\n\nNot run (--quick)." in text
    assert "figures of a long scale run" not in text and "stale" not in text
    assert "## Scale\n\nNot measured by `pathrag bench report`" in text and "pathrag bench scale" in text
    assert "--dataset /" not in text and "--triples /" not in text  # Reproduce lines name relative paths
    assert "Quick smoke run" in text and "Reproduce: `pathrag bench" in text
    assert (tmp_path / "pruning_scaling.png").stat().st_size > 0
    assert "--use-triples" in text and "recall@2" in text  # both graphs of the tiny dataset were evaluated


def test_cli_indexing_prints_json_and_rejects_bad_sizes(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from pathrag_lab.cli import indexing, query

    runner = CliRunner()
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\n## Key figures\n\n- Offline full index of 9 documents: 1.00 s; old.\n- Other.\n\n"
                    "## Indexing, offline\n\nold figures\n\n## Next\n\nkept\n")
    result = runner.invoke(indexing, ["--docs", "12", "--repeats", "1", "--edits", "1", "--llm-docs", "0",
                                      "--no-musique", "--workdir", str(tmp_path / "w"), "--json",
                                      "--update-docs", str(docs)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data) == {"offline"} and data["offline"]["documents"] == 12
    text = docs.read_text()   # the section and its key figure replaced, the rest kept
    assert "old figures" not in text and "- Offline full index of 12 documents:" in text and "old." not in text
    assert "- Other." in text and text.index("## Indexing, offline") < text.index("## Next") and "kept" in text
    bad = runner.invoke(indexing, ["--docs", "0"])
    assert bad.exit_code == 2 and "--docs 0" in bad.output
    assert runner.invoke(query, ["--rounds", "0"]).exit_code == 2


@pytest.mark.e2e   # two evaluation indexes: end to end, run by .ci/run (pytest -m e2e)
def test_cli_bench_retrieval_splices_the_section_with_its_hop_question_check(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from pathrag_lab.cli import bench_retrieval

    data = _tiny_dataset(tmp_path / "tiny")
    rows = [json.loads(line) for line in (data / "questions.jsonl").read_text().splitlines()]
    rows[0]["hops"] = [{"question": "Agnes Morrow >> place of birth", "answer": "Hesketh Mill", "gold_id": "p1"},
                       {"question": "Which river is #1 on?", "answer": "River Lode", "gold_id": "p2"}]
    rows[0]["gold_ids"] = ["p1", "p2"]
    rows[1]["hops"] = [{"question": "Who directed the Kestle Observatory?", "answer": "Rupert Hallam", "gold_id": "p3"}]
    (data / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n\n## Retrieval recall\n\nstale\n\n## NeuroPath retrieval\n\nkept\n")
    result = CliRunner().invoke(bench_retrieval, ["--dataset", str(data), "--workdir", str(tmp_path / "work"),
                                                  "--update-docs", str(report), "--json"])
    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout)     # stdout alone: a local embedder logs its loading to stderr
    # two graphs (triples, offline extraction), each with the multi-hop questions and the hop questions
    assert [(r["use_triples"], r["hop_level"]) for r in runs] == [(True, False), (True, True), (False, False),
                                                                  (False, True)]
    hop_run = runs[1]
    assert hop_run["dataset"] == "tiny (oracle hop questions)" and hop_run["questions"] == 3
    semantic = bool(runs[0]["embedder_runtime"].startswith("st"))   # MiniLM when the extra is installed
    assert set(hop_run["modes"]) == {"path", "bm25", "bm25+dense", "path:paths_in_walk", "path:seeds", "path:graph",
                                     "path:unweighted"} | ({"dense"} if semantic else set())
    assert not hop_run["modes"]["path"].get("prompts") and runs[0]["modes"]["path"]["prompts"]
    text = report.read_text()
    assert "stale" not in text and "## NeuroPath retrieval\n\nkept" in text
    assert "### Second check: the single-hop sub-questions" in text and "--hop-questions" in text
    assert "What the LLM reads" in text and "### How a tuned choice is adopted" in text
    assert text.index("## Retrieval recall") < text.index("## NeuroPath retrieval")
