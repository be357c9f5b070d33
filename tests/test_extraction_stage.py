"""The extraction stage over a real ingest, DuckDB and the fake OpenAI-compatible server over HTTP."""

from __future__ import annotations

import pytest

from pathrag_pipeline.index.llm_extraction import LLMExtractor, OfflineExtractor
from pathrag_pipeline.index.extraction_stage import GRAPH_DIRTY_META, run_extraction
from pathrag_pipeline.llm.client import LLMUnavailableError
from pathrag_lab.testing.openai_server import FakeOpenAIServer
from pathrag_pipeline.storage.store import Store
from tests.extraction_fakes import Corpus, FakeExtractionModel, make_client, names_in

DOCS = {
    "ada.txt": "Ada Lovelace wrote notes about the Engine of Babbage in London.",
    "alan.txt": "Alan Turing worked at Bletchley Park near London during the war.",
    "grace.txt": "Grace Hopper built the Compiler for the Navy in Arlington.",
    "edsger.txt": "Edsger Dijkstra taught in Austin and wrote about Structured Programming.",
}


@pytest.fixture
def corpus(tmp_path) -> Corpus:
    corpus = Corpus(tmp_path)
    for name, text in DOCS.items():
        corpus.write(name, text)
    corpus.sync()
    return corpus


def llm_extractor(server: FakeOpenAIServer, model: FakeExtractionModel | None = None, **options) -> LLMExtractor:
    server.chat_responder = model or FakeExtractionModel()
    return LLMExtractor(make_client(server, **options), gleaning=1)


def entity_names(corpus: Corpus) -> set[str]:
    return {r[0] for r in corpus.query("SELECT name FROM entities")}


def test_llm_run_extracts_every_chunk_then_unchanged_rerun_costs_nothing(corpus: Corpus, openai_server) -> None:
    extractor = llm_extractor(openai_server)
    chunks = corpus.query("SELECT count(*) FROM chunks")[0][0]

    stats = run_extraction(corpus.store, extractor, batch_size=2)

    assert (stats.pending, stats.extracted, stats.failed, stats.cache_hits) == (chunks, chunks, 0, 0)
    assert stats.calls == openai_server.count("chat") == 2 * chunks  # first pass + one gleaning pass each
    assert corpus.query("SELECT count(*) FROM extractions WHERE status = 'ok' AND extractor = ?",
                        [extractor.identity])[0][0] == chunks
    expected = {n for text in DOCS.values() for n in names_in(text)} | {f"Gleaned {names_in(t)[0]}" for t in DOCS.values()}
    assert entity_names(corpus) == expected
    usage = corpus.query("SELECT stage, items, calls, prompt_tokens > 0 FROM llm_usage")
    assert usage == [("extract", chunks, 2 * chunks, True)]

    openai_server.reset()
    again = run_extraction(corpus.store, extractor)
    assert (again.pending, again.calls, openai_server.count("chat")) == (0, 0, 0)
    assert entity_names(corpus) == expected


def test_editing_one_document_calls_only_for_its_changed_chunk(corpus: Corpus, openai_server) -> None:
    extractor = llm_extractor(openai_server)
    run_extraction(corpus.store, extractor)
    openai_server.reset()

    corpus.write("grace.txt", "Grace Hopper built the Compiler for Remington Rand in Philadelphia.")
    corpus.sync()
    stats = run_extraction(corpus.store, extractor)

    assert (stats.pending, stats.removed_chunks) == (1, 1)
    assert openai_server.count("chat") == stats.calls == 2
    names = entity_names(corpus)
    assert {"Remington", "Philadelphia"} <= names and "Navy" not in names and "Arlington" not in names
    assert corpus.query("SELECT count(*) FROM extractions")[0][0] == len(DOCS)


def test_deleting_a_document_removes_its_entities_and_keeps_shared_ones(corpus: Corpus, openai_server) -> None:
    extractor = llm_extractor(openai_server)
    run_extraction(corpus.store, extractor)
    london_docs = corpus.query("SELECT document_ids FROM entities WHERE name = 'London'")[0][0]
    assert sorted(london_docs) == ["ada.txt", "alan.txt"]

    corpus.delete("ada.txt")
    corpus.sync()
    openai_server.reset()
    stats = run_extraction(corpus.store, extractor)

    assert (stats.removed_chunks, stats.calls) == (1, 0)
    names = entity_names(corpus)
    assert not {"Ada", "Lovelace", "Babbage", "Gleaned Ada"} & names
    assert corpus.query("SELECT document_ids FROM entities WHERE name = 'London'")[0][0] == ["alan.txt"]
    assert corpus.query("SELECT count(*) FROM relations WHERE list_contains(document_ids, 'ada.txt')")[0][0] == 0


