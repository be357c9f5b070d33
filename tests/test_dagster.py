"""The Dagster layer: definitions load, the one-run-per-batch sensor, the index job recorded in a persistent
instance (as `pathrag index` runs it), parse failures as a failing check, run config validated at launch."""

import json
import os
import socket
import signal

import dagster as dg
import pytest

from assets.automation import document_folder_sensor, evaluate_folder, index_job
from assets.definitions import defs
from assets.ingestion import FAILED_FILES_TAG, ingest
from assets.resources import PathragResource, RunReports
from pathrag_pipeline.ingest.folder_sync import FileEntry, scan_folder
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


def resources(tmp_path, docs):
    return {"pathrag": resource(tmp_path, docs), "reports": RunReports()}


def test_definitions_load():
    dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    assert {"documents", "chunks", "extractions", "entities", "relations", "embeddings"} <= {
        k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert repo.has_sensor_def("document_folder_sensor") and repo.has_schedule_def("reconcile_documents_nightly")


def test_jobs_that_write_duckdb_run_in_process():
    for name in ("index_folder", "index_graph", "ask_questions"):
        assert defs.resolve_job_def(name).executor_def.name == "in_process", name


def test_sensor_requests_one_run_per_batch_of_changes(folder):
    for i in range(30):
        (folder / f"new{i:02d}.txt").write_text(f"Document {i} about the Drayton Railway.\n")
    first = evaluate_folder(scan_folder(folder, max_bytes=10**6), None)
    assert [r.job_name or index_job.name for r in first.run_requests] == [index_job.name]
    assert first.dynamic_partitions_requests == []
    # unchanged folder: nothing to do
    second = evaluate_folder(scan_folder(folder, max_bytes=10**6), first.cursor)
    assert second.run_requests == []
    # edit one file and delete another: again one run, with a new key
    (folder / "b.txt").write_text("Beta\n\nEdited.\n")
    (folder / "a.md").unlink()
    third = evaluate_folder(scan_folder(folder, max_bytes=10**6), second.cursor or first.cursor)
    assert len(third.run_requests) == 1 and third.run_requests[0].run_key != first.run_requests[0].run_key
    assert json.loads(third.cursor)["files"] == 31


def test_sensor_cursor_stays_small_for_many_files():
    scan = {f"f{i:05d}.txt": FileEntry(f"f{i:05d}.txt", None, 1, f"{i:064x}") for i in range(5000)}
    result = evaluate_folder(scan, None)
    assert len(result.run_requests) == 1 and len(result.cursor) < 200


def test_sensor_adds_no_run_while_one_is_queued(folder):
    scan = scan_folder(folder, max_bytes=10**6)
    result = evaluate_folder(scan, None, run_pending=True)
    assert result.run_requests == [] and result.cursor  # the queued run will see the change
    assert evaluate_folder(scan, result.cursor).run_requests == []


def test_edit_back_to_an_earlier_version_gets_a_new_run_key(folder):
    original = (folder / "b.txt").read_text()
    r1 = evaluate_folder(scan_folder(folder, max_bytes=10**6), None)
    (folder / "b.txt").write_text("changed")
    r2 = evaluate_folder(scan_folder(folder, max_bytes=10**6), r1.cursor)
    (folder / "b.txt").write_text(original)
    r3 = evaluate_folder(scan_folder(folder, max_bytes=10**6), r2.cursor)
    keys = [r.run_key for r in r1.run_requests + r2.run_requests + r3.run_requests]
    assert len(keys) == 3 and len(set(keys)) == 3


def test_sensor_runs_against_an_instance(tmp_path, folder):
    instance = dg.DagsterInstance.ephemeral()
    ctx = dg.build_sensor_context(instance=instance, resources={"pathrag": resource(tmp_path, folder)})
    result = document_folder_sensor(ctx)
    assert len(result.run_requests) == 1 and result.run_requests[0].tags["pathrag/trigger"] == "sensor"


def test_sensor_turned_on_over_an_indexed_folder_launches_nothing_until_it_changes(tmp_path, folder):
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.index.pipeline import run_indexing

    run_indexing(Settings.from_env(env={"PATHRAG_HOME": str(tmp_path / "home")}, docs=folder), folder=folder)
    instance = dg.DagsterInstance.ephemeral()
    first = document_folder_sensor(dg.build_sensor_context(instance=instance,
                                                           resources={"pathrag": resource(tmp_path, folder)}))
    assert not first.run_requests and "already indexed" in first.skip_reason.skip_message and first.cursor
    (folder / "c.md").write_text("# Gamma\n\nThe Carrick ferry crossed to Port Aster.\n")
    after = document_folder_sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor,
                                                           resources={"pathrag": resource(tmp_path, folder)}))
    assert len(after.run_requests) == 1


