"""A chat responder for FakeOpenAIServer that behaves like an extraction LLM, plus small test helpers.

The fake "model" reads the chunk text out of the extraction prompt and answers with its capitalised words as
entities and consecutive pairs of them as relations, so different texts give different graphs and the tests
can predict them. A gleaning request gets one extra entity per chunk, a description-summary request a fixed
summary; texts containing a poison marker get
output that is not JSON, for as long as the marker is in ``poison``.
"""

from __future__ import annotations

import json
import random
import re
import string
import threading
from pathlib import Path
from typing import Any

from pathrag_pipeline.config import Settings
from pathrag_pipeline.index.llm_extraction import GLEANING_PROMPT
from pathrag_pipeline.ingest.folder_sync import sync_folder
from pathrag_pipeline.llm.client import LLMClient
from pathrag_pipeline.storage.store import Store
from pathrag_lab.testing.openai_server import FakeOpenAIServer

_WORD = re.compile(r"\b[A-Z][a-z]+\b")


def unpunctuated_words(n_chars: int, capitalised: float = 0.3, seed: int = 7) -> str:
    """Random words of 2-9 letters, this share of them capitalised, with no punctuation at all, on one line:
    the huge_line.txt of the report (no sentence break anywhere)."""
    rng = random.Random(seed)
    words: list[str] = []
    size = 0
    while size < n_chars:
        word = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
        words.append(word.capitalize() if rng.random() < capitalised else word)
        size += len(word) + 1
    return " ".join(words)


def chunk_text_of(request: dict[str, Any]) -> str:
    """The chunk text inside the extraction prompt of a chat request."""
    for message in request.get("messages") or []:
        content = str(message.get("content") or "")
        if message.get("role") == "user" and "\nText:\n" in content:
            return content.split("\nText:\n", 1)[1]
    raise AssertionError("request carries no extraction prompt")


def names_in(text: str) -> list[str]:
    """What the fake model extracts from a text: distinct capitalised words in order."""
    return list(dict.fromkeys(_WORD.findall(text)))


class FakeExtractionModel:
    """Thread-safe chat responder; ``poison`` markers can be added and removed between runs."""

    def __init__(self, poison: set[str] | None = None, glean: bool = True):
        self.poison = set(poison or ())
        self.glean = glean
        self.summaries = 0  # description-summary requests answered
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str:
        if "Description list:" in str(request["messages"][-1].get("content")):
            with self._lock:
                self.summaries += 1
            return "A short summary."
        text = chunk_text_of(request)
        with self._lock:
            poisoned = any(marker in text for marker in self.poison)
        if poisoned:
            return "this is not JSON {"
        names = names_in(text)
        if request["messages"][-1].get("content") == GLEANING_PROMPT:
            extra = [{"name": f"Gleaned {names[0]}", "type": "other", "description": "found on a second look"}]
            return json.dumps({"entities": extra if (self.glean and names) else [], "relations": []})
        return json.dumps({
            "entities": [{"name": n, "type": "concept", "description": f"{n} appears in the text."} for n in names],
            "relations": [{"source": a, "target": b, "keywords": "near", "description": f"{a} is near {b}.",
                           "strength": 5} for a, b in zip(names, names[1:])],
        })


def make_client(server: FakeOpenAIServer, **options: Any) -> LLMClient:
    """A generous timeout by default (on a loaded CI machine an ordinary reply can take over 0.5 s, and a retry after a
    timeout would meet a consumed script); tests of the timeout fault pass a short one below the 1.5 s stall."""
    server.timeout_sleep = 1.5
    defaults: dict[str, Any] = dict(timeout=30.0, max_retries=2, validation_retries=1, max_concurrency=4)
    return LLMClient(server.base_url, "fake-chat", **{**defaults, **options})


class Corpus:
    """A tmp document folder and PATHRAG_HOME, synced into the store on demand."""

    def __init__(self, root: Path, chunk_tokens: int = 1200):
        self.docs = root / "docs"
        self.docs.mkdir(parents=True, exist_ok=True)
        self.settings = Settings.from_env(env={
            "PATHRAG_HOME": str(root / "home"), "PATHRAG_DOCS": str(self.docs),
            "PATHRAG_CHUNK_TOKENS": str(chunk_tokens), "PATHRAG_CHUNK_OVERLAP": "0",
        })
        self.store = Store(self.settings.duckdb_path)

    def write(self, name: str, text: str) -> None:
        (self.docs / name).write_text(text, encoding="utf-8")

    def delete(self, name: str) -> None:
        (self.docs / name).unlink()

    def sync(self) -> None:
        sync_folder(self.settings, self.store)

    def query(self, sql: str, params: list | None = None) -> list[tuple]:
        with self.store.connect() as con:
            return con.execute(sql, params or []).fetchall()


class CrashingOfflineExtractor:
    """The offline rules, raising on texts that hold ``crash_on`` (a rule bug on one bad text): CPU-bound, so the
    extraction stage runs it in worker processes; importable there (spawned workers import it by name)."""

    identity = "offline-crashing-test"
    cpu_bound = True

    def __init__(self, crash_on: str) -> None:
        self.crash_on = crash_on

    def extract(self, text: str, title: str | None):
        from pathrag_pipeline.index.llm_extraction import OfflineExtractor

        if self.crash_on in text:
            raise ValueError(f"cannot read {self.crash_on!r}")
        return OfflineExtractor().extract(text, title)


class DyingWorkerOfflineExtractor:
    """The offline rules, but a worker process given a text holding ``die_on`` ends at once (as one the kernel
    kills for memory would); in the run's own process it extracts as the offline rules do. CPU-bound and importable
    by name, so the extraction stage runs it in spawned worker processes."""

    identity = "offline-dying-worker-test"
    cpu_bound = True

    def __init__(self, die_on: str) -> None:
        self.die_on = die_on

    def extract(self, text: str, title: str | None):
        import multiprocessing
        import os

        from pathrag_pipeline.index.llm_extraction import OfflineExtractor

        if self.die_on in text and multiprocessing.parent_process() is not None:
            os._exit(3)
        return OfflineExtractor().extract(text, title)