def test_a_result_over_the_per_chunk_cap_is_trimmed_and_said_so(corpus: Corpus, caplog) -> None:
    """Any extractor can return far more than a chunk warrants (an LLM too); one record stores at most
    result_cap(text) bytes of JSON, and a trimmed one is counted, noted on its record and logged by name."""
    from pathrag_pipeline.index.extraction_models import ChunkExtraction, Entity, Relation, result_cap
    from pathrag_pipeline.index.llm_extraction import ExtractionOutcome

    class Runaway:
        identity = "runaway"

        def extract(self, text, title):
            if "Grace" not in text:
                return OfflineExtractor().extract(text, title)
            quote = text * 200  # every description quotes the chunk 200 times over
            entities = [Entity(name=f"Grace {i}", description=quote) for i in range(50)]
            relations = [Relation(source=f"Grace {i}", target=f"Grace {i + 1}", description=quote) for i in range(49)]
            return ExtractionOutcome(ChunkExtraction(entities=entities, relations=relations))

    caplog.set_level("WARNING", logger="pathrag_pipeline.index")
    stats = run_extraction(corpus.store, Runaway())

    assert (stats.extracted, stats.failed, stats.trimmed) == (len(DOCS), 0, 1)
    rows = corpus.query("""SELECT e.document_id, e.status, e.error, strlen(e.result::VARCHAR), c.text
                           FROM extractions e JOIN chunks c ON c.id = e.chunk_id ORDER BY e.document_id""")
    for document_id, status, note, size, text in rows:
        assert status == "ok" and size <= result_cap(text)
        assert (note is not None) == (document_id == "grace.txt")
    grace_note = next(r[2] for r in rows if r[0] == "grace.txt")
    assert "trimmed to the per-chunk cap" in grace_note and "of 50 entities" in grace_note
    warnings = [r.getMessage() for r in caplog.records if "trimmed" in r.getMessage()]
    assert len(warnings) == 1 and "grace.txt" in warnings[0]
    assert "Grace 0" in entity_names(corpus)


def test_what_stopped_the_run_is_reported_even_when_saving_the_finished_chunks_fails(corpus: Corpus,
                                                                                      monkeypatch) -> None:
    """On the way out the stage writes the chunks that finished; when that write fails too (DuckDB out of
    memory again, in the huge_line.txt report), the error that stopped the run is still the one raised."""
    from pathrag_pipeline.index import extraction_stage
    from pathrag_pipeline.storage.store import StoreMemoryError

    class InterruptedAtGrace:
        identity = "interrupted-at-grace"

        def extract(self, text, title):
            if "Grace" in text:
                raise KeyboardInterrupt
            return OfflineExtractor().extract(text, title)

    def failing_persist(con, removed, records):
        raise StoreMemoryError("DuckDB ran out of memory (stand-in)")

    monkeypatch.setattr(extraction_stage, "persist_changes", failing_persist)
    with pytest.raises(KeyboardInterrupt):
        run_extraction(corpus.store, InterruptedAtGrace(), max_concurrency=1, batch_size=100)


def test_deleting_a_document_never_loads_its_extraction_records(tmp_path, monkeypatch) -> None:
    """A home holding records too large to load (the huge_line.txt report: every statement parsing them ran
    DuckDB out of memory) recovers once the file is deleted: what the deleted records contributed is read
    from the mention tables, so the re-index never parses them."""
    import duckdb

    from pathrag_pipeline.index import graph_merge, mention_index

    corpus = Corpus(tmp_path)
    for name, text in DOCS.items():  # a heading first: a one-line .txt would be its own title
        corpus.write(name.replace(".txt", ".md"), f"# {name}\n\n{text}\n")
    corpus.sync()
    run_extraction(corpus.store, OfflineExtractor())
    huge = {c for (c,) in corpus.query("SELECT id FROM chunks WHERE document_id = 'ada.md'")}
    assert huge and "London" in entity_names(corpus)

    def parse_records(con):
        raise duckdb.OutOfMemoryException("Out of Memory Error: stand-in for records too large to load")

    # the only path that parses stored records is rebuilding the mention tables (a home made before them)
    monkeypatch.setattr(mention_index, "rebuild_mentions", parse_records)
    corpus.delete("ada.md")
    corpus.sync()
    stats = run_extraction(corpus.store, OfflineExtractor())

    assert stats.removed_chunks == len(huge)
    assert not {"Ada Lovelace", "Babbage"} & entity_names(corpus)
    assert corpus.query("SELECT document_ids FROM entities WHERE name = 'London'")[0][0] == ["alan.md"]
    assert corpus.query("SELECT count(*) FROM relations WHERE list_contains(document_ids, 'ada.md')")[0][0] == 0
    graph = ("SELECT entity_key, name, type, description, mention_count, source_chunk_ids FROM entities ORDER BY 1",
             "SELECT relation_key, keywords, description, mention_count, source_chunk_ids FROM relations ORDER BY 1")
    with corpus.store.connect() as con:  # the same graph as a rebuild from the remaining records
        incremental = [con.execute(q).fetchall() for q in graph]
        con.execute("BEGIN TRANSACTION")
        graph_merge.merge_keys(con, None, None)
        rebuilt = [con.execute(q).fetchall() for q in graph]
        con.execute("ROLLBACK")
    assert incremental == rebuilt


# "timeout" waits out real client timeouts: end to end (.ci/run: pytest -m e2e)
@pytest.mark.parametrize("fault", ["429", "500", pytest.param("timeout", marks=pytest.mark.e2e), "cut_body"])
def test_transport_faults_are_retried_and_the_run_succeeds(corpus: Corpus, openai_server, fault: str) -> None:
    # The stalled request never answers (until the server stops), and the client waits 3 s, several times
    # what a normal answer takes on a loaded machine: only the injected stall can time out, so the call count
    # below does not depend on the machine's speed (with 0.5 s an ordinary slow answer could time out too).
    extractor = llm_extractor(openai_server, max_concurrency=1, timeout=3.0)
    openai_server.timeout_sleep = 600
    openai_server.inject(fault, times=1)

    stats = run_extraction(corpus.store, extractor, max_concurrency=1)

    assert (stats.failed, stats.extracted) == (0, len(DOCS))
    assert stats.calls == openai_server.count("chat") == 2 * len(DOCS) + 1


