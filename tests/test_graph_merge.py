import dataclasses
import math
import pickle
import random

import duckdb
import pytest

from pathrag_pipeline.index.extraction_models import ChunkExtraction, Entity, Relation
from pathrag_pipeline.index.extraction_records import ExtractionRecord, cached_extraction, delete_records, write_records
from pathrag_pipeline.index.graph_merge import (
    MAX_SOURCE_IDS, apply_chunk_changes, fit_sentences, keys_for_chunks, merge_keys, merge_keywords, merge_sentences,
    relation_key,
)
from pathrag_pipeline.index.mention_index import entries, prepare_mentions
from pathrag_pipeline.storage.schema import init_schema
from pathrag_pipeline.text.tokenizer import count_tokens

ENTITY_COLS = "entity_key, name, type, description, description_tokens, mention_count, source_chunk_ids, document_ids"
RELATION_COLS = ("relation_key, src_key, tgt_key, keywords, description, description_tokens, strength, mention_count, "
                 "source_chunk_ids, document_ids")


@pytest.fixture
def con():
    c = duckdb.connect()
    init_schema(c)
    yield c
    c.close()


def rec(chunk_id, doc, entities=(), relations=(), status="ok"):
    result = ChunkExtraction(entities=[Entity(**e) for e in entities], relations=[Relation(**r) for r in relations])
    return ExtractionRecord(chunk_id=chunk_id, chunk_hash="h-" + chunk_id, document_id=doc, extractor="test",
                            status=status, result=result if status == "ok" else None,
                            error=None if status == "ok" else "boom")


def snapshot(con):
    return (con.execute(f"SELECT {ENTITY_COLS} FROM entities ORDER BY entity_key").fetchall(),
            con.execute(f"SELECT {RELATION_COLS} FROM relations ORDER BY relation_key").fetchall())


def entity(con, key):
    row = con.execute(f"SELECT {ENTITY_COLS} FROM entities WHERE entity_key = ?", [key]).fetchone()
    return dict(zip(ENTITY_COLS.split(", "), row)) if row else None


def relation(con, key):
    row = con.execute(f"SELECT {RELATION_COLS} FROM relations WHERE relation_key = ?", [key]).fetchone()
    return dict(zip(RELATION_COLS.split(", "), row)) if row else None


def orphans(con):
    return con.execute("""SELECT count(*) FROM relations r WHERE NOT EXISTS (SELECT 1 FROM entities e WHERE e.entity_key = r.src_key)
                          OR NOT EXISTS (SELECT 1 FROM entities e WHERE e.entity_key = r.tgt_key)""").fetchone()[0]


def test_aggregation(con):
    write_records(con, [
        rec("c1", "d1", [{"name": "Ada Halden", "type": "person", "description": "A surveyor."},
                         {"name": "Port Aster", "type": "location"}],
            [{"source": "Ada Halden", "target": "Port Aster", "keywords": "survey, harbour", "strength": 2,
              "description": "Ada surveyed Port Aster."}]),
        rec("c2", "d2", [{"name": "ada halden", "type": "person", "description": "A surveyor. Born in 1850."},
                         {"name": "Port Aster", "type": "organization"}],
            [{"source": "Port Aster", "target": "Ada Halden", "keywords": "Survey; maps", "strength": 3.5}]),
        rec("c3", "d2", [{"name": "Ada Halden", "type": "organization"}, {"name": "The Port Aster", "type": "location"}]),
        rec("c4", "d3", [{"name": "Ada Halden", "type": "person"}], status="failed"),
    ])
    stats = merge_keys(con, None, None)
    ada = entity(con, "ada halden")
    assert ada["name"] == "Ada Halden"                 # 2 of 3 mentions
    assert ada["type"] == "person"                     # majority; the failed record does not vote
    assert ada["mention_count"] == 3
    assert ada["source_chunk_ids"] == ["c1", "c2", "c3"] and ada["document_ids"] == ["d1", "d2"]
    assert ada["description"] == "A surveyor. Born in 1850."   # distinct sentences, most frequent first
    assert ada["description_tokens"] == count_tokens(ada["description"])
    port = entity(con, "port aster")
    assert port["type"] == "location" and port["mention_count"] == 3
    rel = relation(con, relation_key("port aster", "ada halden"))
    assert rel["relation_key"] == "ada halden<|>port aster"          # undirected, sorted endpoints
    assert rel["strength"] == 5.5 and rel["mention_count"] == 2
    assert rel["keywords"] == "survey, harbour, maps"
    assert rel["source_chunk_ids"] == ["c1", "c2"] and rel["document_ids"] == ["d1", "d2"]
    assert stats.entities_written == 2 and stats.relations_written == 1


def test_endpoints_become_entities_and_self_loops_drop(con):
    write_records(con, [ExtractionRecord(
        chunk_id="c1", chunk_hash="h", document_id="d", extractor="raw",
        # written without .normalised(): the merge must still add the endpoints
        result=ChunkExtraction(entities=[], relations=[Relation(source="U.S.", target="Canada", keywords="borders"),
                                                     Relation(source="US", target="U.S.")]))])
    merge_keys(con, None, None)
    assert {r[0] for r in con.execute("SELECT entity_key FROM entities").fetchall()} == {"us", "canada"}
    assert entity(con, "us")["type"] == "other" and entity(con, "us")["mention_count"] == 1
    assert [r[0] for r in con.execute("SELECT relation_key FROM relations").fetchall()] == ["canada<|>us"]


def test_type_vote_ignores_endpoint_filler_and_breaks_ties_alphabetically(con):
    write_records(con, [
        rec("c1", "d", [{"name": "X", "type": "other"}]), rec("c2", "d", [{"name": "X", "type": "other"}]),
        rec("c3", "d", [{"name": "X", "type": "person"}]),
        rec("c4", "d", [{"name": "Y", "type": "person"}]), rec("c5", "d", [{"name": "Y", "type": "location"}]),
    ])
    merge_keys(con, None, None)
    assert entity(con, "x")["type"] == "person"
    assert entity(con, "y")["type"] == "location"