def materialisation_metadata(result) -> dict:
    mats = [e.event_specific_data.materialization for e in result.get_asset_materialization_events()]
    return {m.asset_key.to_user_string(): m.metadata for m in mats}


def test_index_job_run_is_recorded_with_its_trigger_and_whole_run_id(tmp_path, folder):
    instance = dg.DagsterInstance.ephemeral()
    res = resources(tmp_path, folder)
    result = defs.resolve_job_def("index_folder").execute_in_process(
        instance=instance, resources=res, tags={"dagster/sensor_name": "document_folder_sensor"})
    assert result.success
    meta = materialisation_metadata(result)
    assert {"documents", "chunks", "extractions", "entities", "relations", "embeddings"} <= set(meta)
    assert meta["documents"]["files_new"].value == 2 and meta["documents"]["trigger"].value == "sensor"
    assert meta["extractions"]["mode"].value == "offline" and meta["extractions"]["llm_calls"].value == 0
    assert meta["embeddings"]["entities_rows"].value == meta["entities"]["dagster/row_count"].value
    checks = result.get_asset_check_evaluations()
    assert {c.asset_check_key.name for c in checks} == {"documents_parse_cleanly", "relations_have_entities",
                                                        "graph_has_provenance", "embedding_keys_match"}
    assert all(c.passed for c in checks)
    with Store(res["pathrag"].settings().duckdb_path).connect(read_only=True) as con:
        assert con.execute("SELECT run_id, trigger FROM ingest_runs").fetchall() == [(result.run_id, "sensor")]
        assert {r[0] for r in con.execute("SELECT run_id FROM llm_usage").fetchall()} == {result.run_id}


def test_a_broken_file_fails_the_parse_check_naming_file_and_error(tmp_path, folder):
    (folder / "empty.txt").write_text("")
    (folder / "scanned-annual-report-2019-final-version.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([ingest], instance=instance,
                            resources=resources(tmp_path, folder))
    assert result.success  # the good files are indexed
    [check] = result.get_asset_check_evaluations()
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert sorted(check.metadata["failed_files"].value) == ["empty.txt", "scanned-annual-report-2019-final-version.pdf"]
    assert "empty.txt" in check.metadata["errors"].value
    with Store(tmp_path / "home" / "pathrag.duckdb").connect(read_only=True) as con:
        errors = [e for (e,) in con.execute("SELECT error FROM documents WHERE status = 'error'").fetchall()]
    assert max(map(len, errors)) > 120    # the PDF's message names the file, so it is long ...
    assert all(e in check.metadata["errors"].value for e in errors)   # ... and shown whole, not cut at 120
    meta = materialisation_metadata(result)
    assert meta["documents"]["files_failed"].value == 2 and "scanned-annual-report-2019-final-version.pdf" in meta["documents"]["failed_files"].value
    assert instance.get_run_by_id(result.run_id).tags[FAILED_FILES_TAG] == "2"
    # fixed: the check passes again
    (folder / "empty.txt").unlink()
    (folder / "scanned-annual-report-2019-final-version.pdf").unlink()
    again = dg.materialize([ingest], instance=instance, resources=resources(tmp_path, folder))
    assert all(c.passed for c in again.get_asset_check_evaluations())


@pytest.mark.e2e
def test_cli_runner_records_the_run_in_the_persistent_instance(tmp_path, folder):
    from assets.runs import index_folder
    from pathrag_pipeline.config import Settings

    settings = Settings.from_env(home=tmp_path / "home", docs=folder)
    report = index_folder(settings, trigger="cli")
    assert report.graph["documents"] == 2 and report.sync.run_id == report.dagster_run_id
    instance = dg.DagsterInstance.from_config(str(settings.dagster_home))
    try:
        run = instance.get_run_by_id(report.dagster_run_id)
        assert run.job_name == "index_folder" and run.is_success and run.tags["pathrag/trigger"] == "cli"
        assert instance.get_latest_materialization_event(dg.AssetKey("entities")).run_id == run.run_id
    finally:
        instance.dispose()
    # `pathrag status` reads the same run from the instance's SQLite files, without Dagster
    from pathrag_pipeline import dagster_state

    [row] = dagster_state.last_runs(settings.dagster_home)
    assert (row["run_id"], row["job"], row["status"], row["trigger"]) == (report.dagster_run_id, "index_folder",
                                                                           "SUCCESS", "cli")
    assert {a["name"]: a["status"] for a in dagster_state.automation_state(settings.dagster_home)} == {
        "document_folder_sensor": "STOPPED (default)", "reconcile_documents_nightly": "STOPPED (default)"}


