"""`pathrag index` on a folder with nothing to do launches no Dagster run and writes nothing; anything a run
would do (a changed file, a failed extraction to retry, unmerged records, embeddings not confirmed in sync)
still gets a recorded run. The check is index/pending_work.py."""

from __future__ import annotations

import duckdb
import json

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.config import Settings
from pathrag_pipeline.dagster_state import last_runs
from pathrag_pipeline.index import embedding_stage, pipeline
from pathrag_pipeline.index.embedding_stage import SYNCED_STATE_META
from pathrag_pipeline.index.extraction_stage import GRAPH_DIRTY_META
from pathrag_pipeline.index.pending_work import find_pending_work, up_to_date_report
from pathrag_pipeline.storage.store import Store
from tests.extraction_fakes import FakeExtractionModel

NO_RUN = "Up to date, no run launched"
# Names far enough apart that the alias pass finds nothing: the first run already records the synced state.
DOCS = {
    "ada.txt": "Ada Lovelace wrote notes about the Analytical Engine in London.",
    "alan.txt": "Alan Turing worked at Bletchley Park near Milton Keynes during the war.",
    "grace.txt": "Grace Hopper built the first Compiler for the Navy in Arlington.",
}


@pytest.fixture()
def folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text + "\n")
    return docs


def index(folder):
    result = CliRunner().invoke(main, ["index", str(folder)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def runs(home) -> list[str]:
    return [r["run_id"] for r in last_runs(home / "dagster", limit=50)]


def tables(home) -> dict[str, list]:
    """Every row of every DuckDB table, in a stable order."""
    with duckdb.connect(str(home / "pathrag.duckdb"), read_only=True) as con:
        names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        return {n: sorted(map(repr, con.execute(f'SELECT * FROM "{n}"').fetchall())) for n in names}


@pytest.mark.e2e
def test_noop_launches_no_run_and_leaves_the_tables_unchanged(home, folder):
    first = index(folder)
    assert "Dagster run" in first and NO_RUN not in first
    before_runs, before_tables = runs(home), tables(home)

    again = index(folder)

    assert NO_RUN in again and "Dagster run" not in again
    assert "0 chunks pending" in again and "3 unchanged" in again   # the report a run prints, nothing done
    assert runs(home) == before_runs
    assert tables(home) == before_tables                            # no ingest_runs or llm_usage row either


@pytest.mark.e2e
def test_a_changed_file_after_a_noop_gets_a_recorded_run(home, folder):
    index(folder)
    assert NO_RUN in index(folder)
    (folder / "grace.txt").write_text("Grace Hopper taught mathematics at Vassar College.\n")

    out = index(folder)

    assert NO_RUN not in out and "1 chunks pending" in out
    [latest, *_] = last_runs(home / "dagster", limit=1)
    assert f"Dagster run {latest['run_id']}" in out
    assert (latest["job"], latest["status"], latest["trigger"]) == ("index_folder", "SUCCESS", "cli")
    with duckdb.connect(str(home / "pathrag.duckdb"), read_only=True) as con:
        row = con.execute("SELECT run_id, files_changed FROM ingest_runs ORDER BY started_at DESC LIMIT 1").fetchone()
    assert row == (latest["run_id"], 1)
    assert NO_RUN in index(folder)


def test_a_failed_extraction_is_pending_work_not_a_noop(home, folder, monkeypatch, openai_server):
    """Over HTTP against the test server: the chunk whose output stays invalid is retried by every run,
    so the index is never 'up to date' until it succeeds."""
    model = FakeExtractionModel(poison={"Bletchley"})
    openai_server.chat_responder = model
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    assert "1 failed" in index(folder)
    before = runs(home)

    retried = index(folder)

    assert NO_RUN not in retried and "1 chunks pending" in retried and "1 failed" in retried
    assert len(runs(home)) == len(before) + 1
    model.poison.clear()
    fixed = index(folder)
    assert "1 chunks pending" in fixed and "0 failed" in fixed and NO_RUN not in fixed
    assert NO_RUN in index(folder)


# ---- the check itself, on the tables a run left ---------------------------------------------------------

@pytest.fixture()
def indexed(home, folder):
    index(folder)
    settings = Settings.from_env(docs=folder)
    mode = pipeline.describe_mode(settings)
    assert find_pending_work(settings, folder, mode["extractor"], mode["embedder"]).nothing_to_do
    return settings, mode


def reasons(settings, folder, mode, **override) -> list[str]:
    ids = {"extractor_id": mode["extractor"], "embedder_id": mode["embedder"], **override}
    return find_pending_work(settings, folder, **ids).reasons


@pytest.mark.e2e
def test_unmerged_records_of_a_crashed_run_are_work(indexed, folder):
    settings, mode = indexed
    with Store.for_settings(settings).connect() as con:
        con.execute("INSERT INTO pathrag_meta VALUES (?, ?)", [GRAPH_DIRTY_META, '{"chunks": ["ada.txt#0"]}'])
    assert reasons(settings, folder, mode) == ["extraction records not yet merged into the graph"]


def test_another_extractor_or_embedder_or_chunking_is_work(indexed, folder, monkeypatch):
    settings, mode = indexed
    assert "3 chunk(s) to extract" in " ".join(reasons(settings, folder, mode, extractor_id="llm:other:v9:glean1"))
    assert reasons(settings, folder, mode, embedder_id="st:other-model") == [
        "embeddings or aliases not confirmed in sync with the graph"]
    from dataclasses import replace

    assert "the chunk settings changed" in reasons(replace(settings, chunk_tokens=50), folder, mode)


@pytest.mark.e2e
def test_an_alias_edit_or_a_missing_lancedb_table_is_work(indexed, folder):
    settings, mode = indexed
    import shutil

    shutil.rmtree(settings.lancedb_path / "chunks.lance")
    assert reasons(settings, folder, mode) == ["LanceDB table(s) missing: chunks"]
    with Store.for_settings(settings).connect() as con:
        con.execute("INSERT INTO entity_aliases VALUES ('ada', 'alan turing', 'manual', 1.0, now(), false)")
    assert reasons(settings, folder, mode) == ["embeddings or aliases not confirmed in sync with the graph"]


@pytest.mark.e2e
def test_a_home_whose_aliases_were_decided_the_old_way_re_decides_them(indexed, folder):
    """Before issue 23 aliases were only ever added: such a home's next run re-decides them once."""
    settings, mode = indexed
    with Store.for_settings(settings).connect() as con:
        state = json.loads(con.execute("SELECT value FROM pathrag_meta WHERE key = ?", [SYNCED_STATE_META]
                                       ).fetchall()[0][0])
        del state["alias_detection"]
        con.execute("UPDATE pathrag_meta SET value = ? WHERE key = ?", [json.dumps(state, sort_keys=True),
                                                                      SYNCED_STATE_META])
    assert reasons(settings, folder, mode) == ["embeddings or aliases not confirmed in sync with the graph"]


@pytest.mark.e2e
def test_an_embedding_stage_that_stops_part_way_vouches_for_nothing(indexed, folder, monkeypatch):
    settings, mode = indexed

    def broken(*_args, **_kwargs):
        raise RuntimeError("killed while writing LanceDB")

    # after the sync's plan (whose connection deletes the no-op record), before LanceDB is written
    monkeypatch.setattr(embedding_stage, "_sync_table", broken)
    with pytest.raises(RuntimeError):
        pipeline.embedding_stage(settings, Store.for_settings(settings))
    with Store.for_settings(settings).connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM pathrag_meta WHERE key = ?", [SYNCED_STATE_META]).fetchone()[0] == 0
    report, why = up_to_date_report(settings, folder)
    assert report is None and why == ["embeddings or aliases not confirmed in sync with the graph"]


@pytest.mark.e2e
def test_a_run_that_adds_aliases_vouches_once_none_is_left_to_add(tmp_path, monkeypatch):
    """The sample has near-duplicate names: its first run adds aliases and re-merges entities, then looks
    for further ones (without applying them); none, so the very next index is already a no-op."""
    from pathrag_pipeline.config import SAMPLE_DOCS

    settings = Settings.from_env(env={}, home=tmp_path / "settled", docs=SAMPLE_DOCS)
    mode = pipeline.describe_mode(settings)
    report = pipeline.run_indexing(settings, folder=SAMPLE_DOCS)
    assert report.aliases.entities_remerged > 0
    assert reasons(settings, SAMPLE_DOCS, mode) == []

    # had the re-merge made a further near-duplicate, the run would not vouch: the next index runs
    unsettled = Settings.from_env(env={}, home=tmp_path / "unsettled", docs=SAMPLE_DOCS)
    monkeypatch.setattr(pipeline, "new_alias_candidates", lambda *a, **k: 1)
    assert pipeline.run_indexing(unsettled, folder=SAMPLE_DOCS).aliases.entities_remerged > 0
    assert reasons(unsettled, SAMPLE_DOCS, mode) == ["embeddings or aliases not confirmed in sync with the graph"]
