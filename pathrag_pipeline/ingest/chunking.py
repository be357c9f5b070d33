"""Token-window chunking with overlap, stable content-derived ids and character offsets for provenance.

The papers (LightRAG, PathRAG) chunk at 1200 tokens with 100 tokens of overlap; both are settings.
A chunk's id derives from its document id and its text, so an edit elsewhere in a document leaves the
ids (and the cached extractions) of untouched chunks unchanged whenever their text is unchanged.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass

from pathrag_pipeline.text.tokenizer import token_spans


@dataclass(frozen=True)
class Chunk:
    id: str
    document_id: str
    ordinal: int
    text: str
    token_count: int
    char_start: int
    char_end: int
    content_hash: str


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_text(document_id: str, text: str, *, max_tokens: int = 1200, overlap: int = 100) -> list[Chunk]:
    """Split ``text`` into windows of ``max_tokens`` tokens, each starting ``max_tokens - overlap`` after the last.

    Offsets satisfy ``text[chunk.char_start:chunk.char_end] == chunk.text``. Windows are trimmed of
    surrounding whitespace (offsets follow), and a window that would hold only whitespace is skipped.
    """
    if max_tokens <= 0 or not 0 <= overlap < max_tokens:
        raise ValueError(f"need 0 <= overlap ({overlap}) < max_tokens ({max_tokens})")
    # The token spans are streamed through one window (never all in a list: a 40 MB text has ~8M tokens,
    # about 1 GB as Python tuples); windows are exactly spans[k*step : k*step + max_tokens].
    spans = iter(token_spans(text))
    step = max_tokens - overlap
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    window = list(itertools.islice(spans, max_tokens))
    while window:
        start, end = window[0][0], window[-1][1]
        piece = text[start:end]
        stripped = piece.strip()
        if stripped:
            lead = len(piece) - len(piece.lstrip())
            start, end = start + lead, start + lead + len(stripped)
            content_hash = text_hash(stripped)
            repeat = seen.get(content_hash, 0)
            seen[content_hash] = repeat + 1
            chunk_id = "chunk-" + hashlib.sha256(f"{document_id}\x00{repeat}\x00{content_hash}".encode()).hexdigest()[:32]
            chunks.append(
                Chunk(
                    id=chunk_id,
                    document_id=document_id,
                    ordinal=len(chunks),
                    text=stripped,
                    token_count=len(window),
                    char_start=start,
                    char_end=end,
                    content_hash=content_hash,
                )
            )
        if len(window) < max_tokens:
            break
        following = list(itertools.islice(spans, step))
        if not following:
            break
        window = window[step:] + following
    return chunks