def test_persistently_malformed_chunk_fails_alone_and_is_retried_next_run(corpus: Corpus, openai_server) -> None:
    model = FakeExtractionModel(poison={"Bletchley"})
    extractor = llm_extractor(openai_server, model, validation_retries=1)

    stats = run_extraction(corpus.store, extractor)

    assert (stats.failed, stats.extracted) == (1, len(DOCS) - 1)
    failed = corpus.query("SELECT document_id, error FROM extractions WHERE status = 'failed'")
    assert len(failed) == 1 and failed[0][0] == "alan.txt" and "invalid" in failed[0][1]
    assert "Turing" not in entity_names(corpus) and "Dijkstra" in entity_names(corpus)
    failed_chunk = corpus.query("SELECT chunk_id FROM extractions WHERE status = 'failed'")[0][0]
    assert stats.errors[0].startswith(failed_chunk)

    model.poison.clear()
    openai_server.reset()
    retry = run_extraction(corpus.store, extractor)

    assert (retry.pending, retry.failed, retry.extracted) == (1, 0, 1)
    assert openai_server.count("chat") == 2
    assert all("Bletchley" in str(r.body) for r in openai_server.requests_for("chat"))
    assert "Turing" in entity_names(corpus)
    assert corpus.query("SELECT count(*) FROM extractions WHERE status = 'failed'")[0][0] == 0


def test_same_text_under_another_chunk_id_is_a_cache_hit(corpus: Corpus, openai_server) -> None:
    extractor = llm_extractor(openai_server)
    run_extraction(corpus.store, extractor)
    openai_server.reset()

    corpus.write("ada-copy.txt", DOCS["ada.txt"])
    corpus.write("twin-1.txt", "Marie Curie studied Radium in Paris.")
    corpus.write("twin-2.txt", "Marie Curie studied Radium in Paris.")
    corpus.sync()
    stats = run_extraction(corpus.store, extractor)

    # ada-copy from the cache; of the two new identical texts only one is extracted.
    assert (stats.pending, stats.cache_hits, stats.extracted) == (3, 2, 2)
    assert openai_server.count("chat") == stats.calls == 2
    assert stats.cache_hit_rate == pytest.approx(2 / 3)
    curie_docs = corpus.query("SELECT document_ids FROM entities WHERE name = 'Curie'")[0][0]
    assert sorted(curie_docs) == ["twin-1.txt", "twin-2.txt"]
    assert "ada-copy.txt" in corpus.query("SELECT document_ids FROM entities WHERE name = 'Lovelace'")[0][0]


@pytest.mark.e2e
def test_a_replaced_or_deleted_result_is_kept_once_and_served_when_its_text_comes_back(corpus: Corpus,
                                                                                        openai_server) -> None:
    extractor = llm_extractor(openai_server)
    run_extraction(corpus.store, extractor)
    live = "SELECT count(*) FROM extractions WHERE status = 'ok'"
    cached = "SELECT chunk_hash FROM extraction_cache ORDER BY 1"
    # every result is stored once: in its record, not also in the cache
    assert corpus.query(live)[0][0] == len(DOCS) and corpus.query(cached) == []
    ada_hash = corpus.query("SELECT chunk_hash FROM extractions WHERE document_id = 'ada.txt'")[0][0]
    alan_hash = corpus.query("SELECT chunk_hash FROM extractions WHERE document_id = 'alan.txt'")[0][0]

    corpus.write("ada.txt", DOCS["ada.txt"] + " She met Mary Somerville.")   # replaces ada's record
    corpus.delete("alan.txt")                                                # deletes alan's
    corpus.sync()
    openai_server.reset()
    stats = run_extraction(corpus.store, extractor)
    assert (stats.extracted, stats.cache_hits, openai_server.count("chat")) == (1, 0, 2)
    assert corpus.query(cached) == sorted([(ada_hash,), (alan_hash,)])
    assert "Turing" not in entity_names(corpus)

    # the edit undone and the file back: both from the kept results, no call
    corpus.write("ada.txt", DOCS["ada.txt"])
    corpus.write("alan.txt", DOCS["alan.txt"])
    corpus.sync()
    openai_server.reset()
    stats = run_extraction(corpus.store, extractor)
    assert (stats.pending, stats.cache_hits, stats.extracted, stats.calls) == (2, 2, 0, 0)
    assert openai_server.count("chat") == 0
    assert {"Turing", "Lovelace"} <= entity_names(corpus) and "Somerville" not in entity_names(corpus)
    assert corpus.query("SELECT calls FROM extraction_cache WHERE chunk_hash = ?", [ada_hash]) == [(2,)]


def test_crash_after_first_batch_resumes_without_repeating_finished_chunks(corpus: Corpus, openai_server) -> None:
    extractor = llm_extractor(openai_server)

    def crash(done: int, total: int) -> None:
        raise RuntimeError("simulated crash")

    with pytest.raises(RuntimeError, match="simulated crash"):
        run_extraction(corpus.store, extractor, max_concurrency=1, batch_size=2, progress=crash,
                       min_flush_seconds=0, write_share=None)

    finished = corpus.query("SELECT count(*) FROM extractions WHERE status = 'ok'")[0][0]
    assert finished == 2
    assert corpus.query("SELECT count(*) FROM pathrag_meta WHERE key = ?", [GRAPH_DIRTY_META])[0][0] == 1
    openai_server.reset()

    stats = run_extraction(corpus.store, extractor, batch_size=2)

    assert stats.pending == len(DOCS) - finished
    assert openai_server.count("chat") == 2 * (len(DOCS) - finished)
    # The graph covers the chunks finished before the crash too (their keys stayed dirty until now).
    expected = {n for text in DOCS.values() for n in names_in(text)}
    assert expected <= entity_names(corpus)
    assert corpus.query("SELECT count(*) FROM pathrag_meta WHERE key = ?", [GRAPH_DIRTY_META])[0][0] == 0


