"""Lexical retrieval offline: Okapi BM25 over chunks and over entity names/descriptions, in numpy.

No model, no download, no extra dependency. The index is built in memory from the store (chunks) or from the
graph snapshot (entities) and cached until the data changes (~0.3 s for 2,000 passages, 7 MB); the chunk index is
also saved in the home for the next process (``save_index``).

Scoring is the textbook Okapi BM25 with Lucene's non-negative idf:

    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(d) = sum over distinct query terms t of idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))

with the usual constants k1 = 1.5, b = 0.75 (Robertson & Zaragoza 2009; bm25s' and Lucene's defaults), not
tuned here. Tokens are casefolded words of two or more characters (accents folded), English stopwords dropped,
no stemming. A chunk is indexed with its document's title (a passage's title is part of the passage).
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
import zipfile
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pathrag_pipeline.storage.cache_files import write_whole
from pathrag_pipeline.storage.store import CHUNKS_VERSION_META, PASSAGE_TEXT_SQL

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
    folded = text.casefold()
    if not folded.isascii():   # NFKD leaves ASCII as it is: only other text is decomposed and stripped of marks
        folded = unicodedata.normalize("NFKD", folded)
        marks = [c for c in set(folded) if unicodedata.combining(c)]
        if marks:
            folded = folded.translate(dict.fromkeys(map(ord, marks)))
    return [w for w in _WORD.findall(folded) if w not in STOPWORDS]


@dataclass
class BM25Index:
    """An inverted index of documents (keys) with BM25 term weights, stored as compressed rows: the postings of term
    ``t = vocab[term]`` are ``docs[indptr[t]:indptr[t + 1]]`` (ascending document indices) with their term
    frequencies ``freq[...]`` and weights ``term_weights(t)``; ``lengths`` are the documents' token counts. The
    weights follow from the rest: what is saved (``save_index``) is the counts, and a term's weights are computed
    the first time a query uses the term, then kept (a new `pathrag ask` process computed all of them, 2.9M on a
    100 MB folder, ~0.2 s, to use a few terms' worth)."""

    keys: list[str]
    vocab: dict[str, int]
    indptr: np.ndarray    # int64, len(vocab) + 1
    docs: np.ndarray      # int32 document indices, grouped by term
    freq: np.ndarray      # uint32 term frequency of (term, document)
    lengths: np.ndarray   # int64 tokens of each document
    idf: np.ndarray       # float64 BM25 idf of each term
    avgdl: float          # mean document length (1.0 for an empty index)
    k1: float
    b: float
    # the chunk index's: DuckDB's hash of each passage's text (``PASSAGE_TEXT_SQL``), what tells a passage that
    # changed when the saved index of an earlier version is brought up to date (``_update``)
    hashes: np.ndarray | None = None
    # the chunk index's passages, kept beside it when few enough (``KEPT_PASSAGES``): chunk id -> (document id,
    # title or None, text), what ``engine.fetch_chunks`` would read back from the file for each query
    passages: dict[str, tuple[str, str | None, str]] | None = None
    # loaded from the home's cache without them (``_chunk_index``): read at the process's second use (``uses``)
    passages_deferred: bool = False
    uses: int = 0
    _weights: dict[int, np.ndarray] = field(default_factory=dict, repr=False)   # term -> its postings' weights

    @classmethod
    def build(cls, keys: Sequence[str], texts: Sequence[str], *, k1: float = BM25_K1, b: float = BM25_B) -> "BM25Index":
        if len(keys) != len(texts):
            raise ValueError(f"{len(keys)} keys for {len(texts)} texts")
        vocab: dict[str, int] = {}
        lengths = np.zeros(len(texts), dtype=np.int64)
        codes, freq = _counted(enumerate(texts), vocab, lengths, max(len(texts), 1))
        return cls.from_codes(list(keys), vocab, codes, freq, lengths, k1=k1, b=b)

    @classmethod
    def from_codes(cls, keys: list[str], vocab: dict[str, int], codes: np.ndarray, freq: np.ndarray,
                   lengths: np.ndarray, *, hashes: np.ndarray | None = None, k1: float = BM25_K1,
                   b: float = BM25_B) -> "BM25Index":
        """The index of (term * max(len(keys), 1) + document) codes, sorted and distinct, with their frequencies.
        Terms of ``vocab`` no code holds leave it; the others keep their order."""
        term, docs = np.divmod(codes, max(len(keys), 1))
        counts = np.bincount(term, minlength=len(vocab))
        used = counts > 0
        if not used.all():
            vocab = dict(zip((t for t, keep in zip(vocab, used.tolist()) if keep), range(int(used.sum()))))
        indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(counts[used], out=indptr[1:])
        return cls.from_counts(keys, vocab, indptr, docs.astype(np.int32), freq.astype(np.uint32), lengths,
                               hashes=hashes, k1=k1, b=b)

    @classmethod
    def from_counts(cls, keys: list[str], vocab: dict[str, int], indptr: np.ndarray, docs: np.ndarray,
                    freq: np.ndarray, lengths: np.ndarray, *, hashes: np.ndarray | None = None,
                    k1: float = BM25_K1, b: float = BM25_B) -> "BM25Index":
        """The index of these counts (its weights are computed per term, when a query first uses it)."""
        n = len(keys)
        df = np.diff(indptr)
        avgdl = float(lengths.mean()) if n and lengths.sum() > 0 else 1.0
        idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
        return cls(keys, vocab, indptr, docs, freq, lengths, idf, avgdl, k1, b, hashes)

    def term_weights(self, t: int) -> np.ndarray:
        """The BM25 weights of term ``t``'s postings: ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``
        (element by element the operations of computing every term's at once, so the same to the bit)."""
        kept = self._weights.get(t)
        if kept is None:
            lo, hi = self.indptr[t], self.indptr[t + 1]
            tf = self.freq[lo:hi].astype(np.float64)
            norm = self.k1 * (1.0 - self.b + self.b * self.lengths[self.docs[lo:hi]] / self.avgdl)
            kept = self._weights[t] = self.idf[t] * tf * (self.k1 + 1.0) / (tf + norm)
        return kept

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (zeros when no term matches)."""
        out = np.zeros(len(self.keys), dtype=np.float64)
        for term in dict.fromkeys(tokenize(query)):
            t = self.vocab.get(term)
            if t is not None:
                out[self.docs[self.indptr[t]:self.indptr[t + 1]]] += self.term_weights(t)
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


def _counted(documents, vocab: dict[str, int], lengths: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Tokenize ``documents`` ((index, text) pairs): their (term * ``width`` + index) codes, sorted and distinct, with
    their frequencies; each document's token count goes to ``lengths``, a new term into ``vocab``."""
    intern = vocab.setdefault
    ids, owners = array("q"), array("q")               # every token's term id and document, 8 bytes each
    for i, text in documents:
        toks = tokenize(text)
        lengths[i] = len(toks)
        ids.extend([intern(t, len(vocab)) for t in toks])
        owners.extend([i] * len(toks))
    if not ids:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.unique(np.frombuffer(ids, dtype=np.int64) * width + np.frombuffer(owners, dtype=np.int64),
                     return_counts=True)


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
    index = store.read_once(CHUNK_INDEX_MEMO, lambda: _chunk_index(store))
    if index.passages_deferred:
        # loaded or brought up to date without its passages (``_chunk_index``): the process's second use keeps them
        # (the block's version, which is the index's: the block holds the file's read lock)
        index.uses += 1
        if index.uses > 1:
            with store.connect(read_only=True) as con:
                index.passages = _passages(con.execute(_PASSAGES_SQL).fetchall())
            index.passages_deferred = False
    return index


def kept_passages(store) -> dict[str, tuple[str, str | None, str]] | None:
    """Every passage of the chunk index this read block of ``store`` loaded (``BM25Index.passages``), or None when
    the block has not loaded it or it keeps none: the chunks table as of the block's version, so a chunk id absent
    from it is absent from the file too (the block holds the file's read lock)."""
    memo = store.read_memo()
    index = memo.get(CHUNK_INDEX_MEMO) if memo is not None else None
    return index.passages if index is not None else None


_PASSAGES_SQL = """SELECT c.id, c.document_id, d.title, c.text FROM chunks c
                   LEFT JOIN documents d ON d.id = c.document_id ORDER BY c.id"""
_HASH_SQL = f"hash({PASSAGE_TEXT_SQL})"


def _passages(rows) -> dict[str, tuple[str, str | None, str]]:
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def _chunk_index(store) -> BM25Index:
    saved: Path | None = None
    with store.connect(read_only=True) as con:
        token = con.execute("SELECT value FROM pathrag_meta WHERE key = ?", [CHUNKS_VERSION_META]).fetchone()
        if token is not None:
            version = f"chunks:v:{token[0]}"
            saved = saved_index_path(store, version)
        else:
            count, digest = con.execute(
                """SELECT count(*), coalesce(bit_xor(hash(c.content_hash || c.id || coalesce(d.title, ''))), 0)
                   FROM chunks c LEFT JOIN documents d ON d.id = c.document_id""").fetchone()
            version = f"chunks:{count}:{digest}"
        key = (str(Path(store.path).resolve()), version)
        with _lock:
            cached = _cache.get(key)
            earlier = next((v for k, v in _cache.items() if k[0] == key[0] and k[1].startswith("chunks:")), None)
        if cached is not None:
            return cached
        index = load_index(saved, version) if saved is not None else None
        changed = False
        if index is None and saved is not None:
            # an earlier version's index, this process's (``serve`` after a re-index) or the one saved last
            previous = earlier if earlier is not None and earlier.hashes is not None else _latest_saved(saved.parent)
            index = _update(con, previous) if previous is not None else None
            changed = index is not None
        rows = None
        if index is None:
            rows = con.execute(f"""SELECT c.id, c.document_id, d.title, c.text, {_HASH_SQL} FROM chunks c
                                   LEFT JOIN documents d ON d.id = c.document_id ORDER BY c.id""").fetchall()
    if index is not None:
        # A new process (``pathrag ask``) quotes a few passages: reading every one to keep them would cost more
        # than its own reads. They are read when the process uses the index again (``pathrag serve``, the API).
        index.passages_deferred = len(index.keys) <= KEPT_PASSAGES
    else:
        index = BM25Index.build([r[0] for r in rows], [passage_text(r[2], r[3]) for r in rows])
        index.hashes = np.array([r[4] for r in rows], dtype=np.uint64)
        if len(rows) <= KEPT_PASSAGES:
            index.passages = _passages(rows)
        changed = bool(rows)
    if changed and saved is not None:
        save_index(index, saved, version)
    with _lock:
        for old in [k for k in _cache if k[0] == key[0] and k[1].startswith("chunks:")]:
            del _cache[old]
        _cache[key] = index
    return index


def _update(con, previous: BM25Index) -> BM25Index | None:
    """``previous`` (the saved index of an earlier chunks version) brought to the chunks of ``con``: the passages
    whose text hash is unchanged keep their counts, the others are read and tokenized, and the weights are computed
    again from the counts, so the result equals a fresh build's (the same counts; only the vocabulary's ids may be
    numbered otherwise). A one-file edit of sqlite3-doc re-reads 1 passage of 1,948 instead of all 7 MB."""
    if previous.hashes is None:
        return None
    now = con.execute(f"""SELECT c.id, {_HASH_SQL} AS h FROM chunks c
                          LEFT JOIN documents d ON d.id = c.document_id ORDER BY c.id""").fetchnumpy()
    keys = now["id"].tolist()
    hashes = np.asarray(now["h"], dtype=np.uint64)
    n = len(keys)
    position = {k: i for i, k in enumerate(previous.keys)}
    before = np.fromiter((position.get(k, -1) for k in keys), dtype=np.int64, count=n)   # old index or -1
    same = before >= 0
    same[same] = previous.hashes[before[same]] == hashes[same]
    fresh = np.flatnonzero(~same)
    texts: dict[str, str] = {}
    if fresh.size:
        texts = dict(con.execute(f"""SELECT c.id, {PASSAGE_TEXT_SQL} FROM chunks c
                                     SEMI JOIN (SELECT unnest(?::VARCHAR[]) AS id) w ON w.id = c.id
                                     LEFT JOIN documents d ON d.id = c.document_id""",
                                 [[keys[i] for i in fresh.tolist()]]).fetchall())
        if len(texts) < fresh.size:
            return None   # a chunk went between the two statements (not under a read lock): build instead
    lengths = np.zeros(n, dtype=np.int64)
    lengths[same] = previous.lengths[before[same]]
    # the kept passages' postings: previous order (term, then document), documents renumbered; both orders sort by
    # chunk id, so the renumbering keeps them sorted
    renumber = np.full(len(previous.keys), -1, dtype=np.int64)
    renumber[before[same]] = np.flatnonzero(same)
    kept = renumber[previous.docs] >= 0
    old_terms = np.repeat(np.arange(len(previous.vocab), dtype=np.int64), np.diff(previous.indptr))[kept]
    vocab = dict(previous.vocab)
    width = max(n, 1)
    new_codes, new_freq = _counted(((i, texts[keys[i]]) for i in fresh.tolist()), vocab, lengths, width)
    codes = np.concatenate([old_terms * width + renumber[previous.docs[kept]], new_codes])
    freq = np.concatenate([previous.freq[kept].astype(np.int64), new_freq])
    order = np.argsort(codes, kind="stable")   # two sorted runs: a merge
    # terms no passage holds any more leave the vocabulary (``from_codes``)
    return BM25Index.from_codes(keys, vocab, codes[order], freq[order], lengths, hashes=hashes)


# ---- the chunk index saved in the home -----------------------------------------------------------------------
# Building the chunk index tokenizes every passage (~0.3 s for 2,000 passages, 7 MB, on a 2-core EPYC), what a new
# ``pathrag ask`` would pay on each question. The first process to build it for a chunks version saves it in the
# home's cache folder; the next loads it (a few ms), and the first after a change brings the last saved one up to
# date (``_update``: only the passages whose text hash changed are read and tokenized). The file is named by the
# version token ingest writes whenever a chunk or title changes (a random uuid: a rebuilt home never reuses one) and
# holds the version it was built for; a store without a token (older code) is not saved. Unreadable, mismatched or
# stale files are rebuilt, never trusted. ``SAVED_FORMAT`` names the tokenizer, the constants and the layout: change
# it with any of them.
SAVED_FORMAT = f"bm25-counts-2|k1={BM25_K1}|b={BM25_B}"
SAVED_PREFIX = "chunk-bm25-"


def saved_index_path(store, version: str) -> Path:
    digest = hashlib.sha256(f"{SAVED_FORMAT}|{version}".encode()).hexdigest()[:16]
    return Path(store.path).parent / "cache" / f"{SAVED_PREFIX}{digest}.npz"


def _blob(strings: Sequence[str]) -> np.ndarray:
    return np.frombuffer("\x00".join(strings).encode(), dtype=np.uint8)


def _strings(blob: np.ndarray, count: int) -> list[str]:
    return blob.tobytes().decode().split("\x00") if count else []


def save_index(index: BM25Index, path: Path, version: str) -> None:
    """Write ``index``'s counts (not its weights, which follow from them, nor its passages) to ``path`` whole and
    remove the files of other versions (``storage.cache_files``); a home it cannot be written to keeps none."""
    if index.hashes is None or any("\x00" in k for k in index.keys):
        return
    write_whole(path, lambda out: np.savez(
        out, format=np.array(SAVED_FORMAT), version=np.array(version),
        count=np.array([len(index.keys), len(index.vocab)], dtype=np.int64),
        keys=_blob(index.keys), terms=_blob(list(index.vocab)),   # the vocabulary in id order
        indptr=index.indptr, docs=index.docs, freq=index.freq, lengths=index.lengths, hashes=index.hashes),
        supersedes=f"{SAVED_PREFIX}*.npz")


def load_index(path: Path, version: str | None) -> BM25Index | None:
    """The index saved at ``path`` for ``version`` (None: for whichever version it was saved), or None when there is
    none or it is not exactly that (another version or format, a truncated or damaged file)."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            if str(saved["format"]) != SAVED_FORMAT or (version is not None and str(saved["version"]) != version):
                return None
            n, terms = (int(x) for x in saved["count"])
            keys, vocab = _strings(saved["keys"], n), _strings(saved["terms"], terms)
            indptr, docs, freq = saved["indptr"], saved["docs"], saved["freq"]
            lengths, hashes = saved["lengths"], saved["hashes"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, EOFError, UnicodeDecodeError, zipfile.BadZipFile):
        return None
    if (len(keys) != n or len(vocab) != terms or indptr.shape != (terms + 1,) or indptr.dtype != np.int64
            or docs.dtype != np.int32 or freq.dtype != np.uint32 or lengths.dtype != np.int64
            or hashes.dtype != np.uint64 or docs.shape != freq.shape or lengths.shape != (n,)
            or hashes.shape != (n,) or indptr[0] != 0 or indptr[-1] != docs.size
            or np.any(np.diff(indptr) < 0) or (docs.size and (docs.min() < 0 or docs.max() >= n))):
        return None
    return BM25Index.from_counts(keys, dict(zip(vocab, range(terms))), indptr, docs, freq, lengths, hashes=hashes)


def _latest_saved(folder: Path) -> BM25Index | None:
    """The most recently written saved index in ``folder``, whatever its version (``_update`` brings it up to
    date), or None."""
    try:
        files = sorted(folder.glob(f"{SAVED_PREFIX}*.npz"), key=lambda f: f.stat().st_mtime, reverse=True)
    except OSError:
        return None
    return next((index for index in (load_index(f, None) for f in files[:1]) if index is not None), None)


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
