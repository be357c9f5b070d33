"""Expected failures of the model endpoints reach the user of `pathrag index` and `pathrag ask` as one line
plus what to do, with a non-zero exit and no traceback (issue 10 item 9), and never with the key (item 7)."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_lab.testing.openai_server import FakeOpenAIServer

SECRET = "sk-cli-5ecret-never-shown-4d2e"


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Valmere\n\nValmere University was founded by Ada Halden in 1851 in Port Aster.\n")
    return docs


def one_line_error(result) -> str:
    assert result.exit_code != 0
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    lines = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.e2e
def test_index_with_a_rejected_mode_is_one_line_naming_the_fix(folder, monkeypatch,
                                                               openai_server: FakeOpenAIServer) -> None:
    openai_server.unsupported_formats = {"json_schema"}
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    monkeypatch.setenv("PATHRAG_LLM_MODE", "json_schema")
    monkeypatch.setenv("PATHRAG_LLM_API_KEY", SECRET)

    result = CliRunner().invoke(main, ["index", str(folder)])

    line = one_line_error(result)
    assert "PATHRAG_LLM_MODE=json" in line
    assert SECRET not in result.output
    assert openai_server.count("chat") == 1


def test_index_with_a_wrong_key_stops_at_the_first_chunk_in_one_line(folder, monkeypatch, caplog,
                                                                     openai_server: FakeOpenAIServer) -> None:
    for i in range(6):
        (folder / f"extra-{i}.md").write_text(f"Document {i} says Ada Halden visited Port Aster.\n")
    openai_server.inject("401", times=100)
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    monkeypatch.setenv("PATHRAG_LLM_API_KEY", SECRET)
    monkeypatch.setenv("PATHRAG_LLM_MAX_CONCURRENCY", "1")

    result = CliRunner().invoke(main, ["index", str(folder)])

    line = one_line_error(result)
    assert "HTTP 401" in line and "PATHRAG_LLM_API_KEY" in line and "is the server up" not in line
    assert openai_server.count("chat") == 1  # the first refusal ends the run: 7 chunks, one request
    assert SECRET not in result.output
    # said once, in the Error line: no per-chunk warning repeats it (a terminal shows warnings too)
    assert not [r for r in caplog.records if "extraction of chunk" in r.getMessage()]


@pytest.mark.e2e   # subprocess index runs: end to end, run by .ci/run (pytest -m e2e)
def test_index_with_an_embedder_that_cannot_load_is_one_line(folder, monkeypatch) -> None:
    pytest.importorskip("pathrag_pipeline.llm.embedding")
    try:
        import sentence_transformers  # noqa: F401
        pytest.skip("sentence-transformers is installed here")
    except ImportError:
        pass
    monkeypatch.setenv("PATHRAG_EMBED_MODEL", "st:all-MiniLM-L6-v2")
    line = one_line_error(CliRunner().invoke(main, ["index", str(folder)]))
    assert "pip install" in line


@pytest.mark.e2e
def test_ask_with_the_llm_stopped_is_one_line(folder, monkeypatch, openai_server: FakeOpenAIServer) -> None:
    assert CliRunner().invoke(main, ["index", str(folder)]).exit_code == 0  # offline index
    openai_server.unsupported_formats = {"json_schema"}
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    monkeypatch.setenv("PATHRAG_LLM_MODE", "json_schema")

    # the keyword call is the structured one the server refuses (path mode's default keywords are the offline rules')
    line = one_line_error(CliRunner().invoke(main, ["ask", "Who founded Valmere University?", "--set", "keywords=llm"]))
    assert "PATHRAG_LLM_MODE=json" in line


@pytest.mark.slow
def test_ask_with_a_failing_embeddings_endpoint_is_one_line_without_the_key(folder, monkeypatch,
                                                                            openai_server: FakeOpenAIServer) -> None:
    """Slow: the embedder runs through openai's retry backoff (about 3.5 s) before it gives up."""
    monkeypatch.setenv("PATHRAG_EMBED_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_EMBED_MODEL", "fake-embed")
    monkeypatch.setenv("PATHRAG_EMBED_API_KEY", SECRET)
    assert CliRunner().invoke(main, ["index", str(folder)]).exit_code == 0
    openai_server.inject("echo_key", times=50, endpoint="embeddings")

    result = CliRunner().invoke(main, ["ask", "Who founded Valmere University?"])

    line = one_line_error(result)
    assert "embedding request" in line and "PATHRAG_EMBED" in line
    assert SECRET not in result.output


