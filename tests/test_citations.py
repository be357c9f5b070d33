"""An answer's citations: each [n] the same source, at the same number, in the answer, `--json`'s `citations`, the
page (`--html`) and the terminal; the page shows the passage the quoted sentences came from.

A user of Python's documentation found `[1] reference/simple_stmts.html > 7.13. The nonlocal statement` in the answer
and `[1] library/symtable.html` on the page: the page numbered the retrieved passages in retrieval's order, which is
not the answer's, and cut each to its first 700 characters, where the quoted sentences were not.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.query.params import MODES
from pathrag_pipeline.storage.store import Store
from tests.query_fixtures import tiny_index_home

QUESTION = "Which sea does the river of the city where Aldermere University stands flow into?"
# the keys `pathrag ask --json` printed before `citations` was added: a public interface, never renamed or removed
JSON_KEYS = {"query_id", "question", "mode", "asked_at", "answer", "answer_kind", "provider", "model", "params",
             "keywords", "paths", "retrieved_nodes", "chunk_ids", "document_ids", "timings_ms", "tokens", "total_ms",
             "llm_calls", "llm_tokens"}


class _Passages(HTMLParser):
    """The page's passage boxes in order: (label line, text, classes, id), as a browser shows them."""

    def __init__(self) -> None:
        super().__init__()
        self.boxes: list[dict] = []
        self._where: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "div" and "passage" in classes:
            self.boxes.append({"meta": "", "text": "", "classes": classes, "id": a.get("id")})
        elif self.boxes and tag == "div" and "meta" in classes and not self.boxes[-1]["meta"]:
            self._where = "meta"
        elif self.boxes and tag == "pre":
            self._where = "text"

    def handle_endtag(self, tag):
        if (tag, self._where) in (("div", "meta"), ("pre", "text")):
            self._where = None

    def handle_data(self, data):
        if self._where:
            self.boxes[-1][self._where] += data


def passages(path) -> list[dict]:
    parser = _Passages()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.boxes


def numbered_sources(answer: str) -> list[tuple[int, str]]:
    """The answer's closing "Sources: [1] a.md; [2] b.md > Section" line as [(1, "a.md"), (2, "b.md > Section")]."""
    line = answer.rpartition("\nSources: ")[2]
    return [(int(n), source) for n, source in re.findall(r"\[(\d+)\] ([^;]+)", line)]


def words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text))


@pytest.fixture
def settings(tmp_path, monkeypatch):
    return tiny_index_home(tmp_path, monkeypatch)


