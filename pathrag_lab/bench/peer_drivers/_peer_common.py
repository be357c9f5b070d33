"""What both peer drivers share (run by a side environment's Python, never imported by the lab or the product).

tiktoken's encodings are downloaded on first use (openaipublic.blob.core.windows.net), which this machine cannot
reach, so ``install_word_tokenizer`` makes ``tiktoken.get_encoding`` / ``encoding_for_model`` return a reversible
word-piece encoding (a piece = a run of non-space characters with the spaces after it): a "token" is about 1.3 of
tiktoken's. Both peers then chunk and truncate by these pieces.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import re
import sys
import threading
import time
from pathlib import Path



def _collector_policy() -> None:
    """The garbage-collector policy of our `pathrag` command (its cli/gc_policy.py: these thresholds while the process
    runs, the heap frozen at exit), given by the bench in PEER_GC_THRESHOLDS, so no system's step gains from it
    alone. Applied when this module is imported: before the peer's own imports."""
    spec = os.environ.get("PEER_GC_THRESHOLDS")
    if spec:
        gc.set_threshold(*(int(v) for v in spec.split(",")))
        atexit.register(gc.freeze)


_collector_policy()
_PIECE = re.compile(r"\S+\s*|\s+")
EMBED_MODEL = "fake-embed"
CHAT_MODEL = "fake-chat"


class WordEncoding:
    name = "word-pieces"

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._pieces: list[str] = []
        self._lock = threading.Lock()

    def __deepcopy__(self, memo):   # LightRAG deep-copies its config, tokenizer included: one shared vocabulary
        return self

    def __copy__(self):
        return self

    def encode(self, text: str, *args, **kwargs) -> list[int]:
        out = []
        for piece in _PIECE.findall(text):
            token = self._ids.get(piece)
            if token is None:
                with self._lock:
                    token = self._ids.setdefault(piece, len(self._pieces))
                    if token == len(self._pieces):
                        self._pieces.append(piece)
            out.append(token)
        return out

    def decode(self, tokens, *args, **kwargs) -> str:
        return "".join(self._pieces[t] for t in tokens)

    def encode_batch(self, texts, *args, **kwargs):
        return [self.encode(t) for t in texts]

    def decode_batch(self, batch, *args, **kwargs):
        return [self.decode(t) for t in batch]

    def encode_ordinary(self, text: str) -> list[int]:
        return self.encode(text)


ENCODING = WordEncoding()


def install_word_tokenizer() -> None:
    import tiktoken

    tiktoken.get_encoding = lambda *a, **k: ENCODING
    tiktoken.encoding_for_model = lambda *a, **k: ENCODING


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("step", choices=("index", "edit", "delete", "query"))
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--docs", type=Path, help="the corpus folder (index)")
    parser.add_argument("--file", type=Path, help="the edited or deleted file (edit, delete)")
    parser.add_argument("--questions", type=Path, help="a JSON list of questions (query)")
    parser.add_argument("--mode", default="")
    parser.add_argument("--dim", type=int, default=384)
    return parser.parse_args()


def read_folder(folder: Path) -> list[tuple[str, str, str]]:
    """(doc id, file name, text) of every .txt file, in name order; the id is the file's stem."""
    return [(p.stem, p.name, p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.txt"))]


def openai_functions(base_url: str):
    """(chat, embed) coroutines calling the scripted server through the openai client."""
    from openai import AsyncOpenAI
    import numpy as np

    client = AsyncOpenAI(base_url=base_url, api_key="unused-local-server", max_retries=2, timeout=120)

    async def chat(prompt, system_prompt=None, history_messages=None, **kwargs) -> str:
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages += list(history_messages or [])
        messages.append({"role": "user", "content": prompt})
        reply = await client.chat.completions.create(model=CHAT_MODEL, messages=messages, temperature=0)
        return reply.choices[0].message.content or ""

    async def embed(texts, *args, **kwargs):
        reply = await client.embeddings.create(model=EMBED_MODEL, input=list(texts))
        return np.array([d.embedding for d in reply.data], dtype=np.float32)

    return chat, embed


def timed_queries(ask, questions: list[str]) -> dict:
    """One unmeasured warm-up question, then each question timed (seconds); ``ask`` is a blocking callable."""
    ask("What is this collection of passages about?")
    seconds = []
    for q in questions:
        started = time.perf_counter()
        ask(q)
        seconds.append(round(time.perf_counter() - started, 4))
    return {"query_s": seconds}


def emit(figures: dict) -> None:
    """The driver's result: one JSON line on stdout, last."""
    sys.stdout.write("\nPEER-RESULT " + json.dumps(figures) + "\n")
    sys.stdout.flush()
