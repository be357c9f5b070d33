"""Template lines: text a folder repeats on most of its pages (a site's menu, a licence footer, "Edit this page").

Main-content extraction removes most page furniture from HTML, but exported wikis, generated Markdown and pages it
misjudges still carry lines that every document repeats. Such a line says nothing about the page it is on, yet the
extractor made entities of it ("Show Source", "Report a Bug", a copyright line became the graph's second hub). The
guard is folder-wide: a line found in at least ``TEMPLATE_SHARE`` of the folder's documents (and in at least
``TEMPLATE_MIN_DOCUMENTS`` of them) is a template line, and chunks are cut from the text without those lines, so
neither the extractor, the embeddings nor an answer reads them. ``documents.text`` keeps them.

Every document's distinct eligible lines are kept as 64-bit hashes in ``document_lines``, written and deleted with
the document, so the set is recounted in SQL after every sync that changed the folder (``refresh``): an edit or a
delete that moves a line across the threshold re-chunks exactly the documents holding that line, and the set in
``template_lines`` always matches the documents indexed. Headings and code fences are never template lines (a
heading every page repeats, "Options", is structure: it stays in the text and in the section paths).
"""

from __future__ import annotations

import bisect
import hashlib
import math
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from pathrag_pipeline.text.structure import is_fence

TEMPLATE_SHARE = 0.5
"""A line in at least this share of the folder's documents is template text: "most documents", as the page furniture
of a generated site is (every page's footer, menu and breadcrumb root). A line on fewer pages (a section's
breadcrumb, a shared paragraph) stays."""
TEMPLATE_MIN_DOCUMENTS = 5
"""... and in at least this many documents: in a folder of a few files, a line two of them share is content."""
MIN_LETTERS = 3
"""Lines with fewer letters (a lone bracket, "|", a number) are never counted: they carry no entity anyway."""


def line_key(line: str) -> int | None:
    """The 64-bit hash under which a line is counted (whitespace collapsed), or None when the line is never a
    template line: a heading, a code fence, or fewer than ``MIN_LETTERS`` letters."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#") and stripped.lstrip("#").startswith(" ") or is_fence(stripped):
        return None
    if sum(ch.isalpha() for ch in stripped[:64]) < MIN_LETTERS:
        return None
    digest = hashlib.blake2b(" ".join(stripped.split()).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def line_keys(text: str) -> list[int]:
    """The distinct line keys of a document's text, sorted."""
    keys = {line_key(line) for line in text.split("\n")}
    keys.discard(None)
    return sorted(keys)


def document_rows(text: str, page_lines: list[int] | None = None) -> list[tuple[int, bool]]:
    """(line key, whether the line is in ``text``) of every line a document is counted by: its text's, and for an
    HTML page its whole page's (``page_lines``: where a site's furniture shows on every page)."""
    own = set(line_keys(text))
    return [(key, key in own) for key in sorted(own | set(page_lines or ()))]


def without_template(text: str, template: frozenset[int]) -> tuple[str, list[tuple[int, int]]]:
    """``text`` without its template lines, and the start of each kept run as (offset in the result, offset in
    ``text``), for mapping offsets back (``original_offset``). Without template lines: the text itself, one run."""
    if not template:
        return text, [(0, 0)]
    kept: list[str] = []
    runs: list[tuple[int, int]] = []
    at = 0          # offset in text
    out = 0         # offset in the result
    dropped = True
    for line in text.split("\n"):
        span = len(line) + 1
        if line_key(line) in template:
            dropped = True
        else:
            if dropped:
                runs.append((out, at))
                dropped = False
            kept.append(line)
            out += span
        at += span
    return "\n".join(kept), runs or [(0, 0)]


def original_offset(runs: list[tuple[int, int]], offset: int) -> int:
    """The offset in the original text of ``offset`` in the text ``without_template`` returned."""
    i = bisect.bisect_right(runs, (offset, float("inf"))) - 1
    kept_start, original_start = runs[max(i, 0)]
    return original_start + offset - kept_start


def threshold(documents: int) -> int:
    """How many documents a line must be on to be a template line, in a folder of ``documents``."""
    return max(TEMPLATE_MIN_DOCUMENTS, math.ceil(TEMPLATE_SHARE * documents))


@dataclass(frozen=True)
class TemplateChange:
    lines: int                 # template lines now
    added: int                 # lines that became template lines
    removed: int               # lines that stopped being template lines
    rechunk: list[str]         # documents whose text holds a line that changed: their chunks must be cut again


