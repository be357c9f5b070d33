"""`pathrag bench kills` on a small corpus: a run killed half-way, then a plain index ends like a clean build."""

from __future__ import annotations

import pytest

from pathrag_lab.bench.kills import markdown_section, run_kills_bench


@pytest.mark.slow   # three index runs in subprocesses: a benchmark, outside the default test run
def test_a_kill_half_way_then_a_plain_index_ends_like_a_clean_build(tmp_path):
    result = run_kills_bench(n_docs=40, points=(("graph", 0.0),), workdir=tmp_path)
    point = result["points"][0]
    assert point["completed"] and point["tables_equal_clean"], point
    assert "**1 of 1** kills" in markdown_section(result)
