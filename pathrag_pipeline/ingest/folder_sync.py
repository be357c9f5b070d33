"""Incremental ingestion of a document folder: scan, diff against DuckDB, parse and chunk only what changed.

The unit of change is a file (keyed by its path relative to the folder); a
JSONL file holds many documents, each compared by its own content hash so that editing one record
rewrites only that record's document and chunks. Parsing happens outside DuckDB connections; writes for
one file happen in one transaction, so a crash never leaves a half-written file, and readers and the
extraction plan never see a file whose documents and chunks disagree. That is kept on purpose for huge files
too (a 40 MB .txt, a 200,000-line JSONL): what grows with the file is bounded instead, not the transaction
cut: chunks come from a stream of token windows (chunking.chunk_text) and are inserted in slices of
CHUNK_INSERT_ROWS, and DuckDB keeps a large transaction's new row groups on disk (optimistic writes) within
its memory limit. Splitting a file over several transactions would let a crash or a concurrent query see
half of it, for a memory gain these bounds already give.

Bad input never costs what is already indexed: a file that fails to parse is recorded with
status 'error' and its message; if an earlier version of it was indexed, that version's text and chunks
are kept (the row says so) until the file parses again or is deleted.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import os
import stat as stat_module
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from pathrag_pipeline.ingest import template_lines
from pathrag_pipeline.ingest.chunking import Chunk, chunk_text
from pathrag_pipeline.ingest.home_folder import (FOLDER_HINT, check_plan, record_folder, require_folder,
                                                  write_folder_note)
from pathrag_pipeline.config import Settings, usable_cores
from pathrag_pipeline.ingest.hash_cache import HashCache
from pathrag_pipeline.ingest.ignore_file import IgnoreRules
from pathrag_pipeline.ingest.page_sources import page_sources
from pathrag_pipeline.storage.file_hash import file_sha256
from pathrag_pipeline.ingest.parsing import (PARSER_ID, ParsedDocument, ParseError, file_format, looks_like_text,
                                             parse_file, supported_by_name)
from pathrag_pipeline.storage import vector_ledger
from pathrag_pipeline.storage.store import Store, bump_chunks_version, get_meta, set_meta, transaction, utc_now
from pathrag_pipeline.storage.write_pacing import WritePacer
from pathrag_pipeline.text.tokenizer import TOKENIZER_NAME
from pathrag_pipeline.worker_processes import worker_pool

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FileEntry:
    """One file found in the folder. ``problem`` is set when it cannot be read at all."""

    rel_path: str
    abs_path: Path
    size: int
    file_hash: str
    problem: str | None = None


@dataclass
class FileResult:
    rel_path: str
    status: str                    # 'indexed', 'error', 'partial' (some JSONL records failed, not all), 'deleted'
    documents_written: int = 0
    chunks_written: int = 0
    documents_deleted: int = 0
    errors: list[str] = field(default_factory=list)
    chunk_counts: dict[str, int] = field(default_factory=dict)   # document id -> its chunks written (chunks_written's parts)
    warnings: list[str] = field(default_factory=list)   # read, but not as intended (parsing.ParsedDocument.warning)


@dataclass
class Plan:
    new: list[str]
    changed: list[str]
    unchanged: list[str]
    deleted: list[str]


@dataclass
class SyncReport:
    run_id: str
    folder: str
    plan: Plan
    results: list[FileResult]
    seconds: float
    rechunked_chunks: int = 0      # chunks rebuilt in documents this run did not write (chunk settings or template lines changed)
    unsupported_count: int = 0     # files skipped because their format is not supported (.csv, .xlsx, ...)
    unsupported: list[str] = field(default_factory=list)   # the first UNSUPPORTED_EXAMPLES of them
    page_sources: dict[str, str] = field(default_factory=dict)   # source file -> its rendered page, not indexed
    linked_dirs: list[str] = field(default_factory=list)   # subfolders that are symlinks: not followed, not indexed
    ignored_files: int = 0         # files the folder's .pathragignore matched (ingest/ignore_file.py): not read
    ignored_folders: int = 0       # subfolders it matched: not entered (their files are not counted)


    @property
    def documents_written(self) -> int:
        return sum(r.documents_written for r in self.results)

    @property
    def documents_deleted(self) -> int:
        """Documents removed: those of deleted files, and records gone from a changed multi-record file (JSONL)."""
        return sum(r.documents_deleted for r in self.results)

    @property
    def chunks_written(self) -> int:
        return sum(r.chunks_written for r in self.results) + self.rechunked_chunks

    @property
    def failed(self) -> list[FileResult]:
        return [r for r in self.results if r.status in ("error", "partial")]

    @property
    def warnings(self) -> list[str]:
        return [w for r in self.results for w in r.warnings]



UNSUPPORTED_EXAMPLES = 20
"""How many unsupported file names a scan keeps for the report (the count is always complete)."""


class FolderScan(dict):
    """{relative path: FileEntry} of the supported files, plus what the scan could not look at:
    ``unreadable_dirs`` (relative paths of subfolders it could not list: their indexed files are kept, not
    treated as deleted) and the unsupported files (``unsupported_count``, the first few in ``unsupported``)."""

    def __init__(self) -> None:
        super().__init__()
        self.unreadable_dirs: dict[str, str] = {}      # relative dir -> message
        self.unsupported: list[str] = []
        self.unsupported_count = 0
        self.page_sources: dict[str, str] = {}   # source file -> the rendered page indexed instead (page_sources.py)
        self.linked_dirs: list[str] = []         # subfolders that are symlinks, not followed (``scan_folder``)
        self.ignored_files = 0                    # matched by the folder's .pathragignore (``scan_folder``)
        self.ignored_folders = 0

    def hidden_by_unreadable_dir(self, rel_path: str) -> bool:
        """Whether an indexed path lies in a subfolder the scan could not read (so its absence proves nothing)."""
        return any(d == "." or rel_path.startswith(d + "/") for d in self.unreadable_dirs)


def scan_folder(root: Path, *, max_bytes: int, cache: HashCache | None = None) -> FolderScan:
    """Supported files under ``root`` (hidden files and folders skipped, and what its ``.pathragignore`` lists:
    ingest/ignore_file.py), keyed by POSIX relative path.

    Never raises for what it finds inside the folder: symlink loops, FIFOs, sockets and devices become
    entries with a ``problem`` (never opened), unreadable subfolders are listed in ``unreadable_dirs``.
    ``cache`` (ingest/hash_cache.py): a file whose stat signature it holds is not read again; saved at the end."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"document folder {root} does not exist or is not a folder; {FOLDER_HINT}")
    root_real = root.resolve()
    rules = IgnoreRules.of_folder(root)   # raises for an ignore file it cannot use, before anything is changed
    scan = FolderScan()

    def unreadable(exc: OSError) -> None:
        where = Path(exc.filename) if exc.filename else root
        try:
            rel = where.relative_to(root).as_posix()
        except ValueError:
            rel = str(where)
        scan.unreadable_dirs[rel] = (f"cannot list folder {rel}: {exc.strerror or exc}; its files were not scanned "
                                     "and what was indexed from it is kept; fix its permissions")

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        # paths made once per folder, not per file: pathlib's parsing was most of a 10,000-file rescan (issue 23)
        folder = Path(dirpath)
        rel_folder = folder.relative_to(root).as_posix()
        prefix = "" if rel_folder == "." else rel_folder + "/"
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if rules is not None:
            kept = [d for d in dirnames if not rules.ignores_folder(prefix + d)]
            scan.ignored_folders += len(dirnames) - len(kept)
            dirnames[:] = kept
        # A subfolder that is a symlink is not followed (os.walk's default): it could lead outside the folder, back
        # into it (its files twice) or round in a loop. Said in the report instead of skipped without a word.
        linked = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        if linked:
            scan.linked_dirs.extend(prefix + d for d in linked)
            dirnames[:] = [d for d in dirnames if d not in linked]
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            rel = prefix + name
            if rules is not None and rules.ignores_file(rel):
                scan.ignored_files += 1
                continue
            known = supported_by_name(name)
            if known is None:   # no suffix (README, NEWS.gz): read when it is text
                known = _text_without_suffix(folder / name, rel, cache)
            if not known:
                scan.unsupported_count += 1
                if len(scan.unsupported) < UNSUPPORTED_EXAMPLES:
                    scan.unsupported.append(rel)
                continue
            scan[rel] = _entry(folder / name, rel, root_real, max_bytes, cache)
    scan.page_sources = page_sources(scan)
    for rel in scan.page_sources:
        del scan[rel]   # the page is indexed; its source would count it twice (ingest/page_sources.py)
    if cache is not None:
        cache.save()
    return scan


