"""The rule-based extractor on real English sentences and, when present, real MuSiQue passages."""

from __future__ import annotations

import json

import pytest

from pathrag_pipeline.config import BENCH_DIR
from pathrag_pipeline.index.extraction_models import RESULT_BYTES_PER_TEXT_BYTE, ChunkExtraction
from pathrag_pipeline.index.llm_extraction import OfflineExtractor
from pathrag_pipeline.index.offline_extraction import (
    MAX_SENTENCE_CHARS,
    OFFLINE_EXTRACTOR_ID,
    SENTENCE_WINDOW_CHARS,
    extract_offline,
    find_candidates,
    normalise_text,
    relation_keywords,
    split_sentences,
)
from pathrag_pipeline.ingest.chunking import chunk_text
from tests.extraction_fakes import unpunctuated_words

MUSIQUE = BENCH_DIR / "musique-100" / "corpus.jsonl"

P0000 = (
    "The Journal of Mathematical Physics is a peer-reviewed journal published monthly by the American Institute "
    "of Physics devoted to the publication of papers in mathematical physics. The journal was first published "
    "bimonthly beginning in January 1960; it became a monthly publication in 1963. The current editor is Jan "
    "Philip Solovej from University of Copenhagen. Its 2018 Impact Factor is 1.355"
)


def names(extraction: ChunkExtraction) -> list[str]:
    return [e.name for e in extraction.entities]


def entity(extraction: ChunkExtraction, name: str):
    return next(e for e in extraction.entities if e.name == name)


def test_finds_names_and_institutions_with_connectors_but_no_date_nodes():
    got = extract_offline(P0000)
    for expected in ("Journal of Mathematical Physics", "American Institute of Physics", "Jan Philip Solovej",
                     "University of Copenhagen"):
        assert expected in names(got)
    assert entity(got, "University of Copenhagen").type == "organization"
    assert entity(got, "Jan Philip Solovej").type == "person"
    # dates are recognised (so they never join a name) but are not graph nodes: they were the hubs
    sentence = split_sentences(P0000)[1]
    assert [(c.name, c.type) for c in find_candidates(sentence)] == [("January 1960", "date"), ("1963", "date")]
    assert not {"January 1960", "1963", "2018"} & set(names(got))
    assert all(r.source not in ("1963", "January 1960") and r.target not in ("1963", "January 1960")
               for r in got.relations)


def test_each_mention_links_to_its_nearest_neighbour_and_the_subject_not_all_pairs():
    text = "Alan Wood met Bea Hart, Carl Dunn, Dora Eyre and Emil Fox in Paris."
    got = extract_offline(text)
    pairs = {frozenset((r.source, r.target)) for r in got.relations}
    people = ["Alan Wood", "Bea Hart", "Carl Dunn", "Dora Eyre", "Emil Fox", "Paris"]
    assert set(names(got)) == set(people)
    # chain of neighbours plus the sentence subject to everyone: 5 + 4 = 9 pairs at most, not 15
    assert frozenset(("Bea Hart", "Carl Dunn")) in pairs and frozenset(("Alan Wood", "Paris")) in pairs
    assert frozenset(("Bea Hart", "Dora Eyre")) not in pairs
    assert len(pairs) <= 2 * len(people) - 3


def test_sentence_initial_function_words_are_not_entities():
    text = ("However, the river flooded. The bridge was built in 1901 by Thomas Telford. It stood in Shrewsbury "
            "for decades. In Shrewsbury, people still remember him. Several engineers came later.")
    got = names(extract_offline(text))
    for noise in ("However", "The", "It", "In", "Several", "In Shrewsbury"):
        assert noise not in got
    assert "Thomas Telford" in got and "Shrewsbury" in got and "1901" not in got


def test_lone_sentence_initial_word_counts_only_when_text_supports_it():
    assert "Ethiopia" in names(extract_offline("Ethiopia is a country in the Horn of Africa."))
    # "Snowfall" opens a sentence but the text also uses it as a common noun
    got = names(extract_offline("Snowfall is heavy in Buffalo. Annual snowfall exceeds two metres."))
    assert "Snowfall" not in got and "Buffalo" in got


