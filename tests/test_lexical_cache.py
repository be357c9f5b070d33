"""The chunk BM25 index is cached on the chunks_version token ingest writes, not on a hash of every chunk."""

from __future__ import annotations

import shutil

import pytest

from pathrag_pipeline.config import Settings
from pathrag_pipeline.ingest.folder_sync import sync_folder
from pathrag_pipeline.query import lexical
from pathrag_pipeline.storage.store import CHUNKS_VERSION_META, Store, get_meta, transaction


def _token(store: Store) -> str | None:
    with store.connect(read_only=True) as con:
        return get_meta(con, CHUNKS_VERSION_META)


def _indexed(tmp_path, text: str):
    """A home holding one document ``a.txt`` with ``text``, its chunk index cache cleared."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text(text, encoding="utf-8")
    settings = Settings(home=tmp_path / "home", docs=docs)
    store = Store.for_settings(settings)
    lexical.clear_cache()
    sync_folder(settings, store)
    return docs, settings, store


def test_ingest_changes_the_token_and_the_cached_index_follows(tmp_path):
    docs, settings, store = _indexed(tmp_path, "The Lode rises near Westry and flows to Saltmouth.\n")
    first_token = _token(store)
    assert first_token
    index = lexical.chunk_index(store)
    assert lexical.chunk_index(store) is index                      # cached: one meta row read
    assert [key for key, _ in index.search("Westry", 5)]
    sync_folder(settings, store)                                     # nothing changed: same token, same index
    assert _token(store) == first_token and lexical.chunk_index(store) is index
    (docs / "a.txt").write_text("The Tamsin rises near Marrowby.\n", encoding="utf-8")
    sync_folder(settings, store)
    assert _token(store) != first_token
    fresh = lexical.chunk_index(store)
    assert fresh is not index
    assert fresh.search("Westry", 5) == [] and [key for key, _ in fresh.search("Marrowby", 5)]
    (docs / "a.txt").unlink()
    sync_folder(settings, store, replace_folder=True)                # emptying the home takes the explicit flag
    assert lexical.chunk_index(store).search("Marrowby", 5) == []


def test_a_store_without_the_token_falls_back_to_hashing_the_chunks(tmp_path):
    _, settings, store = _indexed(tmp_path, "The Lode rises near Westry.\n")
    with store.connect() as con, transaction(con):
        con.execute("DELETE FROM pathrag_meta WHERE key = ?", [CHUNKS_VERSION_META])
        con.execute("UPDATE chunks SET text = 'The Varne rises near Harrow Fell.', content_hash = 'changed'")
    assert [key for key, _ in lexical.chunk_index(store).search("Harrow", 5)]


def test_one_read_block_checks_the_chunks_version_once_and_the_next_block_sees_changes(tmp_path, monkeypatch):
    """Queries sharing a read block (the query service's batches) read the version token once; the file's read lock
    keeps writers out meanwhile, and a change made after the block is seen by the next one."""
    docs, settings, store = _indexed(tmp_path, "The Lode rises near Westry and flows to Saltmouth.\n")
    reads: list[int] = []
    real = lexical._chunk_index
    monkeypatch.setattr(lexical, "_chunk_index", lambda s: reads.append(1) or real(s))
    with store.reading():
        first = lexical.chunk_index(store)
        assert lexical.chunk_index(store) is first and lexical.chunk_index(store) is first
    assert len(reads) == 1
    assert store.read_memo() is None                                  # outside a block: nothing is kept
    (docs / "a.txt").write_text("The Tamsin rises near Marrowby.\n", encoding="utf-8")
    sync_folder(settings, store)
    with store.reading():
        assert [key for key, _ in lexical.chunk_index(store).search("Marrowby", 5)]
    assert len(reads) == 2


def _saved(settings: Settings) -> list:
    return sorted((settings.home / "cache").glob(f"{lexical.SAVED_PREFIX}*.npz"))


def test_a_new_process_loads_the_saved_index_instead_of_building_it(tmp_path, monkeypatch):
    """The first build saves the index in the home; a new process (the in-memory cache cleared) loads it, ranks
    exactly as the built one and reads the passages only when it uses the index again."""
    docs, settings, store = _indexed(tmp_path, "The Lode rises near Westry and flows to Saltmouth.\n")
    (docs / "b.txt").write_text("Saltmouth is a port; the Lode reaches it after Westry.\n", encoding="utf-8")
    sync_folder(settings, store)
    built = lexical.chunk_index(store)
    assert built.passages and len(_saved(settings)) == 1
    lexical.clear_cache()
    monkeypatch.setattr(lexical.BM25Index, "build", classmethod(lambda *a, **k: pytest.fail("built again")))
    loaded = lexical.chunk_index(store)
    assert loaded.search("Westry", 5) == built.search("Westry", 5)
    assert list(loaded._weights) == [loaded.vocab["westry"]]        # weights of the terms a query used, no more
    for query in ("Westry", "Saltmouth port", "Lode", "nothing"):
        assert loaded.search(query, 5) == built.search(query, 5)
    assert loaded.passages is None and loaded.passages_deferred
    assert lexical.chunk_index(store) is loaded                      # used again: now it keeps them
    assert loaded.passages == built.passages and not loaded.passages_deferred


def test_a_changed_folder_rebuilds_and_replaces_the_saved_index(tmp_path):
    docs, settings, store = _indexed(tmp_path, "The Lode rises near Westry.\n")
    lexical.chunk_index(store)
    first = _saved(settings)
    (docs / "a.txt").write_text("The Tamsin rises near Marrowby.\n", encoding="utf-8")
    sync_folder(settings, store)
    lexical.clear_cache()
    assert [key for key, _ in lexical.chunk_index(store).search("Marrowby", 5)]
    assert len(_saved(settings)) == 1 and _saved(settings) != first   # the old version's file is gone
    lexical.clear_cache()
    assert lexical.chunk_index(store).search("Westry", 5) == []


@pytest.mark.parametrize("damage", ["truncated", "garbage", "other_version", "bad_postings"])
def test_a_damaged_or_foreign_saved_index_is_rebuilt_not_trusted(tmp_path, damage):
    import numpy as np

    _, settings, store = _indexed(tmp_path, "The Lode rises near Westry and flows to Saltmouth.\n")
    expected = lexical.chunk_index(store).search("Westry Saltmouth", 5)
    path = _saved(settings)[0]
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "garbage":
        path.write_bytes(b"not a zip file at all")
    else:
        with np.load(path) as saved:
            arrays = dict(saved)
        if damage == "other_version":
            arrays["version"] = np.array("chunks:v:someone-else")
        else:
            arrays["docs"] = arrays["docs"] + 5        # points past the last passage
        with open(path, "wb") as out:
            np.savez(out, **arrays)
    lexical.clear_cache()
    assert lexical.load_index(path, f"chunks:v:{_token(store)}") is None
    assert lexical.chunk_index(store).search("Westry Saltmouth", 5) == expected
    assert lexical.load_index(_saved(settings)[0], f"chunks:v:{_token(store)}") is not None   # written again


def test_no_saved_index_without_a_version_token_or_a_writable_home(tmp_path):
    _, settings, store = _indexed(tmp_path, "The Lode rises near Westry.\n")
    with store.connect() as con, transaction(con):
        con.execute("DELETE FROM pathrag_meta WHERE key = ?", [CHUNKS_VERSION_META])
    assert [key for key, _ in lexical.chunk_index(store).search("Westry", 5)]
    assert _saved(settings) == []                                     # a hash of the rows is not trusted on disk
    (tmp_path / "ro").mkdir()
    _, settings, store = _indexed(tmp_path / "ro", "The Lode rises near Westry.\n")
    shutil.rmtree(settings.home / "cache", ignore_errors=True)
    (settings.home / "cache").write_text("a file where the folder should be (a read-only home fails likewise)")
    assert [key for key, _ in lexical.chunk_index(store).search("Westry", 5)]


def _fresh_scores(store, queries):
    """Scores of an index built from scratch over the store as it is now (nothing saved, nothing cached)."""
    from pathrag_pipeline.query.lexical import BM25Index, passage_text

    with store.connect(read_only=True) as con:
        rows = con.execute("SELECT c.id, d.title, c.text FROM chunks c LEFT JOIN documents d ON d.id = c.document_id "
                           "ORDER BY c.id").fetchall()
    built = BM25Index.build([r[0] for r in rows], [passage_text(r[1], r[2]) for r in rows])
    return built.keys, [built.scores(q) for q in queries]


def test_an_edit_brings_the_saved_index_up_to_date_reading_only_the_changed_passages(tmp_path, monkeypatch):
    """A new process after an edit starts from the saved index of the version before and tokenizes only the passages
    that changed; a long-lived process starts from its own. Either way the scores equal a fresh build's, bit for bit
    (terms no passage holds any more leave the vocabulary)."""
    import numpy as np

    docs, settings, store = _indexed(tmp_path, "The Lode rises near Westry and flows to Saltmouth.\n")
    for name, text in {"b.txt": "Saltmouth is a port on the Lode.\n", "c.txt": "Marrowby lies on the Tamsin.\n",
                       "e.txt": "Kestle Moor rises above Westry.\n"}.items():
        (docs / name).write_text(text, encoding="utf-8")
    sync_folder(settings, store)
    lexical.chunk_index(store)
    (docs / "a.txt").write_text("The Lode now rises near Harrow Fell.\n", encoding="utf-8")
    (docs / "c.txt").unlink()
    (docs / "d.txt").write_text("Pellingham stands where the Varne meets the Lode.\n", encoding="utf-8")
    sync_folder(settings, store)
    queries = ["Westry", "Lode Saltmouth", "Marrowby Tamsin", "Harrow Fell", "Pellingham Varne", "port"]

    lexical.clear_cache()                                             # a new process
    tokenized: list[str] = []
    real_tokenize = lexical.tokenize
    monkeypatch.setattr(lexical, "tokenize", lambda text: tokenized.append(text) or real_tokenize(text))
    monkeypatch.setattr(lexical.BM25Index, "build", classmethod(lambda *a, **k: pytest.fail("built again")))
    updated = lexical.chunk_index(store)
    assert len(tokenized) == 2 and all("Harrow" in t or "Pellingham" in t for t in tokenized)
    assert "marrowby" not in updated.vocab and "tamsin" not in updated.vocab
    scores = [updated.scores(q) for q in queries]
    monkeypatch.undo()
    keys, fresh = _fresh_scores(store, queries)
    assert updated.keys == keys and all(np.array_equal(a, b) for a, b in zip(scores, fresh))
    assert len(_saved(settings)) == 1                                 # saved for this version, the old one gone

    (docs / "e.txt").write_text("Kestle Moor rises above Corran Ford.\n", encoding="utf-8")   # the same process
    sync_folder(settings, store)
    monkeypatch.setattr(lexical, "_latest_saved", lambda folder: pytest.fail("read from the file"))
    again = lexical.chunk_index(store)
    monkeypatch.undo()
    keys, fresh = _fresh_scores(store, queries + ["Corran Ford"])
    assert again.keys == keys
    assert all(np.array_equal(again.scores(q), f) for q, f in zip(queries + ["Corran Ford"], fresh))