def test_provenance_lists_keep_the_smallest_chunk_ids_and_their_documents(con):
    """A key in more chunks than the cap keeps its ``max_source_ids`` smallest chunk ids and the documents of
    those; its mention count still counts every mention; 0 keeps every id (the papers' lists)."""
    spots = [("c5", "d1"), ("c1", "d3"), ("c4", "d2"), ("c2", "d3"), ("c3", "d9")]
    write_records(con, [rec(c, d, [{"name": "Ada Halden", "type": "person", "description": "A surveyor."}],
                            [{"source": "Ada Halden", "target": "Port Aster", "strength": 1}]) for c, d in spots])
    merge_keys(con, None, None, max_source_ids=2)
    ada = entity(con, "ada halden")
    assert (ada["source_chunk_ids"], ada["document_ids"], ada["mention_count"]) == (["c1", "c2"], ["d3"], 5)
    rel = relation(con, "ada halden<|>port aster")
    assert (rel["source_chunk_ids"], rel["document_ids"], rel["mention_count"]) == (["c1", "c2"], ["d3"], 5)
    merge_keys(con, None, None, max_source_ids=0)
    ada = entity(con, "ada halden")
    assert (ada["source_chunk_ids"], ada["document_ids"]) == (["c1", "c2", "c3", "c4", "c5"], ["d1", "d2", "d3", "d9"])
    with pytest.raises(ValueError, match="max_source_ids"):
        merge_keys(con, None, None, max_source_ids=-1)


def test_merge_helpers():
    text, complete = merge_sentences(["B is big. A is red.", "A is red.", "a  is RED."], 100)
    assert text == "A is red. B is big." and complete
    cut, complete = merge_sentences(["word " * 50], 10)
    assert count_tokens(cut) <= 10 and not complete
    assert merge_keywords(["x, Y", "y; z", None, "X"]) == "x, Y, z"


def test_fitting_counts_the_joined_text_as_its_sentences_add_up():
    """``_fit`` returns the sum of its sentences' counts (each with its joining space) as the joined text's count
    and the text unchecked: no token may span the joining space, whatever the sentences hold at their ends."""
    from pathrag_pipeline.index.graph_merge import _fit
    from pathrag_pipeline.index.mention_index import sentences

    rng = random.Random(11)
    pieces = ["Word", "it's", "'s", "'ll", "12", "345", "1234", ".", "...", "?!", "'", "’", "—", "x", "é", "²",
              "日本", "internationalization", "abcdefghijkl", "snake_case", "-", "(", ")", "\"", "ab²cdefghijklm"]
    for _ in range(1500):
        text = " ".join("".join(rng.choice(pieces) for _ in range(rng.randint(1, 4))) + rng.choice([".", "!", "", "?"])
                        for _ in range(rng.randint(2, 8)))
        ranked = sentences(text)
        budget = rng.randint(1, 40)
        fitted, complete, tokens = _fit(ranked, budget)
        assert (fitted, complete) == fit_sentences(ranked, budget)
        if tokens is not None:
            assert tokens == count_tokens(fitted) <= budget, ranked
        elif complete:
            assert len(fitted) <= budget
        else:
            assert count_tokens(fitted) <= budget


class CountingSummariser:
    def __init__(self):
        self.calls = []

    def __call__(self, kind, name, descriptions):
        self.calls.append((kind, name, tuple(descriptions)))
        return f"Summary of {name}: {len(descriptions)} descriptions."


def long_desc(i):
    return f"Fact number {i} about the harbour, its cranes, tides and ships of many kinds."


def test_summaries_are_cached_by_input(con):
    records = [rec(f"c{i}", "d", [{"name": "Port Aster", "type": "location", "description": long_desc(i)},
                                  {"name": "Lune", "description": "A river."}],
                   [{"source": "Port Aster", "target": "Lune", "description": long_desc(i)}]) for i in range(6)]
    write_records(con, records)
    summarise = CountingSummariser()
    stats = merge_keys(con, None, None, summarise=summarise, max_description_tokens=40)
    assert len(summarise.calls) == 2 == stats.summaries_called        # port aster + the relation; lune fits
    assert entity(con, "port aster")["description"] == "Summary of Port Aster: 6 descriptions."
    assert entity(con, "lune")["description"] == "A river."
    assert summarise.calls[1][1] == "Lune <-> Port Aster"
    first = snapshot(con)

    stats = merge_keys(con, None, None, summarise=summarise, max_description_tokens=40)   # nothing changed
    assert len(summarise.calls) == 2 and stats.summaries_cached == 2 and stats.entities_unchanged == 2
    assert snapshot(con) == first

    apply_chunk_changes(con, [], [rec("c9", "d9", [{"name": "Lune", "description": "Long."}])], summarise)
    assert len(summarise.calls) == 2                                   # port aster untouched
    apply_chunk_changes(con, ["c0"], [], summarise, max_description_tokens=40)
    assert len(summarise.calls) == 4                                   # its input changed: new summaries
    assert entity(con, "port aster")["description"] == "Summary of Port Aster: 5 descriptions."
    apply_chunk_changes(con, [], [records[0]], summarise, max_description_tokens=40)   # back to the old input
    assert len(summarise.calls) == 4
    assert entity(con, "port aster")["description"] == "Summary of Port Aster: 6 descriptions."
    # offline (no summariser) the cached summaries still apply: the merge looks them up whenever any exist
    merge_keys(con, None, None, max_description_tokens=40)
    assert entity(con, "port aster")["description"] == "Summary of Port Aster: 6 descriptions."


def test_offline_descriptions_are_cut_to_the_budget(con):
    write_records(con, [rec(f"c{i}", "d", [{"name": "P", "description": long_desc(i % 3)}]) for i in range(7)])
    merge_keys(con, None, None, max_description_tokens=25)
    p = entity(con, "p")
    assert p["description_tokens"] <= 25
    assert p["description"].startswith(long_desc(0))                   # most frequent sentence first (3 of 7)


def test_deleting_a_document_keeps_shared_entities_reaggregated(con):
    summarise = CountingSummariser()
    apply_chunk_changes(con, [], [
        rec("a1", "docA", [{"name": "Shared", "type": "person", "description": "From A."}, {"name": "OnlyA"}],
            [{"source": "Shared", "target": "OnlyA", "strength": 4}, {"source": "Shared", "target": "Both", "strength": 1}]),
        rec("b1", "docB", [{"name": "Shared", "type": "location", "description": "From B."}, {"name": "Both"}],
            [{"source": "Shared", "target": "Both", "strength": 2}]),
    ], summarise)
    assert entity(con, "shared")["document_ids"] == ["docA", "docB"]
    chunk_ids = [r[0] for r in con.execute("SELECT chunk_id FROM extractions WHERE document_id = 'docA'").fetchall()]
    stats = apply_chunk_changes(con, chunk_ids, [], summarise)
    assert entity(con, "onlya") is None and relation(con, "onlya<|>shared") is None
    shared = entity(con, "shared")
    assert shared["document_ids"] == ["docB"] and shared["type"] == "location" and shared["description"] == "From B."
    assert relation(con, "both<|>shared")["strength"] == 2.0
    assert stats.entities_deleted == 1 and stats.relations_deleted == 1 and not summarise.calls
    assert orphans(con) == 0
    before = snapshot(con)
    merge_keys(con, None, None)
    assert snapshot(con) == before


