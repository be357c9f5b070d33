"""Entity name normalisation: the key under which mentions of one entity are merged, and its display name.

Extraction (LLM or offline) writes the same entity many ways: "The Beatles", "beatles", "“Beatles”",
"U.S." and "US". ``name_key`` maps such surface forms to one key so the graph has one node for them.
It only removes differences that never carry meaning in a name; anything riskier (acronyms, initials,
word order, typos) is left to ``aliases``, which is reversible. Choices, in order:

1. Unicode NFKC (full-width letters, ligatures, non-breaking spaces become plain ones), then casefold.
2. Surrounding quotes of every kind (" ' “ ” ‘ ’ „ ‚ « » ‹ › ` and ``...'') are stripped, even when
   unbalanced (LLMs often drop one). A bracket pair ( ) [ ] { } < > is stripped only when it wraps the whole
   name; a lone unmatched bracket at either end is dropped. Inner parentheses stay as word breaks, so
   "Paris (Texas)" keeps "texas" and never becomes "paris".
3. A dot after a single letter vanishes (abbreviations and initials: "U.S." -> "us", "J. Smith" -> "j smith");
   any other dot is a word break ("St. Louis" and "St.Louis" -> "st louis"). A dot between digits is kept
   ("3.5" stays "3.5", so it never equals "35").
4. Apostrophes vanish without a space ("O'Brien" -> "obrien", "McDonald's" -> "mcdonalds").
5. "&" is kept as its own word ("AT&T" -> "at & t", same as "AT & T"); "+" and "#" are kept where they are
   part of a word ("C++", "C#"), since they distinguish real names.
6. Every other punctuation mark, hyphens and dashes included, is a word break: "Jean-Paul" equals "Jean Paul",
   "Paris, France" is "paris france" (and stays different from "paris texas").
7. Whitespace is collapsed, and a leading "the " is dropped ("The Hague" -> "hague") unless nothing remains.
8. Accents are kept ("Müller" differs from "Muller"): folding them is an alias decision, not a key one. A
   combining mark belongs to its letter in every script: Devanagari vowel signs and viramas, Thai vowels,
   Arabic and Hebrew points and any accent that has no precomposed form stay inside the word ("हिन्दी" is one
   word, not "ह न द"); composed and decomposed spellings give the same key (NFKC composes them first).
9. Case folds for every script by Unicode's full case folding ("Straße" = "STRASSE", final sigma "ς" = "σ"),
   and the dot above that folding leaves after i from Turkish "İ" (U+0130) is dropped, so "İstanbul" =
   "Istanbul" and "İZMİR" = "Izmir". Turkish dotless "ı" stays a letter of its own.

A name that normalises to nothing (e.g. "...") keeps its casefolded form, so no key is ever empty.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from functools import lru_cache
from typing import Iterable, Mapping

# The version of the rules below. An index whose graph was merged under another version is merged again in
# full at its next index run (index/extraction_stage.merge_dirty), so no entity keeps a key the rules no longer
# give; extraction is not repeated. Bump it with any change that can change a key.
NAME_KEY_VERSION = "2"   # 2: combining marks stay in words, Turkish İ folds to i

_QUOTES = "\"'“”‘’„‚«»‹›`´"
_PAIRS = {"(": ")", "[": "]", "{": "}", "<": ">"}
_CLOSERS = set(_PAIRS.values())

_APOSTROPHE = re.compile(r"(?<=\w)['’`´](?=\w)")
_ABBREV_DOT = re.compile(r"(?<=\b[^\W\d_])\.(?=[^\W\d_]\b|\s|$)")  # U.S. / e.g.: a dot after a single letter
_DIGIT_DOT = re.compile(r"(?<=\d)\.(?=\d)")
_AMPERSAND = re.compile(r"\s*&\s*")
_DOT_ABOVE_I = re.compile("(?<=[ij])\u0307")   # casefold("İ") is "i" + U+0307: the dot belongs to the capital
_LOOSE_SIGNS = re.compile(r"(?<![\w+#])[+#]+")  # '+'/'#' not attached to a preceding word
_SPACES = re.compile(r"\s+")
_KEEP_DOT = "\x00"


_MARKS = ("Mn", "Mc", "Me")


def _break_punctuation(text: str) -> str:
    """Rule 6: every character but letters, digits, whitespace and rule 5's signs becomes a space ("_" too);
    a combining mark stays when it follows a letter, digit or mark of its word (rule 8) and is a break
    otherwise (a spacing accent such as "´" becomes space + U+0301 under NFKC: "Bach´s" is "bach s")."""
    if text.isascii():
        return _ASCII_BREAK.sub(" ", text)
    out: list[str] = []
    in_word = False
    for ch in text:
        if ch.isalnum():
            out.append(ch)
            in_word = True
        elif unicodedata.category(ch) in _MARKS:
            out.append(ch if in_word else " ")
        else:
            out.append(ch if ch.isspace() or ch in "&+#\x00" else " ")
            in_word = False
    return "".join(out)


_ASCII_BREAK = re.compile(r"[^A-Za-z0-9\s&+#\x00]")


def _strip_wrappers(text: str) -> str:
    """Remove quotes around the name and brackets that wrap all of it (repeatedly: '("X")' -> 'x')."""
    while True:
        before = text
        text = text.strip()
        if text.startswith("``"):
            text = text[2:]
        if text.endswith("''"):
            text = text[:-2]
        text = text.strip(_QUOTES).strip()
        if len(text) >= 2 and text[0] in _PAIRS and _matching_close(text) == len(text) - 1:
            text = text[1:-1]
        elif text and text[0] in _PAIRS and _PAIRS[text[0]] not in text:
            text = text[1:]
        elif text and text[-1] in _CLOSERS and _opener_of(text[-1]) not in text:
            text = text[:-1]
        if text == before:
            return text


def _opener_of(closer: str) -> str:
    return next(o for o, c in _PAIRS.items() if c == closer)


def _matching_close(text: str) -> int:
    """Index of the bracket closing the one at position 0, or -1."""
    opener, closer, depth = text[0], _PAIRS[text[0]], 0
    for i, ch in enumerate(text):
        if ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return i
    return -1


@lru_cache(maxsize=1 << 18)
def name_key(name: str) -> str:
    """The merge key of an entity name (see the module docstring for every rule and why)."""
    if not isinstance(name, str):
        raise TypeError(f"entity name must be a string, got {type(name).__name__}: {name!r}")
    text = _DOT_ABOVE_I.sub("", unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold()))
    text = _strip_wrappers(text)
    text = _APOSTROPHE.sub("", text)
    text = _DIGIT_DOT.sub(_KEEP_DOT, text)
    text = _ABBREV_DOT.sub("", text)
    text = _AMPERSAND.sub(" & ", text)
    text = _break_punctuation(text)
    text = _LOOSE_SIGNS.sub(" ", text)
    text = _SPACES.sub(" ", text).strip().replace(_KEEP_DOT, ".")
    if text.startswith("the ") and len(text) > 4:
        text = text[4:]
    if not text:
        text = _SPACES.sub(" ", unicodedata.normalize("NFKC", name).casefold()).strip()
    return text


def display_name(candidates: Iterable[str]) -> str:
    """The surface form shown for an entity: the most frequent one; ties go to a form without an inverting
    comma ("Agnes Morrow" over "Morrow, Agnes"), then the longest, then the lexicographically smallest, so
    the choice does not depend on the order mentions arrive in."""
    candidates = list(candidates)
    if candidates and candidates.count(candidates[0]) == len(candidates):  # the common case: one surface form
        return display_name_counts({candidates[0]: len(candidates)})
    return display_name_counts(Counter(candidates))


def display_name_counts(counts: Mapping[str, int]) -> str:
    """``display_name`` of surface forms given with how often each occurs."""
    folded: Counter[str] = Counter()
    for form, n in counts.items():
        folded[" ".join(form.split())] += n
    folded.pop("", None)
    if not folded:
        raise ValueError("display_name needs at least one non-empty name")
    return min(folded, key=lambda s: (-folded[s], ", " in s, -len(s), s))
