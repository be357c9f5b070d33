import duckdb
import numpy as np
import pytest

from pathrag_pipeline.index.aliases import (
    EntityName, add_alias, alias_map, delete_alias, find_alias_candidates, read_alias_inputs, decide_aliases,
    set_alias_disabled,
)
from pathrag_pipeline.index.extraction_models import ChunkExtraction, Entity, Relation
from pathrag_pipeline.index.extraction_records import ExtractionRecord, write_records
from pathrag_pipeline.index.graph_merge import merge_keys, remerge_entities
from pathrag_pipeline.text.names import name_key
from pathrag_pipeline.storage.schema import init_schema


def names(*pairs):
    return [EntityName(name_key(n), n, count) for n, count in pairs]


def pairs_of(candidates):
    return {(c.alias_name, c.canonical_name) for c in candidates}


def test_detects_the_known_variants():
    found = find_alias_candidates(names(
        ("Jan P. Solovej", 1), ("Jan Philip Solovej", 3),
        ("University of Copenhagen", 4), ("Copenhagen University", 1),
        ("American Institute of Physics", 5), ("the American Institute of Physics (AIP)", 1), ("AIP", 2),
        ("Massachusetts Institute of Technology", 5), ("Massachusets Institute of Technology", 1),
        ("Dvořák", 2), ("Dvorak", 1),
        ("Leader of the Opposition", 2), ("Leader of Opposition", 1),
    ))
    assert pairs_of(found) == {
        ("Jan P. Solovej", "Jan Philip Solovej"),
        ("Copenhagen University", "University of Copenhagen"),
        ("the American Institute of Physics (AIP)", "American Institute of Physics"),
        ("AIP", "American Institute of Physics"),
        ("Massachusets Institute of Technology", "Massachusetts Institute of Technology"),
        ("Dvorak", "Dvořák"),
        ("Leader of Opposition", "Leader of the Opposition"),
    }
    assert {c.rule for c in found} == {"initials", "reorder", "definition", "typo", "accents"}
    assert all(c.method == "string" for c in found)


@pytest.mark.parametrize("group", [
    [("John Smith", 3), ("John Smithson", 2)],
    [("Paris, France", 3), ("Paris, Texas", 2)],
    [("World War I", 3), ("World War II", 4)],
    [("Henry V", 3), ("Henry VIII", 4)],
    [("2014 FIFA World Cup", 3), ("2018 FIFA World Cup", 4)],
    [("John Paul", 1), ("Paul John", 1)],
    [("J. Doe", 1), ("Jane Doe", 1), ("John Doe", 1)],          # ambiguous initials
    [("Andrew Johnston", 1), ("Andrew Johnson", 1)],
    [("Bernard Shaw", 1), ("Bernardo Shaw", 1)],
    [("9 to 25 February", 1), ("9 and 25 February", 1)],
    [("east of Boston", 1), ("East Boston", 3)],
    [("National League A", 1), ("National League", 3)],
    [("Paris (Texas)", 1), ("Paris", 5)],                      # a parenthetical that is not an acronym
    [("ABC", 1), ("American Broadcasting Company (ABC)", 1), ("Australian Broadcasting Corporation (ABC)", 1)],
])
def test_conservative_non_merges(group):
    found = find_alias_candidates(names(*group))
    assert found == []


def test_types_block_and_canonical_prefers_mentions_then_shorter():
    typed = [EntityName("university of copenhagen", "University of Copenhagen", 1, "organization"),
             EntityName("copenhagen university", "Copenhagen University", 1, "location")]
    assert find_alias_candidates(typed) == []
    [c] = find_alias_candidates(names(("University of Copenhagen", 1), ("Copenhagen University", 1)))
    assert c.canonical_key == "copenhagen university"        # tie on mentions: the shorter key