def test_entities_that_disappear_take_their_stored_relations_along(con):
    write_records(con, [rec("c1", "d", [{"name": "A"}], [{"source": "A", "target": "B"}]),
                        rec("c2", "d", [{"name": "B"}])])
    merge_keys(con, None, None)
    delete_records(con, ["c1"])
    stats = merge_keys(con, {"a"}, set())        # the caller forgot the relation key: no orphan anyway
    assert relation(con, "a<|>b") is None and stats.relations_deleted == 1 and orphans(con) == 0


def test_keys_for_chunks(con):
    write_records(con, [rec("c1", "d", [{"name": "A"}], [{"source": "A", "target": "B"}]),
                        rec("c2", "d", [{"name": "C"}])])
    assert keys_for_chunks(con, ["c1"]) == ({"a", "b"}, {"a<|>b"})
    assert keys_for_chunks(con, []) == (set(), set())


def test_keys_for_chunks_reads_the_keys_the_merge_loads(con):
    """keys_for_chunks reads key columns only; it must find every key the merge's own mention loading finds for
    the same chunks (relations exactly; entities too, plus at most a key two aliased endpoints share), for
    random records and aliases, and nothing for chunks without an ok record."""
    from pathrag_pipeline.index import graph_merge
    from pathrag_pipeline.index.aliases import add_alias

    rng = random.Random(7)
    names = ["Ada", "Bo", "Cy", "Dee", "Eli", "Fay", "Gus", "Hal"]
    records = []
    for i in range(40):
        ents = [{"name": rng.choice(names)} for _ in range(rng.randint(0, 3))]
        rels = [{"source": rng.choice(names), "target": rng.choice(names)} for _ in range(rng.randint(0, 3))]
        records.append(rec(f"c{i:02d}", f"d{i % 5}", ents, rels, status="ok" if i % 9 else "failed"))
    write_records(con, records)
    add_alias(con, "bo", "ada")
    add_alias(con, "cy", "ada")      # a Bo-Cy relation becomes an Ada self-loop: no relation, no implicit mention
    add_alias(con, "eli", "dee")
    for trial in range(12):
        ids = rng.sample([r.chunk_id for r in records], rng.randint(1, 10))
        entity_keys, relation_keys = keys_for_chunks(con, ids)
        with graph_merge._temp_tables(con):
            con.execute("CREATE TEMP TABLE _gm_chunks AS SELECT unnest(?::VARCHAR[]) AS chunk_id", [ids])
            graph_merge._load_mentions(con, chunks="_gm_chunks")
            loaded_e = {k for (k,) in con.execute("SELECT key FROM _gm_em").fetchall()}
            loaded_r = {k for (k,) in con.execute("SELECT relation_key FROM _gm_rm").fetchall()}
        assert relation_keys == loaded_r
        assert loaded_e <= entity_keys and entity_keys - loaded_e <= {"ada", "dee"}
        assert ("bo" not in entity_keys and "cy" not in entity_keys and "eli" not in entity_keys)
    failed = [r.chunk_id for r in records if r.status != "ok"]
    assert failed and keys_for_chunks(con, failed) == (set(), set())


def test_a_failure_inside_keys_for_chunks_is_not_masked_by_the_temp_table_cleanup(con, monkeypatch):
    """A statement failing inside a transaction (DuckDB out of memory in the bug report) aborts it; the temp
    table cleanup then fails too ("Current transaction is aborted"), and that must not replace the error that
    says what happened."""
    from pathrag_pipeline.index import graph_merge
    from pathrag_pipeline.storage.store import transaction

    write_records(con, [rec("c1", "d", [{"name": "A"}])])

    def failing_load(con_, *args, **kwargs):
        con_.execute("CREATE OR REPLACE TEMP TABLE _gm_em AS SELECT 1 AS x")
        con_.execute("SELECT error('out of memory stand-in')")

    monkeypatch.setattr(graph_merge, "_load_aliases", failing_load)
    monkeypatch.setattr(graph_merge, "_load_mentions", failing_load)
    monkeypatch.setattr(graph_merge, "_load_alias_free_scope", failing_load)
    with pytest.raises(duckdb.InvalidInputException, match="out of memory stand-in"):
        with transaction(con):
            keys_for_chunks(con, ["c1"])
    with pytest.raises(duckdb.InvalidInputException, match="out of memory stand-in"):
        with transaction(con):
            merge_keys(con, {"a"}, set())
    # after the rollback the connection works and no temp table is left behind
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name LIKE '_gm_%'").fetchone()[0] == 0


def test_extraction_cache_survives_chunk_id_change(con):
    write_records(con, [rec("c1", "d", [{"name": "A"}])])
    apply_chunk_changes(con, ["c1"], [])
    hit = cached_extraction(con, "h-c1", "test")
    assert hit is not None and hit.entities[0].name == "A"
    assert cached_extraction(con, "h-c1", "other-model") is None
    with pytest.raises(ValueError, match="no result"):
        ExtractionRecord(chunk_id="x", chunk_hash="h", document_id="d", extractor="e")


def test_bad_arguments(con):
    with pytest.raises(ValueError, match="both"):
        merge_keys(con, None, set())
    with pytest.raises(ValueError, match="max_description_tokens"):
        merge_keys(con, None, None, max_description_tokens=0)


NAMES = ["Ada", "ada", "The Ada", "Bo", "Cy", "Port Aster", "port-aster", "Lune", "U.S.", "US", "Kessel", "Dray",
         "<|>"]   # a key holding the relation-key separator itself
TYPES = ["person", "location", "other", "organization"]


def random_record(rng, chunk_id, doc):
    names = rng.sample(NAMES, rng.randint(0, 4))
    entities = [{"name": n, "type": rng.choice(TYPES), "description": rng.choice(["", "S1.", "S2. S1.", "S3."])}
                for n in names]
    relations = [{"source": rng.choice(NAMES), "target": rng.choice(NAMES), "strength": rng.randint(0, 5),
                  "keywords": rng.choice(["k1", "k2, k1", ""]), "description": rng.choice(["R1.", "R2.", ""])}
                 for _ in range(rng.randint(0, 3))]
    status = "failed" if rng.random() < 0.1 else "ok"
    return rec(chunk_id, doc, entities, relations, status)


