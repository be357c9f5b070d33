"""Timing of the graph merge: full build, incremental re-merge and alias detection.

Two inputs: the musique-100 triples (one record per passage, 17k triples; real entity names, so alias
detection has something to find) and a synthetic corpus of ``--records`` single-chunk records with a few
entities and relations each. Run: ``python -m pathrag_lab.bench.graph_merge [--records 17000]``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import defaultdict
from pathlib import Path

import duckdb

from pathrag_pipeline.config import BENCH_DIR
from pathrag_pipeline.index.aliases import find_alias_candidates, read_alias_inputs
from pathrag_pipeline.index.extraction_models import ChunkExtraction, Entity, Relation
from pathrag_pipeline.index.extraction_records import ExtractionRecord, write_records
from pathrag_pipeline.index.graph_merge import apply_chunk_changes, merge_keys
from pathrag_pipeline.storage.schema import init_schema

MUSIQUE = BENCH_DIR / "musique-100"


def musique_records(folder: Path = MUSIQUE) -> list[ExtractionRecord]:
    """One record per passage: its entities plus one relation per triple (predicate as keywords)."""
    ents, rels = defaultdict(list), defaultdict(list)
    for line in (folder / "entities.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["name"].strip():
            ents[row["doc_id"]].append(Entity(name=row["name"], type="concept"))
    for line in (folder / "triples.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["subject"].strip() and row["object"].strip():
            rels[row["doc_id"]].append(Relation(source=row["subject"], target=row["object"], keywords=row["predicate"],
                                                description=f"{row['subject']} {row['predicate']} {row['object']}."))
    return [ExtractionRecord(chunk_id=f"chunk-{doc}", chunk_hash=f"hash-{doc}", document_id=doc, extractor="hipporag",
                             result=ChunkExtraction(entities=ents[doc], relations=rels[doc]).normalised())
            for doc in sorted(set(ents) | set(rels))]


def synthetic_records(n: int, seed: int = 7) -> list[ExtractionRecord]:
    """n records, 3-5 entities and 2-4 relations each, names drawn from ~n distinct names with a long tail."""
    rng = random.Random(seed)
    vocab = [f"{rng.choice(['Ada', 'Bo', 'Cy', 'Di', 'Ed', 'Flo'])} {rng.choice(['Halden', 'Morrow', 'Quist'])} {i}"
             for i in range(n)]
    out = []
    for i in range(n):
        names = [vocab[min(int(rng.paretovariate(1.2)) - 1, n - 1) if rng.random() < 0.3 else rng.randrange(n)]
                 for _ in range(rng.randint(3, 5))]
        entities = [Entity(name=x, type=rng.choice(["person", "organization"]), description=f"{x} appears in doc {i % 97}.")
                    for x in names]
        relations = [Relation(source=a, target=b, keywords=rng.choice(["knows", "works with"]),
                              description=f"{a} is linked to {b}.", strength=rng.randint(1, 9))
                     for a, b in zip(names, names[1:]) if a != b][: rng.randint(2, 4)]
        out.append(ExtractionRecord(chunk_id=f"c{i}", chunk_hash=f"h{i}", document_id=f"d{i // 5}", extractor="synthetic",
                                    result=ChunkExtraction(entities=entities, relations=relations)))
    return out


def _bench(label: str, records: list[ExtractionRecord]) -> None:
    con = duckdb.connect()
    init_schema(con)
    t = time.perf_counter()
    write_records(con, records)
    write_s = time.perf_counter() - t
    stats = merge_keys(con, None, None)
    n_e, n_r = con.execute("SELECT (SELECT count(*) FROM entities), (SELECT count(*) FROM relations)").fetchone()
    print(f"{label}: {len(records)} records; write {write_s:.2f}s; full build {stats.seconds:.2f}s "
          f"-> {n_e} entities, {n_r} relations")
    stats = merge_keys(con, None, None)
    print(f"  full rebuild, nothing changed: {stats.seconds:.2f}s ({stats.entities_unchanged} entities unchanged)")
    changed = records[: max(1, len(records) // 100)]
    t = time.perf_counter()
    stats = apply_chunk_changes(con, [r.chunk_id for r in changed], [])
    print(f"  delete {len(changed)} chunks incrementally: {time.perf_counter() - t:.2f}s "
          f"({stats.entities_written} written, {stats.entities_deleted} deleted entities)")
    t = time.perf_counter()
    inputs = read_alias_inputs(con)
    candidates = find_alias_candidates(inputs)
    print(f"  alias detection over {len(inputs)} names: {time.perf_counter() - t:.2f}s, {len(candidates)} candidates")
    for c in candidates[:12]:
        print(f"    {c.alias_name!r} -> {c.canonical_name!r} ({c.rule}, {c.score:.2f})")
    con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=17000)
    args = parser.parse_args()
    if MUSIQUE.exists():
        _bench("musique-100 triples", musique_records())
    _bench("synthetic", synthetic_records(args.records))


if __name__ == "__main__":
    main()