@pytest.mark.e2e
def test_the_ui_can_re_execute_a_run_the_cli_made(tmp_path, folder):
    """The UI's Re-execute (its GraphQL mutation, against the code location `pathrag dev` serves) on a run of
    `pathrag index`: it used to fail with `CheckError: Expected non-None value` (no code-location origin)."""
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
    from dagster_graphql.client.query import LAUNCH_PIPELINE_REEXECUTION_MUTATION
    from dagster_graphql.test.utils import execute_dagster_graphql

    from assets.runs import CODE_LOCATION, index_folder
    from pathrag_pipeline.config import Settings

    settings = Settings.from_env(home=tmp_path / "home", docs=folder)
    report = index_folder(settings, trigger="cli")
    instance = dg.DagsterInstance.from_config(str(settings.dagster_home))
    origin = InProcessCodeLocationOrigin(
        loadable_target_origin=LoadableTargetOrigin(module_name="assets.definitions", attribute="defs"),
        location_name=CODE_LOCATION)
    try:
        parent = instance.get_run_by_id(report.dagster_run_id)
        assert parent.remote_job_origin.location_name == CODE_LOCATION
        with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget([origin])) as workspace:
            result = execute_dagster_graphql(workspace.create_request_context(), LAUNCH_PIPELINE_REEXECUTION_MUTATION,
                                             variables={"reexecutionParams": {"parentRunId": parent.run_id,
                                                                              "strategy": "ALL_STEPS"}})
            launched = result.data["launchPipelineReexecution"]
            assert launched["__typename"] == "LaunchRunSuccess", launched.get("message", launched)[:3000]
            assert launched["run"]["parentRunId"] == parent.run_id
            assert launched["run"]["pipeline"]["name"] == "index_folder"
    finally:
        for run in instance.get_runs():
            if run.run_id != report.dagster_run_id and not run.is_finished:
                instance.report_run_canceled(run)
        instance.dispose()


