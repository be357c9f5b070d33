"""The embedding stage syncs LanceDB by difference (issue 23): an edit sends only the rows it changed, the result
always equals DuckDB's rows, and a ledger that no longer describes the LanceDB table is never trusted."""

import shutil

import pytest

from pathrag_pipeline.config import Settings
from pathrag_pipeline.index import embedding_stage
from pathrag_pipeline.index.embedding_stage import embedding_rows, sync_embeddings
from pathrag_pipeline.index.pipeline import graph_stage, ingest_stage, run_indexing
from pathrag_pipeline.llm.embedding import HashingEmbedder
from pathrag_pipeline.storage.store import Store
from pathrag_pipeline.storage.vector_store import VectorStore, text_hash

DOCS = {
    f"doc{i}.md": f"# Doc {i}\n\nAgnes Morrow{i} visited Hesketh Mill{i % 3}. The Varne Railway{i % 2} reached "
                  f"Corran Ford{i}. Thomas Greaves{i % 4} wrote to Agnes Morrow{i}.\n"
    for i in range(12)
}


@pytest.fixture()
def home(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    settings = Settings.from_env(home=tmp_path / "home", docs=docs)
    run_indexing(settings)
    return settings, docs


def lance_equals_duckdb(settings) -> bool:
    """Every LanceDB table holds exactly DuckDB's rows: same keys, same text (by hash), same payload."""
    vectors = VectorStore(settings.lancedb_path)
    for table, rows in embedding_rows(Store(settings.duckdb_path)).items():
        tbl = vectors._open(table)
        held = tbl.search().select(["key", "text_hash", *sorted(rows[0][2])]).limit(None).to_arrow().to_pylist()
        got = {r["key"]: (r["text_hash"], {k: v for k, v in r.items() if k not in ("key", "text_hash")}) for r in held}
        want = {k: (text_hash(t), p) for k, t, p in rows}
        if got != want:
            return False
    return True


def sent_rows(monkeypatch) -> list[int]:
    sent: list[int] = []
    real = VectorStore.upsert

    def counting(self, table, rows, embedder, **kwargs):
        sent.append(len(rows))
        return real(self, table, rows, embedder, **kwargs)

    monkeypatch.setattr(VectorStore, "upsert", counting)
    return sent


def test_an_edit_sends_only_the_rows_it_changed(home, monkeypatch):
    settings, docs = home
    assert lance_equals_duckdb(settings)
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        total = sum(con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in ("entities", "relations", "chunks"))
    sent = sent_rows(monkeypatch)
    (docs / "doc3.md").write_text(DOCS["doc3.md"] + "Agnes Morrow3 founded the Lode Society.\n")
    report = run_indexing(settings)
    assert report.embeddings.embedded > 0
    assert 0 < sum(sent) < total / 4                 # the edit's rows, not the tables
    assert lance_equals_duckdb(settings)
    sent.clear()
    again = run_indexing(settings)                   # nothing changed: nothing sent
    assert sum(sent) == 0 and again.embeddings.embedded == 0


def test_deleting_a_document_deletes_its_vectors(home):
    settings, docs = home
    (docs / "doc5.md").unlink()
    report = run_indexing(settings)
    assert sum(s.deleted for s in report.embeddings.tables.values()) > 0
    assert lance_equals_duckdb(settings)


def test_a_ledger_that_does_not_describe_the_table_is_not_trusted(home, monkeypatch):
    """LanceDB changed behind the ledger's back (a table deleted by hand, a crash after a LanceDB write): every
    row is sent again and the tables end equal to DuckDB's, embedding only what LanceDB lacks."""
    settings, docs = home
    shutil.rmtree(settings.lancedb_path / "chunks.lance")
    VectorStore(settings.lancedb_path).delete("entities", ["agnes morrow3"])
    sent = sent_rows(monkeypatch)
    store = Store(settings.duckdb_path)
    report = sync_embeddings(store, VectorStore(settings.lancedb_path), HashingEmbedder())
    assert report.tables["chunks"].embedded == len(DOCS)          # the lost table, whole
    assert report.tables["entities"].embedded == 1                # the one missing row, not the table
    # the two changed tables are sent whole; relations, whose ledger still describes its table, not at all
    assert report.tables["relations"].embedded == 0
    assert sorted(sent) == sorted([report.tables["entities"].total, len(DOCS)])
    assert lance_equals_duckdb(settings)


def test_a_batch_that_fails_is_sent_again_next_run(home, monkeypatch):
    settings, docs = home
    for i in range(12):
        (docs / f"doc{i}.md").write_text(DOCS[f"doc{i}.md"] + f"Mira Holt{i} joined them.\n")
    real = VectorStore.upsert
    calls = {"n": 0}

    def failing_second(self, table, rows, embedder, **kwargs):
        stats = real(self, table, rows, embedder, **kwargs)
        calls["n"] += 1
        if calls["n"] == 2:      # as if the embedder failed on this batch: nothing of it may be recorded
            return type(stats)(embedded=0, unchanged=0, deleted=0, total=stats.total, failed=len(rows),
                               errors=("stand-in failure",))
        return stats

    monkeypatch.setattr(embedding_stage, "SYNC_BATCH_ROWS", 5)
    monkeypatch.setattr(VectorStore, "upsert", failing_second)
    report = run_indexing(settings)
    assert report.embeddings.failed > 0
    monkeypatch.setattr(VectorStore, "upsert", real)
    sent = sent_rows(monkeypatch)
    run_indexing(settings)
    assert sum(sent) >= 5                            # the failed batch's rows went again
    assert lance_equals_duckdb(settings)


def test_the_remembered_no_op_state_from_the_ledger_equals_the_tables(home):
    """The state recorded at the end of a run comes from the ledger (no md5 pass over every row); it must equal
    what the next no-op check computes from the tables, after a build, an edit and a deletion."""
    settings, docs = home

    def states() -> tuple[str, str, str]:
        with Store(settings.duckdb_path).connect(read_only=True) as con:
            kw = {"embedder": HashingEmbedder().identity, "alias_threshold": settings.alias_embedding_threshold}
            return (embedding_stage.stored_synced_state(con), embedding_stage.synced_state(con, **kw),
                    embedding_stage.ledger_synced_state(con, **kw))

    stored, tables, ledger = states()
    assert stored == tables == ledger
    (docs / "doc3.md").write_text(DOCS["doc3.md"] + "\nAgnes Morrow3 met Corran Ford9 at Hesketh Mill1.\n")
    (docs / "doc5.md").unlink()
    run_indexing(settings)
    after = states()
    assert after[0] == after[1] == after[2] and after[1] != tables
    # a row changed behind the ledger's back: the tables' state no longer matches the one remembered
    with Store(settings.duckdb_path).connect() as con:
        con.execute("UPDATE entities SET description = description || ' (edited)' WHERE rowid = 0")
    moved = states()
    assert moved[1] != moved[0] and moved[2] == moved[0]


def test_a_ledger_of_md5_fingerprints_is_converted_and_sends_only_what_changed(home, monkeypatch):
    """Homes synced before the fingerprint became DuckDB's row hash hold md5 fingerprints: the first sync converts
    those that still match their row (never sent again) and sends the rows that changed since."""
    settings, docs = home
    store = Store(settings.duckdb_path)
    with store.connect() as con:
        for name, sql in embedding_stage.SOURCES.items():   # the ledger as the md5 version wrote it
            con.execute(f"""UPDATE vector_rows v SET fingerprint = n.md5 FROM (SELECT t.key, md5(CAST(t AS VARCHAR))
                            AS md5 FROM ({sql}) t) n WHERE v.table_name = ? AND v.key = n.key""", [name])
        con.execute("DELETE FROM pathrag_meta WHERE key = ?", [embedding_stage.FINGERPRINT_META])
        assert con.execute("SELECT count(*) FROM vector_rows WHERE length(fingerprint) = 32").fetchone()[0] > 0
    sent = sent_rows(monkeypatch)
    (docs / "doc3.md").write_text(DOCS["doc3.md"] + "Agnes Morrow3 founded the Lode Society.\n")
    run_indexing(settings)
    with store.connect(read_only=True) as con:
        total = sum(con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in ("entities", "relations", "chunks"))
        assert con.execute("SELECT count(*) FROM vector_rows WHERE length(fingerprint) = 32").fetchone()[0] == 0
    assert 0 < sum(sent) < total / 4
    assert lance_equals_duckdb(settings)


def edit_three_docs(docs) -> None:
    for i in (2, 5, 7):
        (docs / f"doc{i}.md").write_text(DOCS[f"doc{i}.md"] + f"Mira Holt{i} joined the Lode Society.\n")


def count_connections(monkeypatch) -> list[bool]:
    opened: list[bool] = []
    real = Store.connect

    def counting(self, read_only=False, **kwargs):
        opened.append(read_only)
        return real(self, read_only, **kwargs)

    monkeypatch.setattr(Store, "connect", counting)
    return opened


def test_an_edit_sync_opens_the_file_twice(home, monkeypatch):
    """Every table's changes fit one batch: planned and fetched on one connection, recorded on one more."""
    settings, docs = home
    edit_three_docs(docs)
    store = Store.for_settings(settings)
    ingest_stage(settings, store)
    graph_stage(settings, store)
    opened = count_connections(monkeypatch)
    report = sync_embeddings(store, VectorStore(settings.lancedb_path), HashingEmbedder())
    assert report.embedded > 0 and all(s.embedded or s.unchanged for s in report.tables.values())
    assert len(opened) == 2
    assert lance_equals_duckdb(settings)


def test_a_sync_killed_before_its_record_sends_its_rows_again_and_embeds_none(home, monkeypatch):
    """LanceDB holds an edit's rows but the ledger was not updated (killed between the two): the next sync sends
    those rows again (unrecorded, or every row of a table whose ledger no longer describes it), re-embeds none,
    and ends equal to DuckDB."""
    settings, docs = home
    edit_three_docs(docs)
    written = sent_rows(monkeypatch)

    def killed(*_args, **_kwargs):
        raise RuntimeError("killed before the ledger was written")

    real = embedding_stage._remember
    monkeypatch.setattr(embedding_stage, "_remember", killed)
    with pytest.raises(RuntimeError):
        run_indexing(settings)
    monkeypatch.setattr(embedding_stage, "_remember", real)
    killed_wrote = sum(written)
    assert killed_wrote > 0                          # the killed run wrote LanceDB
    sent = sent_rows(monkeypatch)
    report = sync_embeddings(Store(settings.duckdb_path), VectorStore(settings.lancedb_path), HashingEmbedder())
    assert report.embedded == 0                      # LanceDB already held every text
    assert sum(sent) >= killed_wrote                 # nothing the killed run wrote was taken as recorded
    assert lance_equals_duckdb(settings)
    sent.clear()
    again = sync_embeddings(Store(settings.duckdb_path), VectorStore(settings.lancedb_path), HashingEmbedder())
    assert sum(sent) == 0 and again.embedded == 0    # the ledger is trusted again


def test_a_single_batch_that_fails_is_not_recorded(home, monkeypatch):
    """The edit path (one batch per table, recorded after every table is written): a failed batch's rows are
    recorded stale, so the next run sends them again, while the other tables' rows are recorded."""
    settings, docs = home
    edit_three_docs(docs)
    real = VectorStore.upsert

    def failing_relations(self, table, rows, embedder, **kwargs):
        stats = real(self, table, rows, embedder, **kwargs)
        if table == "relations":
            return type(stats)(embedded=0, unchanged=0, deleted=0, total=stats.total, failed=len(rows),
                               errors=("stand-in failure",))
        return stats

    monkeypatch.setattr(VectorStore, "upsert", failing_relations)
    failed = run_indexing(settings).embeddings
    assert failed.tables["relations"].failed > 0 and failed.tables["entities"].embedded > 0
    monkeypatch.setattr(VectorStore, "upsert", real)
    tables: list[str] = []
    real_sync = embedding_stage._sync_table

    def which(store, vectors, embedder, name, batch_rows, plan, ledger):
        if plan.send:
            tables.append(name)
        return real_sync(store, vectors, embedder, name, batch_rows, plan, ledger)

    monkeypatch.setattr(embedding_stage, "_sync_table", which)
    sent = sent_rows(monkeypatch)
    sync_embeddings(Store(settings.duckdb_path), VectorStore(settings.lancedb_path), HashingEmbedder())
    assert tables == ["relations"] and sum(sent) == failed.tables["relations"].failed
    assert lance_equals_duckdb(settings)


def behind_the_writers_back(settings, key: str) -> None:
    """Change an entity's row as no writer of the index does (storage/vector_ledger.py): its ledger row stays."""
    with Store(settings.duckdb_path).connect() as con:
        con.execute("UPDATE entities SET description = description || ' (edited by hand)' WHERE entity_key = ?",
                    [key])


def test_an_edit_sends_what_the_writers_marked_and_a_run_with_nothing_to_do_checks_every_row(home, monkeypatch):
    """The ledger keeps the writers' contract: an edit sends the keys they marked and fingerprints no other row
    (so a row changed by hand, unmarked, is not seen), and a run that finds nothing marked compares every
    fingerprint, which sends it."""
    settings, docs = home
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        assert embedding_stage.get_meta(con, embedding_stage.EXACT_META) == "1"
    behind_the_writers_back(settings, "corran ford9")
    sent = sent_rows(monkeypatch)
    (docs / "doc3.md").write_text(DOCS["doc3.md"] + "Agnes Morrow3 founded the Lode Society.\n")
    assert run_indexing(settings).embeddings.embedded > 0
    assert 0 < sum(sent) and not lance_equals_duckdb(settings)     # the edit's rows only: not the hand-made change
    sent.clear()
    report = run_indexing(settings)                                  # nothing marked: every fingerprint compared
    assert report.embeddings.tables["entities"].embedded == 1 and sum(sent) == 1
    assert lance_equals_duckdb(settings)


def test_a_ledger_from_before_the_writers_contract_is_checked_by_fingerprints_once(home, monkeypatch):
    """A home synced before the writers marked their changes may hold a ledger row older than its row: its first
    sync compares every fingerprint (sending it), then plans from the marks."""
    settings, docs = home
    behind_the_writers_back(settings, "corran ford9")       # as a change the old ledger missed
    with Store(settings.duckdb_path).connect() as con:
        con.execute("DELETE FROM pathrag_meta WHERE key = ?", [embedding_stage.EXACT_META])
    (docs / "doc3.md").write_text(DOCS["doc3.md"] + "Agnes Morrow3 founded the Lode Society.\n")
    run_indexing(settings)
    assert lance_equals_duckdb(settings)
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        assert embedding_stage.get_meta(con, embedding_stage.EXACT_META) == "1"


def test_an_entity_renamed_by_another_document_resends_the_relations_that_name_it(home):
    """A relation's text holds its endpoints' names: when a new document makes "AGNES MORROW3" the most frequent
    form of that entity, its relations (whose rows do not change) are sent again with the new name."""
    settings, docs = home
    (docs / "caps.md").write_text("# Caps\n\nAGNES MORROW3 arrived. AGNES MORROW3 left. AGNES MORROW3 returned.\n")
    run_indexing(settings)
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        assert con.execute("SELECT name FROM entities WHERE entity_key = 'agnes morrow3'").fetchone()[0] == \
            "AGNES MORROW3"
        unchanged = con.execute("SELECT count(*) FROM relations WHERE src_key = 'agnes morrow3' AND "
                                "relation_key NOT LIKE '%caps%'").fetchone()[0]
    assert unchanged > 0
    assert lance_equals_duckdb(settings)


def test_a_changed_title_resends_the_chunk_that_keeps_its_id(home):
    """An HTML page whose <title> changes keeps its text, so its chunk keeps its id; the embedded passage starts
    with the title, so the chunk is sent again."""
    settings, docs = home
    page = "<html><head><title>{}</title></head><body><p>Agnes Morrow1 met Thomas Greaves1 at Corran Ford1.</p>" \
           "</body></html>\n"
    (docs / "page.html").write_text(page.format("First title"))
    run_indexing(settings)
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        before = con.execute("SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
                             "WHERE d.path = 'page.html'").fetchall()
    (docs / "page.html").write_text(page.format("Second title"))
    # with another change in the same run (a run with nothing else to send checks every row anyway)
    (docs / "doc3.md").write_text(DOCS["doc3.md"] + "Agnes Morrow3 founded the Lode Society.\n")
    run_indexing(settings)
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        after = con.execute("SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
                            "WHERE d.path = 'page.html'").fetchall()
    assert before == after and len(after) == 1
    assert lance_equals_duckdb(settings)


def test_rows_of_a_failed_batch_deleted_before_the_next_run_lose_their_vectors(home, monkeypatch):
    """A failed batch may have written some rows to LanceDB: its keys are recorded stale, not left out, so when
    they are deleted from DuckDB before the next sync, their vectors are deleted too."""
    settings, docs = home
    real = VectorStore.upsert

    def failing_chunks(self, table, rows, embedder, **kwargs):
        stats = real(self, table, rows, embedder, **kwargs)     # written, then reported failed
        if table == "chunks":
            return type(stats)(embedded=0, unchanged=0, deleted=0, total=stats.total, failed=len(rows),
                               errors=("stand-in failure",))
        return stats

    (docs / "doc4.md").write_text(DOCS["doc4.md"] + "Mira Holt4 joined the Lode Society.\n")
    monkeypatch.setattr(VectorStore, "upsert", failing_chunks)
    assert run_indexing(settings).embeddings.tables["chunks"].failed > 0
    monkeypatch.setattr(VectorStore, "upsert", real)
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM vector_rows WHERE table_name = 'chunks' AND fingerprint = ''"
                           ).fetchone()[0] > 0
    (docs / "doc4.md").unlink()
    run_indexing(settings)
    assert lance_equals_duckdb(settings)


def test_the_key_check_counts_keys_lancedb_lacks_and_keys_it_holds_in_excess(home):
    """``vector_key_drift`` (the index run's ``embedding_keys_match`` check): nothing after a sync; a key deleted from
    LanceDB behind the ledger's back is missing, a key it holds that DuckDB has not is stale."""
    settings, _ = home
    store, vectors = Store(settings.duckdb_path), VectorStore(settings.lancedb_path)
    assert embedding_stage.vector_key_drift(store, vectors) == {"entities": (0, 0), "relations": (0, 0),
                                                                "chunks": (0, 0)}
    rows = embedding_rows(store)
    victim = rows["chunks"][0][0]
    assert vectors.delete("chunks", [victim]) == 1
    _, text, payload = rows["entities"][0]
    vectors.upsert("entities", [("no such entity", text, payload)], HashingEmbedder())
    assert embedding_stage.vector_key_drift(store, vectors) == {"entities": (0, 1), "relations": (0, 0),
                                                                "chunks": (1, 0)}