def test_sentence_splitting_keeps_abbreviations_initials_and_decimals():
    text = ("G. Stanley Hall was the first president of the American Psychological Association. He studied in "
            "the U.S. and met Dr. Smith in St. Louis. The index rose to 1.355 in 2018. It fell later.")
    sentences = split_sentences(text)
    assert sentences == [
        "G. Stanley Hall was the first president of the American Psychological Association.",
        "He studied in the U.S. and met Dr. Smith in St. Louis.",
        "The index rose to 1.355 in 2018.",
        "It fell later.",
    ]
    got = names(extract_offline(text))
    assert "G. Stanley Hall" in got and "St. Louis" in got and "American Psychological Association" in got


def test_musique_tokenisation_artefacts_are_undone():
    text = "Person - centered therapy grew from ``an inbuilt proclivity toward growth '' says Carl Rogers ."
    assert normalise_text(text) == 'Person-centered therapy grew from "an inbuilt proclivity toward growth" says Carl Rogers.'
    got = extract_offline(text, title="Person-centered therapy")
    assert names(got)[0] == "Person-centered therapy"
    assert "Carl Rogers" in names(got)
    assert not any("proclivity" in n for n in names(got))  # a lower-case quotation is not a title


def test_quoted_titles_are_works_and_possessives_split_names():
    text = ('Film Journal International is a sister publication of "Adweek", "Billboard", and "The Hollywood '
            "Reporter\". Ghana's Kwame Nkrumah visited Men's Studies Press.")
    got = extract_offline(text)
    assert entity(got, "The Hollywood Reporter").type == "work"
    assert {"Adweek", "Billboard", "Ghana", "Kwame Nkrumah", "Men's Studies Press"} <= set(names(got))


def test_of_joins_institutions_but_not_a_person_and_an_organisation():
    got = names(extract_offline("Ron Hextall of the Philadelphia Flyers joined the Bank of America board."))
    assert "Ron Hextall" in got and "Philadelphia Flyers" in got and "Bank of America" in got


def test_relations_link_cooccurring_entities_with_sentence_as_description():
    got = extract_offline(P0000)
    sentence = "The current editor is Jan Philip Solovej from University of Copenhagen."
    rel = next(r for r in got.relations if {r.source, r.target} == {"Jan Philip Solovej", "University of Copenhagen"})
    assert rel.description == sentence
    assert rel.keywords == "from"
    assert 1 <= rel.strength <= 10
    published = next(r for r in got.relations
                     if {r.source, r.target} == {"Journal of Mathematical Physics", "American Institute of Physics"})
    assert "published" in published.keywords and "by" in published.keywords
    endpoints = {n.casefold() for n in names(got)}
    assert all(r.source.casefold() in endpoints and r.target.casefold() in endpoints for r in got.relations)


def test_closer_mentions_relate_more_strongly():
    got = extract_offline("Anna Berg met Carl Lund at Uppsala University, and much later, after many long years "
                          "abroad in several distant countries, she returned to Stockholm.")
    strength = {frozenset((r.source, r.target)): r.strength for r in got.relations}
    assert strength[frozenset(("Anna Berg", "Carl Lund"))] > strength[frozenset(("Anna Berg", "Stockholm"))]


def test_long_lists_do_not_create_quadratic_relations():
    cities = ["Aberdeen", "Bristol", "Cardiff", "Dover", "Exeter", "Falmouth", "Glasgow", "Hull", "Ipswich",
              "Kendal", "Leeds", "Margate", "Norwich", "Oxford", "Penzance", "Reading", "Salisbury", "Truro"]
    text = "The tour visited " + ", ".join(cities[:-1]) + " and " + cities[-1] + "."
    got = extract_offline(text)
    assert set(cities) <= set(names(got))
    assert len(got.relations) <= 3 * len(cities)


def test_title_is_subject_entity_linked_to_opening_sentences():
    text = "It was founded in 1892 by John Muir. The club later moved to Oakland. It publishes Sierra."
    got = extract_offline(text, title="Sierra Club")
    assert names(got)[0] == "Sierra Club"
    linked = {r.target for r in got.relations if r.source == "Sierra Club"}
    assert {"John Muir", "Oakland"} <= linked and "1892" not in linked
    # the date is not a node, but the relation's description still says it
    founded = next(r for r in got.relations if r.source == "Sierra Club" and r.target == "John Muir")
    assert "1892" in founded.description and founded.keywords == "founded by"
    assert entity(got, "Sierra Club").type == "organization"


