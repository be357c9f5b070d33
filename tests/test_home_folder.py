"""A PATHRAG_HOME indexes one folder: indexing another folder, or an empty or missing one, into a home that
holds documents is refused before anything changes (CLI, quickstart, Dagster runs), unless --replace;
removing some files of the home's own folder still just removes them (ingest/home_folder.py)."""

from __future__ import annotations

import json
import shutil

import dagster as dg
import duckdb
import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.config import Settings
from pathrag_pipeline.dagster_state import last_runs
from pathrag_pipeline.ingest.home_folder import FOLDER_META, FolderRefused
from pathrag_pipeline.index.pipeline import run_indexing


def make_folder(path, files: dict[str, str]):
    path.mkdir()
    for name, text in files.items():
        (path / name).write_text(text + "\n")
    return path


@pytest.fixture()
def mine(tmp_path):
    return make_folder(tmp_path / "mine", {
        "a.md": "# Valmere\n\nValmere University was founded by Ada Halden in 1851 in Port Aster.",
        "b.txt": "Ada Halden designed the Drayton Railway, which reached Carrick in 1880.",
        "c.txt": "Grace Hopper built the first Compiler for the Navy in Arlington."})


@pytest.fixture()
def other(tmp_path):
    # a.md as in `mine`: the same relative id from another folder
    return make_folder(tmp_path / "other", {"a.md": "# Kessel\n\nKessel Bay lies north of Northwick."})


def run(*args):
    return CliRunner().invoke(main, list(args))


def indexed(*args):
    result = run("index", *map(str, args))
    assert result.exit_code == 0, result.output
    return result.output


def refusal(result) -> str:
    """The one-line error of a refused command (non-zero exit, no traceback)."""
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    return line


def snapshot(home) -> tuple[dict, list]:
    """Every DuckDB row and the Dagster run list: what 'nothing changed' compares."""
    with duckdb.connect(str(home / "pathrag.duckdb"), read_only=True) as con:
        names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        rows = {n: sorted(map(repr, con.execute(f'SELECT * FROM "{n}"').fetchall())) for n in names}
    return rows, [r["run_id"] for r in last_runs(home / "dagster", limit=50)]


def documents(home) -> list[str]:
    with duckdb.connect(str(home / "pathrag.duckdb"), read_only=True) as con:
        return [r[0] for r in con.execute("SELECT id FROM documents ORDER BY id").fetchall()]


def recorded(home) -> str | None:
    with duckdb.connect(str(home / "pathrag.duckdb"), read_only=True) as con:
        row = con.execute("SELECT value FROM pathrag_meta WHERE key = ?", [FOLDER_META]).fetchone()
    return row[0] if row else None


@pytest.mark.e2e
def test_another_folder_is_refused_naming_home_folder_count_and_the_two_ways(home, mine, other):
    indexed(mine)
    before = snapshot(home)

    line = refusal(run("index", str(other)))

    assert f"PATHRAG_HOME {home} holds 3 documents indexed from {mine}: indexing {other} there" in line
    assert "set PATHRAG_HOME to another folder" in line and "--replace" in line
    assert snapshot(home) == before                      # no row changed, no Dagster run launched
    assert documents(home) == ["a.md", "b.txt", "c.txt"]


@pytest.mark.e2e
def test_replace_indexes_the_new_folder_in_place_of_the_old(home, mine, other):
    indexed(mine)

    out = indexed("--replace", other)

    assert "Dagster run" in out
    assert documents(home) == ["a.md"]
    with duckdb.connect(str(home / "pathrag.duckdb"), read_only=True) as con:
        assert "Kessel" in con.execute("SELECT text FROM documents").fetchone()[0]
    assert recorded(home) == str(other)
    refusal(run("index", str(mine)))                     # now the old folder is the other one


@pytest.mark.parametrize("how", ["emptied", "missing"])
@pytest.mark.e2e
def test_an_empty_or_missing_folder_is_refused_with_the_count(home, mine, how):
    indexed(mine)
    before = snapshot(home)
    for path in mine.iterdir():
        path.unlink()
    if how == "missing":
        mine.rmdir()

    line = refusal(run("index", str(mine)))

    assert str(mine) in line and "3 documents" in line and "disk not mounted" in line
    assert snapshot(home) == before


@pytest.mark.e2e
def test_replace_empties_the_index_on_purpose(home, mine):
    indexed(mine)
    for path in mine.iterdir():
        path.unlink()
    indexed("--replace", mine)
    assert documents(home) == []


@pytest.mark.e2e
def test_removing_some_files_needs_no_flag(home, mine):
    indexed(mine)
    (mine / "b.txt").unlink()
    (mine / "c.txt").unlink()

    indexed(mine)

    assert documents(home) == ["a.md"]


