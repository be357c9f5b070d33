"""The query engine's embedder, keeping the vectors of the texts it embedded last.

A path-mode query embeds the question's text up to four times (the dense text hits, their cosines, the passages'
question cosines, Path Pooling's relation scores) besides its keywords: each an embedding request to an endpoint,
or a model call, for the same text (the peer benchmark counted 3 embedding requests per query where LightRAG and
nano-graphrag send 1). Embedders are deterministic (the same model gives the same text the same vector), so a
text embedded once in a while is embedded once: the last ``MAX_TEXTS`` texts' vectors of small calls (a question,
its keywords) are kept, copied (a few hundred KB at 384 dimensions), shared by the service's worker threads; bulk
calls pass through.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

MAX_TEXTS = 256
MAX_KEPT_CALL = 16   # texts in one call above which it is a bulk call (NeuroPath's entity names): passed through


class RecentVectors:
    """An ``Embedder`` over ``inner`` whose ``embed`` asks ``inner`` only for texts not among its recent ones."""

    def __init__(self, inner: Any, max_texts: int = MAX_TEXTS) -> None:
        self.inner = inner
        self.identity = inner.identity
        self.max_texts = max_texts
        self._kept: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return self.inner.dim

    def __getattr__(self, name: str) -> Any:   # anything else an embedder offers (close, batch_size, ...)
        if name == "inner":   # not set yet (a copy being built): no lookup through itself
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"RecentVectors({self.inner!r})"

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        distinct = list(dict.fromkeys(texts))
        if len(distinct) > MAX_KEPT_CALL:
            return self.inner.embed(texts)
        with self._lock:
            have = {t: self._kept[t] for t in distinct if t in self._kept}
            for text in have:
                self._kept.move_to_end(text)
        missing = [t for t in distinct if t not in have]
        if missing:
            new = {t: v.copy() for t, v in zip(missing, np.asarray(self.inner.embed(missing), dtype=np.float32))}
            have.update(new)
            with self._lock:
                for text, vector in new.items():
                    self._kept[text] = vector
                    self._kept.move_to_end(text)
                while len(self._kept) > self.max_texts:
                    self._kept.popitem(last=False)
        return np.stack([have[t] for t in texts])
