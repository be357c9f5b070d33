"""Lexical retrieval offline: Okapi BM25 over chunks and over entity names/descriptions, in numpy.

No model, no download, no extra dependency. The index is built in memory from the store (chunks) or from the
graph snapshot (entities) and cached until the data changes; on a few thousand chunks that takes well under a
second.

Scoring is the textbook Okapi BM25 with Lucene's non-negative idf:

    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(d) = sum over distinct query terms t of idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))

with the usual constants k1 = 1.5, b = 0.75 (Robertson & Zaragoza 2009; bm25s' and Lucene's defaults), not
tuned here. Tokens are casefolded words of two or more characters (accents folded), English stopwords dropped,
no stemming. A chunk is indexed with its document's title (a passage's title is part of the passage).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pathrag_pipeline.storage.store import CHUNKS_VERSION_META

BM25_K1 = 1.5
BM25_B = 0.75

_WORD = re.compile(r"\w\w+")   # scikit-learn's and bm25s' default token pattern: words of 2+ characters
# A standard English stopword list (the one sklearn/bm25s use, abridged to function words).
STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below between
both but by can cannot could did do does doing down during each few for from further had has have having he her
here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not of off
on once only or other ought our ours ourselves out over own same she should so some such than that the their
theirs them themselves then there these they this those through to too under until up very was we were what when
where which while who whom why will with would you your yours yourself yourselves s t also did does
""".split())


