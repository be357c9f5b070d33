"""`pathrag bench vectors` on a tiny corpus: it measures what it says (sizes, kept versions) and writes its section."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from pathrag_lab.cli import bench


@pytest.mark.e2e   # a benchmark writing its docs section (lab): run by .ci/run (pytest -m e2e)
def test_vectors_bench_writes_its_section_with_sizes_and_versions(tmp_path, monkeypatch):
    from datetime import timedelta

    from pathrag_pipeline.storage import vector_store

    monkeypatch.setattr(vector_store, "VERSION_RETENTION", timedelta(milliseconds=1))
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\n## Answers through a local LLM\n\nkept\n")
    result = CliRunner().invoke(bench, ["vectors", "--docs", "30", "--runs", "3", "--pause", "0", "--workdir",
                                        str(tmp_path / "w"), "--update-docs", str(docs), "--json"])
    assert result.exit_code == 0, result.output
    import json

    r = json.loads(result.output)
    assert r["first"]["bytes"] > 0 and r["first"]["rows"]["chunks"] > 0
    touched, edited = r["series"]["touched"], r["series"]["edited"]
    assert touched["embedded_per_run"] == 0 and touched["bytes_ratio"] == 1.0       # nothing written
    assert edited["embedded_per_run"] >= 1                                           # the edit is embedded
    # a few small writes leave a few versions each, no compaction: bounded, not a rewrite per run
    assert all(v <= 2 * vector_store.TIDY_FRAGMENTS + 4 for v in edited["runs"][-1]["versions"].values())
    text = docs.read_text()
    assert "## Vector store size over re-index runs" in text and text.index("## Vector store") < text.index("## Answers")
    assert "| edited | 3 |" in text and "kept" in text