@pytest.mark.slow
def test_status_shows_a_sensor_turned_on(tmp_path, folder):
    """Turn the sensor on with Dagster's own CLI, then read its state the Dagster-free way."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from pathrag_pipeline import dagster_state
    from pathrag_pipeline.dagster_home import ensure_dagster_yaml

    home = tmp_path / "home" / "dagster"
    ensure_dagster_yaml(home)
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, DAGSTER_HOME=str(home), PATHRAG_HOME=str(tmp_path / "home"), PATHRAG_DOCS=str(folder))
    subprocess.run([str(Path(sys.executable).parent / "dagster"), "sensor", "start", "-w", "workspace.yaml",
                    "document_folder_sensor"], cwd=root, env=env, check=True, capture_output=True, timeout=120)
    state = {a["name"]: a["status"] for a in dagster_state.automation_state(home)}
    assert state["document_folder_sensor"] == "RUNNING"


def test_query_job_answers_a_batch_and_logs_it(tmp_path, folder):
    from pathrag_pipeline.index.pipeline import run_indexing

    res = resource(tmp_path, folder)
    run_indexing(res.settings(), folder=folder)
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(json.dumps({"question": "Who founded Valmere University?"}) + "\n")
    job = defs.resolve_job_def("ask_questions")
    result = job.execute_in_process(
        instance=dg.DagsterInstance.ephemeral(), resources={"pathrag": res},
        run_config={"ops": {"answer_questions": {"config": {
            "questions": ["When did the Drayton Railway reach Carrick?"], "questions_file": str(qfile),
            "mode": "path", "top_k": 5}}}})
    assert result.success
    with Store(res.settings().duckdb_path).connect(read_only=True) as con:
        rows = con.execute("SELECT question, mode, json_extract(params, '$.top_k')::INT FROM queries ORDER BY question").fetchall()
    assert rows == [("When did the Drayton Railway reach Carrick?", "path", 5), ("Who founded Valmere University?", "path", 5)]
    # each answer drawn, one page per question, linked from the materialisation (issue 63 item 4)
    event = next(e for e in result.get_asset_materialization_events()
                 if e.asset_key.path == ["queries"]).materialization
    links = event.metadata["pages"].value
    pages = sorted((res.settings().home / "pages" / result.run_id).glob("*.html"))
    assert len(pages) == 2 and all(p.as_uri() in links for p in pages)
    assert "Who founded Valmere University?" in links and 'class="node' in pages[0].read_text()


def test_query_job_without_questions_is_refused_at_launch_in_one_line(tmp_path, folder):
    """The Launchpad pre-fills `questions: []`: that config is refused before a run is created."""
    job = defs.resolve_job_def("ask_questions")
    instance = dg.DagsterInstance.ephemeral()
    for config in ({}, {"questions": []}, {"question": "  ", "questions": [""]}):
        with pytest.raises(dg.DagsterInvalidConfigError) as refused:
            job.execute_in_process(instance=instance, resources={"pathrag": resource(tmp_path, folder)},
                                   run_config={"ops": {"answer_questions": {"config": config}}})
        assert "ops.answer_questions.config: no question given: set `question`, `questions` or `questions_file`" \
            in str(refused.value)
    assert instance.get_runs() == []


@pytest.mark.slow
def test_key_echoed_by_the_endpoint_stays_out_of_dagster_run_storage(tmp_path, folder, monkeypatch):
    """Slow: the echoing endpoint is retried through openai's backoff before the client stops. Its chunks fail
    (retried by the next run) and the run goes on, as for any failing reply."""
    from pathrag_lab.testing.openai_server import FakeOpenAIServer

    secret = "sk-dagster-5ecret-never-stored-e51f"
    instance = dg.DagsterInstance.ephemeral()
    with FakeOpenAIServer() as server:
        server.inject("echo_key", times=100)
        monkeypatch.setenv("PATHRAG_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
        monkeypatch.setenv("PATHRAG_LLM_API_KEY", secret)
        result = defs.resolve_job_def("index_folder").execute_in_process(
            instance=instance, resources=resources(tmp_path, folder), raise_on_error=False)
        assert any(secret in (r.authorization or "") for r in server.requests)  # the key was sent and echoed
    assert result.success   # one failing endpoint fails its chunks, never the run
    stored = "\n".join(dg.serialize_value(record) for record in instance.all_logs(result.run_id))
    assert "upstream rejected credentials" in stored  # the echo reached run storage ...
    assert secret not in stored  # ... with the key masked


def _query_config_error(config: dict) -> str | None:
    try:
        dg.validate_run_config(defs.resolve_job_def("ask_questions"),
                               {"ops": {"answer_questions": {"config": {"question": "q", **config}}}})
    except dg.DagsterInvalidConfigError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("key,value", [("mode", "pathh"), ("variant", "papper"), ("ordering", "hops"),
                                       ("prompt", "chain"), ("top_k", "ten")])
def test_query_run_config_is_rejected_at_launch(key, value):
    assert key in (_query_config_error({key: value}) or "")


def test_query_config_is_every_query_setting_from_its_one_declaration():
    """Issue 60 item 2: the job's config fields are the QueryParams settings, with their choices as enums, their
    defaults and their bounds (one declaration, query/params.py)."""
    from dataclasses import fields

    from assets.query import NOT_QUERY_PARAMS, QuestionsConfig
    from assets.run_config import allowed_range
    from pathrag_pipeline.query.params import MODES, SETTINGS, QueryParams

    passed = set(QuestionsConfig.model_fields) - set(NOT_QUERY_PARAMS)
    assert passed == {f.name for f in fields(QueryParams)} == set(SETTINGS)
    schema = QuestionsConfig.to_config_schema().as_field().config_type.fields
    for name, spec in SETTINGS.items():
        default = QuestionsConfig.model_fields[name].default
        assert (tuple(default) if isinstance(default, list) else default) == spec.default, name
        if spec.choices and spec.kind != "list":
            inner = schema[name].config_type
            inner = getattr(inner, "inner_type", inner)
            assert tuple(v.config_value for v in inner.enum_values) == spec.choices, name
        if spec.hi is not None:
            assert allowed_range(QuestionsConfig, name).endswith(f"{name} <= {spec.hi}"), name
    assert _query_config_error({"path_seeds": "standing", "seed_query": "joined"}) is None
    assert _query_config_error({"path_seeds": "some"}) is not None
    assert _query_config_error({"np_variant": "ours"}) is None and _query_config_error({"np_variant": "x"})
    assert _query_config_error({"path_pooling": "reselect"}) is None
    assert _query_config_error({"path_pooling": "pool"}) is not None
    assert _query_config_error({"revert": ["seed_gate"], "seed_pass": True, "max_hops": 14}) is None
    assert "revert" in (_query_config_error({"revert": ["sideways"]}) or "")
    for mode in MODES:
        assert _query_config_error({"mode": mode}) is None


@pytest.mark.parametrize("key,value,allowed", [
    ("top_k", 0, "1 <= top_k <= 200"), ("alpha", 1.5, "0.0 < alpha <= 1.0"), ("theta", 5, "0.0 <= theta <= 1.0"),
    ("theta", -0.1, "0.0 <= theta <= 1.0"), ("token_budget", 10, "200 <= token_budget <= 200000"),
    ("top_n", 5000, "1 <= top_n <= 1000"), ("max_hops", 0, "1 <= max_hops <= 20")])
def test_query_numbers_out_of_bounds_are_rejected_at_launch(key, value, allowed):
    error = _query_config_error({key: value})
    assert error is not None and f"ops.answer_questions.config.{key} = " in error and f"allowed {allowed}" in error


def test_query_numbers_in_bounds_and_defaults_are_accepted():
    assert _query_config_error({"top_k": 200, "alpha": 1.0, "theta": 0.0, "token_budget": 200, "max_hops": 20}) is None
    # every default with a question is accepted (with no question at all the launch is refused: test above)
    dg.validate_run_config(defs.resolve_job_def("ask_questions"),
                           {"ops": {"answer_questions": {"config": {"question": "Who founded Valmere University?"}}}})


def test_out_of_bounds_query_config_creates_no_run(tmp_path, folder):
    """execute_in_process resolves the run config before it creates the run: theta=5 never becomes a run."""
    instance = dg.DagsterInstance.ephemeral()
    job = defs.resolve_job_def("ask_questions")
    with pytest.raises(dg.DagsterInvalidConfigError, match=r"theta = 5\.0 is out of range: allowed 0\.0 <= theta <= 1\.0"):
        job.execute_in_process(instance=instance, resources={"pathrag": resource(tmp_path, folder)},
                               run_config={"ops": {"answer_questions": {"config": {"question": "q", "theta": 5}}}})
    assert instance.get_runs() == []
    assert not (tmp_path / "home" / "pathrag.duckdb").exists()


def test_ui_launch_of_out_of_bounds_query_config_is_refused_before_a_run(tmp_path):
    """The Launchpad's path: the GraphQL launch mutation against a workspace on a real instance."""
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
    from dagster_graphql.client.query import LAUNCH_PIPELINE_EXECUTION_MUTATION
    from dagster_graphql.test.utils import execute_dagster_graphql

    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    origin = InProcessCodeLocationOrigin(
        loadable_target_origin=LoadableTargetOrigin(module_name="assets.definitions", attribute="defs"),
        location_name="pathrag")
    with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget([origin])) as workspace:
        context = workspace.create_request_context()
        repository = next(iter(context.get_code_location("pathrag").get_repositories()))

        def launch(config):
            return execute_dagster_graphql(context, LAUNCH_PIPELINE_EXECUTION_MUTATION, variables={"executionParams": {
                "selector": {"repositoryLocationName": "pathrag", "repositoryName": repository,
                             "pipelineName": "ask_questions"},
                "runConfigData": {"ops": {"answer_questions": {"config": {"question": "q", **config}}}},
                "mode": "default"}}).data["launchPipelineExecution"]

        refused = launch({"theta": 5})
        assert refused["__typename"] == "PythonError" and refused["className"] == "DagsterInvalidConfigError"
        assert "ops.answer_questions.config.theta = 5.0 is out of range: allowed 0.0 <= theta <= 1.0" in refused["message"]
        enum = launch({"mode": "pathh"})
        assert enum["__typename"] == "RunConfigValidationInvalid" and "pathh" in enum["errors"][0]["message"]
    assert instance.get_runs() == []


