"""`pathrag status --check` reads every part of a home and names the damaged one with its repair (issue 61)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main


@pytest.fixture()
def indexed(home, tmp_path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Valmere\n\nValmere University was founded by Ada Halden in 1851 in Port Aster.\n")
    (docs / "b.txt").write_text("Drayton\n\nAda Halden designed the Drayton Railway, which reached Carrick in 1880.\n")
    result = CliRunner().invoke(main, ["index", str(docs)])
    assert result.exit_code == 0, result.output
    return docs


def check() -> tuple[int, str]:
    result = CliRunner().invoke(main, ["status", "--check"])
    return result.exit_code, result.output


def _overwrite(path: Path, start: int, length: int | None = None) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(start)
        fh.write(os.urandom((size - start) if length is None else length))


def test_a_whole_home_reads_whole(indexed, home):
    code, output = check()
    assert code == 0 and "parts read whole" in output and "DAMAGED" not in output
    assert "duckdb pathrag.duckdb table entities: ok" in output and "lancedb table entities: ok" in output
    data = json.loads(CliRunner().invoke(main, ["status", "--check", "--json"]).output)
    assert data["ok"] and {p["part"] for p in data["parts"]} == {"duckdb", "lancedb", "dagster"}


@pytest.mark.e2e
def test_a_damaged_duckdb_file_is_named_with_its_repair(indexed, home):
    _overwrite(home / "pathrag.duckdb", 3 * 4096)   # every block after the file header
    code, output = check()
    assert code == 1
    line = next(x for x in output.splitlines() if x.startswith("duckdb"))
    assert "DAMAGED" in line and "Corrupt database file" in line and f"pathrag index {indexed}" in line
    assert "lancedb table entities: ok" in output    # the other parts are still read and said
    for command in (["ask", "Who founded Valmere University?", "--local"], ["status"], ["index", str(indexed)]):
        result = CliRunner().invoke(main, command)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 1 and len(lines) == 1, (command, result.output[-2000:])
        assert "pathrag.duckdb) is damaged" in lines[0] and "`pathrag status --check`" in lines[0]


@pytest.mark.e2e
def test_a_garbled_dagster_storage_is_named_and_the_index_is_not(indexed, home):
    runs = home / "dagster" / "history" / "runs.db"
    _overwrite(runs, runs.stat().st_size // 3, runs.stat().st_size // 3)
    code, output = check()
    assert code == 1 and "dagster history/runs.db: DAMAGED" in output and "history is lost, the index is kept" in output
    assert not [x for x in output.splitlines() if x.startswith(("duckdb", "lancedb")) and "DAMAGED" in x]


@pytest.mark.e2e   # a re-embedding index run: end to end, run by .ci/run (pytest -m e2e)
def test_a_truncated_vector_table_is_named_and_reembed_repairs_it(indexed, home):
    data = sorted((home / "lancedb" / "entities.lance" / "data").glob("*.lance"))[0]
    with open(data, "r+b") as fh:
        fh.truncate(data.stat().st_size // 2)
    code, output = check()
    assert code == 1 and "lancedb table entities: DAMAGED" in output
    assert f"pathrag index --reembed {indexed}" in output
    assert CliRunner().invoke(main, ["index", "--reembed", str(indexed)]).exit_code == 0
    code, output = check()
    assert code == 0 and "DAMAGED" not in output


def test_damage_anywhere_in_the_chain_is_one_line_naming_the_part():
    from pathrag_pipeline.cli.lazy import damaged_store

    class RustPanic(Exception):
        pass

    def chained(inner: Exception) -> Exception:
        try:
            try:
                raise inner
            except Exception as exc:
                raise RuntimeError("step failed") from exc
        except RuntimeError as outer:
            return outer

    cases = {"Corrupt database file: computed checksum 1 does not match": "DuckDB file",
             'IO Error: Could not read enough bytes from file "x.duckdb"': "DuckDB file",
             "(sqlite3.DatabaseError) database disk image is malformed": "Dagster storage",
             "lance error: LanceError(IO): failed to fill whole buffer": "vector table"}
    for message, part in cases.items():
        line = damaged_store(chained(OSError(message)))
        assert line is not None and part in line and "`pathrag status --check`" in line and "\n" not in line
    assert "vector table" in (damaged_store(RustPanic("rust future panicked: unknown error")) or "")
    assert damaged_store(chained(ValueError("top_n=0 is out of range"))) is None


@pytest.mark.e2e
def test_check_repair_moves_the_damage_aside_and_rebuilds_what_it_held(indexed, home):
    _overwrite(home / "pathrag.duckdb", 3 * 4096)
    runs = home / "dagster" / "history" / "runs.db"
    _overwrite(runs, runs.stat().st_size // 3, runs.stat().st_size // 3)
    assert CliRunner().invoke(main, ["status", "--repair"]).exit_code == 2   # repairs what --check finds
    result = CliRunner().invoke(main, ["status", "--check", "--repair"])
    assert result.exit_code == 0, result.output[-3000:]
    assert result.output.rstrip().endswith("parts read whole") and "DAMAGED" in result.output   # before, then after
    kept = sorted(p.name for p in home.iterdir() if ".damaged-" in p.name)
    assert [k.split(".damaged-")[0] for k in kept] == ["dagster", "pathrag.duckdb"]   # moved aside, not deleted
    answer = CliRunner().invoke(main, ["ask", "Who founded Valmere University?", "--local"])
    assert answer.exit_code == 0 and "Ada Halden" in answer.output


@pytest.mark.e2e
def test_a_vector_file_overwritten_in_place_is_named_by_its_sum_and_a_cut_one_is_not_up_to_date(indexed, home):
    """LanceDB reads bytes changed in place without an error; the sums recorded when the index run wrote each file
    see them (storage/vector_sums.py). A second run over an edited folder adds files and keeps the others' sums,
    so the check stays whole; a file cut afterwards makes `pathrag index` run instead of saying "Up to date"."""
    (indexed / "c.md").write_text("# Carrick\n\nCarrick lies on the River Lode below Drayton.\n")
    assert CliRunner().invoke(main, ["index", str(indexed)]).exit_code == 0
    code, output = check()
    assert code == 0 and "DAMAGED" not in output, output
    data = max((home / "lancedb" / "chunks.lance" / "data").glob("*.lance"), key=lambda p: p.stat().st_size)
    size = data.stat().st_size
    _overwrite(data, size // 3, size // 3)
    assert data.stat().st_size == size
    code, output = check()
    name = data.relative_to(home / "lancedb").as_posix()
    assert code == 1 and f"lancedb file {name}: DAMAGED" in output and "pathrag index --reembed" in output
    with open(data, "r+b") as fh:
        fh.truncate(size // 2)
    result = CliRunner().invoke(main, ["index", str(indexed)])
    assert "Up to date" not in result.output
