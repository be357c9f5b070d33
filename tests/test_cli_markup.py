"""Data is never terminal markup: text from documents, file names and errors prints exactly as it is
(issue 10, item 8). rich reads `[...]` as a style tag unless told otherwise."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.cli.ask import print_result
from pathrag_pipeline.cli.common import esc, plain, print_table

TEXT = "Ada Halden kept her notes in [/home] and wrote [citation needed] about the Drayton Railway."


@pytest.fixture()
def folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes [draft].txt").write_text("Drayton\n\n" + TEXT + "\n")
    (docs / "broken [old].txt").write_text("")          # empty: an error naming the file
    return docs


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.e2e
def test_sql_prints_bracketed_text_literally(home, folder):
    assert run("index", str(folder)).exit_code == 0
    out = run("sql", "SELECT text FROM documents WHERE status = 'indexed'")
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())
    assert "[/home]" in flat and "[citation needed]" in flat


@pytest.mark.e2e
def test_index_error_names_the_file_with_its_brackets(home, folder):
    out = run("index", str(folder))
    assert out.exit_code == 0, out.output
    assert "broken [old].txt" in out.output


@pytest.mark.e2e
def test_ask_prints_bracketed_text_in_answer_and_paths(home, folder):
    assert run("index", str(folder)).exit_code == 0
    out = run("ask", "Where did Ada Halden keep her notes?", "--mode", "naive")
    assert out.exit_code == 0, out.output
    assert "[/home]" in out.output and "notes [draft].txt" in out.output


def test_print_helpers_never_parse_markup(capsys):
    from pathrag_pipeline.cli import common

    print_table(["name [x]"], [("[/home]",), ("[citation needed]",), ("[bold]",)], title="T [/red]")
    out = capsys.readouterr().out
    for text in ("name [x]", "[/home]", "[citation needed]", "[bold]", "T [/red]"):
        assert text in out
    common.console.print(f"[yellow]error[/yellow] {esc('notes [draft].txt')}")
    assert "notes [draft].txt" in capsys.readouterr().out
    assert plain("[/x]").plain == "[/x]"


def test_paths_table_prints_node_names_literally(capsys):
    from types import SimpleNamespace

    from pathrag_pipeline.cli.common import console

    path = SimpleNamespace(rank=1, reliability=0.5, hops=1, nodes=["[/home]", "[citation needed]"],
                           document_ids=["notes [draft].txt"])
    result = SimpleNamespace(answer_kind="extractive", model="[offline]", answer="see [/home]", paths=[path],
                             mode="path", document_ids=["notes [draft].txt"], timings_ms={"total": 1.0},
                             query_id="q[1]", total_ms=1.0)
    print_result(result, console)
    out = " ".join(capsys.readouterr().out.split())
    for text in ("[/home] -> [citation needed]", "notes [draft].txt", "[offline]", "q[1]"):
        assert text in out


def test_answer_heading_names_the_mode_once_and_the_paths_shown(capsys):
    from types import SimpleNamespace

    from pathrag_pipeline.cli.common import console
    from pathrag_pipeline.query.answering import EXTRACTIVE_LABEL

    paths = [SimpleNamespace(rank=i, reliability=1 / i, hops=1, nodes=["A", f"B{i}"], document_ids=["a.md"])
             for i in range(1, 8)]
    result = SimpleNamespace(answer_kind="extractive", model="offline", answer=f"{EXTRACTIVE_LABEL} Ada founded it.",
                             paths=paths, mode="path", document_ids=["a.md"], timings_ms={"total": 1.0},
                             query_id="q1", total_ms=1.0)
    print_result(result, console, max_paths=5)
    out = " ".join(capsys.readouterr().out.split())
    assert "Answer (extractive, offline, mode path): Ada founded it." in out
    assert EXTRACTIVE_LABEL not in out  # the heading says it; the stored answer keeps its label
    assert "showing 5 of 7 kept" in out and "A -> B6" not in out
    result.mode = "neuropath"
    print_result(result, console)
    out = " ".join(capsys.readouterr().out.split())
    assert "tracker's best" in out and "7 kept" in out and "showing" not in out
