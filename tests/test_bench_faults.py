"""`pathrag bench faults`: an LLM build through an endpoint failing on part of its requests completes."""

from __future__ import annotations

import pytest

from pathrag_lab.bench.faults import markdown_section, run_faults_bench


@pytest.mark.e2e   # two LLM builds through the scripted server: end to end, run by .ci/run (pytest -m e2e)
def test_a_build_with_a_third_of_its_requests_failing_completes_and_equals_the_reference(tmp_path):
    result = run_faults_bench(n_docs=4, faults={"500": 0.3, "malformed": 0.3}, workdir=tmp_path)
    assert result["reference"]["completed"] and result["reference"]["ok"] > 0
    for run in result["runs"]:
        assert run["first"]["completed"], run
        assert run["graph_equal"], run
        assert run["second"]["ok"] == result["reference"]["ok"]
    section = markdown_section(result)
    assert section.startswith("## Faults on part of the LLM requests") and "| HTTP 500 | 30% | yes |" in section
