"""LanceDB vector store: incremental sync, search, model-mismatch protection, serialised writers."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from pathrag_pipeline.llm.embedding import HashingEmbedder
from pathrag_pipeline.storage.vector_store import EmbeddingMismatchError, VectorStore


class CountingEmbedder:
    """Wraps an embedder and records every text it is asked to embed."""

    def __init__(self, inner=None, identity: str | None = None) -> None:
        self.inner = inner or HashingEmbedder(dim=64)
        self.identity = identity or self.inner.identity
        self.embedded: list[str] = []
        self.calls = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.embedded.extend(texts)
        return self.inner.embed(texts)


NAMES = {
    "uoc": "University of Copenhagen",
    "aip": "American Institute of Physics",
    "jmp": "Journal of Mathematical Physics",
    "pie": "Apple pie",
    "dk": "Denmark",
}


@pytest.fixture
def store(tmp_path) -> VectorStore:
    return VectorStore(tmp_path / "lancedb")


def test_sync_embeds_only_new_and_changed_rows_and_deletes_missing(store):
    e = CountingEmbedder()
    first = store.sync("entities", NAMES, e)
    assert (first.embedded, first.unchanged, first.deleted, first.total) == (5, 0, 0, 5)
    assert sorted(e.embedded) == sorted(NAMES.values())

    e.embedded.clear()
    again = store.sync("entities", NAMES, e)
    assert (again.embedded, again.unchanged, again.deleted, again.total) == (0, 5, 0, 5)
    assert e.embedded == []

    changed = {k: v for k, v in NAMES.items() if k != "pie"}
    changed["dk"] = "Kingdom of Denmark"
    changed["nbi"] = "Niels Bohr Institute"
    stats = store.sync("entities", changed, e)
    assert sorted(e.embedded) == ["Kingdom of Denmark", "Niels Bohr Institute"]
    assert (stats.embedded, stats.unchanged, stats.deleted, stats.total) == (2, 3, 1, 5)
    assert store.keys("entities") == set(changed)
    hit = store.search("entities", "Kingdom of Denmark", k=1, embedder=e)[0]
    assert hit.key == "dk" and hit.text == "Kingdom of Denmark" and hit.similarity == pytest.approx(1.0, abs=1e-5)


def test_identical_texts_are_embedded_once_and_share_the_vector(store):
    e = CountingEmbedder()
    rows = {"a": "born in Paris", "b": "born in Paris", "c": "born in Lyon", "d": "born in Paris"}
    stats = store.sync("relations", rows, e)
    assert stats.embedded == 4 and sorted(e.embedded) == ["born in Lyon", "born in Paris"]
    keys, matrix = store.matrix("relations")
    vec = dict(zip(keys, matrix))
    assert np.array_equal(vec["a"], vec["b"]) and np.array_equal(vec["a"], vec["d"])
    assert not np.array_equal(vec["a"], vec["c"])


def test_batches_hold_texts_of_about_one_length_longest_first(store):
    """A batch is padded to its longest text: batching by length, not arrival order, avoids the padding."""
    e = CountingEmbedder()
    e.batch_size = 2
    batches: list[list[str]] = []
    inner_embed = e.embed

    def recording(texts):
        batches.append(list(texts))
        return inner_embed(texts)

    e.embed = recording
    rows = {f"k{i}": "x" * n for i, n in enumerate([5, 40, 7, 300, 12, 41, 6])}
    store.sync("chunks", rows, e)
    assert [len(t) for b in batches for t in b] == [300, 41, 40, 12, 7, 6, 5]
    assert all(len(b) <= 2 for b in batches)
    keys, matrix = store.matrix("chunks")                  # every row still got its own text's vector
    by_key = dict(zip(keys, matrix))
    for key, text in rows.items():
        assert np.allclose(by_key[key], HashingEmbedder(dim=64).embed([text])[0], atol=1e-6)


def test_search_returns_nearest_first_with_payload(store):
    e = HashingEmbedder(dim=256)
    rows = [(k, v, {"name": v, "doc": f"d{i}", "degree": i}) for i, (k, v) in enumerate(NAMES.items())]
    store.sync("entities", rows, e)
    hits = store.search("entities", "Copenhagen University", k=3, embedder=e)
    assert [h.key for h in hits][0] == "uoc"
    assert hits[0].payload == {"name": "University of Copenhagen", "doc": "d0", "degree": 0}
    assert hits[0].similarity > hits[1].similarity >= hits[2].similarity
    by_vector = store.search("entities", e.embed(["apple pies"])[0], k=1)
    assert by_vector[0].key == "pie"
    filtered = store.search("entities", "Copenhagen University", k=5, embedder=e, where="doc IN ('d1', 'd2')")
    assert {h.key for h in filtered} == {"aip", "jmp"}


def test_payload_change_rewrites_row_without_embedding(store):
    e = CountingEmbedder()
    store.sync("chunks", [("c1", "alpha text", {"document_id": "a"}), ("c2", "beta text", {"document_id": "b"})], e)
    e.embedded.clear()
    stats = store.sync("chunks", [("c1", "alpha text", {"document_id": "a2"}), ("c2", "beta text", {"document_id": "b"})], e)
    assert e.embedded == []
    assert (stats.embedded, stats.payload_updated, stats.unchanged) == (0, 1, 1)
    hit = store.search("chunks", "alpha text", k=1, embedder=e)[0]
    assert hit.payload["document_id"] == "a2" and hit.similarity == pytest.approx(1.0, abs=1e-5)


def test_upsert_and_delete_touch_only_given_keys(store):
    e = CountingEmbedder()
    store.sync("relations", NAMES, e)
    e.embedded.clear()
    stats = store.upsert("relations", {"uoc": NAMES["uoc"], "new": "Tivoli Gardens", "dk": "Danmark"}, e)
    assert sorted(e.embedded) == ["Danmark", "Tivoli Gardens"]
    assert (stats.embedded, stats.unchanged, stats.deleted, stats.total) == (2, 1, 0, 6)
    assert store.delete("relations", ["pie", "absent"]) == 1
    assert store.keys("relations") == set(NAMES) - {"pie"} | {"new"}
    assert store.count("relations") == 5


def test_keys_with_quotes_survive_update_and_delete(store):
    e = CountingEmbedder()
    store.sync("entities", {"O'Brien": "Conan O'Brien", "plain": "x"}, e)
    stats = store.sync("entities", {"O'Brien": "Conan O'Brien show"}, e)
    assert (stats.embedded, stats.deleted) == (1, 1)
    assert store.keys("entities") == {"O'Brien"}
    assert store.delete("entities", ["O'Brien"]) == 1


def test_mismatched_model_raises_with_remedy(store):
    store.sync("entities", NAMES, HashingEmbedder(dim=64))
    other = HashingEmbedder(dim=128)
    with pytest.raises(EmbeddingMismatchError) as info:
        store.sync("entities", NAMES, other)
    message = str(info.value)
    for needle in ("'entities'", "offline:hashing-v1-d64", "dim 64", other.identity, "dim 128",
                   "pathrag index --reembed", str(store.path / "entities.lance")):
        assert needle in message
    with pytest.raises(EmbeddingMismatchError):
        store.search("entities", "Denmark", embedder=other)
    with pytest.raises(EmbeddingMismatchError, match="128 dimensions"):
        store.search("entities", np.ones(128, dtype=np.float32))

    # same identity claimed, different vector size: caught when the vectors arrive
    liar = CountingEmbedder(HashingEmbedder(dim=32), identity="offline:hashing-v1-d64")
    with pytest.raises(EmbeddingMismatchError, match="dim 32"):
        store.sync("entities", {"x": "new row"}, liar)

    store.reset("entities")
    assert store.meta("entities") is None and store.keys("entities") == set()
    assert store.sync("entities", NAMES, other).embedded == len(NAMES)
    meta = store.meta("entities")
    assert (meta.embedder, meta.dim, meta.rows) == (other.identity, 128, len(NAMES))


def test_bad_rows_are_rejected_with_the_key(store):
    e = CountingEmbedder()
    with pytest.raises(ValueError, match="'k1' appears twice"):
        store.sync("entities", [("k1", "a"), ("k1", "b")], e)
    with pytest.raises(ValueError, match="reserved"):
        store.sync("entities", [("k1", "a", {"vector": "x"})], e)
    store.sync("entities", [("k1", "a", {"doc": "d"})], e)
    with pytest.raises(ValueError, match=r"\['extra'\]"):
        store.sync("entities", [("k1", "a", {"doc": "d", "extra": 1})], e)
    assert e.calls == 1


def test_missing_table_is_empty(store):
    assert store.search("nothing", np.ones(4), k=3) == []
    assert store.count("nothing") == 0 and store.keys("nothing") == set() and store.meta("nothing") is None
    assert store.sync("nothing", {}, CountingEmbedder()).total == 0


def test_concurrent_writers_do_not_duplicate_keys(tmp_path):
    e = HashingEmbedder(dim=32)
    path = tmp_path / "lancedb"
    VectorStore(path).sync("entities", {"seed": "seed"}, e)
    batches = [{f"k{i}": f"text {i}" for i in range(start, start + 40)} for start in (0, 20, 40, 60)]
    errors: list[BaseException] = []

    def write(rows):
        try:
            VectorStore(path).upsert("entities", rows, e)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(rows,)) for rows in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    store = VectorStore(path)
    assert store.count("entities") == len(store.keys("entities")) == 1 + 100


def test_search_many_matches_lancedb_scan_and_sees_writes(store):
    e = HashingEmbedder(dim=128)
    store.sync("entities", [(k, v, {"name": v}) for k, v in NAMES.items()], e)
    queries = ["Copenhagen University", "physics journal", "apple"]
    batched = store.search_many("entities", queries, k=3, embedder=e)
    for query, hits in zip(queries, batched):
        scanned = store.search("entities", query, k=3, embedder=e, where="name IS NOT NULL")  # LanceDB path
        assert [h.key for h in hits] == [h.key for h in scanned]
        assert [h.similarity for h in hits] == pytest.approx([h.similarity for h in scanned], abs=1e-5)
        assert all(h.payload["name"] == h.text for h in hits)
    assert store.nearest("entities", queries, k=3, embedder=e) == \
        [[(h.key, h.similarity) for h in hits] for hits in batched]   # the same ranking, without the rows
    store.upsert("entities", {"cph": "Copenhagen University"}, e)
    assert store.search("entities", "Copenhagen University", k=1, embedder=e)[0].key == "cph"
    assert store.search_many("entities", [], embedder=e) == []


def test_search_after_rebuild_does_not_serve_the_old_table(store):
    e = HashingEmbedder(dim=128)
    store.sync("entities", NAMES, e)
    assert store.search("entities", "Denmark", k=1, embedder=e)[0].key == "dk"
    store.reset("entities")
    store.sync("entities", {"only": "Apple pie"}, e)  # same number of writes: same LanceDB version number
    assert [h.key for h in store.search("entities", "Denmark", k=5, embedder=e)] == ["only"]


def _disk_bytes(path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _fragments(store, table: str) -> int:
    return store._open(table).stats()["fragment_stats"]["num_fragments"]


@pytest.mark.filterwarnings("ignore:optimize.cleanup_older_than=0.:UserWarning")
def test_old_versions_are_removed_once_writes_accumulate_so_disk_follows_the_data(store, monkeypatch):
    """Each batch and delete makes a table version and each write a fragment; LanceDB kept every old version's
    files, so the folder grew with the number of runs. Once TIDY_FRAGMENTS fragments were written since the last
    compaction, the sync compacts the table and removes the versions past the retention: versions, fragments and
    disk stay bounded however many runs there are."""
    from datetime import timedelta

    from pathrag_pipeline.storage import vector_store

    e = HashingEmbedder(dim=64)
    rows = {f"k{i}": f"entity number {i} with a description" for i in range(300)}
    store.sync("entities", rows, e)
    # no retention: every version but the latest is old. (With 1 ms, the version a sync wrote just before its
    # compaction was sometimes younger than that on a fast machine and kept with all its files: disk 2.8x, red CI.)
    monkeypatch.setattr(vector_store, "VERSION_RETENTION", timedelta(0))
    store.sync("entities", {**rows, "k0": "changed"}, e)
    after_one = _disk_bytes(store.path)
    seen, fragments = [], []
    for run in range(40):         # every run changes one row and adds one: a fragment more each time
        rows[f"new{run}"] = "one more"
        store.sync("entities", {**rows, "k0": f"changed again {run}"}, e)
        seen.append(store.versions("entities"))
        fragments.append(_fragments(store, "entities"))
    # small writes are not compacted one by one (that rewrote the whole table every run)...
    assert any(b > a for a, b in zip(fragments, fragments[1:]))
    # ...until TIDY_FRAGMENTS accumulated: then it is compacted and its old versions go
    assert any(b < a for a, b in zip(fragments, fragments[1:])) and any(b < a for a, b in zip(seen, seen[1:]))
    assert max(fragments) <= vector_store.TIDY_FRAGMENTS + 2
    assert max(seen) <= 2 * vector_store.TIDY_FRAGMENTS + 4
    assert _disk_bytes(store.path) <= 2.5 * after_one
    assert store.count("entities") == 340

    # and with a retention no version reaches, every version stays (what the folder did before)
    monkeypatch.setattr(vector_store, "VERSION_RETENTION", timedelta(days=1))
    kept = store.versions("entities")
    for run in range(3):
        store.sync("entities", {**rows, "k0": f"kept {run}"}, e)
    assert store.versions("entities") > kept


def test_a_write_just_after_a_compaction_does_not_compact_again(store, monkeypatch):
    """Versions younger than the retention survive a compaction; counting them made the next run compact again:
    a one-file edit just after a build rewrote every table (issue 23). The rule counts what was written since."""
    from pathrag_pipeline.storage import vector_store

    monkeypatch.setattr(vector_store, "EMBED_BATCH_ROWS", 10)     # the build writes 30 fragments
    e = HashingEmbedder(dim=16)
    rows = {f"k{i}": f"entity number {i}" for i in range(300)}
    store.sync("entities", rows, e)
    assert _fragments(store, "entities") == 1                     # the build compacted what it wrote
    assert store.versions("entities") > vector_store.TIDY_FRAGMENTS   # its young versions are all kept
    for run in range(3):
        store.sync("entities", {**rows, "k1": f"edit {run}"}, e)
    assert _fragments(store, "entities") == 2                     # one run's row beside the untouched rest


def test_deleting_a_large_share_of_a_table_compacts_it(store, monkeypatch):
    """Dead rows stay on disk until a compaction: past TIDY_DEAD_SHARE of the rows on disk the sync compacts."""
    from pathrag_pipeline.storage import vector_store

    e = HashingEmbedder(dim=16)
    rows = {f"k{i}": f"entity number {i}" for i in range(100)}
    store.sync("entities", rows, e)
    store.sync("entities", {k: v for k, v in rows.items() if k not in {"k1", "k2"}}, e)   # 2% dead: kept
    stats = store._open("entities").list_versions()[-1]["metadata"]
    assert int(stats["total_deletion_file_rows"]) == 2
    keep = {k: v for i, (k, v) in enumerate(rows.items()) if i >= 30}
    store.sync("entities", keep, e)                                                    # 30% dead: compacted
    stats = store._open("entities").list_versions()[-1]["metadata"]
    assert int(stats["total_deletion_file_rows"]) == 0 and int(stats["total_data_file_rows"]) == 70
    assert store.count("entities") == 70


def test_pinned_reads_open_each_table_once_and_keep_their_version(store, monkeypatch):
    """Inside ``pinned()`` a thread opens a table once (the query service's batches); outside, every read opens the
    latest version, so a write between two blocks is seen by the next."""
    e = HashingEmbedder(dim=64)
    store.sync("entities", [(k, v, {}) for k, v in NAMES.items()], e)
    opened: list[str] = []
    real = store._db.open_table
    def counting(name, *a, **k):
        table = real(name, *a, **k)   # a missing table raises: tried, not opened
        opened.append(name)
        return table

    monkeypatch.setattr(store._db, "open_table", counting)
    with store.pinned():
        first = store.search("entities", "Copenhagen", k=2, embedder=e)
        with store.pinned():
            assert store.search("entities", "Copenhagen", k=2, embedder=e) == first
        assert store.meta("entities").rows == len(NAMES)
        assert store.meta("missing") is None
    assert opened == ["entities"]
    store.sync("entities", [(k, v, {}) for k, v in NAMES.items() if k != "uoc"], e)
    before = len(opened)
    with store.pinned():
        assert "uoc" not in {h.key for h in store.search("entities", "Copenhagen", k=5, embedder=e)}
        store.search("entities", "Denmark", k=1, embedder=e)
    assert opened[before:] == ["entities"]


def test_tables_kept_in_a_memo_serve_later_blocks_until_they_are_due_again(store, monkeypatch):
    """``pinned(keep_in=memo)`` (a query's DuckDB read memo): back-to-back blocks open each table once and read the
    version they opened, with its schema and row count asked of LanceDB once; a new memo (the DuckDB file changed)
    or ``PINNED_FOR_S`` later, the tables are opened again and a write made meanwhile is seen."""
    import pathrag_pipeline.storage.vector_store as vs

    e = HashingEmbedder(dim=64)
    store.sync("entities", [(k, v, {}) for k, v in NAMES.items()], e)
    opened: list[str] = []
    real = store._db.open_table
    monkeypatch.setattr(store._db, "open_table", lambda name, *a, **k: opened.append(name) or real(name, *a, **k))
    memo: dict = {}
    with store.pinned(keep_in=memo):
        assert store.meta("entities").rows == len(NAMES)
    assert opened == ["entities"]
    store.sync("entities", [(k, v, {}) for k, v in NAMES.items() if k != "uoc"], e)   # another writer, say
    opened.clear()
    with store.pinned(keep_in=memo):
        table = store._open("entities")
        counted = []
        monkeypatch.setattr(table._table, "count_rows", lambda *a: counted.append(a) or 0)
        assert store.meta("entities").rows == len(NAMES)   # the version opened, its count kept: not asked again
        assert "uoc" in {h.key for h in store.search("entities", "Copenhagen", k=5, embedder=e)}
    assert opened == [] and counted == []
    with store.pinned(keep_in={}):                            # a new memo: opened again, the write seen
        assert store.meta("entities").rows == len(NAMES) - 1
    assert opened == ["entities"]
    monkeypatch.setattr(vs, "PINNED_FOR_S", 0.0)              # the kept tables are due: opened again
    with store.pinned(keep_in=memo):
        assert "uoc" not in {h.key for h in store.search("entities", "Copenhagen", k=5, embedder=e)}
    assert opened == ["entities"] * 2


def test_a_table_left_with_no_row_reads_as_empty_not_a_reshape_error(store):
    """Issue 61, item 3: a table whose every row was deleted (or whose run embedded nothing) is read as an empty
    matrix of the table's width; `pathrag ask` used to die on "cannot reshape array of size 0"."""
    e = CountingEmbedder()
    store.sync("entities", NAMES, e)
    store.sync("entities", {}, e)                   # every row deleted: the table stays, empty
    keys, matrix = store.matrix("entities")
    assert keys == [] and matrix.shape == (0, 64)
    assert store.search("entities", "Denmark", k=3, embedder=e) == []


def test_a_snapshot_read_in_batches_is_the_whole_table_in_its_order(store, monkeypatch):
    """The in-memory matrix is filled a batch at a time (``SNAPSHOT_BATCH_ROWS``): every row once, in the table's
    order, each key beside its own vector and payload, equal to the bit to the table read whole."""
    import pathrag_pipeline.storage.vector_store as vector_store

    monkeypatch.setattr(vector_store, "SNAPSHOT_BATCH_ROWS", 7)   # 50 rows: 8 batches, the last one short
    e = HashingEmbedder(dim=32)
    rows = [(f"k{i:02}", f"text number {i} about river {i % 5}", {"name": f"n{i}", "rank": i}) for i in range(50)]
    store.sync("entities", rows, e)
    store.upsert("entities", [("k03", "text number 3 rewritten", {"name": "n3b", "rank": 3})], e)   # two fragments
    tbl = store._open("entities")
    whole = tbl.to_arrow()
    columns, matrix = vector_store._rows_and_matrix(tbl)
    assert columns["key"] == whole.column("key").to_pylist() and len(columns["key"]) == 50
    assert set(columns) == {"key", "text", "name", "rank"}
    assert columns["name"] == whole.column("name").to_pylist() and columns["rank"] == whole.column("rank").to_pylist()
    assert np.array_equal(matrix, vector_store._vector_matrix(whole)) and matrix.dtype == np.float32
    hits = store.search_many("entities", ["text number 3 rewritten"], k=1, embedder=e)[0]
    assert (hits[0].key, hits[0].payload) == ("k03", {"name": "n3b", "rank": 3})