# the small-cap history in the developer run, the others end to end (.ci/run: pytest -m e2e)
@pytest.mark.parametrize("seed,cap", [pytest.param(1, MAX_SOURCE_IDS, marks=pytest.mark.e2e),
                                      pytest.param(2, MAX_SOURCE_IDS, marks=pytest.mark.e2e), (3, 2)])
def test_incremental_equals_full_rebuild(seed, cap):
    """After any sequence of record changes merged incrementally, the tables equal a from-scratch rebuild; also
    with the provenance lists capped (``cap`` 2: most keys of this history have more chunks than that)."""
    rng = random.Random(seed)
    live = duckdb.connect()
    init_schema(live)
    summarise = CountingSummariser()
    chunks: dict[str, str] = {}
    largest = 0
    for step in range(25):
        op = rng.random()
        if op < 0.45 or not chunks:
            cid, doc = f"c{rng.randrange(30)}", f"d{rng.randrange(6)}"
            chunks[cid] = doc
            apply_chunk_changes(live, [], [random_record(rng, cid, doc)], summarise, max_description_tokens=4,
                                max_source_ids=cap)
        elif op < 0.7:
            cid = rng.choice(sorted(chunks))
            chunks.pop(cid)
            apply_chunk_changes(live, [cid], [], summarise, max_description_tokens=4, max_source_ids=cap)
        elif op < 0.85:
            doc = rng.choice(sorted(set(chunks.values())))
            gone = [c for c, d in chunks.items() if d == doc]
            for c in gone:
                chunks.pop(c)
            apply_chunk_changes(live, gone, [], summarise, max_description_tokens=4, max_source_ids=cap)
        else:  # replace several chunks at once, one of them moving to another document
            cids = rng.sample(sorted(chunks), min(3, len(chunks)))
            new = [random_record(rng, c, f"d{rng.randrange(6)}") for c in cids]
            chunks.update({r.chunk_id: r.document_id for r in new})
            apply_chunk_changes(live, [], new, summarise, max_description_tokens=4, max_source_ids=cap)
        assert orphans(live) == 0
        fresh = duckdb.connect()
        init_schema(fresh)
        _copy_extractions(live, fresh)
        # the summary cache is part of the store, so the rebuild sees it too
        summaries = live.execute("SELECT * FROM description_summaries").fetchall()
        if summaries:
            fresh.executemany("INSERT INTO description_summaries VALUES (?, ?, ?, ?)", summaries)
        calls = len(summarise.calls)
        merge_keys(fresh, None, None, summarise=summarise, max_description_tokens=4, max_source_ids=cap)
        assert len(summarise.calls) == calls          # every summary the rebuild needs was already made
        assert snapshot(live) == snapshot(fresh), f"step {step}"
        for table in ("entity_names", "entity_mentions", "relation_mentions", "mention_texts"):
            # kept by difference in live, rebuilt from the records in fresh
            query = f"SELECT * FROM {table} ORDER BY ALL"
            assert live.execute(query).fetchall() == fresh.execute(query).fetchall(), (step, table)
        fresh.close()
        largest = max(largest, len(snapshot(live)[1]))
    assert largest > 3 and summarise.calls      # the sequence really built a graph and summarised


def test_sql_ranking_equals_the_python_reference(con):
    """The merge ranks sentences and keywords in SQL over mention_texts; merge_sentences and merge_keywords
    (the plain-Python definition) over the same mentions in (chunk, entry) order must give the same text."""
    rng = random.Random(5)
    sentences = ["Alpha.", "alpha.", "Beta  gamma!", "Delta?", "STRASSE.", "straße.", "Eps", "  "]
    records = []
    for c in range(40):
        entities = [{"name": rng.choice(["Ada", "Bo", "Cy"]), "type": "person",
                     "description": " ".join(rng.sample(sentences, rng.randint(0, 3)))} for _ in range(rng.randint(1, 4))]
        relations = [{"source": "Ada", "target": rng.choice(["Bo", "Cy"]), "strength": 0.1,
                      "keywords": ", ".join(rng.sample(["k1", "K1", "k2", " k3 ", "k4;k5"], rng.randint(0, 3))),
                      "description": " ".join(rng.sample(sentences, rng.randint(0, 2)))} for _ in range(rng.randint(0, 3))]
        records.append(rec(f"c{rng.randrange(10**6):07}", f"d{c % 3}", entities, relations))
    write_records(con, records)
    merge_keys(con, None, None, max_description_tokens=1000)
    ordered = sorted(records, key=lambda r: r.chunk_id)
    for key in ("ada", "bo", "cy"):
        descriptions = [e.description for r in ordered for e in r.result.entities if e.name.lower() == key]
        assert entity(con, key)["description"] == merge_sentences(descriptions, 1000)[0], key
    for other in ("bo", "cy"):
        rels = [x for r in ordered for x in r.result.relations if x.target.lower() == other]
        row = relation(con, f"ada<|>{other}")
        assert row["keywords"] == merge_keywords([x.keywords for x in rels])
        assert row["description"] == merge_sentences([x.description for x in rels], 1000)[0]
        assert row["strength"] == math.fsum(x.strength for x in rels)


# ---- bounded memory (issue 10, item 1) ----------------------------------------------------------------

def _random_corpus(con, n_chunks=60, seed=3):
    rng = random.Random(seed)
    names = [f"Name{i}" for i in range(25)]
    records = []
    for c in range(n_chunks):
        ents = rng.sample(names, 5)
        rels = [{"source": a, "target": b, "keywords": "k", "strength": 1.0, "description": f"{a} met {b} in {c}."}
                for a, b in zip(ents, ents[1:])]
        records.append(rec(f"c{c:03}", f"d{c % 7}", [{"name": n, "type": "person", "description": f"{n} in {c}."}
                                                    for n in ents], rels))
    write_records(con, records)
    return records


