"""The folder-level guard: a line on most of the folder's documents is template text, left out of every chunk, and the
set stays right under edits and deletes (the documents holding a line that crosses the threshold are cut again)."""

from __future__ import annotations

import pytest

from pathrag_pipeline.config import Settings
from pathrag_pipeline.index.offline_extraction import OFFLINE_EXTRACTOR_ID
from pathrag_pipeline.index.pending_work import find_pending_work
from pathrag_pipeline.ingest import template_lines
from pathrag_pipeline.ingest.folder_sync import sync_folder
from pathrag_pipeline.storage.store import Store

FOOTER = "Copyright 2024 the Varne Valley Trust. Report a bug."


def page(i: int, footer: bool = True) -> str:
    body = f"# Page {i}\n\nThe gauge at site {i} was read by observer number {i} every morning of the survey."
    return body + (f"\n\n{FOOTER}\n" if footer else "\n")


@pytest.fixture
def folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"page{i}.md").write_text(page(i), encoding="utf-8")
    settings = Settings.from_env(env={}, home=tmp_path / "home", docs=docs)
    return settings, docs, Store.for_settings(settings)


def chunk_texts(store) -> dict[str, str]:
    with store.connect(read_only=True) as con:
        return dict(con.execute("SELECT document_id, string_agg(text, ' ') FROM chunks GROUP BY 1").fetchall())


def stored_template(store) -> list[str]:
    with store.connect(read_only=True) as con:
        return [r[0] for r in con.execute("SELECT line FROM template_lines ORDER BY line").fetchall()]


def test_a_line_on_most_documents_leaves_every_chunk_and_stays_in_the_documents(folder):
    settings, docs, store = folder
    sync_folder(settings, folder=docs)
    assert stored_template(store) == [FOOTER]
    texts = chunk_texts(store)
    assert len(texts) == 6 and not [t for t in texts.values() if "Report a bug" in t]
    assert all("observer number" in t for t in texts.values())
    with store.connect(read_only=True) as con:
        kept = con.execute("SELECT count(*) FROM documents WHERE contains(text, 'Report a bug')").fetchone()[0]
    assert kept == 6   # documents.text keeps what the chunks leave out


def test_edits_and_deletes_that_move_a_line_across_the_threshold_cut_its_documents_again(folder):
    settings, docs, store = folder
    sync_folder(settings, folder=docs)
    # four of six pages lose the footer: two of six is not most of the folder, so the last two get it back
    for i in range(4):
        (docs / f"page{i}.md").write_text(page(i, footer=False), encoding="utf-8")
    sync_folder(settings, folder=docs)
    assert stored_template(store) == []
    texts = chunk_texts(store)
    assert "Report a bug" in texts["page4.md"] and "Report a bug" in texts["page5.md"]
    # pages come back with it, and deleting the ones without it makes it most of the folder again
    for i in range(6, 10):
        (docs / f"page{i}.md").write_text(page(i), encoding="utf-8")
    for i in range(4):
        (docs / f"page{i}.md").unlink()
    sync_folder(settings, folder=docs)
    assert stored_template(store) == [FOOTER]
    assert not [t for t in chunk_texts(store).values() if "Report a bug" in t]
    assert find_pending_work(settings, docs, OFFLINE_EXTRACTOR_ID, "x").reasons != []   # extraction still to run
    with store.connect(read_only=True) as con:
        assert template_lines.is_current(con)


def test_headings_and_short_lines_are_never_template_lines():
    assert template_lines.line_key("## Options") is None and template_lines.line_key("```") is None
    assert template_lines.line_key("| 1 |") is None
    assert template_lines.line_key("Report  a bug") == template_lines.line_key("  Report a bug ")
    kept, runs = template_lines.without_template("a line\nfooter line\nlast line", frozenset(
        {template_lines.line_key("footer line")}))
    assert kept == "a line\nlast line"
    assert template_lines.original_offset(runs, kept.index("last")) == len("a line\nfooter line\n")


def test_a_small_folder_has_no_template_lines():
    assert template_lines.threshold(3) == template_lines.TEMPLATE_MIN_DOCUMENTS
    assert template_lines.threshold(100) == 50


def test_a_template_line_is_shown_as_a_document_s_text_holds_it(tmp_path):
    """``template_lines.line`` comes from a document whose text holds the line: the first page by id may hold it only
    in its furniture (outside its main content), where no text of it is kept (the trial's rows were all '')."""
    docs = tmp_path / "docs"
    docs.mkdir()
    line = "Maintained by the Varne Valley Trust for all the river gauges."
    for i, name in enumerate(["a", "b", "c", "d", "x", "y"]):
        body = (f"<h1>Gauge {i}</h1><p>The gauge at site {i} was read by observer number {i} every morning of the "
                "survey, and its readings went to the county office each week.</p>")
        inside = f"<p>{line}</p>" if name in "xy" else ""   # two pages keep it in their main content
        (docs / f"{name}.html").write_text(f"<html><head><title>Gauge {i}</title></head><body><main>{body}{inside}"
                                           f"</main><div class=\"footer\"><p>{line}</p></div></body></html>", encoding="utf-8")
    settings = Settings.from_env(env={}, home=tmp_path / "home", docs=docs)
    store = Store.for_settings(settings)
    sync_folder(settings, folder=docs)
    assert line in stored_template(store)
    with store.connect() as con:   # a home written before the fix: its row without the text is filled in
        con.execute("UPDATE template_lines SET line = ''")
        template_lines.refresh(con)
    assert line in stored_template(store)


def test_a_first_build_counts_each_chunk_once_though_its_pages_are_cut_again(folder):
    """A first build finds the template lines after cutting every page and cuts those pages again: the report's
    "chunks written" counted both cuts (python3-doc: 3,064 written for 2,398 chunks). Then an edit that moves the
    footer below the threshold cuts the other pages again: those count as re-cut, apart from the edited file's."""
    settings, docs, store = folder
    report = sync_folder(settings, folder=docs)
    with store.connect(read_only=True) as con:
        held = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
    assert report.chunks_written == held == 6 and report.rechunked_chunks == 0
    for i in range(3):   # 3 of 6 pages keep the footer: under the threshold of 5 documents, no template line
        (docs / f"page{i}.md").write_text(page(i, footer=False), encoding="utf-8")
    report = sync_folder(settings, folder=docs)
    assert stored_template(store) == []
    assert [r.chunks_written for r in report.results] == [1, 1, 1] and report.rechunked_chunks == 3
