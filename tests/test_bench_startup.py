"""The start-up benchmark's runner: it measures a real invocation and refuses to report a failed one."""

import os

import pytest

from pathrag_lab.bench.startup import time_command
from pathrag_pipeline.config import PACKAGE_ROOT


def test_time_command_reports_medians_of_a_real_run():
    figures = time_command(["--version"], code_root=PACKAGE_ROOT, env=dict(os.environ), repeats=1)
    assert figures["runs"] == 1
    assert figures["wall_s"] > 0 and figures["cpu_s"] >= 0


def test_a_failing_command_is_an_error_not_a_figure():
    with pytest.raises(RuntimeError, match="no-such-command"):
        time_command(["no-such-command"], code_root=PACKAGE_ROOT, env=dict(os.environ), repeats=1)


def test_before_runs_ahead_of_every_run_warm_up_included(tmp_path):
    calls = []
    time_command(["--version"], code_root=PACKAGE_ROOT, env=dict(os.environ), repeats=2,
                 before=lambda: calls.append(len(calls)))
    assert calls == [0, 1, 2]


def test_update_docs_replaces_only_the_start_up_section(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from pathrag_lab.bench import startup
    from pathrag_pipeline.cli import main

    rows = [{"command": "pathrag ask", "wall_s": 1.25, "cpu_s": 1.5}]
    monkeypatch.setattr(startup, "run_startup_bench", lambda **kw: {"repeats": kw["repeats"], "rows": rows})
    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n\n## CLI start-up\n\nold figures\n\n## Dagster\n\nkept\n")
    result = CliRunner().invoke(main, ["bench", "startup", "--repeats", "2", "--update-docs", str(report)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = report.read_text()
    assert "old figures" not in text and "## Dagster\n\nkept" in text
    assert "| pathrag ask | 1.25 | 1.5 |" in text and "`pathrag bench startup --repeats 2`" in text
    assert "_Measured " in text and text.count("## CLI start-up") == 1


@pytest.mark.e2e   # two quickstarts in fresh homes
def test_a_fresh_quickstart_row_says_where_its_time_went(tmp_path, monkeypatch):
    """The parts come from the quickstart's own index report (the time line `pathrag index` prints)."""
    from pathrag_lab.bench.report import startup_section
    from pathrag_lab.bench.startup import report_parts

    home = tmp_path / "home"
    figures = time_command(["quickstart"], code_root=PACKAGE_ROOT, repeats=1,
                           env={**os.environ, "PATHRAG_HOME": str(home)},
                           before=lambda: __import__("shutil").rmtree(home, ignore_errors=True))
    parts = figures["parts"]
    assert {"index run", "ingest", "graph", "embeddings", "the run around them", "the process around it"} == set(parts)
    assert parts["index run"] < figures["wall_s"]
    assert abs(parts["index run"] + parts["the process around it"] - figures["wall_s"]) < 0.05
    assert report_parts("no report here") == {}
    text = startup_section({"repeats": 1, "rows": [{"command": "pathrag quickstart (fresh home)", **figures}]})
    assert f"the `index_folder` run {parts['index run']} s (ingest {parts['ingest']} s" in text