def test_index_that_runs_duckdb_out_of_memory_is_one_line_naming_the_setting(folder, monkeypatch) -> None:
    """The huge_line.txt report: DuckDB's OutOfMemoryException in the graph merge ended `pathrag index` with a
    traceback whose last line was an unrelated 'Current transaction is aborted'."""
    import duckdb

    from pathrag_pipeline.index import graph_merge

    def load_mentions(con, *args, **kwargs):
        try:  # abort the transaction as a real out-of-memory failure does
            con.execute("SELECT error('aborting the transaction')")
        except duckdb.Error:
            pass
        raise duckdb.OutOfMemoryException(
            "Out of Memory Error: failed to allocate data of size 2.0 GiB (8.2 MiB/1.8 GiB used)")

    monkeypatch.setattr(graph_merge, "_load_mentions", load_mentions)
    monkeypatch.setattr(graph_merge, "_load_alias_free_scope", load_mentions)   # the merge of a scope without aliases
    monkeypatch.setenv("PATHRAG_DUCKDB_MEMORY_LIMIT", "2GB")

    line = one_line_error(CliRunner().invoke(main, ["index", str(folder)]))
    assert "DuckDB ran out of memory" in line and "failed to allocate data of size 2.0 GiB" in line
    assert "PATHRAG_DUCKDB_MEMORY_LIMIT=8GB" in line


@pytest.mark.e2e
def test_sql_that_runs_duckdb_out_of_memory_is_one_line_naming_the_setting(folder, monkeypatch) -> None:
    """After the huge_line.txt report even `pathrag sql` over the extractions ran out of memory; it says so in
    one line with the setting to raise, not as an 'SQL error' carrying DuckDB's list of SET statements."""
    assert CliRunner().invoke(main, ["index", str(folder)]).exit_code == 0
    monkeypatch.setenv("PATHRAG_DUCKDB_MEMORY_LIMIT", "8MB")  # a real out-of-memory error, not a stand-in

    result = CliRunner().invoke(main, ["sql", "SELECT string_agg(r::VARCHAR, ',') FROM range(3000000) t(r)"])

    line = one_line_error(result)
    assert "DuckDB ran out of memory" in line and "PATHRAG_DUCKDB_MEMORY_LIMIT=2GB" in line   # 4x 8MB < the default
    assert "SQL error" not in result.output and "Possible solutions" not in result.output


@pytest.mark.e2e
def test_sql_cannot_lift_its_limits_with_set(folder) -> None:
    """`SET memory_limit='20GB'` inside the statement used to lift the configured cap (15 GB peak measured)."""
    assert CliRunner().invoke(main, ["index", str(folder)]).exit_code == 0
    for statement in ("SET memory_limit='20GB'", "SET threads=64", "SET temp_directory='/tmp/elsewhere'",
                      "SET max_temp_directory_size='1TB'", "RESET memory_limit"):
        line = one_line_error(CliRunner().invoke(main, ["sql", statement]))
        assert "configuration has been locked" in line, statement
    shown = CliRunner().invoke(main, ["sql", "--csv", "SELECT current_setting('memory_limit') AS m, "
                                      "current_setting('max_temp_directory_size') AS t"])
    assert shown.exit_code == 0, shown.output
    memory, temp = shown.output.splitlines()[1].split(",")
    assert memory.startswith("1.8 GiB") and temp.startswith("3.7 GiB")     # 2GB and 4GB, DuckDB's units


@pytest.mark.e2e
def test_sql_statement_that_runs_too_long_is_stopped_in_one_line(folder, monkeypatch) -> None:
    assert CliRunner().invoke(main, ["index", str(folder)]).exit_code == 0
    endless = "SELECT count(*) FROM range(1000000000000) a"
    line = one_line_error(CliRunner().invoke(main, ["sql", "--timeout", "1", endless]))
    assert "ran longer than 1s and was stopped" in line and "PATHRAG_SQL_TIMEOUT" in line
    monkeypatch.setenv("PATHRAG_SQL_TIMEOUT", "1")
    line = one_line_error(CliRunner().invoke(main, ["sql", endless]))
    assert "ran longer than 1s" in line
    monkeypatch.setenv("PATHRAG_SQL_TIMEOUT", "soon")
    assert "PATHRAG_SQL_TIMEOUT='soon' is not a whole number" in CliRunner().invoke(main, ["sql", "SELECT 1"]).output


