"""`pathrag bench corruption` on a tiny corpus: each damaged file is named by the check and repaired (issue 61)."""

from __future__ import annotations

import pytest

from pathrag_lab.bench import corruption


@pytest.mark.e2e   # builds three homes in subprocesses: end to end, run by .ci/run (pytest -m e2e)
def test_each_damaged_part_is_named_and_the_named_repair_restores_a_clean_build(tmp_path, monkeypatch):
    picked = [c for c in corruption.CASES if c[0] in ("DuckDB file, overwritten in the middle",
                                                      "LanceDB data file, cut to half")]
    monkeypatch.setattr(corruption, "CASES", tuple(picked))
    result = corruption.run_corruption_bench(n_docs=6, workdir=tmp_path)
    assert [c["case"] for c in result["cases"]] == [c[0] for c in picked]
    for case in result["cases"]:
        assert case["check_names_it"] and case["repair_completed"], case
        assert case["check_whole_after"] and case["tables_equal_clean"], case
    duckdb_case = result["cases"][0]
    assert duckdb_case["ask_one_line"] and duckdb_case["index_one_line"] and not duckdb_case["index_said_up_to_date"]
    llm = result["llm_case"]   # an LLM-built home repaired by `status --check --repair`: no paid call again
    assert llm["build_requests"] > 0 and llm["repair_requests"] == 0 and llm["graph_equal"], llm
    text = corruption.markdown_section(result)
    assert "**2 of 2** cases" in text and "pathrag bench corruption --docs 6" in text
    assert "**0 LLM requests** to rebuild" in text
