"""`pathrag ask --html FILE` and `--show QUERY_ID`: an answer as one self-contained page (issue 63)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.storage.store import Store
from tests.query_fixtures import tiny_index_home

QUESTION = "Which sea does the river of the city where Aldermere University stands flow into?"


class _Page(HTMLParser):
    """The page read as a browser's DOM would hold it: node names, edge relations, passages, scripts, links."""

    def __init__(self) -> None:
        super().__init__()
        self.nodes, self.seeds, self.edges, self.external, self.scripts = [], [], [], [], 0
        self.passages, self.top_passages, self._passage, self._in_pre = [], [], None, False
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "g" and "node" in classes:
            self.nodes.append(a["data-name"])
            if "seed" in classes:
                self.seeds.append(a["data-name"])
        if tag == "g" and "edge" in classes:
            self.edges.append(a["data-relation"])
        if tag == "script":
            self.scripts += 1
        for key in ("src", "href"):
            if (a.get(key) or "").startswith(("http:", "https:", "//")):
                self.external.append(a[key])
        if tag == "div" and "passage" in classes:
            self._passage = "top" in classes
        if tag == "pre" and self._passage is not None:
            self._in_pre = True

    def handle_endtag(self, tag):
        if tag == "pre" and self._in_pre:
            self._in_pre, self._passage = False, None

    def handle_data(self, data):
        self.text.append(data)
        if self._in_pre:
            (self.top_passages if self._passage else self.passages).append(data)


def read_page(path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.fixture
def settings(tmp_path, monkeypatch):
    return tiny_index_home(tmp_path, monkeypatch)


def test_an_answer_page_draws_every_path_entity_once_and_quotes_the_top_paths_passage(settings, tmp_path):
    out = tmp_path / "answer.html"
    result = CliRunner().invoke(main, ["ask", QUESTION, "--local", "--html", str(out)])
    assert result.exit_code == 0, result.output
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        query_id, answer = con.execute("SELECT query_id, answer FROM queries ORDER BY asked_at DESC").fetchone()
        paths = con.execute("SELECT node_names, edge_ids, chunk_ids FROM path_traces WHERE query_id = ? ORDER BY rank",
                            [query_id]).fetchall()
        top_text = con.execute("SELECT text FROM chunks WHERE id = ?", [paths[0][2][0]]).fetchone()[0]
    page = read_page(out)
    assert paths, "the question keeps paths"
    assert sorted(page.nodes) == sorted({n for nodes, _, _ in paths for n in nodes})     # one node per entity
    assert set(page.edges) == {e for _, edges, _ in paths for e in edges}
    assert page.seeds and set(page.seeds) <= set(page.nodes)
    assert answer.split()[-1] in "".join(page.text)                                        # the answer, as logged
    assert top_text[:60] in "".join(page.top_passages)                                    # the top path's passage
    assert page.scripts == 0 and page.external == []                                       # nothing to fetch
    assert re.search(r'<line [^>]*stroke-width="[\d.]+"', out.read_text())

    # the same ask drawn again from the log
    again = tmp_path / "again.html"
    shown = CliRunner().invoke(main, ["ask", "--show", query_id, "--html", str(again)])
    assert shown.exit_code == 0, shown.output
    assert sorted(read_page(again).nodes) == sorted(page.nodes) and set(read_page(again).edges) == set(page.edges)


def test_the_page_is_written_when_the_answer_cannot_be_printed_and_an_unwritable_page_after_it(settings, tmp_path,
                                                                                              monkeypatch):
    """`pathrag ask --html FILE | head -1`: the pipe closes while the answer prints; the page is written first."""
    from pathrag_pipeline.cli import ask as ask_command

    def closed_pipe(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")

    printing = ask_command.print_result
    monkeypatch.setattr(ask_command, "print_result", closed_pipe)
    out = tmp_path / "piped.html"
    CliRunner().invoke(main, ["ask", QUESTION, "--local", "--html", str(out)])
    assert read_page(out).nodes
    monkeypatch.setattr(ask_command, "print_result", printing)
    result = CliRunner().invoke(main, ["ask", QUESTION, "--local", "--html", str(tmp_path / "no" / "such" / "x.html")])
    assert result.exit_code == 1 and "cannot write the page to" in result.output
    assert "Extractive answer" in result.output or "Answer" in result.output     # the answer was printed first


def test_an_answer_heading_names_the_settings_that_differ_from_the_modes_defaults(settings):
    default = CliRunner().invoke(main, ["ask", QUESTION, "--local"])
    assert "Answer (extractive, offline, mode path):" in default.stdout
    paper = CliRunner().invoke(main, ["ask", QUESTION, "--local", "--preset", "paper"])
    heading = paper.stdout.split("):", 1)[0]
    assert heading.startswith("Answer (extractive, offline, mode path, with ") and "prompt=paths" in heading
    naive = CliRunner().invoke(main, ["ask", QUESTION, "--local", "--mode", "naive", "--set", "top_n=5"])
    assert "Answer (extractive, offline, mode naive, with top_n=5):" in naive.stdout


def test_an_unknown_query_id_and_a_missing_file_option_are_one_line_each(settings, tmp_path):
    result = CliRunner().invoke(main, ["ask", "--show", "nope", "--html", str(tmp_path / "x.html")])
    assert result.exit_code == 1 and "no ask with query id 'nope'" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "x.html").exists()
    result = CliRunner().invoke(main, ["ask", "--show", "nope"])
    assert result.exit_code == 2 and "give --html FILE" in result.output
    result = CliRunner().invoke(main, ["ask"])
    assert result.exit_code == 2 and "give a QUESTION" in result.output


def test_a_home_with_no_index_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "empty-home"))
    result = CliRunner().invoke(main, ["ask", "--show", "abc", "--html", str(tmp_path / "x.html")])
    assert result.exit_code == 1 and "no index in" in result.output and "pathrag index FOLDER" in result.output