# ---- the tables ----------------------------------------------------------------------------------------------

_IDS = "document_id IN (SELECT unnest(?::VARCHAR[]))"


def forget(con: duckdb.DuckDBPyConnection, document_ids: list[str]) -> None:
    """Drop the counted lines of these documents (deleted, replaced, or no longer indexed)."""
    if document_ids:
        con.execute(f"DELETE FROM document_lines WHERE {_IDS}", [document_ids])


def store(con: duckdb.DuckDBPyConnection, lines: dict[str, list[tuple[int, bool]]]) -> None:
    """Count the lines of these documents (``document_rows``; their earlier lines are replaced)."""
    if not lines:
        return
    forget(con, list(lines))
    ids = [doc_id for doc_id, rows in lines.items() for _ in rows]
    if not ids:
        return
    table = pa.table({"document_id": pa.array(ids, pa.utf8()),
                      "line_hash": pa.array([key for rows in lines.values() for key, _ in rows], pa.int64()),
                      "in_text": pa.array([own for rows in lines.values() for _, own in rows], pa.bool_())})
    con.register("_pathrag_lines", table)
    try:
        con.execute("INSERT INTO document_lines SELECT * FROM _pathrag_lines")
    finally:
        con.unregister("_pathrag_lines")


def current(con: duckdb.DuckDBPyConnection) -> frozenset[int]:
    """The template lines chunks are cut without, as last counted."""
    return frozenset(row[0] for row in con.execute("SELECT line_hash FROM template_lines").fetchall())


def _counted(con: duckdb.DuckDBPyConnection) -> dict[int, int]:
    documents = con.execute("SELECT count(DISTINCT document_id) FROM document_lines").fetchone()[0]
    return dict(con.execute("SELECT line_hash, count(*) FROM document_lines GROUP BY line_hash HAVING count(*) >= ?",
                            [threshold(documents)]).fetchall())


def is_current(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``template_lines`` holds exactly the lines the documents' counts make template lines."""
    return set(_counted(con)) == current(con)


def refresh(con: duckdb.DuckDBPyConnection) -> TemplateChange:
    """Count the lines again; store the template lines that changed and name the documents holding them, whose
    chunks must be cut again."""
    counted = _counted(con)
    before = current(con)
    added, removed = set(counted) - before, before - set(counted)
    changed = sorted(added | removed)
    rechunk: list[str] = []
    if changed:
        rechunk = [row[0] for row in con.execute(
            "SELECT DISTINCT document_id FROM document_lines WHERE in_text AND line_hash IN "
            "(SELECT unnest(?::BIGINT[])) ORDER BY 1", [changed]).fetchall()]   # only text the chunks hold changes
        if removed:
            con.execute("DELETE FROM template_lines WHERE line_hash IN (SELECT unnest(?::BIGINT[]))", [sorted(removed)])
        for key in sorted(added):
            con.execute("INSERT INTO template_lines VALUES (?, ?, ?)", [key, _line_text(con, key), counted[key]])
    # A line stored without its text (older versions looked in a document whose text lacked it: ''), or one that only
    # a page's furniture held until now, gets its text once a document's text holds it.
    for (key,) in con.execute("SELECT line_hash FROM template_lines WHERE line = '' AND line_hash IN "
                              "(SELECT line_hash FROM document_lines WHERE in_text)").fetchall():
        con.execute("UPDATE template_lines SET line = ? WHERE line_hash = ?", [_line_text(con, key), key])
    if counted:
        con.execute("UPDATE template_lines t SET documents = c.n FROM (SELECT unnest(?::BIGINT[]) AS k, "
                    "unnest(?::INTEGER[]) AS n) c WHERE t.line_hash = c.k AND t.documents <> c.n",
                    [list(counted), list(counted.values())])
    return TemplateChange(len(counted), len(added), len(removed), rechunk)


def _line_text(con: duckdb.DuckDBPyConnection, key: int) -> str:
    """The line with this key, as the first document whose text holds it writes it; '' when it is only on the
    pages' furniture (an HTML page's navigation outside its main content: counted, in no document's text, so no
    chunk is cut for it)."""
    row = con.execute("SELECT d.text FROM document_lines l JOIN documents d ON d.id = l.document_id "
                      "WHERE l.line_hash = ? AND l.in_text AND d.text IS NOT NULL ORDER BY d.id LIMIT 1",
                      [key]).fetchone()
    for line in (row[0] if row else "").split("\n"):
        if line_key(line) == key:
            return " ".join(line.split())
    return ""
