"""Importing pre-extracted triples as extraction records, over a real ingest of a corpus JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pathrag_pipeline.config import BENCH_DIR
from pathrag_pipeline.index.llm_extraction import OfflineExtractor
from pathrag_pipeline.index.extraction_stage import run_extraction
from pathrag_pipeline.index.triples_import import TriplesImportError, import_triples
from tests.extraction_fakes import Corpus

BENCH = BENCH_DIR / "musique-100"

PASSAGES = [
    {"id": "p0", "title": "Journal of Mathematical Physics",
     "text": "The Journal of Mathematical Physics is published by the American Institute of Physics."},
    {"id": "p1", "title": "American Institute of Physics",
     "text": "The American Institute of Physics is based in College Park, Maryland."},
    {"id": "p2", "title": "Unrelated", "text": "Nothing here has triples."},
]
TRIPLES = [
    ("p0", "Journal of Mathematical Physics", "published by", "American Institute of Physics"),
    ("p0", "Journal of Mathematical Physics", "first published in", "January 1960"),
    ("p1", "American Institute of Physics", "based in", "College Park"),
    ("p1", "College Park", "located in", "Maryland"),
]


def write_triples(path: Path, triples, extra_lines: tuple[str, ...] = ()) -> Path:
    lines = [json.dumps({"doc_id": d, "subject": s, "predicate": p, "object": o}) for d, s, p, o in triples]
    path.write_text("\n".join(lines + list(extra_lines)) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def corpus(tmp_path) -> Corpus:
    corpus = Corpus(tmp_path)
    corpus.write("corpus.jsonl", "\n".join(json.dumps(p) for p in PASSAGES) + "\n")
    corpus.sync()
    return corpus


def test_import_builds_entities_and_relations_from_triples(corpus: Corpus, tmp_path) -> None:
    stats = import_triples(corpus.store, write_triples(tmp_path / "triples.jsonl", TRIPLES))

    assert (stats.triples, stats.matched_documents, stats.chunks_with_triples, stats.records_written) == (4, 2, 2, 2)
    assert stats.extractor.startswith("import:") and stats.malformed == 0
    entities = dict(corpus.query("SELECT name, description FROM entities"))
    assert set(entities) == {"Journal of Mathematical Physics", "American Institute of Physics", "January 1960",
                             "College Park", "Maryland"}
    assert "Journal of Mathematical Physics published by American Institute of Physics." in \
        entities["American Institute of Physics"]
    assert "American Institute of Physics based in College Park." in entities["American Institute of Physics"]
    aip = corpus.query("SELECT document_ids, mention_count FROM entities WHERE name = 'American Institute of Physics'")
    assert sorted(aip[0][0]) == ["corpus.jsonl#p0", "corpus.jsonl#p1"] and aip[0][1] == 2
    relations = corpus.query("SELECT keywords, description, strength FROM relations ORDER BY keywords")
    assert [r[0] for r in relations] == ["based in", "first published in", "located in", "published by"]
    assert ("published by", "Journal of Mathematical Physics published by American Institute of Physics", 1.0) in relations


def test_reimporting_the_same_file_is_a_no_op_and_a_changed_file_replaces(corpus: Corpus, tmp_path) -> None:
    path = write_triples(tmp_path / "triples.jsonl", TRIPLES)
    first = import_triples(corpus.store, path)
    again = import_triples(corpus.store, path)
    assert (again.records_written, again.records_removed, again.merge) == (0, 0, None)
    assert again.extractor == first.extractor

    changed = import_triples(corpus.store, write_triples(path, TRIPLES[:2] + [("p0", "Journal of Mathematical Physics",
                                                                              "edited by", "Jan Philip Solovej")]))

    assert changed.extractor != first.extractor
    assert (changed.records_written, changed.records_removed) == (1, 1)
    names = {r[0] for r in corpus.query("SELECT name FROM entities")}
    assert "Jan Philip Solovej" in names and not {"College Park", "Maryland"} & names
    assert {r[0] for r in corpus.query("SELECT extractor FROM extractions")} == {changed.extractor}


def test_malformed_lines_are_skipped_and_reported_with_line_numbers(corpus: Corpus, tmp_path) -> None:
    path = write_triples(tmp_path / "triples.jsonl", TRIPLES,
                         ("{not json", json.dumps({"doc_id": "p0", "subject": "", "predicate": "x", "object": "y"})))

    stats = import_triples(corpus.store, path)

    assert (stats.triples, stats.malformed) == (4, 2)
    assert stats.problems[0].startswith(f"{path}:5:") and stats.problems[1].startswith(f"{path}:6:")
    assert "'subject'" in stats.problems[1]
    with pytest.raises(TriplesImportError, match=":5: not JSON"):
        import_triples(corpus.store, path, strict=True)


def test_unmatched_doc_ids_are_named(corpus: Corpus, tmp_path) -> None:
    path = write_triples(tmp_path / "t.jsonl", [("q9", "A", "is", "B"), ("q8", "C", "is", "D")])
    with pytest.raises(TriplesImportError, match="q8, q9"):
        import_triples(corpus.store, path)

    partly = import_triples(corpus.store, write_triples(tmp_path / "t2.jsonl", TRIPLES + [("q9", "A", "is", "B")]))
    assert partly.unmatched_doc_ids == 1 and "'q9'" in partly.problems[-1]

    mapped = import_triples(corpus.store, write_triples(tmp_path / "t3.jsonl", [("q9", "Alpha", "is", "Beta")]),
                            corpus_doc_ids_map={"q9": "corpus.jsonl#p2"})
    assert mapped.matched_documents == 1
    assert corpus.query("SELECT document_ids FROM entities WHERE name = 'Alpha'")[0][0] == ["corpus.jsonl#p2"]


def test_triples_go_to_the_chunk_mentioning_them(tmp_path) -> None:
    corpus = Corpus(tmp_path, chunk_tokens=20)
    text = ("Alpha Centauri is a star system near the Sun. " * 3) + ("Proxima b orbits Proxima Centauri closely. " * 3)
    corpus.write("stars.jsonl", json.dumps({"id": "s1", "title": "Stars", "text": text}) + "\n")
    corpus.sync()
    chunks = corpus.query("SELECT id, text FROM chunks ORDER BY ordinal")
    assert len(chunks) > 2
    path = write_triples(tmp_path / "t.jsonl", [("s1", "Proxima b", "orbits", "Proxima Centauri"),
                                               ("s1", "Nobody", "knows", "Nothing")])

    import_triples(corpus.store, path)

    placed = dict(corpus.query("SELECT name, source_chunk_ids[1] FROM entities"))
    proxima_chunk = next(cid for cid, t in chunks if "Proxima b" in t)
    assert placed["Proxima b"] == proxima_chunk
    assert placed["Nobody"] == chunks[0][0]


def test_extraction_run_after_import_replaces_imported_records(corpus: Corpus, tmp_path) -> None:
    import_triples(corpus.store, write_triples(tmp_path / "t.jsonl", TRIPLES))

    stats = run_extraction(corpus.store, OfflineExtractor())

    assert stats.replaced == 2 and stats.pending == 3
    assert {r[0] for r in corpus.query("SELECT extractor FROM extractions")} == {OfflineExtractor.identity}


@pytest.mark.skipif(not (BENCH / "triples.jsonl").exists(), reason="benchmark data not present")
@pytest.mark.e2e
def test_musique_triples_import_smoke(tmp_path) -> None:
    corpus = Corpus(tmp_path)
    corpus.write("corpus.jsonl", (BENCH / "corpus.jsonl").read_text(encoding="utf-8"))
    corpus.sync()
    lines = (BENCH / "triples.jsonl").read_text(encoding="utf-8").splitlines()
    doc_ids = {json.loads(line)["doc_id"] for line in lines}

    stats = import_triples(corpus.store, BENCH / "triples.jsonl")

    assert stats.lines == len(lines) and stats.unmatched_doc_ids == 0
    assert stats.matched_documents == len(doc_ids) == stats.records_written
    entities, relations = corpus.query("SELECT (SELECT count(*) FROM entities), (SELECT count(*) FROM relations)")[0]
    assert 0 < relations <= stats.triples and 0 < entities <= 2 * stats.triples
    assert import_triples(corpus.store, BENCH / "triples.jsonl").records_written == 0