def test_descriptions_are_the_sentences_that_mention_the_entity():
    got = extract_offline(P0000)
    assert entity(got, "Jan Philip Solovej").description.startswith("The current editor is Jan Philip Solovej")


def test_surname_mentions_fold_into_the_full_name():
    got = names(extract_offline("The prize went to Marie Curie in 1911. Curie had already won in 1903."))
    assert "Marie Curie" in got and "Curie" not in got


def test_relation_keywords_pick_the_verb_phrase():
    assert relation_keywords(" is a peer-reviewed journal published monthly by the ") == "published monthly by"
    assert relation_keywords(" was born in ") == "born in"
    assert relation_keywords(". The current editor is ") == "editor is"


def test_candidates_in_a_question():
    found = [c.name for c in find_candidates("Who founded the Journal of Psychotherapy Integration in May 1990?")]
    assert found == ["Journal of Psychotherapy Integration", "May 1990"]


def test_deterministic_and_identified():
    assert extract_offline(P0000, title="Journal of Mathematical Physics") == extract_offline(
        P0000, title="Journal of Mathematical Physics")
    assert OFFLINE_EXTRACTOR_ID.startswith("offline-rules-")


def test_empty_and_bad_input():
    assert extract_offline("") == ChunkExtraction()
    assert names(extract_offline("", title="Lone Title")) == ["Lone Title"]
    with pytest.raises(TypeError, match="str"):
        extract_offline(b"bytes")  # type: ignore[arg-type]


@pytest.mark.skipif(not MUSIQUE.is_file(), reason="MuSiQue benchmark corpus not present")
def test_real_musique_passages():
    passages = {}
    with MUSIQUE.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if row["id"] in ("p0000", "p0002", "p0004"):
                passages[row["id"]] = row
            if len(passages) == 3:
                break
    p0 = extract_offline(passages["p0000"]["text"], passages["p0000"]["title"])
    assert {"University of Copenhagen", "Jan Philip Solovej", "American Institute of Physics"} <= set(names(p0))
    p2 = extract_offline(passages["p0002"]["text"], passages["p0002"]["title"])
    assert {"George T. Solomon", "George Washington University", "Wiley-Blackwell",
            "International Council for Small Business"} <= set(names(p2))
    p4 = extract_offline(passages["p0004"]["text"], passages["p0004"]["title"])
    assert {"Riemann integral", "Bernhard Riemann", "University of Göttingen"} <= set(names(p4))
    assert not {"1854", "1868"} & set(names(p4))
    assert "Riemann" not in names(p4)  # the title "Riemann integral" is matched whole


def test_unpunctuated_text_gives_output_bounded_by_the_chunk_size():
    """huge_line.txt: with no sentence break a whole 1200-token chunk was one sentence, quoted in full by each of
    its hundreds of relations (5.7 MB of JSON for 7.6 kB of text). Its output now stays within what the
    extraction stage lets one chunk store per byte of text, so that cap never has to cut the offline rules."""
    text = unpunctuated_words(40_000)
    chunks = chunk_text("huge_line.txt", text)
    assert len(chunks) >= 4
    for chunk in chunks:
        result = OfflineExtractor().extract(chunk.text, "huge_line").extraction
        assert len(result.entities) > 50 and len(result.relations) > 50  # still a graph, not an empty answer
        size = len(result.model_dump_json().encode("utf-8"))
        assert size <= RESULT_BYTES_PER_TEXT_BYTE * len(chunk.text.encode("utf-8")), (size, len(chunk.text))
        assert max(len(r.description) for r in result.relations) <= SENTENCE_WINDOW_CHARS