def test_fanout_shards_out_of_bounds_are_rejected_at_launch():
    with pytest.raises(dg.DagsterInvalidConfigError, match=r"shards = 0 is out of range: allowed 1 <= shards <= 1024"):
        dg.validate_run_config(defs.resolve_job_def("extract_fanout"),
                               {"ops": {"plan_extraction_shards": {"config": {"shards": 0}}}})


def test_a_failing_cli_run_raises_its_own_error_and_is_recorded_as_failed(tmp_path, folder, monkeypatch):
    from assets.runs import index_folder
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.storage.store import StoreLockedError

    settings = Settings.from_env(home=tmp_path / "home", docs=folder)

    def locked(*args, **kwargs):
        raise StoreLockedError("pathrag.duckdb is locked by another process")

    monkeypatch.setattr("assets.ingestion.ingest_stage", locked)
    with pytest.raises(StoreLockedError, match="locked by another process"):
        index_folder(settings, trigger="cli")
    from pathrag_pipeline import dagster_state

    [row] = dagster_state.last_runs(settings.dagster_home)
    assert (row["job"], row["status"], row["trigger"]) == ("index_folder", "FAILURE", "cli")


def test_a_small_cli_run_opens_the_file_once_for_all_its_steps_and_lets_go_of_it_when_it_ends(tmp_path, folder,
                                                                                                monkeypatch):
    """`pathrag index` of a one-file edit: its steps (ingest, graph, embeddings) and its report's counts share one
    DuckDB connection (``RunReports.holding``; was one open and close per step, then the report's); when the run
    ends, failed or not, the file is free for any connection of this process."""
    import duckdb

    from assets.runs import index_folder
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.errors import PipelineError
    from pathrag_pipeline.storage.store import Store

    settings = Settings.from_env(home=tmp_path / "home", docs=folder)
    index_folder(settings, trigger="cli")
    opened: list[bool] = []
    real_open = Store._open
    monkeypatch.setattr(Store, "_open", lambda self, read_only, config=None, wait=True:
                        opened.append(read_only) or real_open(self, read_only, config, wait))
    (folder / "a.md").write_text("# Alpha\n\nAda Halden founded Valmere University in 1852 with Orla Fenwick.\n")
    report = index_folder(settings, trigger="cli")
    assert report.sync.documents_written == 1 and report.extraction.extracted == 1 and report.graph["documents"] == 2
    assert opened == [False], opened
    duckdb.connect(str(settings.duckdb_path), read_only=True).close()   # another configuration: only if none is open

    def broken(*args, **kwargs):
        raise PipelineError("the graph stage broke")

    monkeypatch.setattr("assets.graph.graph_stage", broken)
    (folder / "b.txt").write_text("Beta\n\nThe Drayton Railway reached Carrick in 1881.\n")
    with pytest.raises(PipelineError, match="graph stage broke"):
        index_folder(settings, trigger="cli")
    duckdb.connect(str(settings.duckdb_path), read_only=True).close()


