"""An offline tokenizer: GPT-style pre-tokenisation, no vocabulary file, no download.

tiktoken needs its BPE files from the network on first use, which is not available here, so token
windows and budgets use this approximation instead. It applies the cl100k pre-tokeniser pattern
(contractions, a letter run with its leading space, 1-3 digit groups, punctuation runs, whitespace) and
splits letter runs longer than ``LONG_WORD`` characters into pieces of that length, the way BPE splits
rare long words. On English prose it lands within about 10% of cl100k counts; it never needs a network.
"""

from __future__ import annotations

import re
from typing import Iterator

LONG_WORD = 10

_PATTERN = re.compile(
    r"'(?:s|t|re|ve|m|ll|d)\b"      # contractions
    r"| ?[^\W\d_]+"                  # a word with its leading space
    r"| ?\d{1,3}"                    # digits in groups of up to three
    r"| ?[^\s\w]+"                   # punctuation runs
    r"|\s+(?!\S)|\s+",               # whitespace
    re.UNICODE,
)

TOKENIZER_NAME = "regex-cl100k-approx-v1"


def token_spans(text: str) -> Iterator[tuple[int, int]]:
    """Yield (start, end) character offsets of each token of ``text``, in order, covering all of it."""
    for match in _PATTERN.finditer(text):
        start, end = match.span()
        if end - start > LONG_WORD + 1 and text[start:end].strip().isalpha():
            while end - start > LONG_WORD:
                yield start, start + LONG_WORD
                start += LONG_WORD
        yield start, end


def count_tokens(text: str) -> int:
    """Same count as ``len(list(token_spans(text)))``, without a Python step per token: graph merges count
    the descriptions of tens of thousands of entities. A long letter run of length L yields (L-1)//LONG_WORD
    extra pieces."""
    tokens = _PATTERN.findall(text)
    return len(tokens) + sum((len(t) - 1) // LONG_WORD for t in tokens
                             if len(t) > LONG_WORD + 1 and t.strip().isalpha())


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` with at most ``max_tokens`` tokens."""
    if max_tokens <= 0:
        return ""
    # most texts fit (a query clips about a hundred descriptions): every token is at least one character, and
    # ``count_tokens`` counts without a Python step per token
    if len(text) <= max_tokens or count_tokens(text) <= max_tokens:
        return text
    end = 0
    for i, (_, stop) in enumerate(token_spans(text)):
        if i >= max_tokens:
            break
        end = stop
    return text[:end]
