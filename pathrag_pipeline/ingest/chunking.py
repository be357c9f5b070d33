"""Token-window chunking with overlap, stable content-derived ids and character offsets for provenance.

The papers (LightRAG, PathRAG) chunk at 1200 tokens with 100 tokens of overlap; both are settings.
A chunk's id derives from its document id and its text, so an edit elsewhere in a document leaves the
ids (and the cached extractions) of untouched chunks unchanged whenever their text is unchanged.

Windows are cut from the document's text without its template lines (``ingest/template_lines``), and a window that
starts under headings, or inside a code block, is preceded by those headings and an opening fence
(``text.structure.Context.prefix``): a chunk reads as it does in place, says which section it is from, and its
readers (the extractor, the embeddings, an answer) never meet a code line as prose. ``section`` is that heading path
as one line. The prefix is part of the chunk's text and so of its hash: a heading renamed above a chunk changes it.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass

from pathrag_pipeline.ingest.template_lines import original_offset, without_template
from pathrag_pipeline.text.structure import Outline
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
    section: str = ""


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_text(document_id: str, text: str, *, max_tokens: int = 1200, overlap: int = 100,
               template: frozenset[int] = frozenset()) -> list[Chunk]:
    """Split ``text`` into windows of ``max_tokens`` tokens, each starting ``max_tokens - overlap`` after the last.

    ``template``: line keys (``template_lines.line_key``) of the folder's template lines, left out of the windows.
    A chunk's text is its window, trimmed of surrounding whitespace, after the window's context prefix (the
    headings it is under, see the module docstring); ``char_start``/``char_end`` are the window's offsets in
    ``text``, so ``text[chunk.char_start:chunk.char_end]`` is the window when no template line was left out of it.
    A window that would hold only whitespace is skipped.
    """
    if max_tokens <= 0 or not 0 <= overlap < max_tokens:
        raise ValueError(f"need 0 <= overlap ({overlap}) < max_tokens ({max_tokens})")
    kept, runs = without_template(text, template)
    outline = Outline(kept) if "#" in kept or "```" in kept else None
    # The token spans are streamed through one window (never all in a list: a 40 MB text has ~8M tokens,
    # about 1 GB as Python tuples); windows are exactly spans[k*step : k*step + max_tokens].
    spans = iter(token_spans(kept))
    step = max_tokens - overlap
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    window = list(itertools.islice(spans, max_tokens))
    while window:
        start, end = window[0][0], window[-1][1]
        piece = kept[start:end]
        stripped = piece.strip()
        if stripped:
            lead = len(piece) - len(piece.lstrip())
            start, end = start + lead, start + lead + len(stripped)
            section, body = "", stripped
            if outline is not None:
                context = outline.at(start)
                section = context.section
                body = context.prefix(stripped.split("\n", 1)[0]) + stripped
            content_hash = text_hash(body)
            repeat = seen.get(content_hash, 0)
            seen[content_hash] = repeat + 1
            key = f"{document_id}\x00{repeat}\x00{content_hash}".encode()
            chunk_id = "chunk-" + hashlib.sha256(key).hexdigest()[:32]
            chunks.append(
                Chunk(
                    id=chunk_id,
                    document_id=document_id,
                    ordinal=len(chunks),
                    text=body,
                    token_count=len(window),
                    char_start=original_offset(runs, start),
                    char_end=original_offset(runs, end - 1) + 1,
                    content_hash=content_hash,
                    section=section,
                )
            )
        if len(window) < max_tokens:
            break
        following = list(itertools.islice(spans, step))
        if not following:
            break
        window = window[step:] + following
    return chunks