def _text_without_suffix(path: Path, rel: str, cache: HashCache | None) -> bool:
    """Whether a file with no suffix is read (``parsing.looks_like_text``). One the hash cache holds at its current
    stat was read as text when it was hashed (only files the scan picked up are hashed): it is not opened again."""
    if cache is not None:
        try:
            if cache.knows(rel, os.stat(path)):
                return True
        except OSError:
            return False
    return looks_like_text(path)


_SPECIAL_KINDS = ((stat_module.S_ISFIFO, "a FIFO (named pipe)"), (stat_module.S_ISSOCK, "a socket"),
                  (stat_module.S_ISCHR, "a character device"), (stat_module.S_ISBLK, "a block device"))


def _entry(abs_path: Path, rel: str, root_real: Path, max_bytes: int, cache: HashCache | None = None) -> FileEntry:
    try:
        stat = os.lstat(abs_path)   # one call: a file that is not a link has its stat here already
    except OSError as exc:
        return FileEntry(rel, abs_path, 0, "unreadable", f"cannot read {rel}: {exc.strerror or exc}")
    if stat_module.S_ISLNK(stat.st_mode):
        try:
            target = abs_path.resolve(strict=True)
        except RuntimeError:   # Python 3.11-3.12: a symlink loop
            return FileEntry(rel, abs_path, 0, "symlink-loop",
                             f"{rel} is a symlink loop (it leads back to itself); remove or fix the link")
        except OSError as exc:
            target = abs_path.resolve()
            if exc.errno == errno.ELOOP:
                return FileEntry(rel, abs_path, 0, "symlink-loop",
                                 f"{rel} is a symlink loop (it leads back to itself); remove or fix the link")
            if not target.is_relative_to(root_real):
                return FileEntry(rel, abs_path, 0, f"symlink:{target}",
                                 f"{rel} is a symlink to {target}, outside the indexed folder; copy the file in or remove the link")
            return FileEntry(rel, abs_path, 0, f"symlink:{target}", f"{rel} is a broken symlink to {target}")
        if not target.is_relative_to(root_real):
            return FileEntry(rel, abs_path, 0, f"symlink:{target}",
                             f"{rel} is a symlink to {target}, outside the indexed folder; copy the file in or remove the link")
        try:
            stat = abs_path.stat()
        except OSError as exc:
            return FileEntry(rel, abs_path, 0, "unreadable", f"cannot read {rel}: {exc.strerror or exc}")
    if not stat_module.S_ISREG(stat.st_mode):
        # Never opened: reading a FIFO blocks until a writer appears, a device may never end.
        kind = next((name for test, name in _SPECIAL_KINDS if test(stat.st_mode)), "not a regular file")
        return FileEntry(rel, abs_path, 0, f"special:{kind}",
                         f"{rel} is {kind}, not a regular file; it is skipped (move it out of the folder)")
    if stat.st_size > max_bytes:
        # Too large to parse, so no need to hash all of it: size and mtime identify the version.
        return FileEntry(rel, abs_path, stat.st_size, f"oversize:{stat.st_size}:{stat.st_mtime_ns}")
    known = cache.lookup(rel, stat) if cache is not None else None
    if known is not None:
        return FileEntry(rel, abs_path, stat.st_size, known)
    try:
        digest = file_sha256(abs_path)
        if cache is not None:
            cache.record(rel, stat, digest)
        return FileEntry(rel, abs_path, stat.st_size, digest)
    except OSError as exc:
        return FileEntry(rel, abs_path, stat.st_size, f"unreadable:{stat.st_mtime_ns}",
                         f"cannot read {rel}: {exc.strerror or exc}; check its permissions")


