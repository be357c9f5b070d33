"""Expected failures of the model endpoints reach the user of `pathrag index` and `pathrag ask` as one line
plus what to do, with a non-zero exit and no traceback (issue 10 item 9), and never with the key (item 7)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.testing.openai_server import FakeOpenAIServer

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


def test_ask_with_the_llm_stopped_is_one_line(folder, monkeypatch, openai_server: FakeOpenAIServer) -> None:
    assert CliRunner().invoke(main, ["index", str(folder)]).exit_code == 0  # offline index
    openai_server.unsupported_formats = {"json_schema"}
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    monkeypatch.setenv("PATHRAG_LLM_MODE", "json_schema")

    line = one_line_error(CliRunner().invoke(main, ["ask", "Who founded Valmere University?"]))
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
    monkeypatch.setenv("PATHRAG_DUCKDB_MEMORY_LIMIT", "2GB")

    line = one_line_error(CliRunner().invoke(main, ["index", str(folder)]))
    assert "DuckDB ran out of memory" in line and "failed to allocate data of size 2.0 GiB" in line
    assert "PATHRAG_DUCKDB_MEMORY_LIMIT=8GB" in line


def test_sql_that_runs_duckdb_out_of_memory_is_one_line_naming_the_setting(folder, monkeypatch) -> None:
    """After the huge_line.txt report even `pathrag sql` over the extractions ran out of memory; it says so in
    one line with the setting to raise, not as an 'SQL error' carrying DuckDB's list of SET statements."""
    assert CliRunner().invoke(main, ["index", str(folder)]).exit_code == 0
    monkeypatch.setenv("PATHRAG_DUCKDB_MEMORY_LIMIT", "8MB")  # a real out-of-memory error, not a stand-in

    result = CliRunner().invoke(main, ["sql", "SELECT string_agg(r::VARCHAR, ',') FROM range(3000000) t(r)"])

    line = one_line_error(result)
    assert "DuckDB ran out of memory" in line and "PATHRAG_DUCKDB_MEMORY_LIMIT=32MB" in line
    assert "SQL error" not in result.output and "Possible solutions" not in result.output