@pytest.mark.e2e
def test_sql_timeout_covers_fetching_and_printing_and_the_table_stops_at_its_row_cap(folder) -> None:
    """Issue 61: a statement that returns at once but yields millions of rows is stopped by --timeout while its
    rows stream out (it used to be fetched whole, then printed without limit); the table view shows its first
    1000 rows and says how to get the rest."""
    assert CliRunner().invoke(main, ["index", str(folder)]).exit_code == 0
    many = CliRunner().invoke(main, ["sql", "--timeout", "1", "--csv", "SELECT range AS i FROM range(5000000)"])
    assert many.exit_code == 1 and "ran longer than 1s and was stopped" in many.output
    assert many.output.startswith("i\n0\n1\n")                      # rows streamed before the stop
    table = CliRunner().invoke(main, ["sql", "SELECT range AS i FROM range(5000)"])
    assert table.exit_code == 0 and "the first 1000 rows" in table.output and "999" in table.output
    assert "│ 999 │" in table.output and "│ 1000" not in table.output
    streamed = CliRunner().invoke(main, ["sql", "--json", "SELECT range AS i FROM range(2500)"])
    assert streamed.exit_code == 0 and [r["i"] for r in json.loads(streamed.output)] == list(range(2500))


@pytest.mark.e2e   # a real spill to disk: end to end, run by .ci/run (pytest -m e2e)
def test_sql_spill_is_capped_and_removed_when_the_command_ends(folder, monkeypatch, tmp_path) -> None:
    """A heavy statement spills to a folder of its own, within PATHRAG_SQL_MAX_TEMP, removed at the end (also in a
    home whose spill folder does not exist yet: `pathrag bench sql-memory` found a sort failing there); a folder
    left by a killed session is removed by the next one."""
    assert CliRunner().invoke(main, ["index", str(folder)]).exit_code == 0
    spill_root = tmp_path / "home" / "duckdb_tmp"
    shutil.rmtree(spill_root, ignore_errors=True)
    monkeypatch.setenv("PATHRAG_DUCKDB_MEMORY_LIMIT", "64MB")
    sort = ("SELECT max(rn) FROM (SELECT row_number() OVER (ORDER BY hash(i)) AS rn, "
            "i::VARCHAR || repeat('x', 40) AS pad FROM range(20000000) t(i))")
    result = CliRunner().invoke(main, ["sql", "--csv", sort])
    # 20M rows of ~60 bytes sorted under a 64MB cap: only possible by spilling (about 800MB)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1] == "20000000"
    assert not any(spill_root.glob("sql-*"))                                  # nothing is left

    dead = spill_root / "sql-999999999-deadbeef"          # no such process
    dead.mkdir(parents=True)
    (dead / "duckdb_temp_block").write_bytes(b"x" * 1024)
    monkeypatch.setenv("PATHRAG_SQL_MAX_TEMP", "1MB")
    line = one_line_error(CliRunner().invoke(main, ["sql", sort]))
    assert "PATHRAG_SQL_MAX_TEMP" in line and not any(spill_root.glob("sql-*"))
    assert not dead.exists()


@pytest.mark.parametrize("command", [["index", "DOCS"], ["ask", "Who founded Valmere University?"], ["status"],
                                     ["sql", "SELECT 1"]])
def test_a_home_that_is_a_file_is_one_line_for_every_command(folder, tmp_path, monkeypatch, command) -> None:
    home = tmp_path / "not-a-folder"
    home.write_text("a file")
    monkeypatch.setenv("PATHRAG_HOME", str(home))
    args = [str(folder) if a == "DOCS" else a for a in command]
    line = one_line_error(CliRunner().invoke(main, args))
    assert f"PATHRAG_HOME={home} is a file" in line
    assert home.read_text() == "a file"