def stored_file_hashes(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return dict(con.execute("SELECT path, any_value(file_hash) FROM documents GROUP BY path").fetchall())


def plan_changes(scan: dict[str, FileEntry], stored: dict[str, str]) -> Plan:
    """New, changed, unchanged and deleted files. A stored file inside a subfolder the scan could not list
    is not deleted: it counts as unchanged until the folder can be read again."""
    hidden = getattr(scan, "hidden_by_unreadable_dir", lambda _p: False)
    new = sorted(p for p in scan if p not in stored)
    changed = sorted(p for p in scan if p in stored and stored[p] != scan[p].file_hash)
    unchanged = sorted(p for p in scan if p in stored and stored[p] == scan[p].file_hash)
    kept = sorted(p for p in stored if p not in scan and hidden(p))
    deleted = sorted(p for p in stored if p not in scan and not hidden(p))
    return Plan(new, changed, unchanged + kept if kept else unchanged, deleted)


# ---- one file ----------------------------------------------------------------------------------

@dataclass
class ParsedFile:
    entry: FileEntry
    documents: list[ParsedDocument]
    error: str | None = None       # whole-file failure
    chunks: dict[str, list[Chunk]] | None = None   # document id -> its text's chunks, when made where it was parsed
    lines: dict[str, list[tuple[int, bool]]] | None = None   # document id -> its counted lines (_line_keys), likewise


def parse_entry(entry: FileEntry, *, max_bytes: int, max_text_bytes: int | None = None) -> ParsedFile:
    """Parse one file; never raises for bad input (the error is returned for the documents table)."""
    if entry.problem:
        return ParsedFile(entry, [], entry.problem)
    try:
        return ParsedFile(entry, parse_file(entry.abs_path, entry.rel_path, max_bytes=max_bytes,
                                            max_text_bytes=max_text_bytes))
    except ParseError as exc:
        return ParsedFile(entry, [], str(exc))
    except Exception as exc:  # noqa: BLE001 - a parser crash on one file (a library bug, odd input) never stops the run
        return ParsedFile(entry, [], f"{entry.rel_path}: the parser raised {type(exc).__name__}: {exc}; "
                                     "the file is skipped (report it if the file is valid)")


_DOC_SCHEMA = pa.schema([
    ("id", pa.utf8()), ("path", pa.utf8()), ("title", pa.utf8()), ("format", pa.utf8()),
    ("content_hash", pa.utf8()), ("file_hash", pa.utf8()), ("size_bytes", pa.int64()), ("status", pa.utf8()),
    ("error", pa.utf8()), ("text", pa.utf8()), ("created_at", pa.timestamp("us")), ("updated_at", pa.timestamp("us")),
    ("warning", pa.utf8()),
])
_CHUNK_SCHEMA = pa.schema([
    ("id", pa.utf8()), ("document_id", pa.utf8()), ("ordinal", pa.int32()), ("text", pa.utf8()),
    ("token_count", pa.int32()), ("char_start", pa.int32()), ("char_end", pa.int32()), ("content_hash", pa.utf8()),
    ("section", pa.utf8()),
])


def _insert(con: duckdb.DuckDBPyConnection, table: str, schema: pa.Schema, rows: list[tuple], *,
            temp: bool = False) -> None:
    """Insert many rows in one statement through Arrow (row-by-row executemany is ~100x slower); ``temp``
    creates ``table`` as a temp table of the rows instead."""
    if not rows:
        return
    batch = pa.Table.from_arrays([pa.array(col, type=f.type) for col, f in zip(zip(*rows), schema)], schema=schema)
    con.register("_pathrag_rows", batch)
    try:
        if temp:
            con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT * FROM _pathrag_rows")
        else:
            con.execute(f"INSERT INTO {table} SELECT * FROM _pathrag_rows")
    finally:
        con.unregister("_pathrag_rows")


def _replace_documents(con: duckdb.DuckDBPyConnection, rows: list[tuple]) -> None:
    """Insert document rows, replacing stored ones with the same id (their ``created_at`` kept).

    Delete then insert, not ``ON CONFLICT DO UPDATE``: updating the text of a stored row makes DuckDB's next
    checkpoint rewrite the compressed text column of its whole row group (0.5 s per edited file at 100 MB,
    issue 23), where a delete only marks the row and the insert appends to the last row group."""
    if not rows:
        return
    _insert(con, "_pathrag_docs", _DOC_SCHEMA, rows, temp=True)
    try:
        con.execute("""UPDATE _pathrag_docs n SET created_at = d.created_at FROM documents d WHERE d.id = n.id""")
        con.execute("DELETE FROM documents WHERE id IN (SELECT id FROM _pathrag_docs)")
        con.execute("INSERT INTO documents SELECT * FROM _pathrag_docs")
    finally:
        con.execute("DROP TABLE IF EXISTS _pathrag_docs")


def write_documents(con: duckdb.DuckDBPyConnection, files: list[ParsedFile], *,
                    reparse: bool = False) -> tuple[list[FileResult], dict[str, str]]:
    """Store the documents of parsed files; returns a result per file and {document id: text} of changed ones.
    ``reparse``: the files were read again because the parser changed (``parsing_current``): a document whose
    source is unchanged is written again when its text now differs."""
    now = utc_now()
    paths = [f.entry.rel_path for f in files]
    existing: dict[str, dict[str, tuple[str, str]]] = {p: {} for p in paths}
    has_text: set[str] = set()
    old_text: dict[str, str] = {}
    for doc_id, path, content_hash, status, text_kept, text in con.execute(
        f"SELECT id, path, content_hash, status, text IS NOT NULL, {'text' if reparse else 'NULL'} FROM documents "
        f"WHERE {_in_list('path')}", [paths]
    ).fetchall():
        existing[path][doc_id] = (content_hash, status)
        if text_kept:
            has_text.add(doc_id)
        if text is not None:
            old_text[doc_id] = text
    results: list[FileResult] = []
    upserts: list[tuple] = []
    refreshed: list[tuple] = []           # unchanged documents of a changed file: new file hash only
    changed: dict[str, str] = {}
    gone: list[str] = []
    for parsed in files:
        entry, old = parsed.entry, existing[parsed.entry.rel_path]
        result = FileResult(entry.rel_path, "indexed")
        results.append(result)
        if parsed.error is not None:
            result.status = "error"
            result.errors.append(parsed.error)
            if any(status == "indexed" for _, status in old.values()):
                # Keep the last good version searchable; record the failure on its rows, and say it.
                result.errors[-1] += " (the last good version stays indexed)"
                con.execute(
                    "UPDATE documents SET status = 'error', error = ?, file_hash = ?, updated_at = ? WHERE path = ?",
                    [result.errors[-1], entry.file_hash, now, entry.rel_path],
                )
            else:
                gone.extend(doc_id for doc_id in old if doc_id != entry.rel_path)
                upserts.append((entry.rel_path, entry.rel_path, Path(entry.rel_path).name,
                                file_format(entry.abs_path.name), None, entry.file_hash, entry.size,
                                "error", parsed.error, None, now, now, None))
            continue
        keep = set()
        for doc in parsed.documents:
            keep.add(doc.id)
            status = "error" if doc.error else "indexed"
            if doc.error:
                result.errors.append(doc.error)
                result.status = "partial"
            if old.get(doc.id) == (doc.content_hash, status) and (not reparse or doc.error
                                                                   or old_text.get(doc.id) == doc.text):
                refreshed.append((doc.id, entry.file_hash, entry.size))
                continue
            upserts.append((doc.id, entry.rel_path, doc.title, doc.format, doc.content_hash, entry.file_hash,
                            entry.size, status, doc.error, None if doc.error else doc.text, now, now, doc.warning))
            result.documents_written += 1
            if doc.warning:
                result.warnings.append(doc.warning)
            if not doc.error:
                changed[doc.id] = doc.text
        removed = [doc_id for doc_id in old if doc_id not in keep]
        malformed = [doc for doc in parsed.documents if doc.error]
        if malformed and len(malformed) == len(parsed.documents):
            result.status = "error"            # not one record of the file could be read
        bad_lines = [doc.id.rsplit("#line-", 1)[-1] for doc in malformed]
        claimed = {doc.claimed_id for doc in malformed}
        # A record that turned malformed keeps its last good version, like a file does. Its id is usually still
        # readable on the bad line (claimed_id): then only that record is held and records that really vanished
        # go. If some bad line shows no id, a vanished record cannot be told from it: all vanished records are
        # held until the file parses (or shows its ids) again.
        held = [doc_id for doc_id in removed if doc_id in has_text and (None in claimed or doc_id in claimed)]
        if held:
            con.execute(
                f"UPDATE documents SET status = 'error', error = ?, file_hash = ?, updated_at = ? WHERE {_in_list('id')}",
                [f"{entry.rel_path}: this record is no longer found and line(s) {', '.join(bad_lines[:10])} are "
                 "malformed; the last good version stays indexed until the file is fixed", entry.file_hash, now, held],
            )
            removed = [doc_id for doc_id in removed if doc_id not in set(held)]
        result.documents_deleted = len(removed)
        gone.extend(removed)
    if gone:
        con.execute(f"DELETE FROM chunks WHERE {_in_list('document_id')}", [gone])
        con.execute(f"DELETE FROM documents WHERE {_in_list('id')}", [gone])
        template_lines.forget(con, gone)
    _replace_documents(con, upserts)
    lines = {doc.id: f.lines[doc.id] if f.lines and doc.id in f.lines else _line_keys(doc)
             for f in files for doc in f.documents if doc.id in changed}
    template_lines.store(con, lines)
    for doc_id, file_hash, size in refreshed:
        con.execute("UPDATE documents SET file_hash = ?, size_bytes = ? WHERE id = ?", [file_hash, size, doc_id])
    # Documents that became errors lose their chunks (a JSONL record that turned malformed).
    errored = [row[0] for row in upserts if row[7] == "error"]
    if errored:
        con.execute(f"DELETE FROM chunks WHERE {_in_list('document_id')}", [errored])
        template_lines.forget(con, errored)
    if gone or upserts or errored:
        bump_chunks_version(con)   # titles or chunks may have changed: cached BM25 indexes are stale
    return results, changed


CHUNK_INSERT_ROWS = 20_000
"""Chunks are inserted in slices of this many rows, so a huge file never needs all its rows in one Arrow batch."""


def _in_list(column: str) -> str:
    """``column IN (the list parameter)`` as a hash join: ``list_contains`` per row is quadratic for big lists."""
    return f"{column} IN (SELECT unnest(?::VARCHAR[]))"


def write_chunks(con: duckdb.DuckDBPyConnection, texts: dict[str, str], *, max_tokens: int,
                 overlap: int, errors: dict[str, str] | None = None,
                 chunked: dict[str, list[Chunk]] | None = None,
                 template: frozenset[int] = frozenset()) -> dict[str, int]:
    """Replace the chunks of the given documents ({id: text}); returns {document id: chunks written}.
    ``chunked``: chunks already made of some of these texts with the same settings and ``template`` lines (by a
    parse worker).

    A document whose chunking raises is marked 'error' with the message (also put in ``errors``); the
    others are written."""
    if not texts:
        return {}
    con.execute(f"DELETE FROM chunks WHERE {_in_list('document_id')}", [list(texts)])
    rows, counts = [], {}
    for doc_id, text in texts.items():
        try:
            chunks = chunked.get(doc_id) if chunked else None
            if chunks is None:
                chunks = chunk_text(doc_id, text or "", max_tokens=max_tokens, overlap=overlap, template=template)
        except Exception as exc:  # noqa: BLE001 - one document's crash never stops the others
            message = f"{doc_id}: chunking raised {type(exc).__name__}: {exc}; the document is skipped"
            con.execute("UPDATE documents SET status = 'error', error = ?, text = NULL, updated_at = ? WHERE id = ?",
                        [message, utc_now(), doc_id])
            template_lines.forget(con, [doc_id])
            if errors is not None:
                errors[doc_id] = message
            continue
        counts[doc_id] = len(chunks)
        rows.extend((c.id, c.document_id, c.ordinal, c.text, c.token_count, c.char_start, c.char_end, c.content_hash,
                     c.section) for c in chunks)
        if len(rows) >= CHUNK_INSERT_ROWS:
            _insert(con, "chunks", _CHUNK_SCHEMA, rows)
            rows = []
    _insert(con, "chunks", _CHUNK_SCHEMA, rows)
    if counts:   # a chunk written again keeps its id, but its title may have changed: its vector is sent again
        vector_ledger.mark_stale(con, "chunks", f"SELECT id FROM chunks WHERE {_in_list('document_id')}",
                                 [list(counts)])
    bump_chunks_version(con)
    return counts


def stored_texts(con: duckdb.DuckDBPyConnection, *, path: str | None = None) -> dict[str, str]:
    """{document id: text} of the documents that have text (all, or those of one file)."""
    sql = "SELECT id, text FROM documents WHERE text IS NOT NULL"
    if path is None:
        return dict(con.execute(sql).fetchall())
    return dict(con.execute(sql + " AND path = ?", [path]).fetchall())


def chunking_signature(settings: Settings) -> str:
    return f"{settings.chunk_tokens}/{settings.chunk_overlap}/{TOKENIZER_NAME}"


def chunking_current(con: duckdb.DuckDBPyConnection, settings: Settings) -> bool:
    """Whether the chunks were built with these chunk settings (else ``ensure_chunking`` has work to do)."""
    return get_meta(con, "chunking") == chunking_signature(settings)


def ensure_chunking(con: duckdb.DuckDBPyConnection, settings: Settings) -> int:
    """Rechunk every indexed document when the chunk settings differ from those the table was built with."""
    if chunking_current(con, settings):
        return 0
    signature = chunking_signature(settings)
    previous = get_meta(con, "chunking")
    rewritten = 0
    if previous is not None and previous != signature:
        with transaction(con):
            ids = [row[0] for row in con.execute("SELECT id FROM documents WHERE text IS NOT NULL ORDER BY id").fetchall()]
            rewritten = sum(rechunk(con, ids, settings).values())
    if previous != signature:
        set_meta(con, "chunking", signature)
    return rewritten


RECHUNK_BATCH_BYTES = 16 * 1024 * 1024
"""Texts read at a time when stored documents are cut again: memory holds this much, not the folder."""


def rechunk(con: duckdb.DuckDBPyConnection, document_ids: list[str], settings: Settings) -> dict[str, int]:
    """Cut the stored texts of these documents into chunks again (current template lines), a batch of texts at a
    time; returns the chunks written per document."""
    template = template_lines.current(con)
    written: dict[str, int] = {}
    sizes = con.execute(f"SELECT id, strlen(text) FROM documents WHERE text IS NOT NULL AND {_in_list('id')} "
                        "ORDER BY id", [document_ids]).fetchall()
    batch: list[str] = []
    size = 0
    for i, (doc_id, n) in enumerate(sizes):
        batch.append(doc_id)
        size += n
        if size >= RECHUNK_BATCH_BYTES or i == len(sizes) - 1:
            texts = dict(con.execute(f"SELECT id, text FROM documents WHERE {_in_list('id')}", [batch]).fetchall())
            written.update(write_chunks(con, texts, max_tokens=settings.chunk_tokens,
                                        overlap=settings.chunk_overlap, template=template))
            batch, size = [], 0
    return written


def _recut(results: list[FileResult], counts: dict[str, int]) -> int:
    """Count chunks cut again after the template lines changed once: a document this run wrote (a first build
    finds the folder's template lines after cutting every page) has its new count in its file's result instead of
    its first; returns the chunks of the other documents (``SyncReport.rechunked_chunks``). So the report's "chunks
    written" is never more than the chunks the documents it names hold."""
    rest = dict(counts)
    for result in results:
        for doc_id in result.chunk_counts.keys() & rest.keys():
            n = rest.pop(doc_id)
            result.chunks_written += n - result.chunk_counts[doc_id]
            result.chunk_counts[doc_id] = n
    return sum(rest.values())


def read_limits(settings: Settings) -> str:
    """The limits a file is read under (PATHRAG_MAX_FILE_BYTES, PATHRAG_MAX_TEXT_BYTES), as stored in pathrag_meta."""
    return f"file={settings.max_file_bytes};text={settings.max_text_bytes}"


def failed_under_other_limits(con: duckdb.DuckDBPyConnection, settings: Settings) -> list[str]:
    """Files in error to read again because the read limits changed since the last sync (or were not recorded): a
    file's hash changes when it shrinks or grows, but a limit met only while reading it (a .gz that inflates past
    PATHRAG_MAX_FILE_BYTES, text past PATHRAG_MAX_TEXT_BYTES) left an unchanged file in error whose message says to
    raise the limit, and raising it did nothing."""
    if get_meta(con, "read_limits") == read_limits(settings):
        return []
    return [row[0] for row in con.execute("SELECT DISTINCT path FROM documents WHERE status = 'error' "
                                          "ORDER BY 1").fetchall()]


def parsing_current(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the documents were read by this parser (``parsing.PARSER_ID``): else every file is read again once."""
    return get_meta(con, "parsing") == PARSER_ID


def delete_path(con: duckdb.DuckDBPyConnection, rel_path: str) -> int:
    """Remove a file's documents and chunks; returns the number of documents removed."""
    ids = [r[0] for r in con.execute("SELECT id FROM documents WHERE path = ?", [rel_path]).fetchall()]
    if ids:
        con.execute(f"DELETE FROM chunks WHERE {_in_list('document_id')}", [ids])
        con.execute("DELETE FROM documents WHERE path = ?", [rel_path])
        template_lines.forget(con, ids)
        bump_chunks_version(con)
    return len(ids)


def store_files(con: duckdb.DuckDBPyConnection, files: list[ParsedFile], settings: Settings, *,
                template: frozenset[int] = frozenset(), reparse: bool = False) -> list[FileResult]:
    """Write parsed files' documents and chunks in one transaction (chunks cut without the ``template`` lines;
    ``reparse``: see ``write_documents``)."""
    errors: dict[str, str] = {}
    chunked = {doc_id: chunks for f in files if f.chunks for doc_id, chunks in f.chunks.items()}
    with transaction(con):
        results, changed = write_documents(con, files, reparse=reparse)
        counts = write_chunks(con, changed, max_tokens=settings.chunk_tokens, overlap=settings.chunk_overlap,
                              errors=errors, chunked=chunked, template=template)
    path_of = {doc.id: f.entry.rel_path for f in files for doc in f.documents}
    by_path = {r.rel_path: r for r in results}
    for doc_id, n in counts.items():
        by_path[path_of[doc_id]].chunks_written += n
        by_path[path_of[doc_id]].chunk_counts[doc_id] = n
    for doc_id, message in errors.items():
        result = by_path[path_of[doc_id]]
        result.errors.append(message)
        result.status = "error" if path_of[doc_id] == doc_id else "partial"   # a whole file, or a JSONL record
    return results


# ---- a whole folder ----------------------------------------------------------------------------

PARSE_BATCH_FILES = 64
HOLD_MAX_FILES = 8
HOLD_MAX_BYTES = 1024 * 1024
"""A sync of at most this many new, changed or deleted files and bytes to parse keeps one DuckDB connection for
its writes (``Store.holding``): parsing that little takes less than the four opens and closes it saves (about
0.1 s at 200 files, issue 64), and other processes wait for the file no longer than for one write."""
PARSE_BATCH_BYTES = 16 * 1024 * 1024
WRITE_BATCH_BYTES = 2 * PARSE_BATCH_BYTES
"""Parsed input waiting for a write is written once it reaches this many bytes, however cheap writes are."""


def _parse_batches(paths: list[str], scan: dict[str, FileEntry]):
    """Consecutive groups of paths of at most PARSE_BATCH_FILES files and PARSE_BATCH_BYTES bytes (or one file)."""
    batch: list[str] = []
    size = 0
    for p in paths:
        n = scan[p].size
        if batch and (len(batch) >= PARSE_BATCH_FILES or size + n > PARSE_BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(p)
        size += n
    if batch:
        yield batch


PARSE_PROCESS_MIN_BYTES = 32 * 1024 * 1024
"""Input to parse from which a sync parses and chunks in worker processes, one per usable core
(``PATHRAG_EXTRACT_PROCESSES``, the offline stages' setting), while this process writes: below it the ~1 s of
starting them (spawned, importing the parsers) costs more than it saves. A 100 MB folder parsed and chunked on
one core while the other idled: ~22 s of a ~250 s offline build (issue 23, both cores)."""


def _parse_processes(settings: Settings, todo: list[str], scan: dict[str, FileEntry]) -> int:
    if sum(scan[p].size for p in todo) < PARSE_PROCESS_MIN_BYTES or len(todo) < 2:
        return 1
    return settings.extract_processes or usable_cores()


def _line_keys(doc: ParsedDocument) -> list[tuple[int, bool]]:
    """The lines a document is counted by for the template-line guard (``template_lines.document_rows``)."""
    return template_lines.document_rows(doc.text or "", doc.page_lines)


def _parse_and_chunk(entries: list[FileEntry], max_bytes: int, max_text_bytes: int | None, max_tokens: int,
                     overlap: int, template: frozenset[int] = frozenset()) -> list[ParsedFile]:
    """A parse worker's batch: each file parsed (``parse_entry``), its documents chunked and their lines counted. A
    document whose chunking raises is left unchunked here; the writer chunks it again and records the error."""
    out = []
    for entry in entries:
        parsed = parse_entry(entry, max_bytes=max_bytes, max_text_bytes=max_text_bytes)
        parsed.chunks, parsed.lines = {}, {}
        for doc in parsed.documents:
            if not doc.error:
                parsed.lines[doc.id] = _line_keys(doc)
                try:
                    parsed.chunks[doc.id] = chunk_text(doc.id, doc.text or "", max_tokens=max_tokens, overlap=overlap,
                                                       template=template)
                except Exception:  # noqa: BLE001 - the writer chunks it again and says what failed
                    pass
        out.append(parsed)
    return out


def _parsed_batches(batches, scan: dict[str, FileEntry], settings: Settings, processes: int,
                    template: frozenset[int] = frozenset()):
    """(paths, parsed files) of each batch, in order: parsed here, or with ``processes`` > 1 parsed and chunked
    by that many worker processes, at most ``processes + 1`` batches ahead of the writer (so memory holds a few
    batches, not the folder). Should the workers stop (a parser that kills its process on a hostile file, say),
    the batches not parsed yet are parsed here, as without workers."""
    def here(batch: list[str]) -> list[ParsedFile]:
        return [parse_entry(scan[p], max_bytes=settings.max_file_bytes, max_text_bytes=settings.max_text_bytes)
                for p in batch]

    if processes <= 1:
        for batch in batches:
            yield batch, here(batch)
        return
    pool = worker_pool(processes)
    pending: collections.deque = collections.deque()
    broken = False

    def stopped(exc: Exception) -> None:
        nonlocal broken
        if not broken:
            log.warning("parsing goes on in this process: its worker processes stopped (%s)", exc)
        broken = True

    def submit(batch: list[str]):
        if not broken:
            try:
                return pool.submit(_parse_and_chunk, [scan[p] for p in batch], settings.max_file_bytes,
                                   settings.max_text_bytes, settings.chunk_tokens, settings.chunk_overlap, template)
            except Exception as exc:  # noqa: BLE001 - a pool already broken refuses work: parse here
                stopped(exc)
        return None

    def collect() -> tuple[list[str], list[ParsedFile]]:
        batch, future = pending.popleft()
        if future is not None:
            try:
                return batch, future.result()
            except Exception as exc:  # noqa: BLE001 - a dead worker pool: parse here from now on
                stopped(exc)
        return batch, here(batch)

    try:
        for batch in batches:
            pending.append((batch, submit(batch)))
            while len(pending) > processes:
                yield collect()
        while pending:
            yield collect()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


NAMED_TRIGGERS = frozenset({"cli", "quickstart", "python"})
"""Runs whose folder the user named (`pathrag index PATH`, the quickstart, ``run_indexing``): a refusal of another
folder than the home's may offer ``--replace``; the sensor's, the schedule's and UI launches (folder from
PATHRAG_DOCS) never do (ingest/home_folder.py)."""


def sync_folder(settings: Settings, store: Store | None = None, *, folder: Path | None = None,
                trigger: str = "cli", progress=None, run_id: str | None = None,
                replace_folder: bool = False) -> SyncReport:
    """Bring the DuckDB tables in line with the folder: index new and changed files, drop deleted ones.

    Refuses (``home_folder.FolderRefused``, nothing written) a folder other than the one the home indexes,
    or one with no supported file while the home holds documents, unless ``replace_folder``; records the
    folder once the sync is done (see ingest/home_folder.py).
    ``run_id`` (e.g. the Dagster run's id, kept whole) is what ``ingest_runs`` records; default a fresh id."""
    started = time.perf_counter()
    started_at = utc_now()
    store = store or Store.for_settings(settings)
    root = Path(folder or settings.docs)
    require_folder(store, root, settings.home)
    scan = scan_folder(root, max_bytes=settings.max_file_bytes, cache=HashCache.for_home(settings.home, root))
    # the plan is read on a held connection: a small change (a few files: an edit or a delete) then parses and
    # writes on it too, one open in all instead of five; a larger one lets it go and writes in short connections
    with store.holding():
        with store.connect() as con:
            plan = plan_changes(scan, stored_file_hashes(con))
            check_plan(con, scan, plan, root, settings.home, replace=replace_folder, named=trigger in NAMED_TRIGGERS)
            rechunked = ensure_chunking(con, settings)
            reparse = not parsing_current(con)
            template = template_lines.current(con)
            retry = set(failed_under_other_limits(con, settings))
        # a new parser (or other cleaning) reads every file once: unchanged ones are written again where their text
        # changed; other read limits read the files in error again
        todo = plan.new + plan.changed + (plan.unchanged if reparse else [p for p in plan.unchanged if p in retry])
        small = len(todo) + len(plan.deleted) <= HOLD_MAX_FILES and sum(scan[p].size for p in todo) <= HOLD_MAX_BYTES
        with contextlib.nullcontext() if small else store.released():
            results: list[FileResult] = [FileResult(rel, "error", errors=[message])
                                         for rel, message in sorted(scan.unreadable_dirs.items())]
            # Parse in batches outside the connection, write them in short connections. A batch holds at most
            # PARSE_BATCH_FILES files and PARSE_BATCH_BYTES of input (a big file is a batch of its own); parsed batches
            # wait for the next write while writing is cheap next to parsing (``WritePacer``), at most WRITE_BATCH_BYTES
            # of input, so memory stays bounded by the largest file and that cap, not by the folder (with parse workers,
            # plus the batches they hold: at most one per worker, ``_parsed_batches``).
            done = 0
            pacer = WritePacer(0.0)
            parsed: list = []
            pending_bytes = 0
            for batch, files in _parsed_batches(_parse_batches(todo, scan), scan, settings,
                                                _parse_processes(settings, todo, scan), template):
                parsed += files
                pending_bytes += sum(scan[p].size for p in batch)
                done += len(batch)
                if pacer.due() or pending_bytes >= WRITE_BATCH_BYTES or done == len(todo):
                    with pacer.write(store) as con:
                        results.extend(store_files(con, parsed, settings, template=template, reparse=reparse))
                    parsed, pending_bytes = [], 0
                    if progress:
                        progress(done, len(todo))
            if plan.deleted:
                with store.connect() as con, transaction(con):
                    for p in plan.deleted:
                        results.append(FileResult(p, "deleted", documents_deleted=delete_path(con, p)))
            with store.connect() as con, transaction(con):
                # an edit or a delete may have moved a line across the template threshold: cut its documents again
                change = template_lines.refresh(con)
                if change.rechunk:
                    rechunked += _recut(results, rechunk(con, change.rechunk, settings))
                set_meta(con, "parsing", PARSER_ID)
                set_meta(con, "read_limits", read_limits(settings))
            store.settle_row_groups()   # a large sync merges the row groups its batches wrote (storage/row_group_merging)
            seconds = time.perf_counter() - started
            report = SyncReport(run_id or uuid.uuid4().hex[:12], str(root), plan, results, seconds, rechunked,
                                scan.unsupported_count, list(scan.unsupported), dict(scan.page_sources),
                                list(scan.linked_dirs), scan.ignored_files, scan.ignored_folders)
            with store.connect() as con:
                record_folder(con, root)
                record_run(con, report, trigger=trigger, started_at=started_at)
    write_folder_note(settings.home, root)
    return report


def record_run(con: duckdb.DuckDBPyConnection, report: SyncReport, *, trigger: str, started_at: datetime) -> None:
    plan = report.plan
    con.execute(
        "INSERT INTO ingest_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [report.run_id, started_at, utc_now(), trigger, report.folder,
         len(plan.new) + len(plan.changed) + len(plan.unchanged), len(plan.new), len(plan.changed),
         len(plan.deleted), len(plan.unchanged), len(report.failed), report.documents_written,
         report.chunks_written, report.seconds],
    )
