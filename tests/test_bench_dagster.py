"""`pathrag bench dagster`: its section is spliced into the report without touching the rest."""

import pytest

from pathrag_pipeline.bench.dagster import splice


def test_splice_inserts_before_retrieval_recall_then_replaces_only_its_section(tmp_path):
    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n\n## CLI start-up\n\nfast\n\n## Retrieval recall\n\nrecall table\n")
    splice(report, "## Dagster\n\nfirst\n\n")
    assert report.read_text() == ("# Benchmarks\n\n## CLI start-up\n\nfast\n\n## Dagster\n\nfirst\n\n"
                                  "## Retrieval recall\n\nrecall table\n")
    splice(report, "## Dagster\n\nsecond\n\n")
    text = report.read_text()
    assert "second" in text and "first" not in text and text.count("## Dagster") == 1
    assert text.endswith("## Retrieval recall\n\nrecall table\n") and "## CLI start-up\n\nfast" in text


@pytest.mark.slow
def test_bench_dagster_small_run(tmp_path):
    from pathrag_pipeline.bench.dagster import markdown_section, run_dagster_bench

    result = run_dagster_bench(repeats=1, files=50, new_files=20, workdir=tmp_path)
    assert result["sensor_scale"]["runs_for_new_files"] == 1 and result["sensor_latency"]["runs_per_drop"] == 1
    assert "## Dagster" in markdown_section(result)