@pytest.mark.e2e
def test_merge_in_small_batches_equals_one_batch_and_bounds_python_rows(con, monkeypatch):
    from pathrag_pipeline.index import graph_merge

    _random_corpus(con)
    merge_keys(con, None, None)
    one_batch = snapshot(con)
    con.execute("DELETE FROM entities")
    con.execute("DELETE FROM relations")

    pulled = []   # mention rows aggregated per batch
    real_provenance = graph_merge._provenance

    def counting(con_, *args):
        pulled.append(con_.execute("SELECT count(*) FROM _gm_bm").fetchall()[0][0])
        return real_provenance(con_, *args)

    monkeypatch.setattr(graph_merge, "MERGE_BATCH_ROWS", 7)
    monkeypatch.setattr(graph_merge, "_provenance", counting)
    merge_keys(con, None, None)
    assert snapshot(con) == one_batch
    biggest_key = max(n for (n,) in con.execute("SELECT mention_count FROM entities").fetchall())
    assert len(pulled) > 4 and min(pulled) > 0
    assert max(pulled) <= 7 + biggest_key      # a batch overruns the budget by at most one key's mentions
    assert sum(pulled) > 3 * max(pulled)

    # incremental, batched: drop some chunks, merge their keys, compare with a full rebuild
    before_e, before_r = keys_for_chunks(con, [f"c{c:03}" for c in range(0, 60, 3)])
    delete_records(con, [f"c{c:03}" for c in range(0, 60, 3)])
    merge_keys(con, before_e, before_r)
    incremental = snapshot(con)
    monkeypatch.setattr(graph_merge, "MERGE_BATCH_ROWS", 10**6)
    con.execute("DELETE FROM entities")
    con.execute("DELETE FROM relations")
    merge_keys(con, None, None)
    assert incremental == snapshot(con) and orphans(con) == 0


def test_store_connections_have_a_memory_limit_and_spill_folder(tmp_path):
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.storage.store import Store

    settings = Settings.from_env(env={"PATHRAG_HOME": str(tmp_path), "PATHRAG_DUCKDB_MEMORY_LIMIT": "300MB"})
    store = Store.for_settings(settings)
    with store.connect() as c:
        limit = c.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        temp = c.execute("SELECT current_setting('temp_directory')").fetchall()[0][0]
    assert limit.replace(" ", "").upper().startswith(("286", "300", "MB")) or "MiB" in limit, limit
    assert temp == str(tmp_path / "duckdb_tmp")


# ---- incremental merge reads only the touched keys' chunks (issue 10) -----------------------------------

def _hub_corpus(n=40):
    """n chunks all naming the hub entity 'Shared' (with its relation to 'Port'), plus unrelated chunks."""
    shared = [rec(f"s{i:02}", f"d{i % 5}", [{"name": "Shared", "type": "person", "description": f"Seen in {i}."},
                                            {"name": "Port", "type": "location"}],
                  [{"source": "Shared", "target": "Port", "keywords": f"k{i % 3}", "strength": 1.0}])
              for i in range(n)]
    other = [rec(f"o{i:02}", "dx", [{"name": f"Lone{i}", "type": "other", "description": "Alone."}],
                 [{"source": f"Lone{i}", "target": f"Far{i}"}]) for i in range(n)]
    return shared + other


def _copy_extractions(live, fresh) -> None:
    """Every extraction record of ``live`` into ``fresh`` (same schema), whatever its number of columns."""
    rows = live.execute("SELECT * FROM extractions").fetchall()
    if rows:
        fresh.executemany(f"INSERT INTO extractions VALUES ({', '.join('?' * len(rows[0]))})", rows)


def _rebuilt(live):
    fresh = duckdb.connect()
    init_schema(fresh)
    _copy_extractions(live, fresh)
    merge_keys(fresh, None, None)
    out = snapshot(fresh)
    fresh.close()
    return out


def test_editing_one_chunk_keeps_the_touched_keys_mentions_from_untouched_chunks(con):
    """The edited chunk names the hub 'Shared': its recompute must still count the 39 untouched chunks that
    name it, while the unrelated chunks are not read at all."""
    apply_chunk_changes(con, [], _hub_corpus())
    edited = rec("s00", "d0", [{"name": "Shared", "type": "organization", "description": "Edited."},
                               {"name": "New One", "type": "person"}],
                 [{"source": "Shared", "target": "New One", "keywords": "fresh"}])
    stats = apply_chunk_changes(con, [], [edited])
    shared = entity(con, "shared")
    assert shared["mention_count"] == 40 and len(shared["source_chunk_ids"]) == 40
    assert shared["type"] == "person"                        # 39 untouched votes outweigh the edit
    assert relation(con, "port<|>shared")["mention_count"] == 39
    assert relation(con, "new one<|>shared")["mention_count"] == 1
    assert snapshot(con) == _rebuilt(con)
    assert 0 < stats.chunks_read <= 40                       # the hub's chunks, none of the 40 unrelated ones

    # removing chunks: the endpoint that disappears takes its relation, the hub keeps the others
    stats = apply_chunk_changes(con, ["s00", "o03"], [])
    assert entity(con, "new one") is None and entity(con, "lone3") is None
    assert entity(con, "shared")["mention_count"] == 39
    assert snapshot(con) == _rebuilt(con) and orphans(con) == 0
    assert stats.chunks_read < 80


def test_an_edit_updates_entities_with_many_mentions_from_their_tallies(con):
    """Issue 23: the hubs 'Shared' and 'Port' (40 mentions, tallies kept at a 4-token budget) take an edit's own
    mention changes instead of all their mentions counted again: the merge reads fewer mention rows than the same
    merge with the tallies dropped, and both give the rebuild's tables."""
    from pathrag_pipeline.index import entity_tallies

    apply_chunk_changes(con, [], _hub_corpus(), max_description_tokens=4)
    assert {k for (k,) in con.execute("SELECT key FROM entity_tally_keys").fetchall()} == {"shared", "port"}
    other = duckdb.connect()
    init_schema(other)
    _copy_extractions(con, other)
    merge_keys(other, None, None, max_description_tokens=4)
    entity_tallies.forget_all(other)
    edited = rec("s00", "d0", [{"name": "Shared", "type": "organization", "description": "Edited."},
                               {"name": "New One", "type": "person"}],
                 [{"source": "Shared", "target": "New One", "keywords": "fresh"}])
    stats = apply_chunk_changes(con, [], [edited], max_description_tokens=4)
    recounted = apply_chunk_changes(other, [], [edited], max_description_tokens=4)
    assert stats.entities_tallied == 2 and stats.tally_changes_read == 3   # -Shared -Port +Shared
    assert recounted.entities_tallied == 0
    assert stats.mentions_read < recounted.mentions_read
    assert entity(con, "shared")["mention_count"] == 40 and entity(con, "port")["mention_count"] == 39
    assert snapshot(con) == snapshot(other) == _rebuilt_with_aliases(con, max_description_tokens=4)
    assert con.execute("SELECT count(*) FROM tally_changes").fetchone()[0] == 0
    other.close()