def test_an_over_long_sentence_is_read_as_windows_and_a_long_real_one_stays_whole():
    words = unpunctuated_words(MAX_SENTENCE_CHARS + 500)
    windows = split_sentences(words)
    assert len(windows) > 1 and all(0 < len(w) <= SENTENCE_WINDOW_CHARS for w in windows)
    assert " ".join(windows) == words  # cut at spaces: nothing lost, no word split
    blob = "x" * (MAX_SENTENCE_CHARS + 7)  # one "word" longer than a window is cut inside it
    pieces = split_sentences(blob)
    assert "".join(pieces) == blob and len(pieces) == -(-len(blob) // SENTENCE_WINDOW_CHARS)
    long_list = "The cast includes " + ", ".join(f"Actor Number{i}" for i in range(100)) + "."
    assert len(long_list) <= MAX_SENTENCE_CHARS
    assert split_sentences(long_list + " It ran for years.") == [long_list, "It ran for years."]


def _types(text: str, title: str | None = None) -> dict[str, str]:
    return {e.name: e.type for e in extract_offline(text, title).entities}


def test_instruction_verbs_opening_a_sentence_are_not_names_or_part_of_one():
    found = _types("Storage notes\n\nPlease read the guide first. See Duda & Hart for the method. "
                   "Copy the file to the folder. Build Valmere with the flag. Paris is large.")
    assert "Duda & Hart" in found and "Valmere" in found and "Paris" in found
    assert not {"Please", "See", "See Duda & Hart", "Copy", "Build Valmere"} & set(found)


def test_heading_and_field_label_lines_are_not_entities_but_name_lines_are():
    text = ("Iris plants dataset\n\nData Set Characteristics:\n\nNumber of Instances: 150\n\nWriting Database "
            "Migrations\n\nA migration is written by hand here.\n\nAldermere University\n\nIt was founded in "
            "Carrick by Ada Halden.\n\nReferences\n\nFisher, R.A. wrote the paper.")
    found = _types(text, "Iris plants dataset")
    assert {"Aldermere University", "Carrick", "Ada Halden", "Iris plants dataset"} <= set(found)
    assert not {"Data Set Characteristics", "Number of Instances", "Writing Database Migrations",
                "References"} & set(found)


def test_citation_initials_are_not_names_and_type_the_surname_as_a_person():
    found = _types("The data was described by Fisher, R.A. in a journal. The office is in Washington, D.C. "
                   "since then.")
    assert found.get("Fisher") == "person"
    assert "R.A." not in found and "D.C." in found


def test_names_listed_with_a_person_are_people_and_an_address_types_its_town():
    found = _types("I'd like to thank Paul Dubois, Travis Oliphant and Reggie Dugard for their help. "
                   "The institute is at Via Roma, Genoa, Italy. True False True")
    assert found.get("Paul Dubois") == "person" and found.get("Travis Oliphant") == "person"
    assert found.get("Reggie Dugard") == "person" and found.get("Genoa") == "location"
    assert "I'd" not in found and not any("True" in name for name in found)


def test_a_tables_cells_are_not_joined_into_one_term_line_quoted_by_every_relation():
    """postgresql-doc's conversion table (rows of `name` | `SOURCE` | `TARGET`): each cell is a term segment, and
    joining consecutive term lines without a bound made the whole table one line that each of its ~300 relations
    quoted (622 kB of JSON for 2.7 kB of text). Joined lines stop at TERM_LINE_MAX_CHARS; a definition's few terms
    still join."""
    from pathrag_pipeline.index.extraction_models import result_cap
    from pathrag_pipeline.index.offline_extraction import TERM_LINE_MAX_CHARS, read_units

    rows = [f"`conv_{a}_to_{b}` | `{a.upper()}` | `{b.upper()}`"
            for a in ("koi8_r", "mic", "latin1", "win1251", "euc_jp", "sjis") for b in ("utf8", "big5", "euc_kr", "win866")]
    text = "## Available Character Set Conversions\n\n" + "\n".join(rows) + "\n"
    units = read_units(text)
    assert max(len(u.text) for u in units) <= TERM_LINE_MAX_CHARS and len([u for u in units if u.kind == "term"]) > 1
    result = extract_offline(text)
    assert result.relations and max(len(r.description) for r in result.relations) <= TERM_LINE_MAX_CHARS
    assert len(result.model_dump_json()) <= result_cap(text) // 4   # nothing for the per-chunk cap to trim
    options = read_units("## Options\n\n`--autosquash`\n\n`--no-autosquash`\n\nWhen the commit log message begins.\n")
    assert [u.text for u in options if u.kind == "term"] == ["`--autosquash`, `--no-autosquash`"]
