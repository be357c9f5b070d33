"""A page's source file beside the rendered page is indexed once, as the page (ingest/page_sources.py)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.ingest.page_sources import page_sources, rendered_page, sources_of_deleted_pages


def test_the_sources_sphinx_and_asciidoc_ship_beside_their_pages_are_known():
    paths = ["index.html", "index.txt", "_sources/index.rst.txt", "usage/cli.html", "_sources/usage/cli.txt",
             "api/_sources/ref.md.txt", "api/ref.html", "notes.txt", "_sources/gone.rst.txt", "other.htm"]
    assert page_sources(paths) == {"index.txt": "index.html", "_sources/index.rst.txt": "index.html",
                                   "_sources/usage/cli.txt": "usage/cli.html", "api/_sources/ref.md.txt": "api/ref.html"}
    assert rendered_page("notes.txt", {"index.html"}) is None            # no page of its own: indexed
    assert rendered_page("_sources/gone.rst.txt", {"index.html"}) is None  # its page is not in the folder
    assert page_sources(["a.txt", "b.md"]) == {}


def test_a_source_indexed_because_its_page_was_deleted_is_named():
    assert sources_of_deleted_pages(["_sources/io.rst.txt", "new.txt", "c.txt"], ["io.html", "b.html"]) == \
        {"_sources/io.rst.txt": "io.html"}
    assert sources_of_deleted_pages(["new.txt"], ["new.html", "x.md"]) == {"new.txt": "new.html"}
    assert sources_of_deleted_pages(["a.txt"], []) == {} and sources_of_deleted_pages([], ["a.html"]) == {}


@pytest.mark.e2e
def test_an_index_reads_the_page_not_its_source_and_a_home_that_held_both_drops_the_source(home, tmp_path):
    docs = tmp_path / "docs"
    (docs / "_sources").mkdir(parents=True)
    page = "<html><head><title>Widgets</title></head><body><h1>Widgets</h1><p>Use widget.spin() to turn one.</p></body></html>"
    (docs / "widgets.html").write_text(page)
    (docs / "_sources" / "widgets.rst.txt").write_text("Widgets\n=======\n\nUse ``widget.spin()`` to\nturn one.\n")
    (docs / "notes.txt").write_text("Notes\n\nWidgets are blue.\n")
    result = CliRunner().invoke(main, ["index", str(docs)])
    assert result.exit_code == 0, result.output
    assert "skipped 1 source file(s) of rendered pages" in result.output and "_sources/widgets.rst.txt" in result.output
    listed = CliRunner().invoke(main, ["sql", "SELECT path FROM documents ORDER BY path", "--csv"]).output.split()
    assert listed == ["path", "notes.txt", "widgets.html"]
    # the page goes: its source is a document of its own again
    (docs / "widgets.html").unlink()
    result = CliRunner().invoke(main, ["index", str(docs)])
    assert result.exit_code == 0, result.output
    assert "indexed 1 source file(s) of pages deleted in this run" in " ".join(result.output.split())
    listed = CliRunner().invoke(main, ["sql", "SELECT path FROM documents ORDER BY path", "--csv"]).output.split()
    assert listed == ["path", "_sources/widgets.rst.txt", "notes.txt"]
