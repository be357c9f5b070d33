import json
import os

import pytest

from pathrag_pipeline.config import Settings
from pathrag_pipeline.ingest.folder_sync import sync_folder
from pathrag_pipeline.storage.store import Store

LONG = " ".join(f"Ada Halden surveyed the harbour of Port Aster in year {1800 + i}." for i in range(300))


@pytest.fixture()
def env(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Valmere\n\nValmere University was founded by Ada Halden in 1851.\n")
    (docs / "b.txt").write_text("The Drayton Railway\n\n" + LONG)
    (docs / "sub").mkdir()
    (docs / "sub" / "c.html").write_text("<html><head><title>Carrick</title><script>x=1</script></head>"
                                         "<body><p>Carrick lies on the river Lune.</p></body></html>")
    (docs / "records.jsonl").write_text(
        json.dumps({"id": "r1", "title": "One", "text": "Record one about Kessel Bay."}) + "\n"
        + json.dumps({"id": "r2", "title": "Two", "text": "Record two about Northwick."}) + "\n"
    )
    settings = Settings.from_env(home=tmp_path / "home", docs=docs, chunk_tokens=200, chunk_overlap=20)
    return settings, docs, Store(settings.duckdb_path)


def rows(store, sql, params=()):
    with store.connect(read_only=True) as con:
        return con.execute(sql, list(params)).fetchall()


def test_full_ingest_writes_documents_and_chunks(env):
    settings, docs, store = env
    report = sync_folder(settings, store)
    assert len(report.plan.new) == 4 and not report.failed
    ids = {r[0] for r in rows(store, "SELECT id FROM documents WHERE status = 'indexed'")}
    assert ids == {"a.md", "b.txt", "sub/c.html", "records.jsonl#r1", "records.jsonl#r2"}
    # offsets point back into the stored document text
    for doc_text, start, end, chunk in rows(store, "SELECT d.text, c.char_start, c.char_end, c.text FROM chunks c "
                                                   "JOIN documents d ON d.id = c.document_id"):
        assert doc_text[start:end] == chunk
    assert rows(store, "SELECT count(*) FROM chunks WHERE document_id = 'b.txt'")[0][0] > 1
    html = rows(store, "SELECT title, text FROM documents WHERE id = 'sub/c.html'")[0]
    assert html[0] == "Carrick" and "x=1" not in html[1]


def test_unchanged_folder_processes_nothing(env):
    settings, docs, store = env
    sync_folder(settings, store)
    before = rows(store, "SELECT id, updated_at FROM documents ORDER BY id")
    again = sync_folder(settings, store)
    assert again.plan.new == [] and again.plan.changed == [] and len(again.plan.unchanged) == 4
    assert again.documents_written == 0 and again.chunks_written == 0
    assert rows(store, "SELECT id, updated_at FROM documents ORDER BY id") == before


def test_edit_reprocesses_only_that_file_and_keeps_untouched_chunk_ids(env):
    settings, docs, store = env
    sync_folder(settings, store)
    old_chunks = rows(store, "SELECT id FROM chunks WHERE document_id = 'b.txt' ORDER BY ordinal")
    (docs / "b.txt").write_text((docs / "b.txt").read_text() + "\nA final line about Greyhaven.\n")
    report = sync_folder(settings, store)
    assert report.plan.changed == ["b.txt"] and report.plan.new == []
    assert report.documents_written == 1
    new_chunks = rows(store, "SELECT id FROM chunks WHERE document_id = 'b.txt' ORDER BY ordinal")
    assert old_chunks[:-1] == new_chunks[:len(old_chunks) - 1]
    assert old_chunks != new_chunks


def test_jsonl_record_edit_rewrites_only_that_record(env):
    settings, docs, store = env
    sync_folder(settings, store)
    r1_before = rows(store, "SELECT updated_at FROM documents WHERE id = 'records.jsonl#r1'")
    (docs / "records.jsonl").write_text(
        json.dumps({"id": "r1", "title": "One", "text": "Record one about Kessel Bay."}) + "\n"
        + json.dumps({"id": "r2", "title": "Two", "text": "Record two, now about Ember Falls."}) + "\n"
    )
    report = sync_folder(settings, store)
    assert report.documents_written == 1
    assert rows(store, "SELECT updated_at FROM documents WHERE id = 'records.jsonl#r1'") == r1_before
    assert "Ember Falls" in rows(store, "SELECT text FROM chunks WHERE document_id = 'records.jsonl#r2'")[0][0]


def test_deleted_file_removes_documents_and_chunks(env):
    settings, docs, store = env
    sync_folder(settings, store)
    (docs / "b.txt").unlink()
    (docs / "records.jsonl").unlink()
    report = sync_folder(settings, store)
    assert report.plan.deleted == ["b.txt", "records.jsonl"]
    assert rows(store, "SELECT count(*) FROM documents WHERE path IN ('b.txt', 'records.jsonl')")[0][0] == 0
    assert rows(store, "SELECT count(*) FROM chunks WHERE document_id NOT IN (SELECT id FROM documents)")[0][0] == 0
    assert rows(store, "SELECT count(*) FROM documents")[0][0] == 2


BAD = {
    "empty.txt": b"",
    "binary.txt": b"\x00\x01\x02\x03 not text \x00" * 10,
    "latin1.md": "Caf\xe9 au lait".encode("latin-1"),
    "broken.pdf": b"%PDF-1.4\n this is not really a pdf",
    "big.txt": b"x" * 200_000,
    "bad.jsonl": b'{"id": "ok", "text": "A fine record about Valmere."}\n{not json}\n',
}


def test_bad_inputs_get_clear_errors_and_others_still_index(env):
    settings, docs, store = env
    for name, data in BAD.items():
        (docs / name).write_bytes(data)
    outside = docs.parent / "outside.txt"
    outside.write_text("secret outside the folder")
    os.symlink(outside, docs / "link.txt")
    settings = Settings.from_env(home=settings.home, docs=docs, chunk_tokens=200, chunk_overlap=20, max_file_bytes=100_000)
    report = sync_folder(settings, store)
    errors = dict(rows(store, "SELECT id, error FROM documents WHERE status = 'error'"))
    assert "empty" in errors["empty.txt"].lower()
    assert "binary" in errors["binary.txt"].lower()
    # not UTF-8: read as Windows-1252, indexed with a warning naming it (not an error a user cannot fix)
    assert rows(store, "SELECT status, text, warning LIKE 'latin1.md is not UTF-8%' FROM documents "
                       "WHERE id = 'latin1.md'") == [("indexed", "Caf\u00e9 au lait", True)]
    assert "pdf" in errors["broken.pdf"].lower()
    assert "PATHRAG_MAX_FILE_BYTES" in errors["big.txt"]
    assert "outside" in errors["link.txt"]
    assert any(k.startswith("bad.jsonl#") and "line 2" in v for k, v in errors.items())
    indexed = {r[0] for r in rows(store, "SELECT id FROM documents WHERE status = 'indexed'")}
    assert {"a.md", "b.txt", "sub/c.html", "records.jsonl#r1", "bad.jsonl#ok"} <= indexed
    assert "secret" not in " ".join(r[0] or "" for r in rows(store, "SELECT text FROM documents"))
    assert {f.rel_path for f in report.failed} >= {"empty.txt", "binary.txt", "broken.pdf", "big.txt", "link.txt", "bad.jsonl"}


def test_file_that_breaks_after_indexing_keeps_its_last_good_version(env):
    settings, docs, store = env
    sync_folder(settings, store)
    n_chunks = rows(store, "SELECT count(*) FROM chunks WHERE document_id = 'a.md'")[0][0]
    (docs / "a.md").write_bytes(b"\xff\xfe\x00\x00garbage")
    report = sync_folder(settings, store)
    status, error, text = rows(store, "SELECT status, error, text FROM documents WHERE id = 'a.md'")[0]
    assert status == "error" and "last good version" in error and "Valmere" in text
    assert [f.errors for f in report.failed] == [[error]]        # the run's report says it too
    assert rows(store, "SELECT count(*) FROM chunks WHERE document_id = 'a.md'")[0][0] == n_chunks
    # fixing the file re-indexes it
    (docs / "a.md").write_text("# Valmere\n\nNow fixed.\n")
    sync_folder(settings, store)
    assert rows(store, "SELECT status, error FROM documents WHERE id = 'a.md'")[0] == ("indexed", None)


def test_changing_chunk_settings_rechunks(env):
    settings, docs, store = env
    sync_folder(settings, store)
    before = rows(store, "SELECT count(*) FROM chunks WHERE document_id = 'b.txt'")[0][0]
    smaller = Settings.from_env(home=settings.home, docs=docs, chunk_tokens=100, chunk_overlap=10)
    report = sync_folder(smaller, store)
    assert report.rechunked_chunks > 0
    assert rows(store, "SELECT count(*) FROM chunks WHERE document_id = 'b.txt'")[0][0] > before


def test_run_log_records_each_sync(env):
    settings, docs, store = env
    sync_folder(settings, store, trigger="cli")
    sync_folder(settings, store, trigger="cli")
    log = rows(store, "SELECT files_new, files_unchanged FROM ingest_runs ORDER BY started_at")
    assert log == [(4, 0), (0, 4)]


def test_missing_folder_is_a_clear_error(tmp_path):
    settings = Settings.from_env(home=tmp_path / "home", docs=tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="nope"):
        sync_folder(settings)


# ---- real folders (issue 10, item 3) -------------------------------------------------------------------

def _statuses(store):
    return dict(rows(store, "SELECT id, status FROM documents"))


def test_symlink_loop_is_an_error_row_not_an_abort(env):
    settings, docs, store = env
    os.symlink("loop.txt", docs / "loop.txt")              # points at itself
    os.symlink("b2.md", docs / "a2.md")
    os.symlink("a2.md", docs / "b2.md")                    # a two-link cycle
    report = sync_folder(settings, store)
    statuses = _statuses(store)
    assert statuses["loop.txt"] == statuses["a2.md"] == "error" and statuses["a.md"] == "indexed"
    errors = dict(rows(store, "SELECT id, error FROM documents WHERE status = 'error'"))
    assert "symlink loop" in errors["loop.txt"]
    assert {r.rel_path for r in report.failed} >= {"loop.txt", "a2.md", "b2.md"}


def test_linked_folders_are_not_followed_and_the_report_names_them(env):
    """A subfolder that is a symlink (to a folder outside, or back into the folder, a loop) is not indexed and is
    said, not skipped without a word; the no-op check sees the same scan, so an unchanged folder stays a no-op."""
    from click.testing import CliRunner

    from pathrag_pipeline.cli import main

    settings, docs, store = env
    outside = docs.parent / "outside"
    outside.mkdir()
    (outside / "o.md").write_text("# Outside\nText from outside the folder.\n")
    os.symlink(outside, docs / "outdir")
    os.symlink(".", docs / "sub" / "loop")
    report = sync_folder(settings, store)
    assert report.linked_dirs == ["outdir", "sub/loop"]
    ids = [r[0] for r in rows(store, "SELECT id FROM documents")]
    assert "sub/c.html" in ids and not [i for i in ids if i.startswith(("outdir/", "sub/loop/"))]
    env_vars = {"PATHRAG_HOME": str(settings.home), "PATHRAG_AUTO_SERVE": "never"}
    res = CliRunner().invoke(main, ["index", str(docs), "--local"], env=env_vars)
    assert res.exit_code == 0, res.output
    assert "skipped 2 linked folder(s)" in res.stdout and "outdir, sub/loop" in res.stdout
    again = CliRunner().invoke(main, ["index", str(docs), "--local"], env=env_vars)
    assert "Up to date, no run launched" in again.stdout and "skipped 2 linked folder(s)" in again.stdout
    assert "as the last run left them" in again.stdout and "near-duplicate names found" in res.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_fifo_is_skipped_without_being_opened(env, monkeypatch):
    settings, docs, store = env
    os.mkfifo(docs / "pipe.txt")
    from pathrag_pipeline.ingest import folder_sync

    opened = []
    real = folder_sync.file_sha256
    monkeypatch.setattr(folder_sync, "file_sha256", lambda p: opened.append(p) or real(p))
    sync_folder(settings, store)                          # would block forever if the FIFO were read
    assert all(p.name != "pipe.txt" for p in opened)
    error = rows(store, "SELECT status, error FROM documents WHERE id = 'pipe.txt'")[0]
    assert error[0] == "error" and "FIFO" in error[1]
    assert _statuses(store)["a.md"] == "indexed"


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True,
                    reason="root reads any folder; permissions cannot make it unreadable")