def test_unreachable_endpoint_stops_the_run_and_keeps_finished_chunks(corpus: Corpus, openai_server) -> None:
    for i in range(8):
        corpus.write(f"extra-{i}.txt", f"Extra Document number {i} mentions Somewhere.")
    corpus.sync()
    extractor = llm_extractor(openai_server, max_retries=0)
    openai_server.inject("500", times=100)

    with pytest.raises(LLMUnavailableError, match="run again"):
        run_extraction(corpus.store, extractor, max_concurrency=1, abort_after_unavailable=2)

    # It stopped after two failures (plus at most the chunk already started) instead of trying all twelve.
    assert openai_server.count("chat") <= 3
    openai_server.reset()
    stats = run_extraction(corpus.store, extractor)
    assert (stats.pending, stats.failed, stats.extracted) == (len(DOCS) + 8, 0, len(DOCS) + 8)


def test_switching_extractor_replaces_records(corpus: Corpus, openai_server) -> None:
    run_extraction(corpus.store, OfflineExtractor())
    extractor = llm_extractor(openai_server)

    stats = run_extraction(corpus.store, extractor)

    assert (stats.pending, stats.replaced) == (len(DOCS), len(DOCS))
    assert {r[0] for r in corpus.query("SELECT DISTINCT extractor FROM extractions")} == {extractor.identity}
    assert "Gleaned Ada" in entity_names(corpus)


def test_offline_extractor_end_to_end(tmp_path) -> None:
    corpus = Corpus(tmp_path, chunk_tokens=40)
    corpus.write("rivers.md", "# Rivers\n\nThe Thames flows through London and Oxford. "
                              "The Seine flows through Paris. " * 4)
    corpus.write("cities.txt", "Paris is the capital of France. London is the capital of England.")
    corpus.sync()
    chunks = corpus.query("SELECT count(*) FROM chunks")[0][0]
    assert chunks > 2

    stats = run_extraction(corpus.store, OfflineExtractor())

    assert (stats.pending, stats.extracted, stats.calls) == (chunks, chunks, 0)
    names = {n.casefold() for n in entity_names(corpus)}
    assert {"paris", "london"} <= names
    paris_docs = corpus.query("SELECT document_ids FROM entities WHERE lower(name) = 'paris'")[0][0]
    assert sorted(paris_docs) == ["cities.txt", "rivers.md"]
    assert corpus.query("SELECT count(*) FROM relations")[0][0] > 0
    assert run_extraction(corpus.store, OfflineExtractor()).pending == 0


def test_over_budget_descriptions_are_summarised_by_the_llm_once(corpus: Corpus, openai_server) -> None:
    model = FakeExtractionModel()
    extractor = llm_extractor(openai_server, model)

    stats = run_extraction(corpus.store, extractor, max_description_tokens=3)

    assert stats.merge is not None and stats.merge.summaries_called > 0
    assert model.summaries == stats.summary_calls == stats.merge.summaries_called
    assert corpus.query("SELECT count(*) FROM entities WHERE description LIKE 'A short%'")[0][0] > 0
    usage = dict(corpus.query("SELECT stage, calls FROM llm_usage"))
    assert usage == {"extract": 2 * len(DOCS), "summarise": stats.summary_calls}

    corpus.write("grace.txt", "Grace Hopper built the Compiler for Remington Rand in London.")
    corpus.sync()
    before = model.summaries
    again = run_extraction(corpus.store, extractor, max_description_tokens=3)

    # Only keys whose description input changed need a new summary; the rest come from the summary cache.
    assert again.merge.summaries_cached > 0
    assert model.summaries - before == again.merge.summaries_called < stats.merge.summaries_called


def test_summaries_are_made_while_no_process_holds_the_duckdb_file(corpus: Corpus) -> None:
    """A second process can open the index for writing from inside every summarise call."""
    import subprocess
    import sys

    probe = "import duckdb, sys; duckdb.connect(sys.argv[1]).close()"
    opened = []

    def summarise(kind: str, name: str, descriptions: list[str]) -> str:
        done = subprocess.run([sys.executable, "-c", probe, str(corpus.store.path)], capture_output=True, text=True)
        opened.append(done.returncode == 0 or done.stderr)
        return f"A short summary of {name}."

    # one summary at a time, so the probes do not contend with each other for the file
    stats = run_extraction(corpus.store, OfflineExtractor(), summarise=summarise, max_description_tokens=3,
                           max_concurrency=1)
    assert opened and all(result is True for result in opened), opened[:1]
    assert stats.merge.summaries_called == len(opened)
    assert corpus.query("SELECT count(*) FROM entities WHERE description = 'A short summary'")[0][0] > 0  # cut to 3 tokens


