"""Import pre-extracted (subject, predicate, object) triples as extraction records, instead of extracting.

Benchmarks such as musique-100 ship triples an LLM already extracted from each passage; importing them builds
the same graph tables the extraction stage would, with no LLM. Each triple file line is
``{"doc_id", "subject", "predicate", "object"}``; ``doc_id`` names a corpus record, which the ingest stored
as document ``<file>#<record id>`` (e.g. ``corpus.jsonl#p0000``), so ids match exactly or by the part after
``#``. A triple goes to the chunk of its document that mentions its subject and object (else the first
chunk), as one relation plus its two entities, described by the triple's own sentence.

The records carry the extractor identity ``import:<sha256 of the file, 12 hex>``: re-importing the same file
finds every record in place and does nothing; a changed file replaces exactly the chunks whose records
differ, and drops records of an earlier import that the new file no longer covers.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from pathrag_pipeline.errors import PipelineError
from pathrag_pipeline.index.extraction_models import ChunkExtraction, Entity, Relation
from pathrag_pipeline.index.extraction_records import ExtractionRecord
from pathrag_pipeline.index.extraction_stage import merge_dirty, persist_changes
from pathrag_pipeline.index.graph_merge import MergeStats
from pathrag_pipeline.storage.store import Store

IMPORT_PREFIX = "import:"
_FIELDS = ("doc_id", "subject", "predicate", "object")


class TriplesImportError(PipelineError, ValueError):
    """The triples file cannot be imported; the message names the file, the line or ids, and the fix."""


@dataclass(frozen=True)
class Triple:
    doc_id: str
    subject: str
    predicate: str
    object: str

    @property
    def sentence(self) -> str:
        return f"{self.subject} {self.predicate} {self.object}"


@dataclass
class ImportStats:
    extractor: str
    lines: int = 0
    triples: int = 0                      # valid, distinct triples
    malformed: int = 0                    # lines skipped (see ``problems``)
    matched_documents: int = 0
    unmatched_doc_ids: int = 0            # distinct doc_ids with no ingested document
    chunks_with_triples: int = 0
    records_written: int = 0              # records new or changed (0 when re-importing the same file)
    records_removed: int = 0              # records of an earlier import no longer covered
    merge: MergeStats | None = None
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)   # first few "file:line: what is wrong" and unmatched ids


def read_triples(path: Path, *, strict: bool = False) -> tuple[list[Triple], ImportStats]:
    """Parse the file; malformed lines are skipped and counted (or raise when ``strict``)."""
    data = path.read_bytes()
    stats = ImportStats(extractor=IMPORT_PREFIX + hashlib.sha256(data).hexdigest()[:12])
    triples: dict[Triple, None] = {}
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        stats.lines += 1
        problem, triple = _parse_line(line)
        if problem is not None:
            message = f"{path}:{number}: {problem}"
            if strict:
                raise TriplesImportError(f"{message}; fix the line or import without strict to skip it")
            stats.malformed += 1
            if len(stats.problems) < 5:
                stats.problems.append(message)
            continue
        triples.setdefault(triple, None)
    stats.triples = len(triples)
    if stats.lines and not triples:
        raise TriplesImportError(
            f"{path}: none of its {stats.lines} lines is a triple {{\"doc_id\", \"subject\", \"predicate\", "
            f"\"object\"}} with non-empty strings; first problems: {'; '.join(stats.problems)}"
        )
    return list(triples), stats


def _parse_line(line: str) -> tuple[str | None, Triple | None]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg})", None
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}", None
    values = []
    for name in _FIELDS:
        value = obj.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            return f"field {name!r} is missing or not a non-empty string (got {value!r})", None
        values.append(" ".join(value.split()))
    return None, Triple(*values)


def match_documents(triple_doc_ids: set[str], document_ids: list[str],
                    corpus_doc_ids_map: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """Map triple doc_ids to document ids: the explicit map first, then an exact id, then the id after '#'.

    A suffix shared by documents of several files is ambiguous and stays unmatched (pass an explicit map).
    Returns (matches, unmatched doc_ids).
    """
    known = set(document_ids)
    by_suffix: dict[str, list[str]] = defaultdict(list)
    for doc_id in document_ids:
        if "#" in doc_id:
            by_suffix[doc_id.split("#", 1)[1]].append(doc_id)
    explicit = corpus_doc_ids_map or {}
    matches, unmatched = {}, []
    for tid in sorted(triple_doc_ids):
        if tid in explicit and explicit[tid] in known:
            matches[tid] = explicit[tid]
        elif tid in known:
            matches[tid] = tid
        elif len(by_suffix.get(tid, ())) == 1:
            matches[tid] = by_suffix[tid][0]
        else:
            unmatched.append(tid)
    return matches, unmatched


def extraction_for(triples: list[Triple]) -> ChunkExtraction:
    """One chunk's triples as entities (described by the sentences naming them) and one relation per triple."""
    sentences: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    relations = []
    for t in triples:
        sentence = t.sentence + "."
        for name in (t.subject, t.object):
            key = name.casefold()
            names.setdefault(key, name)
            bucket = sentences.setdefault(key, [])
            if sentence not in bucket:
                bucket.append(sentence)
        relations.append(Relation(source=t.subject, target=t.object, keywords=t.predicate,
                                  description=t.sentence, strength=1.0))
    entities = [Entity(name=names[k], type="other", description=" ".join(v)) for k, v in sentences.items()]
    return ChunkExtraction(entities=entities, relations=relations).normalised()