def test_unreadable_subfolder_is_an_error_and_its_files_stay_indexed(env):
    settings, docs, store = env
    sync_folder(settings, store)
    os.chmod(docs / "sub", 0)
    try:
        report = sync_folder(settings, store)
    finally:
        os.chmod(docs / "sub", 0o755)
    assert _statuses(store)["sub/c.html"] == "indexed"
    assert not report.plan.deleted
    assert any(r.rel_path == "sub" and r.status == "error" for r in report.results)


def test_unreadable_subfolder_keeps_its_files_in_the_plan(env, monkeypatch):
    """The same as above for a root user: os.walk reports the listing failure through onerror."""
    settings, docs, store = env
    sync_folder(settings, store)
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path).endswith(os.sep + "sub"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    report = sync_folder(settings, store)
    assert _statuses(store)["sub/c.html"] == "indexed" and not report.plan.deleted
    failed = {r.rel_path: r for r in report.failed}
    assert "Permission denied" in failed["sub"].errors[0]
    assert rows(store, "SELECT count(*) FROM chunks WHERE document_id = 'sub/c.html'")[0][0] > 0


def test_malformed_jsonl_record_keeps_its_last_good_version(env):
    settings, docs, store = env
    sync_folder(settings, store)
    (docs / "records.jsonl").write_text(
        json.dumps({"id": "r1", "title": "One", "text": "Record one about Kessel Bay."}) + "\n"
        + '{"id": "r2", "title": "Two", "text": "Record two about Northw\n'          # broken JSON
    )
    report = sync_folder(settings, store)
    kept = rows(store, "SELECT status, error, text FROM documents WHERE id = 'records.jsonl#r2'")
    assert kept and kept[0][0] == "error" and "last good version" in kept[0][1] and "Northwick" in kept[0][2]
    assert rows(store, "SELECT count(*) FROM chunks WHERE document_id = 'records.jsonl#r2'")[0][0] > 0
    assert any(r.rel_path == "records.jsonl" and r.status == "partial" for r in report.results)
    # fixed again: indexed again, and a record really deleted from a clean file is removed
    (docs / "records.jsonl").write_text(json.dumps({"id": "r2", "title": "Two", "text": "Record two about Northwick."}) + "\n")
    before = set(_statuses(store))
    fixed = sync_folder(settings, store)
    statuses = _statuses(store)
    assert statuses["records.jsonl#r2"] == "indexed" and "records.jsonl#r1" not in statuses
    # the rows gone from a changed file are said (`docs deleted`): r1 and the malformed line's own error row
    assert fixed.documents_deleted == len(before - set(statuses)) == 2 and "records.jsonl#r1" in before
    # a file of which no record can be read failed, it is not 'partial'
    (docs / "unreadable.jsonl").write_text('{"id": "u1", "text": "cut off\n')
    report = sync_folder(settings, store)
    assert [r.status for r in report.results if r.rel_path == "unreadable.jsonl"] == ["error"]


def test_unsupported_files_are_listed_in_the_report(env):
    settings, docs, store = env
    for i in range(25):
        (docs / f"table{i:02}.csv").write_text("a,b\n1,2\n")
    report = sync_folder(settings, store)
    assert report.unsupported_count == 25
    assert report.unsupported[:2] == ["table00.csv", "table01.csv"] and len(report.unsupported) == 20


def test_files_with_no_suffix_and_gzipped_files_are_indexed_binaries_skipped(env):
    import gzip

    settings, docs, store = env
    (docs / "README").write_text("Port Aster Guide\n\nThe Port Aster guide lists the harbour's moorings.\n")
    (docs / "sub" / "NEWS.gz").write_bytes(gzip.compress(b"Release 4 of the guide maps the Lune estuary.\n"))
    (docs / "notes.md.gz").write_bytes(gzip.compress(b"# Notes\n\nKessel Bay freezes in January.\n"))
    (docs / "tool").write_bytes(b"\x7fELF" + bytes(100))
    (docs / "archive.tar.gz").write_bytes(gzip.compress(b"x" * 100))
    report = sync_folder(settings, store)
    assert sorted(report.unsupported) == ["archive.tar.gz", "tool"] and not report.failed
    formats = dict(rows(store, "SELECT id, format FROM documents WHERE status = 'indexed'"))
    assert formats["README"] == "text" and formats["sub/NEWS.gz"] == "text.gz" and formats["notes.md.gz"] == "md.gz"
    text = dict(rows(store, "SELECT document_id, string_agg(text, ' ') FROM chunks GROUP BY document_id"))
    assert "moorings" in text["README"] and "Lune estuary" in text["sub/NEWS.gz"] and "January" in text["notes.md.gz"]
    # the next scan finds them unchanged (a known text file is not sniffed again: the hash cache knows it)
    again = sync_folder(settings, store)
    assert not again.plan.new and not again.plan.changed and again.unsupported_count == 2
    # a file with no suffix that turns binary leaves the index, as a deleted file does
    (docs / "README").write_bytes(bytes(50))
    assert sync_folder(settings, store).plan.deleted == ["README"]


def test_docx_that_inflates_past_the_text_limit_is_an_error(env):
    import docx

    settings, docs, store = env
    document = docx.Document()
    for _ in range(200):
        document.add_paragraph("Kessel Bay " * 200)              # ~440 KB of text, compresses to a few KB
    document.save(docs / "bomb.docx")
    from dataclasses import replace

    small = replace(settings, max_text_bytes=100_000)
    sync_folder(small, store)
    status, error = rows(store, "SELECT status, error FROM documents WHERE id = 'bomb.docx'")[0]
    assert status == "error" and "PATHRAG_MAX_TEXT_BYTES" in error
    assert _statuses(store)["a.md"] == "indexed"


def test_text_limit_applies_to_every_format(env):
    from dataclasses import replace

    settings, docs, store = env
    sync_folder(replace(settings, max_text_bytes=1000), store)
    errors = dict(rows(store, "SELECT id, error FROM documents WHERE status = 'error'"))
    assert "PATHRAG_MAX_TEXT_BYTES" in errors["b.txt"] and "a.md" not in errors


def test_parse_batches_are_bounded_by_bytes_and_files():
    from pathrag_pipeline.ingest.folder_sync import PARSE_BATCH_BYTES, PARSE_BATCH_FILES, FileEntry, _parse_batches

    sizes = [10, PARSE_BATCH_BYTES, 10, 10] + [1] * (PARSE_BATCH_FILES + 5)
    scan = {f"f{i}": FileEntry(f"f{i}", None, n, "h") for i, n in enumerate(sizes)}
    batches = list(_parse_batches(list(scan), scan))
    assert [p for b in batches for p in b] == list(scan)                      # every file once, in order
    assert all(len(b) <= PARSE_BATCH_FILES for b in batches)
    assert all(sum(scan[p].size for p in b) <= PARSE_BATCH_BYTES or len(b) == 1 for b in batches)
    assert ["f1"] in batches                                                  # a big file is a batch alone


def test_parsed_batches_wait_for_a_costly_write_up_to_a_byte_cap(env, monkeypatch):
    """Parsed batches are written together while the next write is not due (its fixed cost is high next to
    parsing), never more than WRITE_BATCH_BYTES of input at once, and every file is stored either way."""
    from pathrag_pipeline.ingest import folder_sync
    from pathrag_pipeline.storage.write_pacing import WritePacer

    settings, docs, store = env
    for i in range(6):
        (docs / f"extra{i}.txt").write_text(f"Extra file {i} about Kessel Bay and Ostrava.")
    files = sum(1 for f in docs.rglob("*") if f.is_file())
    monkeypatch.setattr(folder_sync, "PARSE_BATCH_FILES", 2)
    monkeypatch.setattr(folder_sync, "WritePacer", lambda _min: WritePacer(3600.0, share=None))   # never due
    writes: list[int] = []
    sync_folder(settings, store, progress=lambda done, total: writes.append(done))
    assert writes == [files]                                   # one write, after the last batch
    assert rows(store, "SELECT count(*) FROM documents")[0][0] == files + 1   # the JSONL file holds two

    store2 = Store(env[0].home / "second.duckdb")
    monkeypatch.setattr(folder_sync, "WRITE_BATCH_BYTES", 1)   # the cap: every parsed batch is written
    writes.clear()
    sync_folder(settings, store2, progress=lambda done, total: writes.append(done))
    assert len(writes) == -(-files // 2) and writes[-1] == files
    assert rows(store2, "SELECT id, content_hash, status FROM documents ORDER BY id") == \
        rows(store, "SELECT id, content_hash, status FROM documents ORDER BY id")


def test_chunks_of_a_big_document_are_written_in_slices(env, monkeypatch):
    from pathrag_pipeline.ingest import folder_sync

    settings, docs, store = env
    inserted = []
    real = folder_sync._insert
    monkeypatch.setattr(folder_sync, "CHUNK_INSERT_ROWS", 3)
    monkeypatch.setattr(folder_sync, "_insert",
                        lambda con, table, schema, rows, **kw: (inserted.append((table, len(rows))),
                                                                 real(con, table, schema, rows, **kw)))
    sync_folder(settings, store)
    chunk_writes = [n for table, n in inserted if table == "chunks" and n]
    total = rows(store, "SELECT count(*) FROM chunks")[0][0]
    assert sum(chunk_writes) == total and len(chunk_writes) > 1 and max(chunk_writes) < total


def test_deleted_jsonl_record_goes_while_another_line_is_malformed_but_shows_its_id(env):
    settings, docs, store = env
    good = {i: json.dumps({"id": f"r{i}", "title": f"R{i}", "text": f"Record {i} about Kessel Bay."}) for i in (1, 2, 3)}
    (docs / "records.jsonl").write_text("\n".join(good.values()) + "\n")
    sync_folder(settings, store)
    # r2 turns malformed (its id still readable), r3 is deleted
    (docs / "records.jsonl").write_text(good[1] + "\n" + '{"id": "r2", "title": "R2", "text": "Record two abo\n')
    sync_folder(settings, store)
    statuses = _statuses(store)
    assert statuses["records.jsonl#r2"] == "error" and "records.jsonl#r3" not in statuses
    assert rows(store, "SELECT count(*) FROM chunks WHERE document_id = 'records.jsonl#r2'")[0][0] > 0
    # a bad line that shows no id: a vanished record could be it, so it is held
    (docs / "records.jsonl").write_text("[not an object at all\n" + good[2] + "\n")
    sync_folder(settings, store)
    kept = rows(store, "SELECT status, error FROM documents WHERE id = 'records.jsonl#r1'")
    assert kept and kept[0][0] == "error" and "last good version" in kept[0][1]


def test_claimed_ids_of_malformed_lines():
    from pathrag_pipeline.ingest.parsing import _claimed_id

    assert _claimed_id(b'{"id": "a\\"b", "text": "cut', 3) == 'a"b'
    assert _claimed_id(b'{"id": 42, "text": "cut', 3) == "42"
    assert _claimed_id(b'{"id": "x", "text": ""}', 3) == "x"          # valid JSON, empty text
    assert _claimed_id(b'{"title": "no id", "text": 5}', 7) == "line-7"
    assert _claimed_id(b'{"text": "cut', 3) is None
    assert _claimed_id(b'{"id": "a", "x": {"id": "b"', 3) is None     # ambiguous


def test_an_edited_document_keeps_its_created_at_and_gets_its_new_text(env):
    """Documents are replaced by delete + insert (not an update of the stored text, which makes DuckDB's next
    checkpoint rewrite the whole text column of the row group): the row keeps when it was first indexed."""
    settings, docs, store = env
    sync_folder(settings, store)
    victim = sorted(p for p in docs.rglob("*.txt"))[0]
    rel = victim.relative_to(docs).as_posix()
    (created, updated), = rows(store, "SELECT created_at, updated_at FROM documents WHERE path = ?", [rel])
    victim.write_text(victim.read_text() + "\nA new closing line about Kessel Bay.\n")
    sync_folder(settings, store)
    (created2, updated2, text), = rows(store, "SELECT created_at, updated_at, text FROM documents WHERE path = ?", [rel])
    assert created2 == created and updated2 > updated
    assert text.rstrip().endswith("A new closing line about Kessel Bay.")
    assert rows(store, "SELECT count(*) FROM documents WHERE path = ?", [rel])[0][0] == 1


def _tables(store):
    return (rows(store, "SELECT id, path, title, format, content_hash, file_hash, size_bytes, status, error, text "
                        "FROM documents ORDER BY id"),
            rows(store, "SELECT * FROM chunks ORDER BY id"))


def test_parse_workers_write_the_tables_one_process_writes(env, tmp_path, monkeypatch):
    """Issue 23, both cores: a large sync parses and chunks in worker processes (from PARSE_PROCESS_MIN_BYTES of
    input, lowered here) while this process writes; documents and chunks equal a sync parsed here, malformed and
    undecodable files included, and the chunks are the workers' (this process chunks nothing)."""
    from pathrag_pipeline.ingest import folder_sync

    settings, docs, store = env
    (docs / "records.jsonl").write_text((docs / "records.jsonl").read_text() + "{not json\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    (docs / "latin1.txt").write_bytes("Caf\xe9 Noir in S\xe3o Paulo.".encode("latin-1"))
    for i in range(12):
        (docs / f"many{i}.txt").write_text(f"Note {i}\n\n" + LONG[: 400 * (i + 1)])
    monkeypatch.setattr(folder_sync, "PARSE_PROCESS_MIN_BYTES", 0)
    monkeypatch.setattr(folder_sync, "PARSE_BATCH_FILES", 3)     # several batches in flight at once
    here = Settings.from_env(home=tmp_path / "here", docs=docs, chunk_tokens=200, chunk_overlap=20,
                             extract_processes=1)
    sync_folder(here, Store(here.duckdb_path))
    expected = _tables(Store(here.duckdb_path))
    assert len(expected[0]) >= 18 and len(expected[1]) > 20

    pools, chunked_here = [], []
    real_pool, real_chunk_text = folder_sync.worker_pool, folder_sync.chunk_text
    monkeypatch.setattr(folder_sync, "worker_pool", lambda workers: pools.append({"max_workers": workers})
                        or real_pool(workers))
    monkeypatch.setattr(folder_sync, "chunk_text", lambda *a, **kw: chunked_here.append(a) or real_chunk_text(*a, **kw))
    workers = Settings.from_env(home=tmp_path / "workers", docs=docs, chunk_tokens=200, chunk_overlap=20,
                                extract_processes=2)
    report = sync_folder(workers, Store(workers.duckdb_path))
    assert [p["max_workers"] for p in pools] == [2] and not chunked_here
    assert _tables(Store(workers.duckdb_path)) == expected
    assert {r.rel_path for r in report.failed} >= {"broken.pdf"}


def test_a_dead_parse_worker_pool_leaves_parsing_to_this_process(env, tmp_path, monkeypatch, caplog):
    """Workers that die (a parser crashing its process) cost no file: the batches are parsed here instead."""
    from pathrag_pipeline.ingest import folder_sync
    from tests.parse_worker_faults import die

    settings, docs, store = env
    monkeypatch.setattr(folder_sync, "PARSE_PROCESS_MIN_BYTES", 0)
    monkeypatch.setattr(folder_sync, "PARSE_BATCH_FILES", 1)
    here = Settings.from_env(home=tmp_path / "here", docs=docs, chunk_tokens=200, chunk_overlap=20,
                             extract_processes=1)
    sync_folder(here, Store(here.duckdb_path))
    monkeypatch.setattr(folder_sync, "_parse_and_chunk", die)
    workers = Settings.from_env(home=tmp_path / "workers", docs=docs, chunk_tokens=200, chunk_overlap=20,
                                extract_processes=2)
    with caplog.at_level("WARNING", logger="pathrag_pipeline.ingest.folder_sync"):
        report = sync_folder(workers, Store(workers.duckdb_path))
    assert not report.failed and _tables(Store(workers.duckdb_path)) == _tables(Store(here.duckdb_path))
    assert sum("worker processes stopped" in r.getMessage() for r in caplog.records) == 1


def test_a_new_parser_reads_every_file_once_and_rewrites_only_documents_whose_text_changed(env, monkeypatch):
    from pathrag_pipeline.ingest import folder_sync
    from pathrag_pipeline.storage.store import set_meta

    settings, docs, store = env
    sync_folder(settings)
    before = dict(rows(store, "SELECT id, updated_at FROM documents"))
    chunk_ids = {r[0] for r in rows(store, "SELECT id FROM chunks")}
    with store.connect() as con:   # the home was read by an older parser
        set_meta(con, "parsing", "parse-v1")
    read: list[str] = []
    real = folder_sync.parse_entry
    monkeypatch.setattr(folder_sync, "parse_entry", lambda entry, **kw: read.append(entry.rel_path) or real(entry, **kw))
    report = sync_folder(settings)
    assert sorted(read) == ["a.md", "b.txt", "records.jsonl", "sub/c.html"]     # every file read again ...
    assert report.documents_written == 0 and report.plan.changed == []           # ... none of them changed
    assert dict(rows(store, "SELECT id, updated_at FROM documents")) == before
    assert {r[0] for r in rows(store, "SELECT id FROM chunks")} == chunk_ids
    read.clear()
    sync_folder(settings)
    assert read == []                                                            # once, not every run


def test_the_folder_s_ignore_file_keeps_paths_out_and_their_documents_leave(env):
    from pathrag_pipeline.ingest.ignore_file import IGNORE_FILE

    settings, docs, store = env
    (docs / "sub" / "_static").mkdir()
    (docs / "sub" / "_static" / "theme.txt").write_text("Theme notes about the colour of the navigation bar.\n")
    (docs / "drafts.md").write_text("# Draft\n\nA draft about Kessel Bay.\n")
    (docs / "keep.md").write_text("# Keep\n\nKept page about Northwick.\n")
    sync_folder(settings, store)
    assert {"sub/_static/theme.txt", "drafts.md"} <= {r[0] for r in rows(store, "SELECT path FROM documents")}
    (docs / IGNORE_FILE).write_text("# kept out of the index\n_static/\ndraft*\n*.md\n!keep.md\n")
    report = sync_folder(settings, store)
    assert sorted(report.plan.deleted) == ["a.md", "drafts.md", "sub/_static/theme.txt"]
    assert (report.ignored_files, report.ignored_folders) == (2, 1)   # a.md and drafts.md; sub/_static
    assert {r[0] for r in rows(store, "SELECT DISTINCT path FROM documents")} == {"b.txt", "sub/c.html",
                                                                                  "records.jsonl", "keep.md"}
    # ignoring everything is refused like an empty folder, and the refusal names the ignore file
    from pathrag_pipeline.ingest.home_folder import FolderRefused

    (docs / IGNORE_FILE).write_text("*\n")
    with pytest.raises(FolderRefused, match=r"is its \.pathragignore leaving out too much \(it matched 5 file\(s\) and 1 folder"):
        sync_folder(settings, store)
    # the ignore file itself is never a document, and emptying it brings the files back
    (docs / IGNORE_FILE).write_text("")
    assert sorted(sync_folder(settings, store).plan.new) == ["a.md", "drafts.md", "sub/_static/theme.txt"]


def test_an_ignore_file_that_cannot_be_used_stops_the_sync_before_any_change(env):
    from pathrag_pipeline.ingest.ignore_file import IGNORE_FILE, IgnoreFileError

    settings, docs, store = env
    sync_folder(settings, store)
    before = rows(store, "SELECT id, updated_at FROM documents ORDER BY id")
    (docs / "a.md").unlink()   # a change the refused run must not make either
    ignore = docs / IGNORE_FILE
    ignore.write_bytes(b"caf\xe9/\n")
    with pytest.raises(IgnoreFileError, match=r"\.pathragignore is not UTF-8 text.*Nothing was changed"):
        sync_folder(settings, store)
    ignore.write_text("ok.md\n!\n")   # a lone "!" is no pattern
    with pytest.raises(IgnoreFileError, match=r"\.pathragignore: .*fix or remove that line"):
        sync_folder(settings, store)
    ignore.unlink()
    ignore.symlink_to(docs / "nowhere")   # a link to nothing is no missing ignore file
    with pytest.raises(IgnoreFileError, match=r"cannot read .*\.pathragignore: No such file.*where it links to"):
        sync_folder(settings, store)
    ignore.unlink()
    if os.geteuid() != 0:   # root reads any file
        ignore.write_text("x\n")
        ignore.chmod(0)
        with pytest.raises(IgnoreFileError, match=r"cannot read .*\.pathragignore"):
            sync_folder(settings, store)
        ignore.chmod(0o644)
    assert rows(store, "SELECT id, updated_at FROM documents ORDER BY id") == before


def test_a_file_in_error_for_a_limit_is_read_again_once_the_limit_is_raised(env):
    """A .gz that inflates past PATHRAG_MAX_FILE_BYTES is unchanged on disk, so its hash never told the next run to
    read it again: the message said to raise the limit, and raising it did nothing (a trial, session 67)."""
    import dataclasses
    import gzip

    from pathrag_pipeline.index.pending_work import up_to_date_report

    settings, docs, store = env
    (docs / "big.txt.gz").write_bytes(gzip.compress(b"The Lune estuary tide tables. " * 2000))   # 60 kB inflated
    small = dataclasses.replace(settings, max_file_bytes=20_000)
    report = sync_folder(small, store)
    assert [r.status for r in report.results if r.rel_path == "big.txt.gz"] == ["error"]
    assert rows(store, "SELECT format FROM documents WHERE path = 'big.txt.gz'") == [("txt.gz",)]
    again = "1 file(s) in error to read again under the changed size limits"
    assert again not in up_to_date_report(small, docs)[1]   # the same limits: the error stands
    assert again in up_to_date_report(settings, docs)[1]
    report = sync_folder(settings, store)
    assert report.plan.unchanged and [r.status for r in report.results] == ["indexed"]
    assert rows(store, "SELECT status, format FROM documents WHERE path = 'big.txt.gz'") == [("indexed", "txt.gz")]
    assert again not in up_to_date_report(settings, docs)[1]