@pytest.mark.e2e
def test_a_home_made_before_the_record_adopts_the_folder_of_its_next_index(home, mine, other):
    indexed(mine)
    with duckdb.connect(str(home / "pathrag.duckdb")) as con:
        con.execute("DELETE FROM pathrag_meta WHERE key = ?", [FOLDER_META])
    assert recorded(home) is None

    out = indexed(mine)                                  # nothing changed, yet a run records the folder

    assert "Dagster run" in out and documents(home) == ["a.md", "b.txt", "c.txt"]
    assert recorded(home) == str(mine)
    refusal(run("index", str(other)))


@pytest.mark.e2e
def test_quickstart_does_not_wipe_a_home_holding_another_folder(home, mine):
    indexed(mine)
    before = snapshot(home)

    line = refusal(run("quickstart"))

    assert f"holds 3 documents indexed from {mine}: indexing " in line and "--replace" in line
    assert snapshot(home) == before


@pytest.mark.e2e
def test_triples_and_reembed_runs_are_refused_before_a_run_too(home, mine, other):
    indexed(mine)
    before = snapshot(home)
    refusal(run("index", "--reembed", str(other)))
    assert snapshot(home) == before


def test_run_indexing_refuses_another_folder(tmp_path, mine, other):
    settings = Settings.from_env(env={}, home=tmp_path / "py-home", docs=mine)
    run_indexing(settings, folder=mine)
    with pytest.raises(FolderRefused, match="--replace"):
        run_indexing(settings, folder=other)
    assert documents(settings.home) == ["a.md", "b.txt", "c.txt"]
    run_indexing(settings, folder=other, replace_folder=True)
    assert documents(settings.home) == ["a.md"]


# ---- Dagster: the sensor's and schedule's runs go through the same ingest step ----------------------------

@pytest.mark.e2e
def test_a_scheduled_run_on_an_emptied_folder_fails_clearly_and_keeps_the_index(tmp_path, mine):
    from assets.definitions import defs
    from assets.resources import PathragResource, RunReports

    resources = {"pathrag": PathragResource(home=str(tmp_path / "home"), docs=str(mine)), "reports": RunReports()}
    instance = dg.DagsterInstance.ephemeral()
    job = defs.resolve_job_def("index_folder")
    schedule_tags = {"dagster/schedule_name": "reconcile_documents_nightly"}
    assert job.execute_in_process(instance=instance, resources=resources, tags=schedule_tags).success
    shutil.rmtree(mine)
    mine.mkdir()                                         # an unmounted disk's empty mount point

    result = job.execute_in_process(instance=instance, resources=resources, tags=schedule_tags, raise_on_error=False)

    assert not result.success
    error = str(result.failure_data_for_node("ingest").error)
    assert f"{mine} holds no supported file" in error and "delete 3 documents" in error
    assert "ops.ingest.config.replace" in error
    assert documents(tmp_path / "home") == ["a.md", "b.txt", "c.txt"]
    replaced = job.execute_in_process(instance=instance, resources=resources,
                                      run_config={"ops": {"ingest": {"config": {"replace": True}}}})
    assert replaced.success and documents(tmp_path / "home") == []


@pytest.mark.e2e
def test_status_shows_the_folder(home, mine):
    indexed(mine)
    assert recorded(home) == str(mine.resolve())
    assert f"Home {home} indexes {mine}\n" in run("status").output
    assert json.loads(run("status", "--json").output)["folder"] == str(mine)


def test_the_dagster_side_reads_the_home_folder_without_opening_duckdb(tmp_path):
    """A sensor tick or a run's first step picks the home's folder from its note, so an index run holding the
    DuckDB file never makes them wait; a home indexed before the note existed falls back to pathrag_meta."""
    from pathrag_pipeline.ingest.home_folder import FOLDER_NOTE, home_folder, with_home_folder

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nAda Halden founded Valmere University in 1851.\n")
    settings = Settings.from_env(env={"PATHRAG_HOME": str(tmp_path / "home")})
    assert home_folder(settings) is None                           # no home yet
    run_indexing(settings, folder=docs)
    note = settings.home / FOLDER_NOTE
    assert note.read_text().strip() == str(docs.resolve())
    moved = settings.duckdb_path.rename(settings.duckdb_path.with_suffix(".away"))
    assert with_home_folder(settings).docs == docs.resolve()       # read from the note alone
    moved.rename(settings.duckdb_path)
    note.unlink()                                                  # an older home: pathrag_meta says it
    assert home_folder(settings) == str(docs.resolve())
