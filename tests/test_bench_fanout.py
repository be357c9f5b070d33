"""`pathrag bench fanout`: bad worker counts are refused; on a tiny corpus (slow: Redis, moto, celery workers) it
runs every count, finds the tables equal to one process's and writes its section."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from pathrag_lab.cli import bench


@pytest.mark.parametrize("workers", ["1,x", "0,2", ""])
def test_bad_worker_counts_are_a_usage_error(workers):
    result = CliRunner().invoke(bench, ["fanout", "--workers", workers])
    assert result.exit_code == 2 and "--workers" in result.output


@pytest.mark.slow
def test_fanout_bench_measures_every_worker_count_and_writes_its_section(tmp_path):
    pytest.importorskip("dagster_celery", reason="pip install -e '.[distributed]' (dagster-celery)")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed: install redis-server (apt-get install redis-server)")
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\n## Scale\n\nkept\n")
    result = CliRunner().invoke(bench, ["fanout", "--docs", "24", "--workers", "1,2", "--delay", "0.05",
                                        "--query-rounds", "1", "--workdir", str(tmp_path / "w"),
                                        "--update-docs", str(docs), "--json"])
    assert result.exit_code == 0, result.output
    r, _ = json.JSONDecoder().raw_decode(result.stdout[result.stdout.index("{\n"):])  # warnings may follow it
    assert [run["workers"] for run in r["runs"]] == [1, 2]
    assert all(run["tables_equal"] for run in r["runs"])
    assert [run["shard_processes"] for run in r["runs"]] == [1, 2]
    assert all(run["requests"] == r["requests_per_run"] for run in r["runs"])   # each text extracted once
    assert r["query"]["home folder"]["p50_ms"] > 0 and r["query"]["S3 (moto, 127.0.0.1)"]["p50_ms"] > 0
    text = docs.read_text()
    assert text.index("## Extraction on celery workers") < text.index("## Scale") and "kept" in text
    assert "_Measured " in text and "1-min load average" in text