def test_a_merge_that_crashes_midway_resumes_in_batches_on_the_next_run(corpus: Corpus, monkeypatch) -> None:
    """The pending-merge marker survives a crash in the merge, and the re-run merges in bounded batches."""
    from pathrag_pipeline.index import graph_merge

    reference = corpus.__class__(corpus.docs.parent / "reference")
    for name, text in DOCS.items():
        reference.write(name, text)
    reference.sync()
    run_extraction(reference.store, OfflineExtractor())
    expected = reference.query("SELECT entity_key, name, mention_count FROM entities ORDER BY 1")

    monkeypatch.setattr(graph_merge, "MERGE_BATCH_ROWS", 1)                 # one entity key per batch
    real_write = graph_merge._write
    calls = {"n": 0}

    def crashing_write(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise MemoryError("simulated crash in the middle of the merge")
        return real_write(*args, **kwargs)

    monkeypatch.setattr(graph_merge, "_write", crashing_write)
    with pytest.raises(MemoryError):
        run_extraction(corpus.store, OfflineExtractor())
    assert corpus.query("SELECT count(*) FROM pathrag_meta WHERE key = ?", [GRAPH_DIRTY_META])[0][0] == 1
    assert corpus.query("SELECT count(*) FROM entities")[0][0] == 0          # the merge rolled back whole

    monkeypatch.setattr(graph_merge, "_write", real_write)
    again = run_extraction(corpus.store, OfflineExtractor())
    assert again.pending == 0 and again.merge is not None
    assert corpus.query("SELECT entity_key, name, mention_count FROM entities ORDER BY 1") == expected
    assert corpus.query("SELECT count(*) FROM pathrag_meta WHERE key = ?", [GRAPH_DIRTY_META])[0][0] == 0


def test_a_graph_merged_under_older_name_key_rules_is_merged_again_in_full(tmp_path, monkeypatch) -> None:
    """An index built before a name-key fix keeps no entity under a key the current rules no longer give:
    the next run merges the whole graph again from its records, without extracting anything again."""
    from pathrag_pipeline.index import extraction_stage, mention_index
    from pathrag_pipeline.text.names import NAME_KEY_VERSION, name_key

    corpus = Corpus(tmp_path)
    corpus.write("turkey.txt", "İstanbul is the largest city of Turkey. Ankara is the capital of Turkey.")
    corpus.write("travel.txt", "Istanbul lies on the Bosphorus. Ferries cross the Bosphorus every hour.")
    corpus.sync()

    def old_rules(name: str) -> str:        # the rules of version 1: the dot of İ was a word break
        return name_key(name.replace("İ", "I "))
    monkeypatch.setattr(mention_index, "name_key", old_rules)
    monkeypatch.setattr(mention_index, "MENTION_RULES", "1/old")
    monkeypatch.setattr(extraction_stage, "NAME_KEY_VERSION", "1")
    run_extraction(corpus.store, OfflineExtractor())
    keys = {r[0] for r in corpus.query("SELECT entity_key FROM entities")}
    assert {"i stanbul", "istanbul"} <= keys                    # the old rules split the city in two
    monkeypatch.undo()

    stats = run_extraction(corpus.store, OfflineExtractor())
    assert stats.pending == 0 and stats.calls == 0                 # nothing extracted again
    assert stats.merge is not None and stats.merge.entities_deleted >= 1
    keys = {r[0] for r in corpus.query("SELECT entity_key FROM entities")}
    assert "istanbul" in keys and "i stanbul" not in keys
    docs = corpus.query("SELECT document_ids FROM entities WHERE entity_key = 'istanbul'")[0][0]
    assert sorted(docs) == ["travel.txt", "turkey.txt"]             # one entity for both spellings
    stale = corpus.query("SELECT count(*) FROM relations WHERE src_key = 'i stanbul' OR tgt_key = 'i stanbul'")
    assert stale[0][0] == 0
    assert corpus.query("SELECT value FROM pathrag_meta WHERE key = 'name_key_version'")[0][0] == \
        extraction_stage.graph_rules()
    assert extraction_stage.graph_rules().startswith(NAME_KEY_VERSION + "/")
    assert run_extraction(corpus.store, OfflineExtractor()).merge is None   # once only


def test_a_new_provenance_cap_is_pending_work_and_merges_the_graph_again(tmp_path, monkeypatch) -> None:
    """The provenance cap is one of the merge rules: a graph merged under another cap (or before it existed) is
    reported as work by the pending-work check and merged again in full by the next run, without extracting."""
    from pathrag_pipeline.index import extraction_stage, graph_merge
    from pathrag_pipeline.storage.store import get_meta

    corpus = Corpus(tmp_path)
    for i in range(4):
        corpus.write(f"doc{i}.txt", f"Ada Halden surveyed Port Aster in the year {1900 + i}. Port Aster grew.")
    corpus.sync()
    run_extraction(corpus.store, OfflineExtractor())
    lists = lambda: dict(corpus.query("SELECT entity_key, source_chunk_ids FROM entities"))  # noqa: E731
    assert len(lists()["ada halden"]) == 4
    with corpus.store.connect(read_only=True) as con:
        assert extraction_stage.extraction_backlog(con, OfflineExtractor().identity).empty

    monkeypatch.setattr(graph_merge, "MAX_SOURCE_IDS", 2)
    with corpus.store.connect(read_only=True) as con:
        backlog = extraction_stage.extraction_backlog(con, OfflineExtractor().identity)
        assert backlog.rules_stale and not backlog.empty and backlog.pending == 0
    stats = run_extraction(corpus.store, OfflineExtractor())
    assert stats.pending == 0 and stats.merge is not None
    kept = lists()
    assert kept["ada halden"] == sorted(kept["ada halden"]) and len(kept["ada halden"]) == 2
    assert max(len(v) for v in kept.values()) <= 2
    with corpus.store.connect(read_only=True) as con:
        assert get_meta(con, extraction_stage.NAME_KEYS_META) == extraction_stage.graph_rules()
        assert extraction_stage.extraction_backlog(con, OfflineExtractor().identity).empty
    assert run_extraction(corpus.store, OfflineExtractor()).merge is None   # once only


@pytest.mark.e2e
def test_a_failed_summary_is_asked_again_next_run_and_ends_as_a_rebuild(corpus: Corpus, tmp_path) -> None:
    """A summary that fails leaves its key dirty: the next run (nothing else changed) asks for it again and
    the graph ends equal to a build whose summaries never failed (issue 23)."""
    calls = {"n": 0}

    def flaky(kind: str, name: str, descriptions: list[str]) -> str:
        calls["n"] += 1
        if calls["n"] % 2:
            raise RuntimeError("the endpoint dropped the connection")
        return f"Summary of {name}."

    def steady(kind: str, name: str, descriptions: list[str]) -> str:
        return f"Summary of {name}."

    first = run_extraction(corpus.store, OfflineExtractor(), summarise=flaky, max_description_tokens=3,
                           max_concurrency=1)
    assert any("failed" in e for e in first.errors)
    assert corpus.query("SELECT count(*) FROM pathrag_meta WHERE key = ?", [GRAPH_DIRTY_META])[0][0] == 1
    for _ in range(8):                                  # each run retries what is still missing
        again = run_extraction(corpus.store, OfflineExtractor(), summarise=flaky, max_description_tokens=3,
                               max_concurrency=1)
        assert again.pending == 0                       # nothing extracted again
        if not corpus.query("SELECT count(*) FROM pathrag_meta WHERE key = ?", [GRAPH_DIRTY_META])[0][0]:
            break
    else:
        pytest.fail("summaries still missing after 8 runs")

    reference = corpus.__class__(tmp_path / "reference")
    for name, text in DOCS.items():
        reference.write(name, text)
    reference.sync()
    run_extraction(reference.store, OfflineExtractor(), summarise=steady, max_description_tokens=3)
    sql = "SELECT entity_key, name, description FROM entities ORDER BY 1"
    assert corpus.query(sql) == reference.query(sql)
    sql = "SELECT relation_key, description FROM relations ORDER BY 1"
    assert corpus.query(sql) == reference.query(sql)


def test_offline_extraction_in_worker_processes_writes_the_same_tables_as_one_process(tmp_path, monkeypatch) -> None:
    """The offline rules are CPU-bound: threads would hold them to one core, so a large enough run extracts in
    worker processes (issue 23, both cores). Records and graph equal those of a run in this process."""
    from pathrag_pipeline.index import extraction_stage

    monkeypatch.setattr(extraction_stage, "PROCESS_MIN_TEXTS", 2)    # the sample is small: use the processes anyway
    tables = ("SELECT chunk_id, status, result FROM extractions ORDER BY 1",
              "SELECT * EXCLUDE (updated_at) FROM entities ORDER BY 1",
              "SELECT * EXCLUDE (updated_at) FROM relations ORDER BY 1")
    out = {}
    for processes in (1, 2):
        corpus = Corpus(tmp_path / f"p{processes}")
        for name, text in DOCS.items():
            corpus.write(name, text)
        corpus.sync()
        stats = run_extraction(corpus.store, OfflineExtractor(), processes=processes)
        assert stats.processes == processes and stats.extracted == len(DOCS) and stats.failed == 0
        out[processes] = [corpus.query(q) for q in tables]
    assert out[1] == out[2] and out[1][1]


def test_a_text_that_crashes_a_worker_process_fails_alone_in_its_task(tmp_path, monkeypatch) -> None:
    """Worker processes get several texts a task (PROCESS_TASK_TEXTS); an extractor raising on one of them fails
    that chunk only, with what was raised, and the others of the task are written."""
    from pathrag_pipeline.index import extraction_stage
    from tests.extraction_fakes import CrashingOfflineExtractor

    monkeypatch.setattr(extraction_stage, "PROCESS_MIN_TEXTS", 2)
    corpus = Corpus(tmp_path)
    for name, text in DOCS.items():
        corpus.write(name, text)
    corpus.sync()
    assert extraction_stage.PROCESS_TASK_TEXTS >= len(DOCS)   # one task holds every text
    stats = run_extraction(corpus.store, CrashingOfflineExtractor("Grace Hopper"), processes=2)
    assert stats.processes == 2
    assert (stats.pending, stats.extracted, stats.failed) == (len(DOCS), len(DOCS) - 1, 1)
    rows = corpus.query("SELECT document_id, status, error FROM extractions ORDER BY 1")
    assert [(d, s) for d, s, _ in rows] == [(d, "failed" if d == "grace.txt" else "ok") for d in sorted(DOCS)]
    error = next(e for d, _, e in rows if d == "grace.txt")
    assert "raised ValueError: cannot read 'Grace Hopper'" in error
    names = " | ".join(entity_names(corpus))
    assert "Turing" in names and "Hopper" not in names


@pytest.mark.e2e
def test_worker_processes_that_die_leave_their_texts_and_the_rest_to_this_process(tmp_path, monkeypatch,
                                                                                  caplog) -> None:
    """A worker process that ends (killed for memory, say) breaks the pool: every task in flight fails at once and
    the pool takes no more. Every text in flight (up to PROCESS_QUEUE_PER_WORKER a worker) failed with it and the
    next submit stopped the run (BrokenProcessPool); now the texts in flight and the rest are extracted in this
    process, with one warning, and the tables are those of one process."""
    from pathrag_pipeline.index import extraction_stage
    from tests.extraction_fakes import DyingWorkerOfflineExtractor

    monkeypatch.setattr(extraction_stage, "PROCESS_MIN_TEXTS", 2)
    monkeypatch.setattr(extraction_stage, "PROCESS_TASK_TEXTS", 1)      # texts in flight, others not sent yet
    docs = {**DOCS, **{f"town{i:02d}.txt": f"Town {i} Council met Mayor Number{i} in Valmere." for i in range(24)}}
    tables = ("SELECT chunk_id, status, error, result FROM extractions ORDER BY 1",
              "SELECT * EXCLUDE (updated_at) FROM entities ORDER BY 1",
              "SELECT * EXCLUDE (updated_at) FROM relations ORDER BY 1")
    out, stats = {}, {}
    for processes in (1, 2):
        corpus = Corpus(tmp_path / f"p{processes}")
        for name, text in docs.items():
            corpus.write(name, text)
        corpus.sync()
        with caplog.at_level("WARNING", logger="pathrag_pipeline.index"):
            stats[processes] = run_extraction(corpus.store, DyingWorkerOfflineExtractor("Grace Hopper"),
                                              processes=processes)
        out[processes] = [corpus.query(q) for q in tables]
    assert (stats[2].pending, stats[2].extracted, stats[2].failed) == (len(docs), len(docs), 0)
    assert stats[2].processes == 1                         # said: it ended in this process
    assert out[2] == out[1] and {s for _, s, _, _ in out[2][0]} == {"ok"}
    assert sum("worker processes stopped" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("cap, value, first", [("MAX_BATCH_RECORDS", 2, 2), ("MAX_BATCH_MENTION_ROWS", 1, 1)])
def test_a_batch_is_written_at_its_cap_even_when_no_write_is_due(corpus: Corpus, monkeypatch, cap, value,
                                                                 first) -> None:
    """Paced writes may wait long when checkpoints are costly; MAX_BATCH_RECORDS still bounds what waits in memory,
    and MAX_BATCH_MENTION_ROWS the prepared mention rows the waiting records carry."""
    from pathrag_pipeline.index import extraction_stage

    monkeypatch.setattr(extraction_stage, cap, value)
    written: list[int] = []
    run_extraction(corpus.store, OfflineExtractor(), max_concurrency=1, batch_size=1, min_flush_seconds=3600,
                   write_share=None, progress=lambda done, total: written.append(done))
    # a write at the cap (or one record more when two chunks finish together) before the end, not after the hour
    assert first <= written[0] < len(DOCS) and written[-1] == len(DOCS)
    assert corpus.query("SELECT count(*) FROM extractions WHERE status = 'ok'")[0][0] == len(DOCS)


@pytest.mark.e2e
def test_texts_and_cached_results_are_read_in_bounded_batches_with_the_same_tables(tmp_path, monkeypatch) -> None:
    """Issue 23, flat memory: the plan holds chunk ids, not texts; texts are read TEXT_BATCH groups at a time
    and cached results written TEXT_BATCH records per transaction. Tables equal those of one batch."""
    from pathrag_pipeline.index import extraction_stage

    docs = {**DOCS, **{f"more-{i}.txt": f"Person{i} Smith visited City{i % 3} with Ada Lovelace in {1900 + i}."
                       for i in range(7)}}
    tables = ("SELECT chunk_id, status, result FROM extractions ORDER BY 1",
              "SELECT * EXCLUDE (updated_at) FROM entities ORDER BY 1",
              "SELECT * EXCLUDE (updated_at) FROM relations ORDER BY 1")

    def build(name: str, batch: int) -> tuple[list, list, list]:
        monkeypatch.setattr(extraction_stage, "TEXT_BATCH", batch)
        corpus = Corpus(tmp_path / name)
        for doc, text in docs.items():
            corpus.write(doc, text)
        corpus.sync()
        with corpus.store.connect() as con:
            plan = extraction_stage.plan_extraction(con, OfflineExtractor().identity, texts=False)
        assert len(plan.pending) == len(docs) and all(c.text is None for c in plan.pending)
        reads: list[int] = []
        real = extraction_stage._with_texts

        def counting(store, groups):
            for group in real(store, groups):
                assert group[0].text                      # read before it is submitted
                reads.append(len(group))
                yield group

        monkeypatch.setattr(extraction_stage, "_with_texts", counting)
        first = run_extraction(corpus.store, OfflineExtractor())
        assert first.extracted == len(docs) and sum(reads) == len(docs)
        fresh = [corpus.query(q) for q in tables]
        # every document renamed: new chunk ids, the same texts, all from the cache
        for doc, text in docs.items():
            (corpus.docs / doc).rename(corpus.docs / f"renamed-{doc}")
        corpus.sync()
        second = run_extraction(corpus.store, OfflineExtractor())
        assert (second.cache_hits, second.extracted) == (len(docs), 0)
        renamed = [corpus.query(q) for q in tables]
        return fresh, [len(renamed[0])], renamed[1]

    with_one_batch = build("one", 10_000)
    opened = []
    real_connect = extraction_stage.Store.connect

    def connect(self, *args, **kwargs):
        opened.append(kwargs.get("read_only", args[0] if args else False))
        return real_connect(self, *args, **kwargs)

    monkeypatch.setattr(extraction_stage.Store, "connect", connect)
    assert build("small", 2) == with_one_batch
    assert opened.count(True) >= len(docs) // 2       # texts read two groups at a time


@pytest.mark.e2e   # waits out real timeouts: end to end, run by .ci/run (pytest -m e2e)
def test_hung_requests_on_a_serial_server_neither_abort_the_run_nor_stack_retries(corpus: Corpus, openai_server) -> None:
    """Issue 61, item 2: a one-slot server where about one request in six hangs past the client's timeout. The
    timed-out request keeps its slot until the server is done with it, so retries never queue behind it and time
    out in turn: the run extracts every chunk instead of stopping with "answered none of N requests"."""
    import time as clock

    for i in range(12):
        corpus.write(f"extra-{i}.txt", f"Extra Document number {i} mentions Somewhere Else {i}.")
    corpus.sync()
    model = FakeExtractionModel()
    calls = {"n": 0}

    def sometimes_hangs(request):
        calls["n"] += 1
        if calls["n"] % 6 == 3:
            clock.sleep(1.0)                     # the server works on, past the client's 0.4 s timeout
        return model(request)

    openai_server.serial = True
    extractor = llm_extractor(openai_server, timeout=0.4, max_retries=3, max_concurrency=2)
    openai_server.chat_responder = sometimes_hangs
    stats = run_extraction(corpus.store, extractor, max_concurrency=2)
    assert stats.failed == 0 and stats.extracted == stats.pending == len(DOCS) + 12
    assert openai_server.max_processing == 1
    assert openai_server.max_in_flight <= 2        # no request stacked behind an abandoned one


def test_a_burst_of_server_errors_amid_successes_does_not_stop_the_client(corpus: Corpus, openai_server) -> None:
    """Issue 61, item 2: four HTTP 500s in a row, spread over two chunks extracted at once (each chunk fails twice,
    within its retries), while the server answered a moment before: the client stops only once the endpoint has
    answered nothing for two timeouts, so the retries go on and every chunk is extracted (four failed attempts in a
    row used to stop the client and fail the rest of the run)."""
    model = FakeExtractionModel()
    calls = {"n": 0}

    def bursty(request):
        calls["n"] += 1
        if 3 <= calls["n"] <= 6:
            raise RuntimeError("injected server error")     # the fake server answers HTTP 500
        return model(request)

    extractor = llm_extractor(openai_server, max_retries=3, max_concurrency=2)
    openai_server.chat_responder = bursty
    stats = run_extraction(corpus.store, extractor, max_concurrency=2)
    assert calls["n"] > 6 and stats.failed == 0 and stats.extracted == stats.pending == len(DOCS)


def _graph(corpus: Corpus) -> tuple[list, list]:
    return (corpus.query("SELECT entity_key, name, description FROM entities ORDER BY entity_key"),
            corpus.query("SELECT relation_key, description, keywords FROM relations ORDER BY relation_key"))


def test_a_lost_duckdb_file_is_rebuilt_from_the_paid_work_log_with_no_llm_call(corpus: Corpus, openai_server) -> None:
    """Issue 61: the LLM's extractions and summaries are also appended to paid_work.jsonl beside pathrag.duckdb;
    a home whose DuckDB file is gone is rebuilt (folder synced again, the same run) with 0 LLM calls, to the same
    graph."""
    from pathrag_pipeline.storage import paid_work

    model = FakeExtractionModel()
    extractor = llm_extractor(openai_server, model)
    first = run_extraction(corpus.store, extractor, batch_size=2, max_description_tokens=3)
    assert first.calls > 0 and first.summary_calls > 0
    built = _graph(corpus)
    log_file = paid_work.log_path(corpus.store.path.parent)
    kinds = [line.split('"kind":"', 1)[1].split('"', 1)[0] for line in log_file.read_text().splitlines()]
    assert kinds.count("extraction") == len(DOCS) and kinds.count("summary") == first.summary_calls

    for lost in corpus.store.path.parent.glob("pathrag.duckdb*"):
        lost.unlink()   # lost (or moved aside as damaged by `pathrag status --check --repair`)
    corpus.store = Store(corpus.settings.duckdb_path)
    corpus.sync()
    openai_server.reset()
    summaries_before = model.summaries
    again = run_extraction(corpus.store, extractor, batch_size=2, max_description_tokens=3)

    assert openai_server.count("chat") == 0 and again.calls == 0 and model.summaries == summaries_before
    assert again.cache_hits == len(DOCS)
    assert _graph(corpus) == built
    # nothing is logged twice: the rebuild paid for nothing
    assert len(log_file.read_text().splitlines()) == len(kinds)


def test_a_home_from_before_the_log_writes_its_paid_results_there_on_its_next_run(corpus: Corpus, openai_server,
                                                                                  ) -> None:
    from pathrag_pipeline.storage import paid_work

    run_extraction(corpus.store, llm_extractor(openai_server), max_description_tokens=3)
    log_file = paid_work.log_path(corpus.store.path.parent)
    written = log_file.read_text()
    log_file.unlink()   # as a home built before the log existed
    run_extraction(corpus.store, llm_extractor(openai_server))
    assert len(log_file.read_text().splitlines()) == len(written.splitlines()) > 0
    # a line cut short by a crash is skipped, and the next append starts a line of its own
    with open(log_file, "a") as out:
        out.write('{"kind": "extraction", "extr')
    paid_work.append(corpus.store.path.parent, [{"kind": "summary", "input_hash": "h", "summary": "s",
                                                 "model": "llm:x", "at": "2026-01-01T00:00:00"}])
    with corpus.store.connect() as con:
        assert paid_work.sync(con, corpus.store.path.parent) == {"extractions": 0, "summaries": 1}
