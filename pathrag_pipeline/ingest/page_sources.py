"""Source files of rendered pages: indexed once, as the page.

Documentation generators ship the text a page was made from beside the page: Sphinx copies every page's
reStructuredText (or Markdown) source to ``_sources/PAGE.rst.txt`` (``PAGE.txt`` in older versions) for its "Show
Source" link, and asciidoc builds such as Debian's git-doc install ``git-rebase.txt`` beside ``git-rebase.html``.
Indexed as well, each page counted twice: its source read as plain text, hard-wrapped lines and markup included
(``.. code-block::``, ``linkgit:git-log[1]``), competes with the page for every question, and an LLM extraction pays
for both. The rendered page is the better reading (headings, lists, tables, code blocks as such), so a ``.txt`` file
that is a page's source is skipped when that page is in the folder, and the index report says how many were (issue
58). A ``.txt`` file with no rendered page beside it is indexed as before.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

SOURCES_DIR = "_sources"
SOURCE_SUFFIXES = (".rst", ".md", ".txt", ".ipynb")   # what Sphinx's copy may carry before its own ".txt"


def rendered_page(rel: str, pages: set[str]) -> str | None:
    """The rendered page (relative path, in ``pages``) whose source ``rel`` is, or None."""
    if not rel.lower().endswith(".txt"):
        return None
    stem = rel[:-4]
    beside = stem + ".html"
    if beside in pages:
        return beside
    parts = rel.split("/")
    if SOURCES_DIR in parts[:-1]:
        at = len(parts) - 1 - parts[::-1].index(SOURCES_DIR)   # the innermost _sources folder
        inner = "/".join(parts[at + 1:])[:-4]
        for suffix in SOURCE_SUFFIXES:
            if inner.lower().endswith(suffix):
                inner = inner[:-len(suffix)]
                break
        page = posixpath.join(*parts[:at], inner + ".html") if at else inner + ".html"
        if page in pages:
            return page
    return None


def page_sources(paths: Iterable[str]) -> dict[str, str]:
    """{source file: its rendered page} among these relative paths."""
    paths = list(paths)
    pages = {p for p in paths if p.lower().endswith((".html", ".htm"))}
    if not pages:
        return {}
    out = {}
    for rel in paths:
        page = rendered_page(rel, pages)
        if page is not None:
            out[rel] = page
    return out


def sources_of_deleted_pages(new: Iterable[str], deleted: Iterable[str]) -> dict[str, str]:
    """{source file: its page} for files a run indexes as new because their rendered page left the folder in the same
    run (the source was skipped while the page was there): said in the report, which would otherwise show a page
    deleted and an unexplained new file, and the source's plain text answering for the page."""
    new, deleted = set(new), set(deleted)
    return {source: page for source, page in page_sources(new | deleted).items()
            if source in new and page in deleted}