def test_embedding_candidates_with_guards():
    entities = names(("New York City", 5), ("NYC", 2), ("1990 election", 1), ("1994 election", 1), ("Oslo", 1))
    keys = [e.key for e in entities]
    vectors = np.array([[1, 0, 0], [0.999, 0.04, 0], [0, 1, 0], [0, 0.999, 0.04], [0, 0, 1]], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    found = find_alias_candidates(entities, embeddings=(keys, vectors), embedding_threshold=0.99)
    assert [(c.alias_key, c.canonical_key, c.method) for c in found] == [("nyc", "new york city", "embedding")]
    with pytest.raises(ValueError, match="normalised"):
        find_alias_candidates(entities, embeddings=(keys, vectors * 2))
    with pytest.raises(ValueError, match="shape"):
        find_alias_candidates(entities, embeddings=(keys[:2], vectors))


def test_blocking_skips_frequent_words_but_keeps_rare_ones():
    crowd = [(f"University of Place{i}", 1) for i in range(300)]
    found = find_alias_candidates(names(*crowd, ("University of Copenhagen", 2), ("Copenhagen University", 1)),
                                  max_block=50)
    assert pairs_of(found) == {("Copenhagen University", "University of Copenhagen")}


def test_the_numpy_prefilter_drops_only_pairs_no_rule_passes(monkeypatch):
    """``_may_pass`` only skips pairs the rules would reject: the candidates equal those of checking every blocked
    pair one by one, over names made to pass or narrowly fail each rule (typos, initials, reorderings, numbers,
    types) mixed with random ones."""
    import random

    from pathrag_pipeline.index import aliases

    rng = random.Random(5)
    words = ["river", "rivers", "north", "northern", "mill", "millbank", "of", "the", "and", "college", "collage",
             "institute", "institut", "technology", "technologies", "j", "john", "jane", "smith", "smyth", "ii", "2",
             "paris", "texas", "university", "copenhagen", "east", "boston", "a", "b", "m", "mary", "margaret"]
    made = {" ".join(rng.choice(words) for _ in range(rng.randint(1, 5))) for _ in range(1500)}
    longer = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8)) for _ in range(200)]
    for _ in range(150):                         # near misses and hits of each rule, around rare words
        base = [rng.choice(longer), rng.choice(words), rng.choice(longer)]
        made.add(" ".join(base))
        at = rng.randrange(3)
        made.add(" ".join(base[:at] + [base[at][:-1] + rng.choice("aez")] + base[at + 1:]))    # typo or not
        made.add(" ".join(base[:at] + [base[at][0]] + base[at + 1:]))                          # initials or not
        made.add(f"{base[0]} {base[2]}")
        made.add(f"{base[2]} {rng.choice(['of', 'of the', 'and', ''])} {base[0]}")              # reorder or not
    made |= {"Jan P. Solovej", "Jan Philip Solovej", "University of Copenhagen", "Copenhagen University",
             "Massachusetts Institute of Technology", "Massachusets Institute of Technology", "J. Doe", "Jane Doe",
             "river mill of the north", "north mill of the river", "east of Boston", "East Boston"}
    types = ["", "", "concept", "person", "organization"]
    entities = [EntityName(name_key(n), n, rng.randint(1, 4), rng.choice(types)) for n in sorted(made)]
    entities = list({e.key: e for e in entities if e.key}.values())
    filtered = find_alias_candidates(entities, max_block=40)
    seen = []
    real = aliases._may_pass
    monkeypatch.setattr(aliases, "_may_pass", lambda names, a, b: seen.append(real(names, a, b)) or np.ones(a.size, bool))
    every_pair = find_alias_candidates(entities, max_block=40)
    assert filtered == every_pair
    assert len(filtered) > 20 and {c.rule for c in filtered} >= {"typo", "initials", "reorder"}
    assert 0 < seen[0].sum() < seen[0].size / 5        # the prefilter skipped most pairs


@pytest.fixture
def con():
    c = duckdb.connect()
    init_schema(c)
    yield c
    c.close()


def test_alias_map_resolves_chains_and_cycles(con):
    add_alias(con, "a", "b")
    add_alias(con, "b", "c")
    assert alias_map(con) == {"a": "c", "b": "c"}
    add_alias(con, "c", "a")                       # a cycle made by hand: the smallest key wins
    assert alias_map(con) == {"b": "a", "c": "a"}
    set_alias_disabled(con, "c")
    assert alias_map(con) == {"a": "c", "b": "c"}
    with pytest.raises(KeyError, match="no alias row"):
        set_alias_disabled(con, "zzz")
    with pytest.raises(ValueError, match="method"):
        add_alias(con, "x", "y", method="guess")


