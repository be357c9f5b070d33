"""`pathrag index` handed to the home's query service (`pathrag serve`, cli/indexing.ServiceIndexer): the same
Dagster run and printed report as a local index, without the new process's start-up (issue 64). A service with
other settings, --local, --runless and the like index here; a refused folder gets the local error; one run at a
time."""

from __future__ import annotations

import shutil
import threading

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.cli.indexing import ServiceIndexer
from pathrag_pipeline.config import SAMPLE_DOCS, Settings
from pathrag_pipeline.query.service import serve, wait_ready
from pathrag_pipeline.storage.store import Store

pytestmark = pytest.mark.e2e   # whole index runs through Dagster, in a service thread and locally


@pytest.fixture
def home(tmp_path, monkeypatch):
    """The sample documents indexed (locally) into a fresh home, and a service with an indexer serving it."""
    from pathrag_pipeline.query import graph_cache

    graph_cache.clear_cache()
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE_DOCS, docs)
    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PATHRAG_DOCS", raising=False)
    res = CliRunner().invoke(main, ["index", str(docs), "--local"])
    assert res.exit_code == 0, res.output
    settings = Settings.from_env()
    stop, lines = threading.Event(), []
    indexer = ServiceIndexer(settings)
    thread = threading.Thread(target=serve, args=(settings,),
                              kwargs={"stop": stop, "log": lines.append, "indexer": indexer}, daemon=True)
    thread.start()
    wait_ready(settings.home)
    yield settings, docs, lines
    stop.set()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert indexer._instance is None   # the service closed its Dagster instance when it stopped


def index(*args: str):
    res = CliRunner().invoke(main, ["index", *map(str, args)])
    return res.exit_code, res.stdout, res.stderr


def runs_in_log(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("index of ")]


def chunk_texts(settings: Settings) -> list[str]:
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        return [r[0] for r in con.execute("SELECT text FROM chunks").fetchall()]


def test_an_edit_is_indexed_by_the_service_as_a_dagster_run_and_printed_as_here(home):
    settings, docs, lines = home
    victim = sorted(docs.glob("*.md"))[0]
    victim.write_text(victim.read_text() + "\nThe Quillon Observatory opened in 1911.\n")
    code, out, err = index(docs)
    assert code == 0, err
    assert "indexed by the query service" in err
    assert "Indexed " in out and "│ 1       │" in out   # the sync table, with the one changed file
    assert "Dagster run " in out and "Stored in " in out
    run_id = out.split("Dagster run ")[1].split()[0]
    assert any(run_id in line for line in runs_in_log(lines))
    assert any("Quillon Observatory" in text for text in chunk_texts(settings))
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(settings.dagster_home))
    try:
        run = instance.get_run_by_id(run_id)
        assert run is not None and run.is_success and run.tags.get("pathrag/trigger") == "cli"
    finally:
        instance.dispose()

    # nothing changed since: the service's no-op check answers, no run
    code, out, err = index(docs)
    assert code == 0 and "Up to date, no run launched" in out and "indexed by the query service" in err
    # --local indexes here: the service's log does not grow
    before = len(runs_in_log(lines))
    victim.unlink()
    code, out, err = index(docs, "--local")
    assert code == 0 and "indexed by the query service" not in err and "docs deleted" in out
    assert len(runs_in_log(lines)) == before


def test_a_refused_folder_gets_the_local_error_and_the_service_keeps_indexing(home, tmp_path):
    settings, docs, lines = home
    other = tmp_path / "other"
    other.mkdir()
    (other / "note.md").write_text("# Note\n\nAnother folder.\n")
    code, out, err = index(other)
    assert code == 1
    local = CliRunner().invoke(main, ["index", str(other), "--local"])
    assert local.exit_code == 1
    assert err.strip().splitlines()[-1] == local.stderr.strip().splitlines()[-1]   # the same one line
    assert "Traceback" not in err
    (docs / "new.md").write_text("# New\n\nThe Varne Valley Railway reached Corran Ford in 1887.\n")
    code, out, err = index(docs)
    assert code == 0 and "indexed by the query service" in err and "│ 1   │" in out


def test_a_service_with_other_settings_is_not_handed_the_run(home, monkeypatch):
    settings, docs, lines = home
    monkeypatch.setenv("PATHRAG_CHUNK_TOKENS", "300")
    (docs / "new.md").write_text("# New\n\nThe Varne Valley Railway reached Corran Ford in 1887.\n")
    before = len(runs_in_log(lines))
    code, out, err = index(docs)
    assert "runs with other settings (PATHRAG_CHUNK_TOKENS); indexing in this process" in err
    assert len(runs_in_log(lines)) == before


def test_a_terminal_gets_colour_and_no_spinner_frames(home):
    """The service renders the report for the caller's terminal: colour codes when it has colour, and never the
    spinner a local run shows while it works (its frames would be replayed into the caller's terminal)."""
    settings, docs, _ = home
    (docs / "new.md").write_text("# New\n\nThe Varne Valley Railway reached Corran Ford in 1887.\n")
    indexer = ServiceIndexer(settings)
    try:
        reply = indexer({"folder": str(docs), "color": True, "width": 120})
    finally:
        indexer.close()
    assert "\x1b[" in reply["printed"] and "Dagster run " in reply["printed"]
    assert "\x1b[?25l" not in reply["printed"]   # a live display hides the cursor first
    with pytest.raises(Exception, match="not a number of columns"):
        ServiceIndexer(settings)({"folder": str(docs), "width": "wide"})


def test_a_local_plain_run_starts_a_service_for_the_next_and_a_served_or_local_one_does_not(tmp_path, monkeypatch):
    """`pathrag index` leaves a background service (cli/background_service.py) only after a plain run it did itself:
    not after one the service did, nor after --local/--runless. The start itself is tested with a real process in
    tests/test_background_service.py; here it is recorded."""
    from pathrag_pipeline.cli import background_service

    started = []
    monkeypatch.setattr(background_service, "start_for_next_command", lambda s: started.append(s.home))
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE_DOCS, docs)
    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    code, out, err = index(docs, "--local")
    assert code == 0, err
    code, out, err = index(docs, "--runless")
    assert code == 0 and started == [], err
    code, out, err = index(docs)
    assert code == 0 and "Up to date" in out and started == [tmp_path / "home"], err
    # handed to a service (its reply stands in here: the handing itself is tested above), no start
    monkeypatch.setattr("pathrag_pipeline.cli.indexing._index_in_service",
                        lambda *a: {"printed": "Up to date, no run launched\n", "unembedded": 0})
    code, out, err = index(docs)
    assert code == 0 and "indexed by the query service" in err and len(started) == 1, err