@pytest.mark.e2e
def test_a_rate_limit_that_never_lifts_stops_the_index_in_one_line(folder, monkeypatch,
                                                                   openai_server: FakeOpenAIServer) -> None:
    """Each chunk used to fail on its own after its retries, every one printed; a limit that does not lift now
    stops the client (RATE_LIMIT_STOP 429s in a row), in one line, like a dead endpoint."""
    from pathrag_pipeline.llm import transport

    monkeypatch.setattr(transport, "RATE_LIMIT_STOP", 3)
    openai_server.retry_after = "0"
    openai_server.inject("429", times=10_000)
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    line = one_line_error(CliRunner().invoke(main, ["index", str(folder), "--runless"]))
    assert "rate-limited 3 requests in a row" in line and "PATHRAG_LLM_MAX_CONCURRENCY" in line


def test_an_exhausted_quota_is_one_line_naming_the_key(folder, monkeypatch, openai_server: FakeOpenAIServer) -> None:
    openai_server.inject("quota", times=10_000)
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    monkeypatch.setenv("PATHRAG_LLM_API_KEY", SECRET)
    result = CliRunner().invoke(main, ["index", str(folder), "--runless"])
    line = one_line_error(result)
    assert "insufficient_quota" in line and "PATHRAG_LLM_API_KEY" in line and SECRET not in result.output
    assert openai_server.count("chat") == 1                     # not retried: no retry can add credit


@pytest.mark.e2e
def test_a_chunk_given_up_is_left_alone_by_index_until_retry_failed(folder, monkeypatch,
                                                                   openai_server: FakeOpenAIServer) -> None:
    """Issue 27: a chunk the model cannot extract used to be retried on every run, at the full cost each time."""
    from tests.extraction_fakes import FakeExtractionModel

    model = FakeExtractionModel(poison={"Valmere"})   # never JSON for this chunk
    openai_server.chat_responder = model
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    for _ in range(3):
        assert CliRunner().invoke(main, ["index", str(folder), "--runless"]).exit_code == 0
    calls = openai_server.count("chat")
    result = CliRunner().invoke(main, ["index", str(folder), "--runless"])
    assert result.exit_code == 0 and openai_server.count("chat") == calls
    assert "Up to date, no run launched" in result.output
    assert "1 left alone after failing 3 runs in a row (--retry-failed retries them)" in " ".join(result.output.split())
    status = CliRunner().invoke(main, ["status", "--json"])
    import json

    assert json.loads(status.stdout)["graph"]["given_up_extractions"] == 1
    model.poison.clear()
    result = CliRunner().invoke(main, ["index", str(folder), "--runless", "--retry-failed"])
    assert result.exit_code == 0 and openai_server.count("chat") > calls
    assert json.loads(CliRunner().invoke(main, ["status", "--json"]).stdout)["graph"]["failed_extractions"] == 0


def test_each_failed_chunk_is_printed_once(folder, monkeypatch, openai_server: FakeOpenAIServer, caplog) -> None:
    """Issue 27: every chunk failure was printed twice (the stage's warning line, then again in the report)."""
    import logging

    from tests.extraction_fakes import FakeExtractionModel

    caplog.set_level(logging.WARNING, logger="pathrag_pipeline.index")
    openai_server.chat_responder = FakeExtractionModel(poison={"Valmere"})
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    result = CliRunner().invoke(main, ["index", str(folder), "--runless"])
    assert result.exit_code == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "pathrag_pipeline.index"] + [result.output]
    assert sum(line.count("output still invalid") for line in lines) == 1, lines
    assert "1 chunk(s) failed" in result.output


@pytest.mark.e2e
def test_index_from_a_bad_triples_file_is_one_line_and_keeps_the_index(folder, tmp_path) -> None:
    """A triples file with no triple in it is the user's to fix: one line naming the file and the line, as every
    other bad input gets (it was a Dagster step's traceback of ~100 lines), and what was indexed stays."""
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.storage.store import Store

    assert CliRunner().invoke(main, ["index", str(folder)]).exit_code == 0
    store = Store(Settings.from_env().duckdb_path)
    with store.connect(read_only=True) as con:
        before = con.execute("SELECT count(*) FROM extractions").fetchone()[0]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    line = one_line_error(CliRunner().invoke(main, ["index", str(folder), "--triples", str(bad)]))
    assert f"{bad}:1: not JSON" in line
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM extractions").fetchone()[0] == before > 0


def test_bench_ingest_with_too_few_documents_is_one_line_naming_the_option(tmp_path) -> None:
    result = CliRunner().invoke(main, ["bench", "ingest", "--docs", "5", "--repeats", "1", "--workdir",
                                       str(tmp_path / "w")])
    line = one_line_error(result)
    assert "--docs" in line and "at least 22" in line