def test_dirty_merge_and_alias_remerge_read_only_touched_chunks(con):
    from pathrag_pipeline.index.aliases import add_alias
    from pathrag_pipeline.index.extraction_stage import merge_dirty, persist_changes
    from pathrag_pipeline.index.graph_merge import remerge_entities

    persist_changes(con, [], _hub_corpus())
    assert merge_dirty(con).chunks_read == 80
    # a new chunk joins an existing key through a relation only: its other endpoint's mentions must be found
    persist_changes(con, [], [rec("n1", "d9", [], [{"source": "Far7", "target": "Shared"}])])
    stats = merge_dirty(con)
    assert entity(con, "far7")["mention_count"] == 2 and entity(con, "shared")["mention_count"] == 41
    assert snapshot(con) == _rebuilt(con) and stats.chunks_read < 80
    # an alias folds 'Lone5' into 'Port': Port keeps its 40 mentions and gains Lone5's
    stats = remerge_entities(con, add_alias(con, "lone5", "port"))
    assert entity(con, "lone5") is None and entity(con, "port")["mention_count"] == 41
    assert relation(con, "far5<|>port")["mention_count"] == 1
    assert stats.chunks_read < 80


def test_edit_touching_a_canonical_key_keeps_its_aliased_mentions(con):
    """With 'lone5' aliased into 'port', an edit that touches only 'port' must still count the mentions
    stored under the alias's name key."""
    from pathrag_pipeline.index.aliases import add_alias
    from pathrag_pipeline.index.graph_merge import remerge_entities

    apply_chunk_changes(con, [], _hub_corpus())
    remerge_entities(con, add_alias(con, "lone5", "port"))
    assert entity(con, "port")["mention_count"] == 41
    apply_chunk_changes(con, [], [rec("s01", "d1", [{"name": "Port", "type": "location"}])])
    assert entity(con, "port")["mention_count"] == 41 and "o05" in entity(con, "port")["source_chunk_ids"]
    assert relation(con, "far5<|>port")["mention_count"] == 1
    assert snapshot(con) == _rebuilt_with_aliases(con)


def _rebuilt_with_aliases(live, **merge_options):
    fresh = duckdb.connect()
    init_schema(fresh)
    _copy_extractions(live, fresh)
    aliases = live.execute("SELECT * FROM entity_aliases").fetchall()
    if aliases:
        fresh.executemany("INSERT INTO entity_aliases VALUES (?, ?, ?, ?, ?, ?)", aliases)
    merge_keys(fresh, None, None, **merge_options)
    out = snapshot(fresh)
    fresh.close()
    return out


@pytest.mark.e2e
def test_mentions_inserted_and_parts_streamed_in_small_pieces_equal_one_piece(monkeypatch):
    """Issue 23, flat memory: the mention rows of a write are inserted every ``INSERT_ROWS`` rows, ranked parts
    are fetched ``STREAM_ROWS`` at a time, and the extraction stage holds results as JSON (``result_json``);
    none of it may change a table."""
    from pathrag_pipeline.index import graph_merge, mention_index

    def build(records):
        c = duckdb.connect()
        init_schema(c)
        write_records(c, records)
        merge_keys(c, None, None, max_description_tokens=12)
        tables = {t: c.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                  for t in ("entity_names", "entity_mentions", "relation_mentions", "mention_texts")}
        out = snapshot(c), tables
        c.close()
        return out

    scratch = duckdb.connect()
    init_schema(scratch)
    records = _random_corpus(scratch)
    scratch.close()
    whole = build(records)
    entities, relations = whole[0]
    assert all(e[3] for e in entities) and all(r[3] and r[4] for r in relations)   # every key got its parts
    held = []
    real_insert = mention_index._Rows.insert

    def counting(self):
        held.append(self.held)
        real_insert(self)

    monkeypatch.setattr(mention_index, "INSERT_ROWS", 10)
    monkeypatch.setattr(mention_index._Rows, "insert", counting)
    monkeypatch.setattr(graph_merge, "STREAM_ROWS", 2)
    as_json = [ExtractionRecord(chunk_id=r.chunk_id, chunk_hash=r.chunk_hash, document_id=r.document_id,
                                extractor=r.extractor, result_json=r.result.model_dump_json()) for r in records]
    assert build(as_json) == whole and build(records) == whole
    one_record = max(len(r.result.entities) * 3 + len(r.result.relations) * 4 for r in records)
    assert len(held) > 20 and max(held) < 10 + one_record    # inserted as they came, not all at the end
    # rows prepared beside the result (extraction workers: prepare_mentions) are the rows the result gives
    held.clear()
    prepared = [dataclasses.replace(r, result=None, result_json=r.result.model_dump_json(),
                                    mentions=prepare_mentions(*entries(r.result))) for r in records]
    assert build(prepared) == whole
    assert len(held) > 20 and max(held) < 10 + one_record
    # ... and many records' prepared rows in one insert (their ids are made for all of them at once)
    held.clear()
    monkeypatch.setattr(mention_index, "INSERT_ROWS", 10**6)
    assert build(prepared) == whole
    assert held == [sum(len(r.mentions) for r in prepared)]
    monkeypatch.setattr(mention_index, "INSERT_ROWS", 10)
    # ... and as they reach the writing process from a worker process (pickled: MentionRows.__reduce__)
    shipped = [dataclasses.replace(r, mentions=pickle.loads(pickle.dumps(r.mentions))) for r in prepared]
    assert all(s.mentions.tables.keys() == r.mentions.tables.keys()
               and all(s.mentions.tables[t].equals(r.mentions.tables[t]) for t in r.mentions.tables)
               for s, r in zip(shipped, prepared))
    assert build(shipped) == whole
    with pytest.raises(ValueError, match="not both"):
        ExtractionRecord(chunk_id="c", chunk_hash="h", document_id="d", extractor="x", result=records[0].result,
                         result_json="{}")


# ---- description rankings kept by difference (issue 23) -----------------------------------------------

POOL = [f"Fact {i} about the place." for i in range(30)]


def _hot_record(rng, chunk_id, doc):
    """Records naming a few hub keys with many distinct sentences (so their rankings are kept, at a budget of
    4 tokens: 5 parts used, 10 kept) drawn unevenly (so counts differ and deletions reorder the top)."""
    def text():
        return " ".join(rng.choice(POOL[:rng.choice([3, 10, 30])]) for _ in range(rng.randint(1, 4)))
    names = rng.sample(["Hub", "Port", "Mill", "Jane Smith", "J. Smith"], rng.randint(1, 3))
    entities = [{"name": n, "type": "place", "description": text()} for n in names]
    relations = [{"source": "Hub", "target": rng.choice(["Port", "Mill"]), "keywords": "k", "strength": 1.0,
                  "description": text()} for _ in range(rng.randint(0, 2))]
    return rec(chunk_id, doc, entities, relations)