def test_sensor_reports_index_runs_made_outside_dagster_as_materialisations(tmp_path, folder):
    from pathrag_pipeline.index.pipeline import run_indexing

    res = resource(tmp_path, folder)
    report = run_indexing(res.settings(), trigger="python")  # no Dagster run
    instance = dg.DagsterInstance.ephemeral()
    ctx = dg.build_sensor_context(instance=instance, resources={"pathrag": res})
    result = document_folder_sensor(ctx)
    keys = sorted(e.asset_key.to_user_string() for e in result.asset_events)
    assert keys == sorted(["documents", "chunks", "extractions", "entities", "relations", "embeddings"])
    assert {e.metadata["pathrag_run_id"].value for e in result.asset_events} == {report.sync.run_id}
    # reported once: the next tick starts after it
    again = document_folder_sensor(dg.build_sensor_context(instance=instance, resources={"pathrag": res},
                                                           cursor=result.cursor))
    assert again.asset_events == [] and again.run_requests == []


def test_sensor_does_not_report_runs_dagster_made(tmp_path, folder):
    instance = dg.DagsterInstance.ephemeral()
    defs.resolve_job_def("index_folder").execute_in_process(instance=instance, resources=resources(tmp_path, folder))
    ctx = dg.build_sensor_context(instance=instance, resources={"pathrag": resource(tmp_path, folder)})
    assert document_folder_sensor(ctx).asset_events == []


def test_runless_cli_index_records_materialisations_and_the_sensor_skips_them(tmp_path, folder, monkeypatch):
    """`pathrag index --runless`: the stages run without Dagster, then the run is recorded as runless
    materialisations of the index assets in PATHRAG_HOME's instance; the sensor does not report it again."""
    from click.testing import CliRunner

    from assets.runs import instance_for
    from pathrag_pipeline.cli.indexing import index
    from pathrag_pipeline.config import Settings

    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(index, ["--runless", str(folder)])
    assert result.exit_code == 0, result.output
    assert "materialisations of run" in result.output and "no Dagster run" in result.output
    settings = Settings.from_env(docs=folder)
    with Store.for_settings(settings).connect(read_only=True) as con:
        run_id = con.execute("SELECT run_id FROM ingest_runs").fetchone()[0]
    instance = instance_for(settings)
    try:
        assert instance.get_runs() == []
        for key in ("documents", "chunks", "extractions", "entities", "relations", "embeddings"):
            event = instance.get_latest_materialization_event(dg.AssetKey(key))
            assert event is not None and event.asset_materialization.metadata["pathrag_run_id"].value == run_id
        tick = document_folder_sensor(dg.build_sensor_context(instance=instance,
                                                              resources={"pathrag": resource(tmp_path, folder)}))
        assert tick.asset_events == []
    finally:
        instance.dispose()


