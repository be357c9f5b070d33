"""The Dagster layer: definitions load, per-document materialisation, the sensor's decisions, reconcile job."""

import json

import dagster as dg
import pytest

from assets.automation import document_folder_sensor, evaluate_folder, reconcile_documents
from assets.definitions import defs
from assets.ingestion import DOCUMENT_PARTITIONS, chunks, documents
from assets.resources import PathragResource
from pathrag_pipeline.ingest.folder_sync import scan_folder
from pathrag_pipeline.storage.store import Store


@pytest.fixture()
def folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nAda Halden founded Valmere University in 1851.\n")
    (docs / "b.txt").write_text("Beta\n\nThe Drayton Railway reached Carrick in 1880.\n")
    return docs


def resource(tmp_path, docs):
    return PathragResource(home=str(tmp_path / "home"), docs=str(docs))


def test_definitions_load():
    dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    assert {"documents", "chunks", "extractions", "entities", "relations", "embeddings"} <= {
        k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert repo.has_sensor_def("document_folder_sensor") and repo.has_schedule_def("reconcile_documents_nightly")


def test_materialise_one_partition(tmp_path, folder):
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(DOCUMENT_PARTITIONS.name, ["a.md", "b.txt"])
    res = resource(tmp_path, folder)
    result = dg.materialize([documents, chunks], instance=instance, partition_key="a.md", resources={"pathrag": res})
    assert result.success
    store = Store(res.settings().duckdb_path)
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT id FROM documents").fetchall() == [("a.md",)]
        assert con.execute("SELECT count(*) FROM chunks WHERE document_id = 'a.md'").fetchone()[0] == 1
    mats = result.asset_materializations_for_node("documents")
    assert mats[0].metadata["dagster/row_count"].value == 1
    # the file is deleted: re-materialising the partition removes its rows
    (folder / "a.md").unlink()
    assert dg.materialize([documents], instance=instance, partition_key="a.md", resources={"pathrag": res}).success
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM documents").fetchone()[0] == 0


def test_sensor_decisions_new_changed_unchanged_deleted(folder):
    scan = scan_folder(folder, max_bytes=10**6)
    first = evaluate_folder(scan, None, set())
    ingest_runs = [r for r in first.run_requests if r.job_name == "ingest_documents"]
    assert sorted(r.partition_key for r in ingest_runs) == ["a.md", "b.txt"]
    assert first.run_requests[-1].job_name == "index_graph"  # the graph follows the per-file runs
    assert first.dynamic_partitions_requests[0].partition_keys == ["a.md", "b.txt"]
    partitions = {"a.md", "b.txt"}
    # unchanged folder: nothing to do
    second = evaluate_folder(scan, first.cursor, partitions)
    assert second.run_requests == [] and second.dynamic_partitions_requests == []
    # change one file: one run whose key holds the new content hash
    (folder / "b.txt").write_text("Beta\n\nEdited.\n")
    scan2 = scan_folder(folder, max_bytes=10**6)
    third = evaluate_folder(scan2, second.cursor, partitions)
    assert [r.partition_key for r in third.run_requests] == ["b.txt", None]
    assert scan2["b.txt"].file_hash[:16] in third.run_requests[0].run_key
    # delete a file: partition removed and a removal run requested
    (folder / "a.md").unlink()
    fourth = evaluate_folder(scan_folder(folder, max_bytes=10**6), third.cursor, partitions)
    assert [r.job_name for r in fourth.run_requests] == ["remove_deleted_documents", "index_graph"]
    assert fourth.run_requests[0].run_config["ops"]["remove_documents"]["config"]["paths"] == ["a.md"]
    assert fourth.dynamic_partitions_requests[0].partition_keys == ["a.md"]
    assert "a.md" not in json.loads(fourth.cursor)["files"]


def test_edit_back_to_an_earlier_version_gets_a_new_run_key(folder):
    partitions = {"a.md", "b.txt"}
    original = (folder / "b.txt").read_text()
    c1 = evaluate_folder(scan_folder(folder, max_bytes=10**6), None, set()).cursor
    (folder / "b.txt").write_text("changed")
    r2 = evaluate_folder(scan_folder(folder, max_bytes=10**6), c1, partitions)
    (folder / "b.txt").write_text(original)
    r3 = evaluate_folder(scan_folder(folder, max_bytes=10**6), r2.cursor, partitions)
    keys = [r.run_key for r in r2.run_requests + r3.run_requests]
    assert len(keys) == 4 and len(set(keys)) == 4


def test_sensor_runs_against_an_instance(tmp_path, folder):
    instance = dg.DagsterInstance.ephemeral()
    ctx = dg.build_sensor_context(instance=instance, resources={"pathrag": resource(tmp_path, folder)})
    result = document_folder_sensor(ctx)
    assert len(result.run_requests) == 3


def test_reconcile_job_indexes_folder_and_syncs_partitions(tmp_path, folder):
    instance = dg.DagsterInstance.ephemeral()
    res = resource(tmp_path, folder)
    result = reconcile_documents.execute_in_process(instance=instance, resources={"pathrag": res})
    assert result.success
    assert sorted(instance.get_dynamic_partitions(DOCUMENT_PARTITIONS.name)) == ["a.md", "b.txt"]
    with Store(res.settings().duckdb_path).connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM documents").fetchone()[0] == 2


def materialisation_metadata(result) -> dict:
    mats = [e.event_specific_data.materialization for e in result.get_asset_materialization_events()]
    return {m.asset_key.to_user_string(): m.metadata for m in mats}


def test_graph_assets_and_checks_after_ingest(tmp_path, folder):
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(DOCUMENT_PARTITIONS.name, ["a.md", "b.txt"])
    res = resource(tmp_path, folder)
    for key in ("a.md", "b.txt"):
        assert dg.materialize([documents, chunks], instance=instance, partition_key=key,
                              resources={"pathrag": res}).success
    from assets.graph import embedding_keys_match, embeddings, graph, graph_has_provenance, relations_have_entities

    result = dg.materialize([graph, embeddings, relations_have_entities, graph_has_provenance, embedding_keys_match],
                            instance=instance, resources={"pathrag": res},
                            selection=["extractions", "entities", "relations", "embeddings"])
    assert result.success
    meta = materialisation_metadata(result)
    assert meta["extractions"]["mode"].value == "offline" and meta["extractions"]["llm_calls"].value == 0
    assert meta["entities"]["dagster/row_count"].value > 0
    assert meta["embeddings"]["entities_rows"].value == meta["entities"]["dagster/row_count"].value
    checks = result.get_asset_check_evaluations()
    assert checks and all(c.passed for c in checks)
    # nothing changed: a second run extracts and embeds nothing
    again = dg.materialize([graph, embeddings], instance=instance, resources={"pathrag": res})
    mats = materialisation_metadata(again)
    assert mats["extractions"]["pending_chunks"].value == 0 and mats["embeddings"]["embedded"].value == 0


def test_query_job_answers_a_batch_and_logs_it(tmp_path, folder):
    from pathrag_pipeline.index.pipeline import run_indexing

    res = resource(tmp_path, folder)
    run_indexing(res.settings(), folder=folder)
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(json.dumps({"question": "Who founded Valmere University?"}) + "\n")
    job = defs.get_job_def("ask_questions")
    result = job.execute_in_process(
        instance=dg.DagsterInstance.ephemeral(), resources={"pathrag": res},
        run_config={"ops": {"answer_questions": {"config": {
            "questions": ["When did the Drayton Railway reach Carrick?"], "questions_file": str(qfile),
            "mode": "path", "top_k": 5}}}})
    assert result.success
    with Store(res.settings().duckdb_path).connect(read_only=True) as con:
        rows = con.execute("SELECT question, mode, json_extract(params, '$.top_k')::INT FROM queries ORDER BY question").fetchall()
    assert rows == [("When did the Drayton Railway reach Carrick?", "path", 5), ("Who founded Valmere University?", "path", 5)]


def test_query_job_without_questions_fails_clearly(tmp_path, folder):
    job = defs.get_job_def("ask_questions")
    result = job.execute_in_process(instance=dg.DagsterInstance.ephemeral(),
                                    resources={"pathrag": resource(tmp_path, folder)},
                                    run_config={"ops": {"answer_questions": {"config": {}}}}, raise_on_error=False)
    assert not result.success
    assert "no question given" in str(result.failure_data_for_node("answer_questions").error)


def test_sensor_keeps_files_of_an_unreadable_subfolder(tmp_path, monkeypatch):
    import os

    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("Ada Halden lived in Port Aster.")
    (folder / "sub" / "b.txt").write_text("Tomas Brill lived in Carrick.")
    first = evaluate_folder(scan_folder(folder, max_bytes=10**6), None, set())
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path).endswith(os.sep + "sub"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    scan = scan_folder(folder, max_bytes=10**6)
    assert "sub/b.txt" not in scan and "sub" in scan.unreadable_dirs
    second = evaluate_folder(scan, first.cursor, {"a.txt", "sub/b.txt"})
    assert not second.run_requests and not second.dynamic_partitions_requests