def tokenize(text: str) -> list[str]:
    """Casefolded, accent-folded word tokens without English stopwords."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return [w for w in _WORD.findall(folded) if w not in STOPWORDS]


@dataclass
class BM25Index:
    """An inverted index of documents (keys) with precomputed BM25 term weights."""

    keys: list[str]
    postings: dict[str, tuple[np.ndarray, np.ndarray]]   # term -> (doc indices, BM25 weights)
    # the chunk index's passages, kept beside it when few enough (``KEPT_PASSAGES``): chunk id -> (document id,
    # title or None, text), what ``engine.fetch_chunks`` would read back from the file for each query
    passages: dict[str, tuple[str, str | None, str]] | None = None

    @classmethod
    def build(cls, keys: Sequence[str], texts: Sequence[str], *, k1: float = BM25_K1, b: float = BM25_B) -> "BM25Index":
        if len(keys) != len(texts):
            raise ValueError(f"{len(keys)} keys for {len(texts)} texts")
        tokens = [tokenize(t) for t in texts]
        lengths = np.array([len(t) for t in tokens], dtype=np.float64)
        n = len(tokens)
        avgdl = float(lengths.mean()) if n and lengths.sum() > 0 else 1.0
        tf: dict[str, dict[int, int]] = {}
        for i, toks in enumerate(tokens):
            for tok in toks:
                row = tf.setdefault(tok, {})
                row[i] = row.get(i, 0) + 1
        postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for term, row in tf.items():
            docs = np.fromiter(row.keys(), dtype=np.int64, count=len(row))
            freq = np.fromiter(row.values(), dtype=np.float64, count=len(row))
            df = len(row)
            idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
            norm = k1 * (1.0 - b + b * lengths[docs] / avgdl)
            postings[term] = (docs, idf * freq * (k1 + 1.0) / (freq + norm))
        return cls(list(keys), postings)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (zeros when no term matches)."""
        out = np.zeros(len(self.keys), dtype=np.float64)
        for term in dict.fromkeys(tokenize(query)):
            hit = self.postings.get(term)
            if hit is not None:
                out[hit[0]] += hit[1]
        return out

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best (key, score) with a positive score, best first; ties keep index order."""
        if k < 1:
            raise ValueError(f"k={k} must be at least 1")
        s = self.scores(query)
        hits = np.flatnonzero(s > 0)
        if hits.size == 0:
            return []
        order = hits[np.lexsort((hits, -s[hits]))][:k]
        return [(self.keys[i], float(s[i])) for i in order]


_cache: dict[tuple[str, str], BM25Index] = {}
_lock = threading.Lock()

CHUNK_INDEX_MEMO = "chunk_index"   # its key in a read block's memo (``Store.read_once``)

KEPT_PASSAGES = 20_000
"""The most passages a process keeps in memory: beside the chunk BM25 index, which reads every passage to build
itself anyway (about 1 KB each: tens of MB at most), and in a read block's memo of passages read one by one
(``engine.fetch_chunks``). A query then takes its passages from memory instead of reading them from the file again
(~2-3 ms of DuckDB statement a query). Above it, each query reads only the passages it quotes."""


def passage_text(title: str | None, text: str) -> str:
    """A passage as every text retriever sees it: ``storage.store.PASSAGE_TEXT_SQL`` in Python."""
    return f"{title or ''} {text}"


def chunk_index(store) -> BM25Index:
    """BM25 over every chunk of ``store`` (a ``storage.store.Store``), cached while the chunks are unchanged.

    Validity is the ``chunks_version`` token ingest writes whenever chunks or titles change (one row read);
    a store without one (written by older code or by hand) falls back to hashing every chunk row. Queries sharing
    one read block (``Store.reading``: the query service's batches) check the version once."""
    return store.read_once(CHUNK_INDEX_MEMO, lambda: _chunk_index(store))


def kept_passages(store) -> dict[str, tuple[str, str | None, str]] | None:
    """Every passage of the chunk index this read block of ``store`` loaded (``BM25Index.passages``), or None when
    the block has not loaded it or it keeps none: the chunks table as of the block's version, so a chunk id absent
    from it is absent from the file too (the block holds the file's read lock)."""
    memo = store.read_memo()
    index = memo.get(CHUNK_INDEX_MEMO) if memo is not None else None
    return index.passages if index is not None else None


def _chunk_index(store) -> BM25Index:
    with store.connect(read_only=True) as con:
        token = con.execute("SELECT value FROM pathrag_meta WHERE key = ?", [CHUNKS_VERSION_META]).fetchone()
        if token is not None:
            version = f"chunks:v:{token[0]}"
        else:
            count, digest = con.execute(
                """SELECT count(*), coalesce(bit_xor(hash(c.content_hash || c.id || coalesce(d.title, ''))), 0)
                   FROM chunks c LEFT JOIN documents d ON d.id = c.document_id""").fetchone()
            version = f"chunks:{count}:{digest}"
        key = (str(Path(store.path).resolve()), version)
        with _lock:
            cached = _cache.get(key)
        if cached is not None:
            return cached
        rows = con.execute(
            """SELECT c.id, c.document_id, d.title, c.text FROM chunks c
               LEFT JOIN documents d ON d.id = c.document_id ORDER BY c.id""").fetchall()
    index = BM25Index.build([r[0] for r in rows], [passage_text(r[2], r[3]) for r in rows])
    if len(rows) <= KEPT_PASSAGES:
        index.passages = {r[0]: (r[1], r[2], r[3]) for r in rows}
    with _lock:
        for old in [k for k in _cache if k[0] == key[0] and k[1].startswith("chunks:")]:
            del _cache[old]
        _cache[key] = index
    return index


def entity_index(snapshot) -> BM25Index:
    """BM25 over entities (``GraphSnapshot``): the name counts twice, then the description; keys are entity keys."""
    key = (f"snapshot:{id(snapshot)}", f"entities:{snapshot.version}")
    with _lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    texts = [f"{name} {name} {desc}" for name, desc in zip(snapshot.entity_names, snapshot.entity_descriptions)]
    index = BM25Index.build(snapshot.entity_keys, texts)
    with _lock:
        for old in [k for k in _cache if k[1].startswith("entities:")]:
            del _cache[old]
        _cache[key] = index
    return index


def clear_cache() -> None:
    with _lock:
        _cache.clear()
