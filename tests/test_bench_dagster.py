"""`pathrag bench dagster`, and splicing a long benchmark's section into the report without touching the rest."""

import pytest

from pathrag_lab.bench.report_sections import read_section, splice


def test_splice_inserts_before_retrieval_recall_then_replaces_only_its_section(tmp_path):
    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n\n## CLI start-up\n\nfast\n\n## Retrieval recall\n\nrecall table\n")
    splice(report, "Dagster", "## Dagster\n\nfirst\n\n", before="Retrieval recall")
    assert report.read_text() == ("# Benchmarks\n\n## CLI start-up\n\nfast\n\n## Dagster\n\nfirst\n\n"
                                  "## Retrieval recall\n\nrecall table\n")
    splice(report, "Dagster", "## Dagster\n\nsecond\n\n", before="Retrieval recall")
    text = report.read_text()
    assert "second" in text and "first" not in text and text.count("## Dagster") == 1
    assert text.endswith("## Retrieval recall\n\nrecall table\n") and "## CLI start-up\n\nfast" in text
    assert read_section(report, "Dagster") == "## Dagster\n\nsecond"
    assert read_section(report, "Retrieval recall") == "## Retrieval recall\n\nrecall table"
    assert read_section(report, "Scale") is None and read_section(tmp_path / "missing.md", "Dagster") is None


def test_splice_appends_a_section_the_report_lacks_and_its_anchor_is_missing(tmp_path):
    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n\n## Scaled things\n\nnot the Scale section\n")
    splice(report, "Scale", "## Scale\n\nbig\n", before="Retrieval recall")
    assert report.read_text() == ("# Benchmarks\n\n## Scaled things\n\nnot the Scale section\n\n"
                                  "## Scale\n\nbig\n")


@pytest.mark.slow
def test_bench_dagster_small_run(tmp_path):
    from pathrag_lab.bench.dagster import markdown_section, run_dagster_bench

    result = run_dagster_bench(repeats=1, files=50, new_files=20, workdir=tmp_path)
    assert result["sensor_scale"]["runs_for_new_files"] == 1 and result["sensor_latency"]["runs_per_drop"] == 1
    assert "## Dagster" in markdown_section(result)


@pytest.mark.e2e   # an index and 101 asks
def test_the_catalog_report_of_asks_is_measured_per_ask_and_its_rows_are_shown(tmp_path):
    from pathrag_lab.bench.dagster import _asks_rows, asks_in_catalog

    asks = asks_in_catalog(tmp_path, 1, lambda _: None)   # asserts 3 events per report, none when nothing is new
    assert asks["report_after_100_s"] > 0 and asks["per_ask_ms"] == round(asks["report_after_100_s"] * 10, 2)
    rows = _asks_rows(asks)
    assert f"{asks['per_ask_ms']} ms" in rows and rows.count("\n") == 3
