"""A full disk stops `pathrag index` with one line naming the path and what to free, and loses nothing: the next
run, with space again, ends with the tables a clean build has (issue 22 item 3; ENOSPC injected where DuckDB and
LanceDB write)."""

from __future__ import annotations

import errno

import duckdb
import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.errors import disk_full_cause
from pathrag_pipeline.storage.store import Store


@pytest.fixture()
def folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Valmere\n\nValmere University was founded by Ada Halden in 1851 in Port Aster.\n")
    (docs / "b.txt").write_text("The Drayton Railway reached Carrick in 1880. Ada Halden opened it.\n")
    return docs


def tables(home) -> dict[str, list]:
    """The graph's and the chunks' keys in DuckDB and the row counts of the LanceDB tables."""
    import lancedb

    with Store(home / "pathrag.duckdb").connect(read_only=True) as con:
        out = {"entities": sorted(con.execute("SELECT name FROM entities").fetchall()),
               "relations": sorted(con.execute("SELECT src_key, tgt_key FROM relations").fetchall()),
               "chunks": sorted(con.execute("SELECT id, content_hash FROM chunks").fetchall())}
    db = lancedb.connect(str(home / "lancedb"))
    for name in ("entities", "relations", "chunks"):
        out[f"vectors {name}"] = db.open_table(name).count_rows()
    return out


def _lance_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device", "/home/lancedb/chunks.lance/data/x.lance")


def _duckdb_full(*args, **kwargs):
    raise duckdb.IOException('IO Error: Could not write file "pathrag.duckdb.wal": No space left on device')


@pytest.mark.parametrize("where", [pytest.param("lancedb", marks=pytest.mark.e2e), "duckdb"])   # lancedb: end to end (.ci/run)
@pytest.mark.e2e
def test_disk_full_is_one_line_and_the_next_run_ends_like_a_clean_build(tmp_path, folder, monkeypatch, where):
    import assets.graph
    from pathrag_pipeline.storage.vector_store import VectorStore

    clean_home = tmp_path / "clean"
    monkeypatch.setenv("PATHRAG_HOME", str(clean_home))
    assert CliRunner().invoke(main, ["index", str(folder)]).exit_code == 0
    home = tmp_path / "home"
    monkeypatch.setenv("PATHRAG_HOME", str(home))
    with monkeypatch.context() as patch:
        if where == "lancedb":
            patch.setattr(VectorStore, "upsert", _lance_full)
        else:
            patch.setattr(assets.graph, "graph_stage", _duckdb_full)
        result = CliRunner().invoke(main, ["index", str(folder)])

    assert result.exit_code != 0 and "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    assert errors[0].startswith("Error: disk full while writing ") and "MiB free there" in errors[0]
    assert ("lancedb" in errors[0]) if where == "lancedb" else (str(home) in errors[0])
    assert "what was indexed before is kept" in errors[0]

    again = CliRunner().invoke(main, ["index", str(folder)])
    assert again.exit_code == 0, again.output
    assert tables(home) == tables(clean_home)


def test_disk_full_is_found_anywhere_in_the_exception_chain_and_nothing_else_is():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("step failed") from inner
    except RuntimeError as outer:
        assert isinstance(disk_full_cause(outer), OSError)
    assert disk_full_cause(RuntimeError("lance error: External error: os error 28")) is not None
    assert disk_full_cause(OSError(errno.EACCES, "Permission denied")) is None
    assert disk_full_cause(ValueError("a full moon")) is None


def test_in_a_dagster_run_launched_elsewhere_the_step_fails_with_the_same_one_line(tmp_path, folder, monkeypatch):
    """The UI and the daemon show a step's error as its message and traceback: a disk-full write is one line
    there too (a `dg.Failure` with the CLI's message, no chained traceback)."""
    import dagster as dg

    import assets.graph
    from assets.definitions import defs

    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATHRAG_DOCS", str(folder))
    monkeypatch.setattr(assets.graph, "graph_stage", _duckdb_full)
    job = defs.resolve_job_def("index_folder")
    result = job.execute_in_process(instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)

    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    error = failure.event_specific_data.error
    assert error.cls_name == "Failure" and error.cause is None
    assert error.message.count("\n") <= 1 and "disk full while writing" in error.message
    assert failure.event_specific_data.user_failure_data.description.startswith("disk full while writing")