def _full_rankings(con, field):
    """Every key's complete ranking of ``field`` parts from the live mention tables (the reference)."""
    from pathrag_pipeline.index.graph_merge import _load_mentions

    _load_mentions(con)
    if field == "entity_description":
        parts = f"""SELECT m.key, t.chunk_id, t.ord, t.pos, t.fold FROM _gm_em m
                    JOIN mention_texts t ON t.chunk_id = m.chunk_id AND t.ord = m.ord AND t.field = '{field}'"""
    else:   # a relation mention's sentences are a list in its own row
        parts = """SELECT relation_key AS key, chunk_id, ord, generate_subscripts(description_parts, 1) - 1 AS pos,
                          unnest(description_parts).fold AS fold FROM _gm_rm"""
    rows = con.execute(f"""
        SELECT t.key, t.fold, count(*) AS n, min({{'c': t.chunk_id, 'o': t.ord, 'p': t.pos}}) AS first
        FROM ({parts}) t GROUP BY ALL ORDER BY t.key, n DESC, first""").fetchall()
    out = {}
    for key, fold_, n, first in rows:
        out.setdefault(key, []).append((fold_, n, (first["c"], first["o"], first["p"])))
    return out


def _check_kept(con):
    """Each kept ranking is the top of the key's full ranking, and every part it leaves out ranks below its bound
    (or it leaves none out: complete). Returns how many complete and cut rankings it checked."""
    checked = [0, 0]
    for field in ("entity_description", "relation_description"):
        full = _full_rankings(con, field)
        for key, n, c, o, p, complete in con.execute(
                "SELECT key, n, first_chunk, first_ord, first_pos, complete FROM ranked_parts_keys WHERE field = ?",
                [field]).fetchall():
            kept = [(f, m, (fc, fo, fp)) for f, m, fc, fo, fp in con.execute(
                """SELECT fold, n, first_chunk, first_ord, first_pos FROM ranked_parts WHERE field = ? AND key = ?
                   ORDER BY n DESC, first_chunk, first_ord, first_pos""", [field, key]).fetchall()]
            assert kept == full.get(key, [])[:len(kept)], (field, key)
            if complete:
                assert len(kept) == len(full.get(key, [])), (field, key)
            else:
                assert all((-m, first) > (-n, (c, o, p)) for _, m, first in full[key][len(kept):]), (field, key)
            checked[0 if complete else 1] += 1
    return checked


def _check_tallies(con):
    """Each kept entity tally is what the key's current mentions give (``entity_names``): its counts per name and
    type, and its smallest chunks, all of them when complete. Returns how many complete and cut lists it checked."""
    checked = [0, 0]
    for key, complete in con.execute("SELECT key, complete FROM entity_tally_keys").fetchall():
        counts = "SELECT name, type, sum(n) FROM {} WHERE {} = ? GROUP BY ALL HAVING sum(n) > 0 ORDER BY ALL"
        assert con.execute(counts.format("entity_tallies", "key"), [key]).fetchall() == con.execute(
            counts.format("(SELECT *, mentions AS n FROM entity_names)", "name_key"), [key]).fetchall(), key
        kept = con.execute("SELECT chunk_id, document_id FROM entity_tally_chunks WHERE key = ? ORDER BY 1",
                           [key]).fetchall()
        every = con.execute("""SELECT DISTINCT n.chunk_id, x.document_id FROM entity_names n JOIN extractions x
                               USING (chunk_id) WHERE n.name_key = ? ORDER BY 1""", [key]).fetchall()
        assert kept == every[:len(kept)] and (not complete or kept == every), key
        assert con.execute("SELECT count(*) FROM entity_aliases WHERE alias_key = ? OR canonical_key = ?",
                           [key, key]).fetchone()[0] == 0 or not con.execute(
            "SELECT count(*) FROM entity_aliases WHERE NOT disabled AND (alias_key = ? OR canonical_key = ?)",
            [key, key]).fetchone()[0], key
        checked[0 if complete else 1] += 1
    return checked