def snapshot(con):
    return (con.execute("SELECT * EXCLUDE (updated_at) FROM entities ORDER BY ALL").fetchall(),
            con.execute("SELECT * EXCLUDE (updated_at) FROM relations ORDER BY ALL").fetchall())


def test_merge_and_unmerge_through_the_graph(con):
    write_records(con, [
        ExtractionRecord(chunk_id="c1", chunk_hash="h1", document_id="d1", extractor="t", result=ChunkExtraction(
            entities=[Entity(name="Jan Philip Solovej", type="person", description="Editor.")],
            relations=[Relation(source="Jan Philip Solovej", target="Journal of Mathematical Physics", strength=2)])),
        ExtractionRecord(chunk_id="c2", chunk_hash="h2", document_id="d2", extractor="t", result=ChunkExtraction(
            entities=[Entity(name="Jan P. Solovej", type="person", description="Mathematician.")],
            relations=[Relation(source="Jan P. Solovej", target="University of Copenhagen", strength=1),
                       Relation(source="Jan P. Solovej", target="Journal of Mathematical Physics", strength=3)])),
    ])
    merge_keys(con, None, None)
    separate = snapshot(con)
    assert con.execute("SELECT count(*) FROM entities").fetchone()[0] == 4

    changed = decide_aliases(con, find_alias_candidates(read_alias_inputs(con)))
    assert changed == {"jan p solovej", "jan philip solovej"}
    remerge_entities(con, changed)
    merged = snapshot(con)
    # one mention each: the shorter key is canonical; the display name is still the longer surface form
    assert con.execute("SELECT alias_key, canonical_key, method FROM entity_aliases").fetchall() == [
        ("jan philip solovej", "jan p solovej", "string")]
    jan = con.execute("SELECT name, mention_count, source_chunk_ids, description FROM entities "
                      "WHERE entity_key = 'jan p solovej'").fetchone()
    assert jan[:3] == ("Jan Philip Solovej", 2, ["c1", "c2"]) and "Editor." in jan[3] and "Mathematician." in jan[3]
    assert con.execute("SELECT count(*) FROM entities WHERE entity_key = 'jan philip solovej'").fetchone()[0] == 0
    assert con.execute("SELECT strength, mention_count FROM relations WHERE relation_key = "
                       "'jan p solovej<|>journal of mathematical physics'").fetchone() == (5.0, 2)
    assert con.execute("SELECT count(*) FROM relations WHERE src_key = 'jan philip solovej' "
                       "OR tgt_key = 'jan philip solovej'").fetchone()[0] == 0
    merge_keys(con, None, None)
    assert snapshot(con) == merged                 # incremental alias merge == full rebuild

    remerge_entities(con, set_alias_disabled(con, "jan philip solovej"))
    assert snapshot(con) == separate               # un-merged
    decide_aliases(con, find_alias_candidates(read_alias_inputs(con)))
    assert con.execute("SELECT disabled FROM entity_aliases").fetchall() == [(True,)]   # not re-proposed

    remerge_entities(con, set_alias_disabled(con, "jan philip solovej", disabled=False))
    assert snapshot(con) == merged
    remerge_entities(con, delete_alias(con, "jan philip solovej"))
    assert snapshot(con) == separate


def test_inverted_dictionary_names_merge_with_the_plain_form():
    from pathrag_pipeline.index.aliases import EntityName, find_alias_candidates
    from pathrag_pipeline.text.names import name_key

    names = [("Morrow, Agnes", 2, "concept"), ("Agnes Morrow", 9, "person"), ("Paris, Texas", 3, "location"),
             ("Paris", 5, "location"), ("Hallam, Rupert", 1, "person")]
    found = {(c.alias_key, c.canonical_key, c.rule) for c in find_alias_candidates(
        [EntityName(name_key(n), n, m, t) for n, m, t in names])}
    assert (name_key("Morrow, Agnes"), name_key("Agnes Morrow"), "inverted") in found
    # no swapped form exists for these: nothing proposed
    assert not any(a in (name_key("Paris, Texas"), name_key("Hallam, Rupert")) for a, _, _ in found)