def _pick_chunk(chunks: list[tuple[str, str, str]], triple: Triple) -> int:
    """Index of the chunk mentioning most of subject/object (case-insensitive); the first chunk on ties."""
    if len(chunks) == 1:
        return 0
    subject, obj = triple.subject.casefold(), triple.object.casefold()
    best, best_score = 0, -1
    for i, (_, _, text) in enumerate(chunks):
        folded = text.casefold()
        score = (subject in folded) + (obj in folded)
        if score > best_score:
            best, best_score = i, score
    return best


def import_triples(store: Store, triples_path: Path | str, *, corpus_doc_ids_map: dict[str, str] | None = None,
                   strict: bool = False) -> ImportStats:
    """Turn a triples JSONL file into extraction records on the ingested chunks and merge the graph."""
    started = time.perf_counter()
    path = Path(triples_path)
    if not path.is_file():
        raise TriplesImportError(f"triples file {path} does not exist; give the path of a JSONL file of "
                                 '{"doc_id", "subject", "predicate", "object"} lines')
    triples, stats = read_triples(path, strict=strict)
    identity = stats.extractor

    with store.connect() as con:
        document_ids = [r[0] for r in con.execute("SELECT DISTINCT document_id FROM chunks").fetchall()]
        matches, unmatched = match_documents({t.doc_id for t in triples}, document_ids, corpus_doc_ids_map)
        if triples and not matches:
            raise TriplesImportError(
                f"{path}: none of its {len(unmatched)} doc_ids matches an ingested document with chunks "
                f"(e.g. {', '.join(unmatched[:5])}; documents look like {', '.join(sorted(document_ids)[:3]) or 'none'}). "
                "Ingest the corpus the triples came from first (`pathrag index FOLDER`), or pass corpus_doc_ids_map."
            )
        chunk_rows = con.execute(
            """SELECT document_id, id, content_hash, text FROM chunks
               WHERE document_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY document_id, ordinal""",
            [sorted(set(matches.values()))],
        ).fetchall()
        existing = {r[0]: (r[1], r[2], r[3]) for r in con.execute(
            "SELECT chunk_id, chunk_hash, extractor, status FROM extractions").fetchall()}
    stats.unmatched_doc_ids = len(unmatched)
    stats.matched_documents = len(matches)
    stats.problems.extend(f"no ingested document for doc_id {d!r}" for d in unmatched[:5])

    chunks_of: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for doc_id, chunk_id, chunk_hash, text in chunk_rows:
        chunks_of[doc_id].append((chunk_id, chunk_hash, text))
    per_chunk: dict[tuple[str, str, str], list[Triple]] = defaultdict(list)
    for t in triples:
        doc_id = matches.get(t.doc_id)
        if doc_id is None:
            continue
        chunks = chunks_of[doc_id]
        chunk_id, chunk_hash, _ = chunks[_pick_chunk(chunks, t)]
        per_chunk[(chunk_id, chunk_hash, doc_id)].append(t)
    stats.chunks_with_triples = len(per_chunk)

    records = [
        ExtractionRecord(chunk_id=chunk_id, chunk_hash=chunk_hash, document_id=doc_id, extractor=identity,
                         result=extraction_for(group))
        for (chunk_id, chunk_hash, doc_id), group in per_chunk.items()
        if existing.get(chunk_id) != (chunk_hash, identity, "ok")
    ]
    covered = {chunk_id for chunk_id, _, _ in per_chunk}
    removed = [cid for cid, (_, extractor, _) in existing.items()
               if extractor.startswith(IMPORT_PREFIX) and cid not in covered]
    stats.records_written, stats.records_removed = len(records), len(removed)
    with store.connect() as con:
        if records or removed:
            persist_changes(con, removed, records)
        stats.merge = merge_dirty(con)
    stats.seconds = time.perf_counter() - started
    return stats