# the small-cap history in the developer run, the others end to end (.ci/run: pytest -m e2e)
@pytest.mark.parametrize("seed,cap", [pytest.param(1, MAX_SOURCE_IDS, marks=pytest.mark.e2e), pytest.param(2, 2, marks=pytest.mark.e2e), (3, 3)])
def test_kept_rankings_updated_by_difference_equal_a_rebuild(seed, cap, monkeypatch):
    """Random adds, replacements (one or two before a merge), deletions and alias changes on keys whose
    description rankings and entity tallies are kept: after each step the graph equals a rebuild, each kept
    ranking is the top of the full one, each tally what the key's mentions give, and the by-difference updates
    really ran (and sometimes fell back to a full ranking, or to a full count when too few listed chunks were
    left: ``cap`` small lists few chunks)."""
    from pathrag_pipeline.index import entity_tallies, graph_merge, part_rankings

    monkeypatch.setattr(graph_merge, "MAX_SOURCE_IDS", cap)
    tallied, tally_fallbacks = [], []
    real_tally_update = entity_tallies.update

    def spying_tallies(con_, scope, min_source_ids):
        real_tally_update(con_, scope, min_source_ids)
        tallied.append(con_.execute("SELECT count(*) FROM _et_ok").fetchall()[0][0])
        tally_fallbacks.append(con_.execute("SELECT count(*) FROM _et_k").fetchall()[0][0] - tallied[-1])

    monkeypatch.setattr(entity_tallies, "update", spying_tallies)
    from pathrag_pipeline.index.aliases import add_alias, set_alias_disabled
    from pathrag_pipeline.index.extraction_stage import merge_dirty, persist_changes
    from pathrag_pipeline.index.graph_merge import remerge_entities

    updated, fallbacks = [], []
    real_update = part_rankings._update_kept

    def spying(con_, field, limit, size, **where):
        real_update(con_, field, limit, size, **where)
        kept = con_.execute("SELECT count(*) FROM _pr_k").fetchall()[0][0]
        done = con_.execute("SELECT count(*) FROM _pr_done").fetchall()[0][0]
        updated.append(done)
        fallbacks.append(kept - done)

    monkeypatch.setattr(part_rankings, "_update_kept", spying)
    rng = random.Random(seed)
    live = duckdb.connect()
    init_schema(live)
    chunks: dict[str, str] = {}
    apply_chunk_changes(live, [], [_hot_record(rng, f"c{i:02}", f"d{i % 4}") for i in range(30)],
                        max_description_tokens=4)
    for cid in (f"c{i:02}" for i in range(30)):
        chunks[cid] = f"d{int(cid[1:]) % 4}"
    seen = _check_kept(live)
    assert sum(seen) >= 3                              # the hubs' rankings are kept
    lists = _check_tallies(live)
    assert sum(lists) >= 3                             # and their tallies
    for step in range(30):
        op = rng.random()
        if op < 0.35:
            cid = f"c{rng.randrange(40):02}"
            chunks[cid] = f"d{rng.randrange(4)}"
            apply_chunk_changes(live, [], [_hot_record(rng, cid, chunks[cid])], max_description_tokens=4)
        elif op < 0.6 and chunks:
            pool = sorted(chunks)[:6] if rng.random() < 0.5 else sorted(chunks)   # often the chunks lists keep
            gone = rng.sample(pool, min(len(pool), rng.randint(1, 4)))
            for cid in gone:
                chunks.pop(cid)
            apply_chunk_changes(live, gone, [], max_description_tokens=4)
        elif op < 0.85 and chunks:       # the extraction stage's way: written (maybe twice), merged later
            cid = rng.choice(sorted(chunks))
            for _ in range(rng.randint(1, 2)):
                persist_changes(live, [], [_hot_record(rng, cid, chunks[cid])])
            merge_dirty(live, max_description_tokens=4)
        else:                             # an alias change re-merges its keys in full, then edits go on
            if rng.random() < 0.5:
                remerge_entities(live, add_alias(live, "j. smith", rng.choice(["jane smith", "hub"])),
                                 max_description_tokens=4)
            else:
                remerge_entities(live, set_alias_disabled(live, "j. smith", True) if live.execute(
                    "SELECT count(*) FROM entity_aliases").fetchone()[0] else set(), max_description_tokens=4)
        assert snapshot(live) == _rebuilt_with_aliases(live, max_description_tokens=4), f"step {step}"
        seen = [a + b for a, b in zip(seen, _check_kept(live))]
        lists = [a + b for a, b in zip(lists, _check_tallies(live))]
    assert sum(updated) > 10 and sum(fallbacks) > 0
    assert min(seen) > 0                               # complete rankings and cut ones
    assert sum(tallied) > 10 and (sum(tally_fallbacks) > 0 or cap == MAX_SOURCE_IDS)
    assert lists[1 if cap < MAX_SOURCE_IDS else 0] > 0   # cut chunk lists at a small cap, complete ones otherwise
    for table in ("dirty_parts", "tally_changes"):
        assert live.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table   # every change consumed


@pytest.mark.parametrize("seed", [4, 5])
def test_alias_free_scope_loads_the_same_mentions_as_resolving_every_one(con, seed):
    """Issue 23: a scope no alias touches builds _gm_em from entity_mentions and entity_names and _gm_rm from its
    relations' own mentions; the rows the merge reads must be those that resolving every mention gives."""
    from pathrag_pipeline.index.graph_merge import _load_alias_free_scope, _load_aliases, _load_mentions, _set_scope

    rng = random.Random(seed)
    write_records(con, [random_record(rng, f"c{i}", f"d{i % 5}") for i in range(60)])
    merge_keys(con, None, None)
    keys = [k for (k,) in con.execute("SELECT entity_key FROM entities ORDER BY 1").fetchall()]
    relations = con.execute("SELECT relation_key, src_key, tgt_key FROM relations ORDER BY 1").fetchall()
    em = "SELECT chunk_id, document_id, key, name, type, ord >= 1000000 AS implicit, CASE WHEN ord < 1000000 THEN ord END FROM _gm_em ORDER BY ALL"
    rm = "SELECT * FROM _gm_rm WHERE relation_key IN (SELECT key FROM _gm_scope_r) ORDER BY ALL"
    for _ in range(5):
        scope_r = rng.sample(relations, min(len(relations), 4))
        scope_e = set(rng.sample(keys, 4)) | {k for _, a, b in scope_r for k in (a, b)}
        _set_scope(con, "_gm_scope_e", scope_e)
        _set_scope(con, "_gm_scope_r", [r for r, _, _ in scope_r])
        _load_mentions(con, scoped=True)
        expected = con.execute(em).fetchall(), con.execute(rm).fetchall()
        _load_aliases(con)
        _load_alias_free_scope(con)
        assert (con.execute(em).fetchall(), con.execute(rm).fetchall()) == expected
        assert any(row[5] for row in expected[0]) and expected[1]     # implicit mentions and relations were compared


def test_the_merge_transaction_does_not_hold_the_rows_it_wrote_until_it_commits(con, monkeypatch):
    """DuckDB keeps a table registered in a transaction (its Arrow memory) alive until the transaction ends, and a
    merge writes every batch in one transaction: written batches must not pile up until the commit (issue 23,
    flat memory: a 300 MB build's merge peaked ~300 MiB higher). What stays is a few kB per write, whatever its rows."""
    import pyarrow as pa

    from pathrag_pipeline.index import graph_merge

    rng = random.Random(3)
    names = [f"Name{i}" for i in range(25)]
    records = []
    for c in range(300):
        ents = rng.sample(names, 5)
        long = " ".join(f"word{c}x{k}" for k in range(60)) + "."   # rows of a few hundred bytes each
        rels = [{"source": a, "target": b, "keywords": "k", "strength": 1.0, "description": f"{a} met {b}. {long}"}
                for a, b in zip(ents, ents[1:])]
        records.append(rec(f"c{c:03}", f"d{c % 7}", [{"name": n, "type": "person", "description": f"{n}. {long}"}
                                                    for n in ents], rels))
    write_records(con, records)
    monkeypatch.setattr(graph_merge, "MERGE_BATCH_ROWS", 100)
    written = []
    real_write = graph_merge._write

    def counting(con_, table, key, rows):
        written.append(rows.nbytes)
        return real_write(con_, table, key, rows)

    monkeypatch.setattr(graph_merge, "_write", counting)
    con.execute("BEGIN")
    before = pa.total_allocated_bytes()
    merge_keys(con, None, None)
    held = pa.total_allocated_bytes() - before
    con.execute("COMMIT")
    assert len(written) > 10 and orphans(con) == 0 and snapshot(con)[1]
    assert held < sum(written) / 2, (held, sum(written))   # registering the table itself: held > sum(written)
