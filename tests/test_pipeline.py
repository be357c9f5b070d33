"""The whole indexing pipeline, offline: incremental at every stage, aliases, deletions, bad settings."""

import json
import subprocess
import sys

import pytest

from pathrag_pipeline.config import ConfigError, Settings
from pathrag_pipeline.index.extraction_models import RESULT_BYTES_PER_TEXT_BYTE
from pathrag_pipeline.index.pipeline import run_indexing
from pathrag_pipeline.storage.store import Store
from pathrag_pipeline.storage.vector_store import VectorStore
from tests.extraction_fakes import unpunctuated_words


@pytest.fixture()
def setup(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "dictionary.jsonl").write_text(json.dumps({
        "id": "agnes-morrow", "title": "Morrow, Agnes",
        "text": "Hydrologist, born in Hesketh Mill. She studied at Aldermere University."}) + "\n")
    (docs / "institute.md").write_text(
        "# Institute\n\nAgnes Morrow directed the Pellingham Institute of Hydrology. "
        "The Pellingham Institute of Hydrology measured the River Lode.\n")
    (docs / "railway.md").write_text("# Railway\n\nThomas Greaves built the Varne Valley Railway to Corran Ford.\n")
    settings = Settings.from_env(home=tmp_path / "home", docs=docs)
    return settings, docs


def names(settings):
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        return {r[0] for r in con.execute("SELECT name FROM entities").fetchall()}


def test_full_then_unchanged_run_does_no_work(setup):
    settings, docs = setup
    first = run_indexing(settings)
    assert first.mode["mode"] == "offline" and first.graph["entities"] > 0
    assert first.embeddings.tables["entities"].total == first.graph["entities"]
    again = run_indexing(settings)
    assert again.sync.documents_written == 0
    assert again.extraction.pending == 0 and again.extraction.calls == 0
    assert again.embeddings.embedded == 0 and again.aliases.new_aliases == 0


def test_inverted_name_becomes_an_alias_of_one_entity(setup):
    settings, docs = setup
    report = run_indexing(settings)
    assert report.aliases.new_aliases >= 1
    got = names(settings)
    assert "Agnes Morrow" in got and "Morrow, Agnes" not in got
    vectors = VectorStore(settings.lancedb_path)
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        keys = {r[0] for r in con.execute("SELECT entity_key FROM entities").fetchall()}
    assert vectors.keys("entities") == keys
    # a first build's report adds up although the aliases re-merged entities and re-synced them (issue 62): every
    # row was embedded this run, none was already there
    entities = report.embeddings.tables["entities"]
    assert report.aliases.entities_remerged >= 1
    assert entities.unchanged == 0 and entities.embedded >= entities.total == len(keys)
    assert set(report.stage_seconds) == {"ingest", "graph", "embeddings"}
    assert report.seconds >= sum(report.stage_seconds.values()) > 0


def test_deleting_a_document_removes_only_its_contributions(setup):
    settings, docs = setup
    run_indexing(settings)
    assert "Thomas Greaves" in names(settings)
    (docs / "railway.md").unlink()
    report = run_indexing(settings)
    assert report.sync.plan.deleted == ["railway.md"]
    got = names(settings)
    assert "Thomas Greaves" not in got and "Varne Valley Railway" not in got
    assert {"Agnes Morrow", "Pellingham Institute of Hydrology"} <= got
    assert "thomas greaves" not in VectorStore(settings.lancedb_path).keys("entities")


def test_bad_alias_threshold_names_the_variable():
    with pytest.raises(ConfigError, match="PATHRAG_ALIAS_EMBEDDING_THRESHOLD"):
        Settings.from_env({"PATHRAG_ALIAS_EMBEDDING_THRESHOLD": "high"})