def _ui_launch_index(instance, tmp_path):
    """The Launchpad's launch of `index_folder` (the GraphQL mutation, against the code location `pathrag dev`
    serves) on a real instance, run to its end in this process; the launched run."""
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
    from dagster_graphql.client.query import LAUNCH_PIPELINE_EXECUTION_MUTATION
    from dagster_graphql.test.utils import execute_dagster_graphql

    from assets.runs import CODE_LOCATION

    origin = InProcessCodeLocationOrigin(
        loadable_target_origin=LoadableTargetOrigin(module_name="assets.definitions", attribute="defs"),
        location_name=CODE_LOCATION)
    # a run in this process makes SIGTERM do what SIGINT does (Dagster's interrupt handling) and leaves it so: put
    # both back, or a test runner started with SIGINT ignored goes on with SIGTERM ignored, and a later process
    # pool that ends its workers with SIGTERM waits for them forever
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget([origin])) as workspace:
            context = workspace.create_request_context()
            repository = next(iter(context.get_code_location(CODE_LOCATION).get_repositories()))
            launched = execute_dagster_graphql(context, LAUNCH_PIPELINE_EXECUTION_MUTATION, variables={
                "executionParams": {"selector": {"repositoryLocationName": CODE_LOCATION,
                                                 "repositoryName": repository, "pipelineName": "index_folder"},
                                    "mode": "default"}}).data["launchPipelineExecution"]
            assert launched["__typename"] == "LaunchRunSuccess", launched.get("message", launched)[:3000]
            return instance.get_run_by_id(launched["run"]["runId"])
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


@pytest.mark.e2e
def test_a_home_knows_its_folder_in_the_sensor_and_ui_launches(tmp_path, folder, monkeypatch):
    """Issue 62: a home indexed from folder A with PATHRAG_DOCS unset: the sensor watches A and a UI launch indexes
    A (not the sample folder); with PATHRAG_DOCS naming B, the UI's run is refused in one line that does not
    propose `replace`, and nothing indexed is lost."""
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.index.pipeline import run_indexing

    home = tmp_path / "home"
    monkeypatch.setenv("PATHRAG_HOME", str(home))
    monkeypatch.delenv("PATHRAG_DOCS", raising=False)
    run_indexing(Settings.from_env(), folder=folder)
    with Store(home / "pathrag.duckdb").connect(read_only=True) as con:
        indexed = con.execute("SELECT count(*) FROM documents").fetchone()[0]
    (folder / "c.md").write_text("# Gamma\n\nThe Carrick ferry crossed to Port Aster.\n")

    unnamed = PathragResource()           # what the code location's sensor, schedule and UI launches use
    assert unnamed.settings().docs == folder.resolve()
    (tmp_path / "dagster").mkdir()
    # a launched run starts at once (no daemon here to dequeue it) and runs in this process (an in-process code
    # location has no gRPC server for the default launcher's subprocess)
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"), overrides={
        "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "DefaultRunCoordinator"},
        "run_launcher": {"module": "dagster._core.launcher.sync_in_memory_run_launcher",
                         "class": "SyncInMemoryRunLauncher"}})
    try:
        tick = document_folder_sensor(dg.build_sensor_context(instance=instance, resources={"pathrag": unnamed}))
        assert len(tick.run_requests) == 1   # A's new file (the sample folder would be all new, and refused)
        run = _ui_launch_index(instance, tmp_path)
        assert run.status == dg.DagsterRunStatus.SUCCESS
        with Store(home / "pathrag.duckdb").connect(read_only=True) as con:
            assert con.execute("SELECT count(*) FROM documents").fetchone()[0] == indexed + 1

        other = tmp_path / "other"
        other.mkdir()
        (other / "z.md").write_text("# Zeta\n\nA page of another folder.\n")
        monkeypatch.setenv("PATHRAG_DOCS", str(other))
        refused = _ui_launch_index(instance, tmp_path)
        assert refused.status == dg.DagsterRunStatus.FAILURE
        failure = next(e for e in instance.all_logs(refused.run_id)
                       if e.dagster_event is not None and e.dagster_event.event_type_value == "STEP_FAILURE")
        message = failure.dagster_event.step_failure_data.error.message
        assert f"PATHRAG_DOCS names {other.resolve()}" in message and "Unset PATHRAG_DOCS" in message
        assert "replace" not in message.lower()
        with Store(home / "pathrag.duckdb").connect(read_only=True) as con:
            assert con.execute("SELECT count(*) FROM documents").fetchone()[0] == indexed + 1
    finally:
        instance.dispose()


