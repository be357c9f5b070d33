"""The `pathrag` commands as a user runs them (click's CliRunner, a temporary PATHRAG_HOME)."""

import csv
import io
import json

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main


@pytest.fixture()
def folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Valmere\n\nValmere University was founded by Ada Halden in 1851 in Port Aster.\n")
    (docs / "b.txt").write_text("Drayton\n\nAda Halden designed the Drayton Railway, which reached Carrick in 1880.\n")
    return docs


def run(*args):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result


@pytest.mark.e2e
def test_index_then_reindex_processes_only_changes(home, folder):
    first = run("index", str(folder))
    assert first.exit_code == 0, first.output
    assert "offline" in first.output
    again = run("index", str(folder))
    assert again.exit_code == 0
    assert "0 chunks pending" in again.output
    (folder / "b.txt").write_text("Drayton\n\nThe Drayton Railway reached Greyhaven in 1890.\n")
    third = run("index", str(folder))
    assert "1 chunks pending" in third.output


@pytest.mark.e2e
def test_sql_table_json_csv_and_read_only(home, folder):
    run("index", str(folder))
    out = run("sql", "SELECT id, status FROM documents ORDER BY id", "--json")
    assert json.loads(out.output) == [{"id": "a.md", "status": "indexed"}, {"id": "b.txt", "status": "indexed"}]
    out = run("sql", "SELECT id FROM documents ORDER BY id", "--csv")
    assert list(csv.reader(io.StringIO(out.output))) == [["id"], ["a.md"], ["b.txt"]]
    assert "a.md" in run("sql", "SELECT id FROM documents").output
    bad = CliRunner().invoke(main, ["sql", "DELETE FROM documents"])
    assert bad.exit_code == 1 and "read-only" in bad.output.lower()
    assert json.loads(run("sql", "SELECT count(*) AS n FROM documents", "--json").output) == [{"n": 2}]
    typo = CliRunner().invoke(main, ["sql", "SELEC nothing"])
    assert typo.exit_code == 1 and "SQL error" in typo.output


@pytest.mark.e2e
def test_status_json_reports_documents_graph_and_runs(home, folder):
    run("index", str(folder))
    status = json.loads(run("status", "--json").output)
    assert status["documents"] == {"indexed": 2}
    assert status["chunks"] == 2 and status["graph"]["entities"] > 0
    assert status["last_runs"][0]["trigger"] == "cli"
    # the same run, whole id, in the Dagster instance (read without importing Dagster)
    [dagster_run] = status["dagster"]["runs"]
    assert dagster_run["run_id"] == status["last_runs"][0]["run_id"] and len(dagster_run["run_id"]) == 36
    assert (dagster_run["job"], dagster_run["status"], dagster_run["trigger"]) == ("index_folder", "SUCCESS", "cli")
    assert {a["name"] for a in status["dagster"]["automation"]} == {"document_folder_sensor",
                                                                    "reconcile_documents_nightly"}


@pytest.mark.e2e
def test_status_says_which_folder_the_sensor_watches_and_warns_when_pathrag_docs_names_another(home, folder,
                                                                                                 monkeypatch, tmp_path):
    monkeypatch.delenv("PATHRAG_DOCS", raising=False)
    run("index", str(folder))
    status = json.loads(run("status", "--json").output)
    assert status["dagster_folder"] == status["folder"] == str(folder.resolve())
    assert status["dagster_folder_mismatch"] is None and "warning" not in run("status").output
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("PATHRAG_DOCS", str(other))
    status = json.loads(run("status", "--json").output)
    assert status["dagster_folder"] == str(other.resolve())
    assert f"but this home indexes {folder.resolve()}" in status["dagster_folder_mismatch"]
    assert "unset PATHRAG_DOCS" in " ".join(run("status").output.split())


@pytest.mark.e2e
def test_status_names_the_files_that_failed_with_their_whole_error(home, folder):
    (folder / "empty.md").write_text("")
    (folder / "binary.txt").write_bytes(b"\x00\x01\x02" * 200)
    run("index", str(folder))
    status = json.loads(run("status", "--json").output)
    failed = {f["path"]: f for f in status["failed_files"]}
    assert set(failed) == {"binary.txt", "empty.md"}
    assert all(f["error"] and not f["last_good_version_kept"] for f in failed.values())
    shown = run("status").output
    assert "Files that failed (2)" in shown and "binary.txt" in shown and "empty.md" in shown


def test_status_without_an_index_says_what_to_do(home):
    result = CliRunner().invoke(main, ["status"])
    assert result.exit_code == 1 and "pathrag index" in result.output