@pytest.mark.parametrize("mode", MODES)
def test_each_citation_is_the_same_source_at_the_same_number_in_the_answer_json_and_page(settings, tmp_path, mode):
    """Every mode's offline answer. In local, hybrid and neuropath mode retrieval ranks aldermere.md first while
    the answer cites brackwater.md as [1]: the page numbered by retrieval showed them swapped."""
    page = tmp_path / f"{mode}.html"
    result = CliRunner().invoke(main, ["ask", QUESTION, "--local", "--mode", mode, "--json", "--html", str(page)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert JSON_KEYS <= set(data)                                           # every key kept, `citations` added
    sources = numbered_sources(data["answer"])
    assert sources, data["answer"]
    # the page's numbered boxes: the answer's numbers, in its order, each naming that number's document
    boxes = passages(page)
    numbered = [b for b in boxes if re.match(r"\[\d+\] ", b["meta"])]
    assert [re.match(r"\[(\d+)\] (\S+)", b["meta"]).groups() for b in numbered] == [
        (str(n), source.split(" > ")[0]) for n, source in sources]

    citations = data["citations"]
    assert [(c["n"], c["source"]) for c in citations] == sources
    for c in citations:
        assert c["source"] == " > ".join(part for part in (c["document"], c["section"]) if part)
        assert c["chunk_ids"] and set(c["chunk_ids"]) <= set(data["chunk_ids"]) and c["quotes"]
        for quote in c["quotes"]:                                           # the answer says each quote, marked [n]
            assert f"{quote} [{c['n']}]" in data["answer"]

    cited = [b for b in boxes if "cited" in b["classes"]]
    assert cited == numbered and [re.match(r"\[\d+\] (\S+)", b["meta"]).group(1) for b in cited] == [
        c["document"] for c in citations]
    for box, c in zip(cited, citations):
        assert box["id"] == f"cite-{c['n']}"                                # the answer's [n] links here
        for quote in c["quotes"]:                                           # the passage shows what was quoted
            assert words(quote) in words(box["text"])
    # the other retrieved passages carry no bracketed number, which only the answer's citations have
    others = [b for b in boxes if "cited" not in b["classes"]]
    assert all(not re.match(r"\s*\[\d+\]", b["meta"]) and b["meta"].startswith("retrieved #") for b in others)


def test_a_logged_ask_drawn_again_shows_the_same_citations_and_an_older_one_says_it_has_none(settings, tmp_path):
    first = tmp_path / "first.html"
    result = CliRunner().invoke(main, ["ask", QUESTION, "--local", "--mode", "hybrid", "--html", str(first)])
    assert result.exit_code == 0, result.output
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        query_id, logged = con.execute("SELECT query_id, citations FROM queries").fetchone()
    assert [c["n"] for c in json.loads(logged)] == [1, 2]
    again = tmp_path / "again.html"
    shown = CliRunner().invoke(main, ["ask", "--show", query_id, "--html", str(again)])
    assert shown.exit_code == 0, shown.output
    assert [b["meta"] for b in passages(again)] == [b["meta"] for b in passages(first)]

    # an ask logged before citations were recorded: its retrieved passages, unnumbered, and a note saying why
    with Store(settings.duckdb_path).connect() as con:
        con.execute("UPDATE queries SET citations = NULL")
    older = tmp_path / "older.html"
    assert CliRunner().invoke(main, ["ask", "--show", query_id, "--html", str(older)]).exit_code == 0
    assert not any("cited" in b["classes"] or b["meta"].startswith("[") for b in passages(older))
    assert "logged before the answer's citations were recorded" in older.read_text()


def test_the_terminal_labels_the_cited_sources_apart_from_the_retrieved_documents(settings):
    result = CliRunner().invoke(main, ["ask", QUESTION, "--local", "--mode", "hybrid"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert not any(line.startswith("Sources:") for line in lines)          # one word for two lists confused users
    cited = [line for line in lines if line.startswith("Cited: ")]
    assert cited == ["Cited: [1] brackwater.md; [2] aldermere.md"]
    retrieved = [line for line in lines if line.startswith("Retrieved documents: ")]
    assert len(retrieved) == 1 and "aldermere.md" in retrieved[0] and "kettle.md" in retrieved[0]


def test_a_long_passage_is_shown_around_its_quoted_sentence_with_it_marked(settings, tmp_path):
    """The quoted sentence lies past the first 700 characters of its passage (a page's section far down a chunk):
    the page shows it, marked, not the passage's opening."""
    filler = " ".join(f"Paragraph {i} of the harbour records lists ships and cargo." for i in range(40))
    with Store(settings.duckdb_path).connect() as con:
        con.execute("UPDATE chunks SET text = ? || ' ' || text WHERE id = 'chunk-brackwater'", [filler])
    page = tmp_path / "long.html"
    result = CliRunner().invoke(main, ["ask", QUESTION, "--local", "--mode", "naive", "--json", "--html", str(page)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    river = next(c for c in data["citations"] if c["document"] == "brackwater.md")
    box = next(b for b in passages(page) if b["id"] == f"cite-{river['n']}")
    assert "The Varne River flows into the Grey Sea" in box["text"] and box["text"].startswith("…")
    assert "<mark>The Varne River flows into the Grey Sea</mark>" in page.read_text()


def test_an_llm_answer_numbers_no_source_and_its_page_says_its_passages_are_context(settings, tmp_path, monkeypatch,
                                                                                   openai_server):
    """The answer prompt asks for no numbered sources: an LLM's answer has an empty `citations`, and its page lists
    the retrieved passages as context, with no [n]."""
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    openai_server.script_chat(["The Varne River flows into the Grey Sea."])
    page = tmp_path / "llm.html"
    result = CliRunner().invoke(main, ["ask", QUESTION, "--local", "--json", "--html", str(page)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["answer_kind"] == "llm" and data["answer"] == "The Varne River flows into the Grey Sea."
    assert JSON_KEYS <= set(data) and data["citations"] == []
    boxes = passages(page)
    assert boxes and all("cited" not in b["classes"] and b["meta"].startswith("retrieved #") for b in boxes)
    assert "the answer numbers no source" in page.read_text()