def test_asks_outside_dagster_reach_the_catalog_with_their_row_counts(tmp_path, folder):
    """Issue 62: asks from the CLI or Python show in the asset catalog (the sensor reports them as runless
    materialisations of the query tables, with row counts); the query job's own asks are not reported twice."""
    from assets.automation import asks_outside_runs
    from pathrag_pipeline.index.pipeline import run_indexing
    from pathrag_pipeline.query.engine import PathRAG

    res = resource(tmp_path, folder)
    settings = res.settings()
    run_indexing(settings, folder=folder)
    rag = PathRAG(settings)
    rag.query("Who founded Valmere University?")
    rag.query("When did the Drayton Railway reach Carrick?", mode="naive")
    instance = dg.DagsterInstance.ephemeral()

    def tick():
        result = document_folder_sensor(dg.build_sensor_context(instance=instance, resources={"pathrag": res}))
        events = [e for e in result.asset_events if e.asset_key.path[0] in ("queries", "path_traces",
                                                                             "retrieved_nodes")]
        for event in events:   # what the daemon does with a tick's events
            instance.report_runless_asset_event(event)
        return {e.asset_key.path[0]: e.metadata for e in events}

    with Store(settings.duckdb_path).connect(read_only=True) as con:
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("queries", "path_traces", "retrieved_nodes")}
    first = tick()
    assert set(first) == {"queries", "path_traces", "retrieved_nodes"}
    assert {t: m["dagster/row_count"].value for t, m in first.items()} == counts
    assert first["queries"]["asks_since_last_report"].value == 2
    assert first["queries"]["modes"].value == "naive, path" and first["queries"]["answered_by"].value == "offline"
    # which command or process asked: the Python API here, from this process
    assert first["queries"]["asked_from"].value == "python: 2"
    assert first["queries"]["processes"].value == f"{socket.gethostname()}:{os.getpid()}"
    assert tick() == {}                              # nothing new: nothing reported again

    defs.resolve_job_def("ask_questions").execute_in_process(
        instance=instance, resources={"pathrag": res},
        run_config={"ops": {"answer_questions": {"config": {"question": "Who designed the Drayton Railway?"}}}})
    assert tick() == {}                              # the job recorded its own ask, with the row counts
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        job_ask = con.execute("SELECT asked_from FROM queries ORDER BY asked_at DESC LIMIT 1").fetchone()[0]
    assert job_ask.startswith("dagster run ") and len(job_ask) > len("dagster run ")
    rag.query("Where is Valmere University?")
    later = asks_outside_runs(instance, Store(settings.duckdb_path), "test")
    assert [e.metadata["asks_since_last_report"].value for e in later] == [1, 1, 1]
    assert later[0].metadata["dagster/row_count"].value == counts["queries"] + 2


def test_pathrag_dev_opens_the_ui_with_the_asks_in_the_catalog(tmp_path, folder):
    from assets.runs import instance_for
    from pathrag_pipeline.cli.dev import _report_asks
    from pathrag_pipeline.index.pipeline import run_indexing
    from pathrag_pipeline.query.engine import PathRAG

    settings = resource(tmp_path, folder).settings()
    run_indexing(settings, folder=folder)
    PathRAG(settings).query("Who founded Valmere University?")
    _report_asks(settings)
    _report_asks(settings)                           # a second start reports nothing new
    instance = instance_for(settings)
    try:
        records = instance.fetch_materializations(dg.AssetKey("queries"), limit=5).records
        assert len(records) == 1
        meta = records[0].asset_materialization.metadata
        assert meta["reported_by"].value == "pathrag dev" and meta["dagster/row_count"].value == 1
    finally:
        instance.dispose()


@pytest.mark.e2e
def test_a_small_offline_edit_through_the_job_holds_one_connection_per_stage_as_the_runless_path_does(tmp_path,
                                                                                                       folder):
    """Issue 64: the graph and embeddings steps of a small offline `index_folder` run keep one DuckDB connection
    each (``Store.holding``, on run_indexing's terms), instead of opening the file for every short read and
    write (22 opens for a one-file edit before, against 6 without Dagster)."""
    from assets.runs import index_folder
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.index.pipeline import run_indexing

    opened = []
    real = Store._open

    def counting(self, *args, **kwargs):
        opened.append(1)
        return real(self, *args, **kwargs)

    counts = {}
    for name, index in (("job", lambda s: index_folder(s)), ("runless", lambda s: run_indexing(s, folder=folder))):
        settings = Settings.from_env(env={}, home=tmp_path / name, docs=folder)
        index(settings)
        (folder / "b.txt").write_text((folder / "b.txt").read_text() + f"\nThe line reached Greyhaven ({name}).\n")
        opened.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Store, "_open", counting)
            index(settings)
        counts[name] = len(opened)
    # the job's ingest step adds its check and metadata reads, and the report its counts: a few, not one per read
    assert counts["job"] <= counts["runless"] + 4, counts


def test_a_run_leaves_sigterm_as_the_process_had_it_even_with_sigint_ignored():
    """A background job (`pathrag index DIR &`) starts with SIGINT ignored; Dagster's run maps SIGTERM to SIGINT's
    disposition and leaves it: without ``sigterm_kept`` the process (and the `tail -F` of Dagster's log capture)
    ignored SIGTERM after its first run."""
    from dagster._utils.interrupts import capture_interrupts

    from assets.runs import sigterm_kept

    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with capture_interrupts():   # what a run does around its steps
            pass
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN   # Dagster's own behaviour, which this undoes
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with sigterm_kept(), capture_interrupts():
            pass
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])