@pytest.mark.e2e
def test_ask_json_shape(home, folder):
    run("index", str(folder))
    out = run("ask", "Who founded Valmere University?", "--json")
    data = json.loads(out.output)
    assert {"query_id", "mode", "answer", "paths"} <= set(data)
    for path in data["paths"]:
        assert {"rank", "reliability", "nodes", "text", "chunk_ids"} <= set(path)
    assert data["mode"] == "path"


@pytest.mark.e2e
def test_ask_path_pooling_reranks_and_says_so(home, folder):
    run("index", str(folder))
    out = run("ask", "Who founded Valmere University?", "--path-pooling", "rerank")
    assert "rank 1 = best by Path Pooling" in out.output.replace("\n", " ")
    data = json.loads(run("ask", "Who founded Valmere University?", "--path-pooling", "reselect", "--json").output)
    assert data["params"]["path_pooling"] == "reselect" and data["paths"]
    plain = run("ask", "Who founded Valmere University?")
    assert "rank 1 = most reliable" in plain.output.replace("\n", " ")


@pytest.mark.e2e
def test_ask_preset_paper_runs_the_papers_pathrag_and_given_options_win(home, folder):
    run("index", str(folder))
    paper = json.loads(run("ask", "Who founded Valmere University?", "--preset", "paper", "--local", "--json").output)
    params = paper["params"]
    assert (params["prompt"], params["passages"], params["seed_search"]) == ("paths", "path_order", "vector")
    assert set(params["revert"]) == {"question_seed", "exact_name", "both_ends", "damping", "similarity", "seed_gate"}
    default = json.loads(run("ask", "Who founded Valmere University?", "--local", "--json").output)["params"]
    assert (default["prompt"], default["passages"]) != ("paths", "path_order")
    mixed = json.loads(run("ask", "Who founded Valmere University?", "--preset", "paper", "--prompt", "passages",
                           "--local", "--json").output)["params"]
    assert (mixed["prompt"], mixed["passages"]) == ("passages", "path_order")
    public = json.loads(run("ask", "Who founded Valmere University?", "--preset", "public-code", "--local",
                            "--json").output)
    assert (public["params"]["variant"], public["params"]["prompt"], public["params"]["passages"]) == \
        ("reference", "public", "seeds") and public["answer"]
    result = CliRunner().invoke(main, ["ask", "Who founded Valmere University?", "--preset", "paper", "--mode",
                                       "naive"])
    assert result.exit_code != 0 and "path-mode method" in result.output


def test_a_missing_folder_in_a_fresh_home_leaves_no_home_behind(home, tmp_path):
    """Issue 62: the refusal used to leave a home folder holding only its lock file."""
    result = CliRunner().invoke(main, ["index", str(tmp_path / "no-such-folder")])
    assert result.exit_code == 1 and "does not exist" in result.output
    assert not home.exists()


def test_bad_setting_is_a_clear_error(home, folder, monkeypatch):
    monkeypatch.setenv("PATHRAG_CHUNK_TOKENS", "many")
    result = CliRunner().invoke(main, ["index", str(folder)])
    assert result.exit_code == 1 and "PATHRAG_CHUNK_TOKENS" in result.output


@pytest.mark.e2e
def test_quickstart_indexes_the_sample_and_answers(home):
    result = run("quickstart")
    assert result.exit_code == 0, result.output
    assert "Sample question" in result.output and "Answer" in result.output
    status = json.loads(run("status", "--json").output)
    assert status["documents"].get("indexed", 0) >= 10 and "error" not in status["documents"]
    # the Dagster home it prints exists and holds the quickstart's run
    assert f"Dagster home {home / 'dagster'}" in result.output.replace("\n", " ")
    assert (home / "dagster" / "dagster.yaml").exists()
    assert status["dagster"]["runs"][0]["trigger"] == "quickstart"
    # its showcase question is answered: the river is named first, then the chain that leads to it, with sources
    answer = result.output.split("Answer (extractive, offline, mode path):", 1)[1]
    answer = " ".join(answer.split())
    assert "River Lode" in answer[:400] and "Hesketh Mill" in answer[:400]
    assert "Cited: [1] varne_valley_geography.md" in answer and "Retrieved documents: " in answer


@pytest.mark.e2e
def test_sql_cannot_touch_other_files_and_rejects_empty_or_conflicting_input(home, folder, tmp_path):
    run("index", str(folder))
    target = tmp_path / "out.csv"
    copy = CliRunner().invoke(main, ["sql", f"COPY documents TO '{target}'"])
    assert copy.exit_code == 1 and not target.exists()
    outside = tmp_path / "outside.csv"
    outside.write_text("a\n1\n")
    read = CliRunner().invoke(main, ["sql", f"SELECT * FROM read_csv('{outside}')"])
    assert read.exit_code == 1 and "only reads the index" in read.output
    assert CliRunner().invoke(main, ["sql", "  "]).exit_code == 2
    assert CliRunner().invoke(main, ["sql", "SELECT 1", "--json", "--csv"]).exit_code == 2
    two = CliRunner().invoke(main, ["sql", "SELECT 1 AS one; SELECT 2 AS two"])   # only the last one's rows showed
    assert two.exit_code == 2 and "2 statements" in two.output and "two" not in two.output.split("Error")[0]
    assert CliRunner().invoke(main, ["sql", "SELECT ';' AS semicolon;"]).exit_code == 0


