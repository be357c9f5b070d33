"""A first index stopped by a tiny DuckDB memory limit leaves no half-made schema, and every command says what
to do in one line (issue 22 item 7)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


def one_line(result) -> str:
    assert result.exit_code != 0 and "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    return errors[0]


@pytest.mark.e2e
def test_a_first_index_out_of_memory_leaves_no_half_schema_and_every_command_says_what_to_do(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE, docs)
    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATHRAG_DUCKDB_MEMORY_LIMIT", "1KB")

    line = one_line(CliRunner().invoke(main, ["index", str(docs)]))
    assert "PATHRAG_DUCKDB_MEMORY_LIMIT=2GB" in line   # the default, not four times 1KB

    monkeypatch.delenv("PATHRAG_DUCKDB_MEMORY_LIMIT")
    import duckdb

    with duckdb.connect(str(tmp_path / "home" / "pathrag.duckdb"), read_only=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert tables == set() or {"documents", "chunks", "entities", "relations", "queries"} <= tables  # all or none
    for command in (["status"], ["ask", "Who founded Valmere University?"]):
        assert "run `pathrag index PATH` to build it" in one_line(CliRunner().invoke(main, command))

    assert CliRunner().invoke(main, ["index", str(docs)]).exit_code == 0
    assert CliRunner().invoke(main, ["ask", "Who founded Valmere University?"]).exit_code == 0