@pytest.mark.slow
def test_a_long_line_of_unpunctuated_words_indexes_at_the_default_memory_limit(tmp_path):
    """huge_line.txt end to end, at 2 MB (about a minute): one line of random words with no punctuation. Before
    the offline rules read it in windows, 1 MB of it was enough to run DuckDB out of memory at the default
    limit (567 MB of JSON); now every chunk's record stays within its cap without being trimmed, and deleting
    the file empties the graph again."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "huge_line.txt").write_text(unpunctuated_words(2_000_000) + "\n")
    settings = Settings.from_env(home=tmp_path / "home", docs=docs, env={})

    report = run_indexing(settings)

    x = report.extraction
    assert x.pending > 200 and (x.extracted, x.failed, x.trimmed) == (x.pending, 0, 0)
    assert report.graph["entities"] > 0 and report.graph["relations"] > 0
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        over = con.execute(
            """SELECT count(*) FROM extractions e JOIN chunks c ON c.id = e.chunk_id
               WHERE strlen(e.result::VARCHAR) > ? * strlen(c.text)""", [RESULT_BYTES_PER_TEXT_BYTE]).fetchone()[0]
    assert over == 0
    (docs / "huge_line.txt").unlink()
    # the file was the folder's only one: emptying the home on purpose needs replace_folder (ingest/home_folder.py)
    assert run_indexing(settings, replace_folder=True).graph["entities"] == 0


def test_chunk_vectors_embed_the_title_with_the_text_and_an_older_home_reembeds_only_its_chunks(setup, monkeypatch):
    """Dense search sees the passage BM25 indexes (title + text). A home whose chunk vectors embedded the chunk
    text alone (the earlier CHUNK_SQL) re-embeds its chunks on the next run, and no entity or relation."""
    from pathrag_pipeline.index import embedding_stage
    from pathrag_pipeline.index.pending_work import find_pending_work
    from pathrag_pipeline.index.pipeline import describe_mode

    settings, docs = setup
    old_sql = "SELECT id AS key, text, document_id FROM chunks"
    monkeypatch.setattr(embedding_stage, "CHUNK_SQL", old_sql)
    monkeypatch.setitem(embedding_stage.SOURCES, "chunks", old_sql)
    old = run_indexing(settings)
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        chunks = {r[0]: (r[1], r[2]) for r in con.execute(
            "SELECT c.id, c.text, d.title FROM chunks c JOIN documents d ON d.id = c.document_id").fetchall()}
    vectors = VectorStore(settings.lancedb_path)
    key = next(k for k, (_, title) in chunks.items() if title == "Morrow, Agnes")
    assert {h.key: h.text for h in vectors.search("chunks", "Agnes", k=len(chunks), embedder=_embedder(settings))
            }[key] == chunks[key][0]
    monkeypatch.undo()

    mode = describe_mode(settings)
    reasons = find_pending_work(settings, docs, mode["extractor"], mode["embedder"]).reasons
    assert reasons == ["embeddings or aliases not confirmed in sync with the graph"]   # `pathrag index` runs
    new = run_indexing(settings)
    assert new.embeddings.tables["chunks"].embedded == len(chunks) == old.embeddings.tables["chunks"].total
    assert new.embeddings.tables["entities"].embedded == 0 and new.embeddings.tables["relations"].embedded == 0
    texts = {h.key: h.text for h in VectorStore(settings.lancedb_path).search(
        "chunks", "Agnes", k=len(chunks), embedder=_embedder(settings))}
    assert texts[key] == "Morrow, Agnes " + chunks[key][0]
    assert all(texts[k] == f"{title} {text}" for k, (text, title) in chunks.items())
    assert run_indexing(settings).embeddings.embedded == 0


def _embedder(settings):
    from pathrag_pipeline.llm.embedding import embedder_from_settings

    return embedder_from_settings(settings)


@pytest.mark.e2e   # three index runs: end to end, run by .ci/run (pytest -m e2e)
def test_a_failed_reembed_keeps_the_previous_vectors_and_a_good_one_replaces_them(setup, openai_server):
    """`--reembed` used to drop the tables first: an endpoint failing half-way left LanceDB empty until the next
    good run (issue 22 item 2). It now embeds beside the store and swaps only once everything is embedded."""
    from dataclasses import replace

    from pathrag_pipeline.llm.embedding import EmbeddingError

    settings, _ = setup
    run_indexing(settings)
    vectors = VectorStore(settings.lancedb_path)
    before = {t: vectors.count(t) for t in ("entities", "relations", "chunks")}
    identity = vectors.meta("chunks").embedder
    remote = replace(settings, embed_base_url=openai_server.base_url, embed_model="fake-embed")
    calls = []

    def fails_after_one_batch(texts, model):
        calls.append(len(texts))
        if len(calls) > 1:
            raise RuntimeError("the embeddings server fell over")
        return [[1.0] * 8 for _ in texts]

    openai_server.embed_responder = fails_after_one_batch
    with pytest.raises(EmbeddingError, match="previous vectors .* are kept unchanged"):
        run_indexing(remote, reembed=True)
    vectors = VectorStore(settings.lancedb_path)
    assert {t: vectors.count(t) for t in before} == before and vectors.meta("chunks").embedder == identity
    assert not settings.lancedb_path.with_name("lancedb.reembed").exists()

    openai_server.embed_responder = lambda texts, model: [[float(len(t) % 7 + 1)] * 8 for t in texts]
    run_indexing(remote, reembed=True)
    vectors = VectorStore(settings.lancedb_path)
    assert {t: vectors.count(t) for t in before} == before and vectors.meta("chunks").embedder == "openai:fake-embed"
    assert not settings.lancedb_path.with_name("lancedb.reembed").exists()
    assert not settings.lancedb_path.with_name("lancedb.replaced").exists()


def test_a_delete_with_a_remote_embedder_sends_it_no_request(setup, openai_server):
    """A delete embeds nothing; its report's dimension comes from the vector tables, not from a probe request
    (which built the client and imported openai: 3.1 s of a fresh process's one-file delete, issue 64)."""
    from dataclasses import replace

    settings, docs = setup
    remote = replace(settings, embed_base_url=openai_server.base_url, embed_model="fake-embed")
    openai_server.embed_responder = lambda texts, model: [[float(len(t) % 7 + 1)] * 6 for t in texts]
    run_indexing(remote)
    sent = openai_server.count("embeddings")
    assert sent > 0
    (docs / "railway.md").unlink()   # its entities are its own: nothing left changes its text
    report = run_indexing(replace(remote))   # a new Settings: a new embedder that has never called
    assert report.sync.documents_deleted == 1
    assert openai_server.count("embeddings") == sent, [r.body for r in openai_server.requests][sent:]
    assert report.embeddings.dim == 6


def _record_opens(monkeypatch) -> tuple[list[bool], list[int]]:
    """Every DuckDB file open from now on (True: read-only), and how many there were when each ingest stage
    returned."""
    from pathrag_pipeline.index import pipeline

    opened: list[bool] = []
    real_open = Store._open
    monkeypatch.setattr(Store, "_open", lambda self, read_only, config=None, wait=True:
                        opened.append(read_only) or real_open(self, read_only, config, wait))
    after_ingest: list[int] = []
    real_ingest = pipeline.ingest_stage

    def ingest(*args, **kwargs):
        sync = real_ingest(*args, **kwargs)
        after_ingest.append(len(opened))
        return sync

    monkeypatch.setattr(pipeline, "ingest_stage", ingest)
    return opened, after_ingest


def test_an_offline_edit_opens_the_file_once_for_its_graph_and_embedding_stages(setup, monkeypatch):
    settings, docs = setup
    run_indexing(settings)
    opened, after_ingest = _record_opens(monkeypatch)
    (docs / "railway.md").write_text("# Railway\n\nThomas Greaves built the Varne Valley Railway to Corran Ford. "
                                     "Agnes Morrow rode it to Hesketh Mill.\n")
    report = run_indexing(settings)
    assert report.extraction.extracted == 1 and report.embeddings.embedded > 0
    # the ingest's connection held for both stages and the report's counts (was one per step: 11 at 100 MB; then
    # the ingest's, the stages' and the report's)
    assert after_ingest == [1] and opened == [False], opened
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM entities WHERE name = 'Agnes Morrow'").fetchone()[0] == 1


def test_a_small_change_is_ingested_on_one_connection_and_a_large_one_lets_it_go_after_its_plan(setup, monkeypatch):
    """The ingest reads its plan on a held connection: a change of a few files parses and writes on it too (one
    open for the whole sync, was two); more than HOLD_MAX_FILES files let it go and write in short connections."""
    from pathrag_pipeline.ingest.folder_sync import HOLD_MAX_FILES, sync_folder

    settings, docs = setup
    store = Store.for_settings(settings)
    sync_folder(settings, store)
    opened: list[bool] = []
    real_open = Store._open
    monkeypatch.setattr(Store, "_open", lambda self, read_only, config=None, wait=True:
                        opened.append(read_only) or real_open(self, read_only, config, wait))
    (docs / "railway.md").write_text("# Railway\n\nThomas Greaves built the Varne Valley Railway to Hesketh Mill.\n")
    small = sync_folder(settings, store)
    assert [(r.rel_path, r.status) for r in small.results] == [("railway.md", "indexed")] and opened == [False]
    opened.clear()
    for n in range(HOLD_MAX_FILES + 1):
        (docs / f"note-{n}.md").write_text(f"# Note {n}\n\nAgnes Morrow wrote note {n} at Hesketh Mill.\n")
    large = sync_folder(settings, store)
    assert len(large.plan.new) == HOLD_MAX_FILES + 1 and len(opened) >= 3, opened
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM documents WHERE path LIKE 'note-%'").fetchone()[0] == HOLD_MAX_FILES + 1


def test_a_model_embedder_embeds_with_the_file_released(setup, monkeypatch):
    """A small run holds one connection for its embedding stage too, but a model or an endpoint embeds with it
    closed (``Store.released``): other processes can open the file while it works."""
    from pathrag_pipeline.index import pipeline
    from pathrag_pipeline.llm.embedding import HashingEmbedder

    settings, docs = setup
    run_indexing(settings)
    monkeypatch.setattr(pipeline, "is_offline_embedder", lambda _settings: False)
    stores, seen = [], []
    real_stage, real_embed = pipeline.embedding_stage, HashingEmbedder.embed

    def stage(settings, store, **kwargs):
        stores.append(store)
        seen.append(("stage", store._holding.active))
        return real_stage(settings, store, **kwargs)

    def embed(self, texts):
        seen.append(("embed", stores[-1]._holding.active or stores[-1]._holding.con is not None))
        return real_embed(self, texts)

    monkeypatch.setattr(pipeline, "embedding_stage", stage)
    monkeypatch.setattr(HashingEmbedder, "embed", embed)
    (docs / "railway.md").write_text("# Railway\n\nThomas Greaves built the Varne Valley Railway to Hesketh Mill.\n")
    assert run_indexing(settings).extraction.extracted == 1
    assert seen[0] == ("stage", True) and len(seen) > 1
    assert {held for kind, held in seen[1:]} == {False}, seen


def test_only_small_runs_hold_the_file(setup):
    from pathrag_pipeline.index.pipeline import HOLD_MAX_CHUNKS, holds_file
    from pathrag_pipeline.ingest.folder_sync import Plan, SyncReport

    _settings, docs = setup

    def sync(chunks: int) -> SyncReport:
        return SyncReport("run", str(docs), Plan([], [], [], []), [], 0.0, rechunked_chunks=chunks)

    # with an LLM too: no setting enters the decision (the extraction lets go of the file while the model works,
    # next test)
    assert holds_file(sync(HOLD_MAX_CHUNKS))
    assert not holds_file(sync(HOLD_MAX_CHUNKS + 1))          # a large run lets readers in
    assert not holds_file(sync(1), reembed=True)
    assert not holds_file(sync(1), triples=docs / "triples.jsonl")


def test_a_small_llm_run_lets_go_of_the_file_while_the_model_works(setup, openai_server):
    """Another process can open the DuckDB file while the model extracts (``Store.released`` in the extraction
    stage), though the run holds one connection for its graph and embedding stages around it (issue 64)."""
    from dataclasses import replace

    settings, docs = setup
    online = replace(settings, llm_base_url=openai_server.base_url, llm_model="fake-chat")
    opened: list[str] = []

    def responder(request):
        if len(opened) < 2:   # a probe or two: every call waits in the same place
            probe = subprocess.run([sys.executable, "-c", "import duckdb, sys; "
                                    "duckdb.connect(sys.argv[1], read_only=True).close(); print('opened')",
                                    str(online.duckdb_path)], capture_output=True, text=True, timeout=120)
            opened.append(probe.stdout.strip() or probe.stderr.strip().splitlines()[-1])
        return json.dumps({"entities": [], "relations": []})

    openai_server.chat_responder = responder
    report = run_indexing(online)
    assert report.extraction.calls > 0 and report.extraction.failed == 0
    assert opened and set(opened) == {"opened"}


def test_a_small_llm_edit_reads_its_texts_and_writes_its_records_on_the_held_connection(setup, openai_server,
                                                                                          monkeypatch):
    """Around the model's calls the run lets go of the file (test above), but the texts it sends are read before
    and the records written after, on the connection the run holds: the ingest's until the model, one after it
    for the rest and the report's counts (was four more: the stages', a read-only one for the texts, a write for
    the records, the report's)."""
    from dataclasses import replace

    settings, docs = setup
    online = replace(settings, llm_base_url=openai_server.base_url, llm_model="fake-chat", gleaning=0)
    openai_server.chat_responder = lambda request: json.dumps({
        "entities": [{"name": "Agnes Morrow", "type": "person", "description": "Rode the railway."}],
        "relations": []})
    run_indexing(online)
    opened, after_ingest = _record_opens(monkeypatch)
    calls = openai_server.count("chat")
    (docs / "railway.md").write_text("# Railway\n\nAgnes Morrow rode the Varne Valley Railway to Hesketh Mill.\n")
    report = run_indexing(online)
    assert report.extraction.calls == 1 and report.extraction.failed == 0 and openai_server.count("chat") == calls + 1
    assert after_ingest == [1] and opened == [False, False], opened
    with Store(online.duckdb_path).connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM entities WHERE name = 'Agnes Morrow'").fetchone()[0] == 1
        assert con.execute("""SELECT count(*) FROM extractions x JOIN chunks c ON c.id = x.chunk_id
                              JOIN documents d ON d.id = c.document_id
                              WHERE d.path = 'railway.md' AND x.status = 'ok'""").fetchone()[0] >= 1


@pytest.mark.e2e
def test_a_home_with_relation_parts_in_mention_texts_moves_them_and_ends_as_a_fresh_build(tmp_path):
    """Before relation-parts-1 a relation mention's keywords and sentences were rows of mention_texts: such a
    home rebuilds its mention tables from the records once (nothing extracted again) and its graph, vectors and
    mention tables end equal to a fresh build's."""
    from pathrag_pipeline.index.mention_index import MENTIONS_META, MENTION_RULES
    from tests.test_alias_history import assert_same, snapshot

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAgnes Morrow directed the Pellingham Institute. The Pellingham Institute "
                               "measured the River Lode. Agnes Morrow visited Hesketh Mill.\n")
    old = Settings.from_env(home=tmp_path / "old", docs=docs)
    run_indexing(old)
    with Store(old.duckdb_path).connect() as con:      # the layout before: parts as rows, no lists
        for field, column in (("relation_keywords", "keyword_parts"), ("relation_description", "description_parts")):
            con.execute(f"""INSERT INTO mention_texts
                            SELECT chunk_id, ord, '{field}', generate_subscripts({column}, 1) - 1,
                                   unnest({column}).fold, unnest({column}).text FROM relation_mentions""")
        con.execute("UPDATE relation_mentions SET keyword_parts = NULL, description_parts = NULL")
        con.execute("UPDATE pathrag_meta SET value = ? WHERE key = ?", [MENTION_RULES.rsplit("/", 1)[0], MENTIONS_META])
        assert con.execute("SELECT count(*) FROM mention_texts WHERE field <> 'entity_description'").fetchone()[0] > 0
    (docs / "b.md").write_text("# B\n\nThomas Greaves built the Varne Railway to Hesketh Mill.\n")
    report = run_indexing(old)
    assert report.extraction.extracted == 1                          # only the new document's chunk
    fresh = Settings.from_env(home=tmp_path / "fresh", docs=docs)
    run_indexing(fresh)
    assert_same(snapshot(old.home), snapshot(fresh.home), "moving relation parts out of mention_texts")
    tables = {}
    for settings in (old, fresh):
        with Store(settings.duckdb_path).connect(read_only=True) as con:
            tables[settings.home] = [con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                                     for t in ("relation_mentions", "mention_texts")]
    assert tables[old.home] == tables[fresh.home]
    with Store(old.duckdb_path).connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM mention_texts WHERE field <> 'entity_description'").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM relation_mentions WHERE description_parts IS NULL").fetchone()[0] == 0