@pytest.mark.e2e
def test_ask_rejects_path_options_in_other_modes(home, folder):
    run("index", str(folder))
    result = CliRunner().invoke(main, ["ask", "Who founded Valmere University?", "--mode", "local",
                                       "--variant", "reference"])
    assert result.exit_code == 2 and "--variant" in result.output
    pooled = CliRunner().invoke(main, ["ask", "Who founded Valmere University?", "--mode", "naive",
                                       "--path-pooling", "rerank"])
    assert pooled.exit_code == 2 and "--path-pooling" in pooled.output
    layout = CliRunner().invoke(main, ["ask", "Who founded Valmere University?", "--mode", "naive",
                                       "--prompt", "paths"])       # the paper's layout, not the default
    assert layout.exit_code == 2 and "--prompt" in layout.output
    empty = CliRunner().invoke(main, ["ask", "   "])
    assert empty.exit_code == 2 and "the question is empty" in empty.output
    assert "Aldermere" not in empty.output   # a hint for any home, not the sample's question


def test_index_of_a_folder_without_supported_files_says_so(home, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.xyz").write_text("not a supported format")
    result = run("index", str(empty))
    assert "no supported files" in result.output and ".md" in result.output


@pytest.mark.e2e
def test_index_lists_unsupported_files(home, folder):
    (folder / "figures.csv").write_text("a,b\n1,2\n")
    out = run("index", str(folder))
    assert out.exit_code == 0, out.output
    assert "skipped 1 unsupported file(s)" in out.output and "figures.csv" in out.output


def test_dev_gives_dg_default_signal_dispositions(tmp_path, monkeypatch):
    """Started in the background by a shell, `pathrag dev` inherits SIGINT ignored; `dg dev` must not."""
    import os
    import signal

    from click.testing import CliRunner

    from pathrag_pipeline.cli.dev import dev

    seen = {}

    def fake_exec(path, args, env):
        seen.update({name: signal.getsignal(getattr(signal, name)) for name in ("SIGINT", "SIGTERM")})
        seen["args"] = args
        seen["path"] = path
        seen["PATH"] = env["PATH"]

    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(os, "execvpe", fake_exec)
    monkeypatch.setattr(os, "chdir", lambda _: None)
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = CliRunner().invoke(dev, ["-p", "3999"])
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    assert result.exit_code == 0, result.output
    assert seen["SIGINT"] == signal.SIG_DFL and seen["SIGTERM"] == signal.SIG_DFL
    assert seen["args"][1:] == ["dev", "-p", "3999"]
    # `.venv/bin/pathrag dev` without an activated venv: this environment's `dg`, and its bin first on PATH.
    import sys

    bin_dir = os.path.dirname(sys.executable)
    assert seen["path"] == os.path.join(bin_dir, "dg")
    assert seen["PATH"].split(os.pathsep)[0] == bin_dir


def test_ask_refuses_a_theta_the_job_would_refuse():
    from click.testing import CliRunner

    from pathrag_pipeline.cli import main

    result = CliRunner().invoke(main, ["ask", "Who founded Aldermere University?", "--theta", "5"])
    assert result.exit_code == 2 and "--theta" in result.output and "0<=x<=1" in result.output


@pytest.mark.e2e   # four index runs: run by .ci/run (pytest -m e2e)
def test_a_file_in_error_is_said_on_every_run_until_fixed(home, folder):
    (folder / "empty.txt").write_text("")
    first = run("index", str(folder))
    assert first.exit_code == 0, first.output
    assert "empty.txt" in first.output and "still in error" not in first.output  # said once, as this run's

    again = run("index", str(folder))  # nothing changed: no run, but the failure is said again
    assert again.exit_code == 0, again.output
    assert "Up to date" in again.output
    assert "1 file(s) still in error from an earlier run" in again.output and "empty.txt" in again.output

    (folder / "b.txt").write_text("Drayton\n\nAda Halden rebuilt the Drayton Railway in 1890.\n")  # a real run
    third = run("index", str(folder))
    assert "still in error" in third.output and "empty.txt" in third.output

    (folder / "empty.txt").write_text("Carrick is a town on the Drayton Railway.\n")
    fixed = run("index", str(folder))
    assert fixed.exit_code == 0, fixed.output
    assert "still in error" not in fixed.output