class DagsterExecutionInterruptedError(BaseException):
    """Named as Dagster's own: a BaseException an in-process run raises from the step on Ctrl-C."""


@pytest.mark.parametrize("raised", [KeyboardInterrupt, DagsterExecutionInterruptedError])
def test_ctrl_c_is_one_line_and_exit_130(raised, monkeypatch) -> None:
    """Issue 61, item 5: Ctrl-C during a command (a Dagster run turns it into its own error) prints one line."""
    import click

    from pathrag_pipeline.cli import main as root
    from pathrag_pipeline.cli.lazy import LazyGroup

    @click.command()
    def busy() -> None:
        raise raised()

    monkeypatch.setattr(LazyGroup, "get_command", lambda self, ctx, name: busy if name == "busy" else None)
    result = CliRunner().invoke(root, ["busy"])
    assert result.exit_code == 130
    assert result.output.strip() == "Interrupted: what was finished is kept; run the same command again to go on."


@pytest.mark.e2e   # index runs with failing batches: run by .ci/run (pytest -m e2e)
def test_an_index_that_left_rows_unembedded_exits_non_zero_saying_partial(folder, monkeypatch,
                                                                          openai_server: FakeOpenAIServer) -> None:
    """Issue 61, item 3: a run whose embedding batches failed for some rows used to exit 0. It now says
    "partial" in one line (exit 1); the next run embeds the rows and exits 0."""
    from pathrag_lab.testing.openai_server import hash_embedding

    failing = {"on": True}

    def responder(texts, model):
        if failing["on"] and any("Port Aster" in t and " | " in t for t in texts):   # the relations' batch
            return {"object": "list", "data": [], "model": model}   # this batch never gets its vectors
        return [hash_embedding(t) for t in texts]

    openai_server.embed_responder = responder
    monkeypatch.setenv("PATHRAG_EMBED_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_EMBED_MODEL", "fake-embed")
    line = one_line_error(CliRunner().invoke(main, ["index", str(folder)]))
    assert line.startswith("Error: partial:") and "run `pathrag index` again" in line
    # status says the index is partial, and an answer says what it could not see (it still answers)
    left = json.loads(CliRunner().invoke(main, ["status", "--json"]).output)["unembedded"]
    assert left and all(n > 0 for n in left.values())
    assert set(left) == {"relations"}
    asked = CliRunner().invoke(main, ["ask", "Who founded Valmere University?"])
    assert asked.exit_code == 0, asked.output
    assert "note: partial index:" in asked.stderr and "`pathrag index` embeds them" in asked.stderr
    assert "Answer" in asked.stdout
    failing["on"] = False
    again = CliRunner().invoke(main, ["index", str(folder)])
    assert again.exit_code == 0, again.output
    assert "failed (retried next run)" not in again.output and "Up to date" not in again.output
    assert json.loads(CliRunner().invoke(main, ["status", "--json"]).output)["unembedded"] == {}
    assert "partial index" not in CliRunner().invoke(main, ["ask", "Who founded Valmere University?"]).stderr


@pytest.mark.e2e
def test_an_ask_over_a_vector_table_left_empty_by_failed_batches_says_why_and_how_to_mend_it(
        folder, monkeypatch, openai_server: FakeOpenAIServer) -> None:
    """Issue 61: every chunk's batch failed, so naive mode has no vector to search: the error names the rows the
    last run left without vectors and the command that embeds them (not "index documents")."""
    from pathrag_lab.testing.openai_server import hash_embedding

    def responder(texts, model):
        if any("# Valmere" in t for t in texts):   # the chunk's batch (its text keeps the heading)
            return {"object": "list", "data": [], "model": model}
        return [hash_embedding(t) for t in texts]

    openai_server.embed_responder = responder
    monkeypatch.setenv("PATHRAG_EMBED_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_EMBED_MODEL", "fake-embed")
    assert one_line_error(CliRunner().invoke(main, ["index", str(folder)])).startswith("Error: partial:")
    line = one_line_error(CliRunner().invoke(main, ["ask", "Who founded Valmere University?", "--mode", "naive"]))
    assert "the last index run left its 1 row(s) without vectors" in line and "run `pathrag index`" in line
