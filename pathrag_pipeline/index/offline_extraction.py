"""Rule-based entity and relation extraction from English text, the no-LLM default of the pipeline.

Without a language model the graph still needs nodes and edges, so this module finds what an LLM
would mostly call entities with deterministic rules: runs of capitalised tokens (allowing name
connectors such as "of", "de", "van" inside: "University of Copenhagen"), acronyms and quoted titles.
Dates, years and money amounts are recognised (so they never merge into a neighbouring name) but are not
made entities: see ``LITERAL_TYPES``. Capitalised function words that merely start a sentence
("The", "However", "In") are not entities; a lone sentence-initial word counts only if the text also
capitalises it mid-sentence. Relations link entities that share a sentence, the nearest neighbour and the
sentence subject only, so long lists do not create quadratic edge counts (a run of text too long to be a
sentence is read as sentence-sized windows: ``MAX_SENTENCE_CHARS``); a passage title, when given,
is the subject entity of the passage and links to what its first sentences (and sentences opening with
a pronoun such as "It" or "He") mention.

Everything is stdlib ``re`` with precompiled patterns: no model, no download, thousands of chunks/s.
``OFFLINE_EXTRACTOR_ID`` names the rule set; it is part of the extraction cache key, so bump it
whenever a rule changes the output.
"""

from __future__ import annotations

from typing import Iterator

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pathrag_pipeline.index.extraction_models import ChunkExtraction, Relation, entity_of, relation_of
from pathrag_pipeline.index.identifiers import (CODE_SPAN, bare_names, code_line_names, code_name, heading_name,
                                                is_operator, is_term)
from pathrag_pipeline.text.structure import blocks

# v2: titles inside longer names, line segments; v3: dates and amounts are not graph nodes, one neighbour.
# The windows of over-long runs (MAX_SENTENCE_CHARS) came without a bump: every text without such a run extracts
# byte for byte as before (checked on musique-100, the sample and the generated benchmark corpora), so indexes
# need no re-extraction; records of text with one, made before, stay until their document changes or goes.
# v4: documentation text: heading and field-label lines, instruction verbs ("See", "Please"), citation initials
# and literals ("True", "API") are not names; names listed with a person, citation surnames and towns of an
# address are typed (measured on hand-labelled real docs, `pathrag bench extractor`).
# v5: structure (text/structure.py): headings are read for the names in them only, code blocks not at all; technical
# names (index/identifiers.py) are entities, a term line defines its names, a section's subject relates to them.
# v6: a heading that is one hyphenated capitalised word ("X-Frame-Options") is a name, and a heading that is one
# name is defined by the sentence opening its section (as a term line is).
# v7: code lines that declare names (identifiers.code_line_names: a shell command and its options, a Python import, a
# header string) give those names, related as they stand on the line; no other code is read.
# v8: consecutive term lines join into one only up to TERM_LINE_MAX_CHARS: a table's cells (each a term segment)
# joined into one line of the whole table, which every relation of it quoted (2.5 kB each: 622 kB of JSON for a
# 2.7 kB chunk of postgresql-doc's conversion table, past the per-chunk cap, most relations dropped).
OFFLINE_EXTRACTOR_ID = "offline-rules-v8"

DESCRIPTION_MAX_CHARS = 400
# A "sentence" longer than MAX_SENTENCE_CHARS is not one: a word list, an unpunctuated transcript or dump, a
# line with no full stop. Every relation of a sentence quotes it whole and there is a relation per mention, so
# such a run made one chunk's output grow with the square of its length (one 7.6 kB chunk of unpunctuated words
# gave 5.7 MB of JSON, and DuckDB ran out of memory merging them). It is read instead as consecutive windows of
# at most SENTENCE_WINDOW_CHARS, cut at spaces, each a sentence of its own: about 25 words, the length of an
# ordinary sentence (English prose averages 20-25 words; musique-100's sentences average 131 characters). Edited
# prose never reaches MAX_SENTENCE_CHARS (about 300 words; the longest sentence of musique-100, a list, has 1,325
# characters), so its extraction is unchanged; text that does gets output linear in its length: 5-25 bytes of
# JSON per byte of random word salad, by how many of its words are capitalised. A real sentence below the limit
# is still quoted whole by each of its relations (a dense one near it gives up to ~250 bytes per byte); the
# extraction stage's per-chunk cap (extraction_models.result_cap) bounds what such a chunk stores.
MAX_SENTENCE_CHARS = 2000
SENTENCE_WINDOW_CHARS = 150
RELATION_NEIGHBOURS = 1     # each entity links to this many following entities of its sentence (v2: 2)
TITLE_LEAD_SENTENCES = 2    # the title entity links to every entity of this many opening sentences
TERM_LINE_MAX_CHARS = 300   # a term line, alone or joined from consecutive ones ("--autosquash, --no-autosquash")
# Literal values found by the rules (dates and years, money amounts) stay masked, so they never join a name,
# but are not entities: a year shared by two passages is not a relation between them, and as nodes they were
# the graph's hubs ("1928 -> Pellingham" paths for unrelated questions). The sentence that states them stays
# in the descriptions of the entities and relations around them. Empty this set to keep them as nodes.
LITERAL_TYPES = frozenset({"date", "other"})

# --- word lists --------------------------------------------------------------------------------------
# The lists are data, in offline_words.toml beside this module, each with why its words are there; read once here.
_WORDS: dict[str, frozenset[str]] = {
    key: frozenset(text.split())
    for key, text in tomllib.loads(Path(__file__).with_name("offline_words.toml").read_text(encoding="utf-8")).items()
}

_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|December"
           "|Jan\\.|Feb\\.|Mar\\.|Apr\\.|Jun\\.|Jul\\.|Aug\\.|Sep\\.|Sept\\.|Oct\\.|Nov\\.|Dec\\.")

_FUNCTION_WORDS = _WORDS["function_words"]

_CONNECTORS = _WORDS["connectors"]

_ABBREVIATIONS = _WORDS["abbreviations"]
_HONORIFICS = _WORDS["honorifics"]
_NAME_SUFFIXES = _WORDS["name_suffixes"]
_COMPANY_SUFFIXES = _WORDS["company_suffixes"]

_PERSON_TITLES = _WORDS["person_titles"]
_PERSON_CUES = _WORDS["person_cues"]
_GIVEN_NAMES = _WORDS["given_names"]

_ORG_HEADS = _WORDS["org_heads"]
_EVENT_FIRST = _WORDS["event_first"]
_ORG_FIRST = _WORDS["org_first"]
_LOCATION_HEADS = _WORDS["location_heads"]
_LOCATION_FIRST = _WORDS["location_first"]
_EVENT_HEADS = _WORDS["event_heads"]
_LOCATION_PREPS = _WORDS["location_preps"]
_PLACES = _WORDS["places"]
_PRONOUN_OPENERS = _WORDS["pronoun_openers"]
_VERB_HINTS = _WORDS["verb_hints"]
_RELATION_PREPS = _WORDS["relation_preps"]
_ARTICLES = _WORDS["articles"]
_COPULAS = _WORDS["copulas"]
_COMMON_OPENERS = _WORDS["common_openers"]
_DERIVED_SUFFIXES = _WORDS["derived_suffixes"]
_EPITHETS = _WORDS["epithets"]
_OF_HEADS_EXTRA = _WORDS["of_heads_extra"]
_SPECIFIC_HEADS = _WORDS["specific_heads"]
_NOT_NAMES = _WORDS["not_names"]
_IMPERATIVES = _WORDS["imperatives"]
_DESCRIPTION_VERBS = _IMPERATIVES | _WORDS["description_verbs"]
_VERB_OBJECTS = _WORDS["verb_objects"]
_LAYOUT_WORDS = _WORDS["layout_words"]
_MONTH_WORDS = frozenset(m for m in _MONTHS.split("|") if not m.endswith("."))

# --- patterns ----------------------------------------------------------------------------------------

_INITIAL = re.compile(r"(?:[A-Z]\.)+")
_OF_HEADS = _OF_HEADS_EXTRA | _ORG_HEADS | _LOCATION_HEADS | _EVENT_HEADS
_GENERIC_HEADS = _ORG_HEADS | _LOCATION_HEADS | _EVENT_HEADS
_LATEX_QUOTES = re.compile(r"``\s*|\s*''")
_MID_CAP = re.compile(r"(?<=[\w,;:)] )([A-Z][\w'\u2019-]*)")
_LOWER_WORD = re.compile(r"\b[a-z][\w'-]*")
_COMMON_SUFFIX = re.compile(
    r"(?:ly|ed|ing|ous|ive|ful|less|ness|ment|tion|sion|ship|ity|ance|ence|ism|ist|ists|ers|ions|al|ic|ary|ure|ty|ics)$"
)
_KEY_STRIP = re.compile(r"[^\w]+")
_PERSON_SHAPE = re.compile(r"[A-Z][\w'\u2019-]*(?: (?:[A-Z]\.)+)?(?: [A-Z][\w'\u2019-]*){1,3}")

_ARTEFACT_HYPHEN = re.compile(r"(?<=\w) - (?=\w)")
_ARTEFACT_SPACE_PUNCT = re.compile(r"\s+(?=[,;:.!?)](?:\s|$))")
_ARTEFACT_OPEN_PAREN = re.compile(r"\(\s+")
_QUOTE_CHARS = re.compile(r"[\u201c\u201d\u201e\u00ab\u00bb]")
_WHITESPACE = re.compile(r"\s+")

_BOUNDARY = re.compile(r"[.!?]+[\"')\]]*\s+")
_WORD_BEFORE = re.compile(r"(?:^|[\s(\"'\[])([^\s(\"'\[]*)$")
_FIRST_WORD = re.compile(r"[\"'(\[]*([A-Za-z]+)")

_QUOTED = re.compile(r'"([^"\n]{1,120})"')
_DATE = re.compile(
    rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})(?:,?\s+\d{{3,4}})?"
    rf"|(?:{_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,\s*\d{{3,4}}|\s+\d{{4}})?\b"
    rf"|(?:(?:early|mid|late)[- ])?(?:{_MONTHS}),?\s+\d{{4}}\b"
    rf"|(?:(?:early|mid|late)[- ])?\d{{1,2}}(?:st|nd|rd|th)[- ]century\b"
    rf"|(?:(?:early|mid|late)[- ](?:the\s+)?)?(?:1[0-9]|20)\d0s\b"
    rf"|(?:(?:early|mid|late)[- ])?(?:1[0-9]|20)\d{{2}}(?!\s*(?:km|m|kg|mi|ft|%))\b(?![.,]\d))"
)
# Money and scaled amounts ("$24 million", "7.8 billion"); bare counts and measures are rarely entities.
_AMOUNT = re.compile(
    r"(?<![\w.,])(?:(?:US)?[$£€]\s?\d[\d,]*(?:\.\d+)?(?:\s+(?:million|billion|trillion))?"
    r"|\d[\d,]*(?:\.\d+)?\s+(?:million|billion|trillion))(?![\w])"
)
_DIGIT = re.compile(r"\d")
"""What every alternative of ``_DATE`` and ``_AMOUNT`` needs (the same ``\\d``): a sentence without one (~60% of
them) is not scanned for them."""
# An ordinal or a year directly before a name: "54th Massachusetts Infantry", "2020 Summer Olympics".
_NUMBER_PREFIX = re.compile(r"(?:(?<=\s)|(?<=^))(?:(\d{1,3}(?:st|nd|rd|th))|\d{4}) $")
_TOKEN = re.compile(
    r"(?P<initials>(?:[A-Z]\.){2,}|[A-Z]\.(?=\s*[A-Z]))"        # U.S., C.M., G. (before a capital)
    r"|(?P<word>[^\W\d_]\w*(?:['\u2019-]\w+|&[A-Z]\w*)*)"
    r"|(?P<num>\d[\w.,%-]*)"
    r"|(?P<punct>[^\w\s])"
)


_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_LINE_END = (".", "!", "?", ":", ";", ",", '"', ")")


def _segments(text: str) -> Iterator[str]:
    """Runs of text that a sentence never crosses: a blank line ends one (headings and list items carry no
    final period), and so does a short unpunctuated line (a heading, a table row) or a table cell
    (`` | ``). Wrapped lines of a paragraph (PDF text) are joined back together."""
    for block in _BLANK_LINE.split(text):
        joined: list[str] = []
        for line in block.split("\n"):
            line = line.strip()
            if not line:
                continue
            if "|" in line or (len(line.split()) <= 12 and not line.endswith(_LINE_END)):
                if joined:
                    yield " ".join(joined)
                    joined = []
                yield from (cell for cell in line.split("|") if cell.strip())
            else:
                joined.append(line)
        if joined:
            yield " ".join(joined)


def normalise_text(text: str) -> str:
    """Undo the tokenisation artefacts of QA corpora ("Person - centered", "`` quoted ''", "word ,").

    Quotes become plain double quotes so quoted titles are found one way, and whitespace collapses, so
    every later offset refers to this cleaned text.
    """
    text = _LATEX_QUOTES.sub('"', text)
    text = _QUOTE_CHARS.sub('"', text)
    text = _ARTEFACT_HYPHEN.sub("-", text)
    text = _ARTEFACT_OPEN_PAREN.sub("(", text)
    text = _ARTEFACT_SPACE_PUNCT.sub("", text)
    return _WHITESPACE.sub(" ", text).strip()


@dataclass(frozen=True, slots=True)
class Unit:
    """What the extractor reads, one at a time: a heading, a term line (``identifiers.is_term``: a definition's
    term, a signature, an option list) or a prose sentence; ``section`` is the index of the heading unit it sits
    under (-1: none)."""

    text: str
    kind: str
    section: int = -1
    block: int = 0     # the prose block (paragraph, list item, definition) it is part of: units of one block share it


CODE_UNIT_LINES = 3   # a code block of at most this many lines is a unit when asked for (``read_units(code=True)``)


def read_units(text: str, *, code: bool = False, code_names: bool = False) -> list[Unit]:
    """The units of document text (``text.structure`` marks): headings, then each prose block's segments (see
    ``_segments``), cleaned, a term line whole, other segments split into sentences. Code blocks are not read; with
    ``code``, a block of at most ``CODE_UNIT_LINES`` lines is a unit of kind "code" (its lines joined by spaces: the
    answers' neighbour line, ``query/answering``); with ``code_names``, each line of a code block that declares names
    (``identifiers.code_line_names``: a shell command, an import, a header string) is a unit of kind "code line"."""
    units: list[Unit] = []
    stack: list[tuple[int, int]] = []   # (heading level, its unit index)
    blocks_read = 0
    for block in blocks(text):
        if block.kind == "code":
            lines = [line.strip() for line in block.text.splitlines() if line.strip()]
            if code and 0 < len(lines) <= CODE_UNIT_LINES:
                blocks_read += 1
                units.append(Unit(" ".join(lines), "code", stack[-1][1] if stack else -1, blocks_read))
            elif code_names:
                blocks_read += 1
                units.extend(Unit(line, "code line", stack[-1][1] if stack else -1, blocks_read)
                             for line in lines if code_line_names(line))
            continue
        if block.kind == "heading":
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            heading = normalise_text(block.text)
            if heading:
                units.append(Unit(heading, "heading", stack[-1][1] if stack else -1))
                stack.append((block.level, len(units) - 1))
            continue
        section = stack[-1][1] if stack else -1
        for segment in _segments(block.text):
            cleaned = normalise_text(segment)
            if not cleaned:
                continue
            blocks_read += 1
            if len(cleaned) <= TERM_LINE_MAX_CHARS and is_term(cleaned):
                last = units[-1] if units else None
                if (last is not None and last.kind == "term" and last.section == section
                        and last.block == blocks_read - 1 and len(last.text) + 2 + len(cleaned) <= TERM_LINE_MAX_CHARS):
                    # several terms of one definition ("--autosquash" then "--no-autosquash"): one term line
                    units[-1] = Unit(f"{last.text}, {cleaned}", "term", section, blocks_read)
                else:
                    units.append(Unit(cleaned, "term", section, blocks_read))
            else:
                units.extend(Unit(sentence, "prose", section, blocks_read)
                             for sentence in _labelled(split_sentences(cleaned)))
    return units


LABEL_WORDS = 3


def _labelled(sentences: list[str]) -> list[str]:
    """A run-in label read with its sentence: "Hesketh Mill. A mill village on the River Lode." is one sentence (a
    gazetteer's or glossary's entry), not a name alone and a sentence that never names it."""
    out: list[str] = []
    for sentence in sentences:
        if out and len(out[-1].split()) <= LABEL_WORDS and out[-1].endswith((".", ":")) and out[-1][:1].isupper() \
                and not out[-1].endswith(("..", "...")):
            out[-1] = f"{out[-1]} {sentence}"
        else:
            out.append(sentence)
    return out


def text_sentences(text: str) -> list[str]:
    """The sentences of document text, headings and code left out: what answers and excerpts quote."""
    return [unit.text for unit in read_units(text) if unit.kind != "heading"]


def split_sentences(text: str) -> list[str]:
    """Split cleaned English text into sentences, not breaking after abbreviations, initials or decimals.

    A period after "Mr", "St", "U.S" or an initial ends a sentence only when the next word is one
    that typically opens a sentence ("The", "He", "In"), so "G. Stanley Hall" and "St. Louis" stay whole.
    A run longer than ``MAX_SENTENCE_CHARS`` comes back as windows of ``SENTENCE_WINDOW_CHARS``.
    """
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.end()
        if end >= len(text):
            break
        following = text[end]
        if not (following.isupper() or following.isdigit() or following in "\"'([`"):
            continue
        if text[match.start()] == "." and match.end() - match.start() <= 3:
            before = _WORD_BEFORE.search(text, start, match.start())
            word = before.group(1) if before else ""
            if _is_abbreviation(word):
                nxt = _FIRST_WORD.match(text, end)
                if not (nxt and nxt.group(1).lower() in _FUNCTION_WORDS):
                    continue
        sentence = text[start:end].strip()
        if sentence:
            sentences.extend(_bounded(sentence))
        start = end
    tail = text[start:].strip()
    if tail:
        sentences.extend(_bounded(tail))
    return sentences


def _bounded(sentence: str) -> list[str]:
    """``sentence``, or when it is longer than ``MAX_SENTENCE_CHARS`` (not a sentence: see there) its
    consecutive windows of at most ``SENTENCE_WINDOW_CHARS``, cut at the last space that fits (a word longer
    than a window is cut inside). ``sentence`` is cleaned text: single spaces, no space at either end."""
    if len(sentence) <= MAX_SENTENCE_CHARS:
        return [sentence]
    windows = []
    start = 0
    while len(sentence) - start > SENTENCE_WINDOW_CHARS:
        space = sentence.rfind(" ", start + 1, start + SENTENCE_WINDOW_CHARS + 1)
        end = space if space > 0 else start + SENTENCE_WINDOW_CHARS
        windows.append(sentence[start:end])
        start = end + 1 if space > 0 else end
    windows.append(sentence[start:])
    return windows


def _is_abbreviation(word: str) -> bool:
    if not word:
        return False
    if word.lower().rstrip(".") in _ABBREVIATIONS:
        return True
    if len(word) == 1 and word.isupper():
        return True
    # dotted acronyms: "U.S" (the final period is the boundary candidate)
    return len(word) >= 3 and word[1] == "." and word.replace(".", "").isalpha() and word.replace(".", "").isupper()


# --- candidates --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Candidate:
    """An entity mention in one sentence: its name, rule-assigned type and character span."""

    name: str
    type: str
    start: int
    end: int


@dataclass(slots=True)
class _Token:
    start: int
    end: int
    text: str
    kind: str  # "cap", "lower", "num", "punct", "mask"


def _tokenise(sentence: str, masked: list[tuple[int, int]]) -> list[_Token]:
    """Tokens of ``sentence``; each masked span (already an entity) becomes one run-breaking token."""
    tokens: list[_Token] = []
    spans = iter(sorted(masked))
    mask = next(spans, None)
    last_end = -1   # the end of the last token
    for match in _TOKEN.finditer(sentence):
        s, e = match.span()
        if s < last_end:
            continue  # the period of an abbreviation, already part of the previous token
        if mask is not None:
            while mask is not None and mask[1] <= s:
                mask = next(spans, None)
            if mask is not None and s < mask[1] and e > mask[0]:
                if not tokens or tokens[-1].kind != "mask" or tokens[-1].start != mask[0]:
                    tokens.append(_Token(mask[0], mask[1], sentence[mask[0]:mask[1]], "mask"))
                    last_end = mask[1]
                continue
        kind = match.lastgroup
        text = match.group()
        if kind == "initials":
            kind = "cap"
        elif kind == "word":
            kind = "cap" if text[0].isupper() else "lower"
            if kind == "cap" and "-" in text and text.rsplit("-", 1)[1] in _DERIVED_SUFFIXES:
                # "Westminster-based", "British-held": the name is the prefix, and the run ends there
                head = text.rsplit("-", 1)[0]
                tokens.append(_Token(s, s + len(head), head, "cap"))
                tokens.append(_Token(s + len(head), e, text[len(head):], "punct"))
                last_end = e
                continue
            if sentence[e:e + 1] == "." and text.lower() in _ABBREVIATIONS:
                e += 1
                text += "."
        tokens.append(_Token(s, e, text, kind))
        last_end = e
    return tokens


def _overlaps(spans: list[tuple[int, int]], s: int, e: int) -> bool:
    return any(s < b and e > a for a, b in spans)


@dataclass(frozen=True, slots=True)
class NameContext:
    """What the whole chunk says about its words, to judge a capitalised word that opens a sentence.

    ``capitalised`` holds words the chunk capitalises mid-sentence (names for sure); ``lowercase`` the
    words it writes in lower case (so "Snowfall" opening a sentence is a common noun).
    """

    capitalised: frozenset[str] = frozenset()
    lowercase: frozenset[str] = frozenset()

    @classmethod
    def of(cls, sentences: list[str], title: str = "") -> "NameContext":
        capitalised = {_bare(m.group(1)) for sentence in sentences for m in _MID_CAP.finditer(sentence)}
        capitalised.update(_bare(w) for w in title.split() if w[:1].isupper())
        lowercase = {w for sentence in sentences for w in _LOWER_WORD.findall(sentence)}
        return cls(frozenset(capitalised), frozenset(lowercase))

    def opens_with_name(self, word: str) -> bool:
        """Whether a lone capitalised word opening a sentence is a name ("Ethiopia is ...")."""
        if word in self.capitalised:
            return True
        lower = word.lower()
        if lower in _PLACES:
            return True
        if (not self.lowercase or lower in self.lowercase or lower in _COMMON_OPENERS or _COMMON_SUFFIX.search(lower)
                or (lower.endswith("s") and lower[:-1] in self.lowercase)):  # "Migrations" where "migration" is
            return False
        return not word.isupper() or len(word) >= 3


_PLACE_INITIALS = _WORDS["place_initials"]
_CITED_INITIALS = re.compile(r", ((?:[A-Z]\.\s?){1,3})(?=[\s,;:()]|$)")
_PLACE_AFTER = re.compile(r", ([A-Z][a-z]+)\b")
_CITED_SURNAME = re.compile(r"(?:^|[\s(\[;])[A-Z][a-z][\w'-]*, $")
_CAPITAL_BEFORE = re.compile(r"([A-Z][\w'-]*)(?:\s+(?:of|the|and|de|for|on))*\s+$")
_CAPITAL_AFTER = re.compile(r"\s+(?:(?:of|the|and|de|for|on)\s+)*[A-Z]")


def _name_word_before(sentence: str, pos: int) -> bool:
    match = _CAPITAL_BEFORE.search(sentence, 0, pos)
    return bool(match) and match.group(1).lower() not in _FUNCTION_WORDS


def _lower_same_length(text: str) -> str:
    """``text.lower()`` with every character kept one character long, so offsets into the result are offsets
    into ``text``: str.lower() turns some capitals into two characters (Turkish 'İ' -> 'i̇')."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(low if len(low := c.lower()) == 1 else c for c in text)


def find_candidates(sentence: str, context: NameContext = NameContext(),
                    known_names: tuple[str, ...] = (), *, names_only: bool = False) -> list[Candidate]:
    """Entity mentions in one cleaned sentence, in text order, spans not overlapping.

    ``context`` judges a lone capitalised word opening the sentence; without one, such a word is never
    a name. Technical names (``identifiers``: inline code, snake_case, dotted.names, ``f()``, ``--option``) are
    found first; ``names_only`` stops there (a heading: its words are never entities, a name in it is).
    ``known_names`` (e.g. the passage title) are matched verbatim next, case-insensitively, so
    a title like "Riemann integral" is kept whole.
    """
    found: list[Candidate] = []
    masked: list[tuple[int, int]] = []
    whole = heading_name(sentence) if names_only else None
    if whole:   # "PRAGMA cache_size": the heading names one thing
        return [Candidate(whole, "concept", 0, len(sentence))]
    if "`" in sentence:
        for match in CODE_SPAN.finditer(sentence):
            name = code_name(match.group(1))
            if name:
                found.append(Candidate(name, "concept", match.start(), match.end()))
            masked.append(match.span())   # code is never read as prose, name or not
    for name, s, e in bare_names(sentence):
        if not _overlaps(masked, s, e):
            found.append(Candidate(name, "concept", s, e))
            masked.append((s, e))
    if names_only:
        found.sort(key=lambda c: c.start)
        return found
    lowered = _lower_same_length(sentence) if known_names else ""
    for name in known_names:
        key = _lower_same_length(name)
        pos = lowered.find(key)
        while pos != -1:
            end = pos + len(key)
            # A known name inside a longer name ("Institute" in "Pellingham Institute of Hydrology") is not a
            # mention of it: no capitalised word (or connector + capitalised word) may touch it.
            before_ok = (pos == 0 or not sentence[pos - 1].isalnum()) and not _name_word_before(sentence, pos)
            after_ok = (end == len(sentence) or not sentence[end].isalnum()) and not _CAPITAL_AFTER.match(sentence, end)
            if before_ok and after_ok and not _overlaps(masked, pos, end):
                found.append(Candidate(name, "", pos, end))
                masked.append((pos, end))
            pos = lowered.find(key, end)
    for match in _QUOTED.finditer(sentence):
        inner = match.group(1).strip(" ,.;:")
        if inner and (inner[0].isupper() or inner[0].isdigit()) and len(inner.split()) <= 10:
            s, e = match.span()
            if not _overlaps(masked, s, e):
                found.append(Candidate(inner, "work", s + 1, s + 1 + len(inner)))
                masked.append((s, e))
    if _DIGIT.search(sentence):   # every date and amount holds a digit: most sentences are not scanned for them
        for match in _DATE.finditer(sentence):
            s, e = match.span()
            if not _overlaps(masked, s, e):
                found.append(Candidate(match.group(), "date", s, e))
                masked.append((s, e))
        for match in _AMOUNT.finditer(sentence):
            s, e = match.span()
            if not _overlaps(masked, s, e):
                found.append(Candidate(match.group(), "other", s, e))
                masked.append((s, e))
    tokens = _tokenise(sentence, masked)
    for run in _capitalised_runs(sentence, tokens, context):
        prefix = _NUMBER_PREFIX.search(sentence, max(0, run.start - 8), run.start)
        if prefix and (prefix.group(1) or run.name.rsplit(" ", 1)[-1].lower() in _EVENT_HEADS):
            found = [c for c in found if not (c.start <= prefix.start() < c.end)]
            run = Candidate(sentence[prefix.start():run.end], "event", prefix.start(), run.end)
        elif run.name in _MONTH_WORDS:
            run = Candidate(run.name, "date", run.start, run.end)
        found.append(run)
    found.sort(key=lambda c: c.start)
    return found


def _capitalised_runs(sentence: str, tokens: list[_Token], context: NameContext) -> list[Candidate]:
    """Names as runs of capitalised tokens joined by connectors, sentence-initial noise removed."""
    runs: list[Candidate] = []
    first_word = next((i for i, t in enumerate(tokens) if t.kind != "punct"), -1)
    n = len(tokens)
    i = 0   # the first token a run may start at: a run starts at each capitalised token not inside the last run
    for start in [k for k, t in enumerate(tokens) if t.kind == "cap"]:
        if start < i:
            continue
        i = start
        parts = [i]
        # capitalised tokens since the run start or the last connector, a leading "The" not counted
        segment = 0 if tokens[i].text.lower() in _FUNCTION_WORDS else 1
        k = i + 1
        while k < n:
            t = tokens[k]
            prev = tokens[k - 1]
            if t.kind == "cap" and t.start <= prev.end + 1:
                if prev.text.endswith(("'s", "\u2019s")) and not _possessive_continues(tokens, k):
                    break
                parts.append(k)
                segment += 1
                k += 1
                continue
            if t.text == "," and k + 1 < n and (tokens[k + 1].text in _COMPANY_SUFFIXES or tokens[k + 1].text in ("Jr.", "Sr.")):
                parts.extend((k, k + 1))
                k += 2
                continue
            if (t.kind == "lower" or t.text == "&") and t.start == prev.end + 1:
                word = t.text.lower()
                nxt = k + 1
                if word in ("of", "for", "on", "de", "van", "von") and nxt < n and tokens[nxt].text == "the":
                    nxt += 1  # "of the", "for the"
                if nxt < n and tokens[nxt].kind == "cap" and tokens[nxt].start == tokens[nxt - 1].end + 1:
                    if _joins(word, tokens, parts, segment, nxt):
                        parts.extend(range(k, nxt + 1))
                        segment = 1
                        k = nxt + 1
                        continue
            break
        i = k
        person_cue = False
        while parts and (tokens[parts[0]].text.lower() in _FUNCTION_WORDS or tokens[parts[0]].text in _HONORIFICS):
            person_cue = person_cue or tokens[parts[0]].text in _HONORIFICS
            parts.pop(0)
            while parts and tokens[parts[0]].kind != "cap":
                parts.pop(0)
        if parts and parts[0] == first_word and _opens_instruction(tokens, parts, context):
            parts.pop(0)
            while parts and tokens[parts[0]].kind != "cap":
                parts.pop(0)
        if not parts:
            continue
        if len(parts) == 1:
            word = _bare(tokens[parts[0]].text)
            if not _single_word_name(word) or (parts[0] == first_word and not context.opens_with_name(word)):
                continue
            if parts[0] == first_word and word not in context.capitalised and (
                    _verb_follows(tokens, parts[0]) or _instruction_verb(word)):
                continue  # "Fill in the parts", "Copy the file", "Insert x in a": an instruction's verb
        words = [tokens[k].text for k in parts if tokens[k].kind == "cap"]
        if all(w.lower().rstrip(".") in _NOT_NAMES for w in words):
            continue  # "True False True", "APIs"
        if (all(_INITIAL.fullmatch(w) for w in words) and " ".join(words) not in _PLACE_INITIALS
                and _CITED_SURNAME.search(sentence, 0, tokens[parts[0]].start)):
            continue  # "R.A." of "Fisher, R.A." (a citation's initials), not a name of its own like "U.S."
        if _is_layout_label(sentence, tokens, parts, context):
            continue
        s, e = tokens[parts[0]].start, tokens[parts[-1]].end
        name = sentence[s:e]
        if name.endswith(("'s", "\u2019s")):
            name, e = name[:-2], e - 2
        elif name.endswith(("'", "\u2019")):
            name, e = name[:-1], e - 1
        last = name.rsplit(" ", 1)[-1]
        if name.endswith(".") and last not in _NAME_SUFFIXES and not _INITIAL.fullmatch(last):
            name, e = name[:-1], e - 1
        if name:
            runs.append(Candidate(name, "person" if person_cue else "", s, e))
    return runs


def _opens_instruction(tokens: list[_Token], parts: list[int], context: NameContext) -> bool:
    """Whether the run's first word is an instruction verb opening the sentence ("See Duda & Hart",
    "Build ORT with ...") rather than part of the name: an imperative the text never capitalises mid-sentence."""
    word = tokens[parts[0]].text
    return word.lower() in _IMPERATIVES and word not in context.capitalised


def _instruction_verb(word: str) -> bool:
    """An instruction verb, or its third person ("Returns", "Implies"): documentation opens descriptions with them."""
    lower = word.lower()
    verbs = _DESCRIPTION_VERBS
    return lower in verbs or (lower.endswith("s") and (lower[:-1] in verbs or lower.endswith("es") and lower[:-2] in verbs))


def _verb_follows(tokens: list[_Token], k: int) -> bool:
    nxt = tokens[k + 1] if k + 1 < len(tokens) else None
    return nxt is not None and nxt.kind == "lower" and nxt.start == tokens[k].end + 1 and nxt.text in _VERB_OBJECTS


def _is_layout_label(sentence: str, tokens: list[_Token], parts: list[int], context: NameContext) -> bool:
    """A heading or field label ("Data Set Characteristics:", "Technical Details", "Writing Database
    Migrations"): the run is its whole line (the extractor reads such a line as a sentence of its own) or opens
    it before a colon, and it is an action heading (a first word in -ing) or every word is a layout word, a word
    the text also writes in lower case, or a function word. A line naming something keeps a word that is none of these
    ("Aldermere University", "ONNX Runtime"); the document title is matched before and never reaches here."""
    start, end = tokens[parts[0]].start, tokens[parts[-1]].end
    if sentence[:start].strip(" #*-") or (sentence[end:].strip(" :.") and not sentence[end:].startswith(":")):
        return False  # neither its whole line nor a field label ("Number of Instances: 150")
    words = [tokens[k].text for k in parts]
    if len(words) >= 2 and _is_gerund(words[0], context):
        return True
    for word in words:
        lower = word.lower()
        if not word.isalpha():
            return False
        if lower in _FUNCTION_WORDS or lower in _CONNECTORS or lower in _LAYOUT_WORDS or lower in context.lowercase:
            continue
        if lower.endswith("s") and (lower[:-1] in _LAYOUT_WORDS or lower[:-1] in context.lowercase):
            continue
        return False
    return True


def _is_gerund(word: str, context: NameContext) -> bool:
    """"Writing", "Getting", "Disabling": an -ing form whose verb is an instruction verb or a word the text
    writes in lower case (so "Beijing" and "Reading" as a town are not, unless the text says "reading")."""
    lower = word.lower()
    if not lower.endswith("ing") or len(lower) <= 5:
        return False
    stem = lower[:-3]
    stems = {stem, stem + "e", stem[:-1] if len(stem) > 2 and stem[-1] == stem[-2] else stem}
    return lower in context.lowercase or any(x in _IMPERATIVES or x in context.lowercase for x in stems)


def _possessive_continues(tokens: list[_Token], k: int) -> bool:
    """"Men's Studies Press" and "St Paul's Cathedral" are one name; "Ghana's Kwame Nkrumah" is two.

    A name goes on past a possessive only when the capitalised words after it end in a head noun.
    """
    while k + 1 < len(tokens) and tokens[k + 1].kind == "cap" and tokens[k + 1].start == tokens[k].end + 1:
        k += 1
    return tokens[k].text.lower() in _GENERIC_HEADS


def _joins(word: str, tokens: list[_Token], parts: list[int], segment: int, nxt: int) -> bool:
    """Whether a lower-case word between capitalised tokens continues the name.

    "of" joins "University of Copenhagen" but not "Ron Hextall of the Philadelphia Flyers": after two or
    more capitalised words (or a second "of") it joins only when the words before it end in a head noun
    such as "Institute", "Bank" or "History". "and" joins only inside an "X of Y" name and only one more
    word ("College of Arts and Sciences"), "the" only epithets ("Alexander the Great").
    """
    last = tokens[parts[-1]].text.lower().rstrip(".")
    if word == "&":
        return True
    if word == "the":
        return tokens[nxt].text in _EPITHETS
    if word in ("of", "for"):
        if segment >= 2 or any(tokens[p].text in ("of", "for") for p in parts):
            return last in _OF_HEADS
        return word == "of" or last in _ORG_HEADS
    if word in ("on", "upon"):
        return last in _ORG_HEADS or last in _OF_HEADS
    if word == "and":
        if last in _GENERIC_HEADS:
            return False  # "Harvard University and Yale University" are two names
        after = nxt
        while after + 1 < len(tokens) and tokens[after + 1].kind == "cap" and tokens[after + 1].start == tokens[after].end + 1:
            after += 1
        if tokens[after].text.lower() in _GENERIC_HEADS:
            return True  # "Sinai and Palestine Campaign", "Saint Peter and Paul Cathedral"
        return after == nxt and any(tokens[p].text in ("of", "for") for p in parts)
    return word in _CONNECTORS


def _single_word_name(word: str) -> bool:
    """Whether one capitalised word may be a name: not a letter, title, generic head noun or unit."""
    if len(word.rstrip(".")) < 2 or word == "May":
        return False
    lower = word.lower().rstrip(".")
    if lower in _FUNCTION_WORDS or lower in _ABBREVIATIONS or lower in _PERSON_TITLES or lower in _NOT_NAMES:
        return False
    return not (lower in _GENERIC_HEADS and lower not in _SPECIFIC_HEADS)


def _bare(word: str) -> str:
    return word[:-2] if word.endswith(("'s", "\u2019s")) else word


# --- typing ------------------------------------------------------------------------------------------


def classify(name: str, sentence: str, start: int) -> str:
    """Rule-based entity type of a capitalised run from its head noun, its shape and the word before it.

    The head of "Treaty on the Functioning of the European Union" is "Treaty" (the last word before the
    first connector), so it is an event, not an organisation.
    """
    words = name.split()
    lower = [w.lower().strip(".,'") for w in words]
    after = sentence[start + len(name):start + len(name) + 40]
    cited = _CITED_INITIALS.match(after)
    if cited and cited.group(1).replace(" ", "") not in _PLACE_INITIALS and len(words) <= 2:
        return "person"  # "Fisher, R.A.", "Duda, R.O., & Hart, P.E.": a citation's surname
    place_after = _PLACE_AFTER.match(after)
    if place_after and place_after.group(1).lower() in _PLACES and len(words) <= 3 and words[0].lower() not in _ORG_FIRST:
        return "location"  # "Genoa, Italy", "Amherst, Massachusetts": an address
    cut = next((i for i, w in enumerate(lower) if w in ("of", "on", "for", "in") and i > 0), len(lower))
    heads = (lower[cut - 1], lower[-1]) if cut < len(lower) else (lower[-1],)
    first = lower[0]
    for head in heads:
        if head in _ORG_HEADS:
            return "organization"
        if head in _EVENT_HEADS or head in _EVENT_FIRST:
            return "event"
        if head in _LOCATION_HEADS:
            return "location"
    if (first in _ORG_FIRST and cut < len(lower)) or words[-1] in _COMPANY_SUFFIXES:
        return "organization"
    if (first in _LOCATION_FIRST and len(words) > 1) or all(w in _PLACES for w in lower):
        return "location"
    if len(words) > 1 and (first in _PERSON_TITLES or words[-1] in _NAME_SUFFIXES
                           or any(_INITIAL.fullmatch(w) for w in words[:-1])):
        return "person"
    before = sentence[max(0, start - 30):start].split()
    prev = before[-1].lower().strip(",(") if before else ""
    if 1 < len(words) <= 4 and all(w.isalpha() or "-" in w for w in words):
        if first in _GIVEN_NAMES or prev in _PERSON_CUES:
            return "person"
        if sentence[start + len(name):start + len(name) + 7].startswith((" (born", " (c.", " (b.")):
            return "person"
    if len(words) == 1 and name.isupper() and len(name) >= 2:
        return "organization"
    if prev in _LOCATION_PREPS:
        return "location"
    if prev in _PERSON_CUES:
        return "person"
    return "concept"


# --- extraction --------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Mention:
    key: str
    start: int
    end: int


_TITLE_HEAD = re.compile(r"^(\S+(?: \S+){0,2}) [—–] \S")
_MAN_PAGE_TITLE = re.compile(r"^([a-z][\w.+-]*)\([1-8]\)(?:\s|$)")


def _clean_title(title: str | None) -> str:
    """A passage title as an entity name: cleaned like the text, without a "(disambiguation)" suffix."""
    if not title:
        return ""
    cleaned = normalise_text(title).replace("`", "")
    page = _MAN_PAGE_TITLE.match(cleaned)
    if page:   # "git-rebase(1) Manual Page": a man page is about its command
        return page.group(1)
    head = _TITLE_HEAD.match(cleaned)
    if head:   # "bisect — Array bisection algorithm": the page is about its head
        cleaned = head.group(1)
    return re.sub(r"\s*\([^()]*\)$", "", cleaned).strip() or cleaned


def extract_offline(text: str, title: str | None = None) -> ChunkExtraction:
    """Entities and relations of ``text`` by deterministic rules; ``title`` names the subject entity.

    Same input, same output: ordering follows first mention, ties are broken by text position.
    """
    if not isinstance(text, str):
        raise TypeError(f"extract_offline expects text as str, got {type(text).__name__}; decode it first")
    title_name = _clean_title(title)
    units = read_units(text, code_names=True)
    sentences = [unit.text for unit in units]

    context = NameContext.of([unit.text for unit in units if unit.kind != "code line"], title_name)

    known_names = (title_name,) if title_name else ()
    entities: dict[str, dict] = {}
    order: list[str] = []
    per_sentence: list[list[_Mention]] = []
    for idx, sentence in enumerate(sentences):
        mentions: list[_Mention] = []
        if units[idx].kind == "code line":
            candidates = [Candidate(name, "concept", start, end) for name, start, end in code_line_names(sentence)]
        else:
            candidates = find_candidates(sentence, context, known_names, names_only=units[idx].kind == "heading")
        for cand in candidates:
            key = _key(cand.name)
            if not key or cand.type in LITERAL_TYPES:
                continue
            record = entities.get(key)
            if record is None:
                etype = cand.type or classify(cand.name, sentence, cand.start)
                record = {"name": cand.name, "type": etype, "sentences": [idx]}
                entities[key] = record
                order.append(key)
            elif record["sentences"][-1] != idx:
                record["sentences"].append(idx)
            mentions.append(_Mention(key, cand.start, cand.end))
        per_sentence.append(mentions)

    _type_coordinated_people(per_sentence, sentences, entities)
    aliases = _person_aliases(entities, order)
    if aliases:
        for mentions in per_sentence:
            for m in mentions:
                m.key = aliases.get(m.key, m.key)
        for short, full in aliases.items():
            entities[full]["sentences"] = sorted(set(entities[full]["sentences"]) | set(entities[short]["sentences"]))
            del entities[short]
        order = [k for k in order if k in entities]

    title_key = _key(title_name) if title_name else ""
    if title_key and title_key not in entities:
        entities[title_key] = {"name": title_name, "type": classify(title_name, title_name, 0), "sentences": []}
        order.insert(0, title_key)
    if title_key and entities[title_key]["type"] == "concept" and per_sentence:
        entities[title_key]["type"] = _title_type(sentences)

    definitions, structure = _structure(units, per_sentence, entities, title_key)
    out_entities = [
        entity_of(entities[k]["name"], entities[k]["type"],
                  definitions.get(k) or _describe(entities[k]["sentences"], sentences))
        for k in order
    ]
    relations = _relations(per_sentence, sentences, entities, title_key, units) + structure
    return ChunkExtraction(entities=out_entities, relations=relations)


DEFINES_STRENGTH = 9.0
"""A section's subject and a name its term lines define are as closely related as two adjacent mentions."""


def _structure(units: list[Unit], per_sentence: list[list[_Mention]], entities: dict[str, dict],
               title_key: str) -> tuple[dict[str, str], list[Relation]]:
    """What the page's structure says: each heading's subject (the first name in it, else its parent's, else the
    title's) defines the names of the term lines under it ("module bisect defines insort"), and a heading's subject
    sits in its parent's. A heading that is one name is defined by the sentence opening its section. The first name
    of a code line (``code_line_names``: the command, the package, the header) is one its section's subject uses.
    Returns the term names' definitions (the term line and the sentence after it:
    "`insort(a, x)`: Insert x in a in sorted order.") and those relations."""
    subject: dict[int, str] = {}
    definitions: dict[str, str] = {}
    best: dict[tuple[str, str], Relation] = {}

    def subject_of(section: int) -> str:
        return subject.get(section, title_key) if section >= 0 else title_key

    def relate(a: str, b: str, keywords: str, description: str) -> None:
        if a and b and a != b and a in entities and b in entities:
            pair = (a, b) if a < b else (b, a)
            best.setdefault(pair, relation_of(entities[a]["name"], entities[b]["name"], keywords, description,
                                              DEFINES_STRENGTH))

    for idx, unit in enumerate(units):
        keys = [m.key for m in per_sentence[idx] if m.key in entities]
        if unit.kind == "heading":
            parent = subject_of(unit.section)
            subject[idx] = keys[0] if keys else parent
            if keys:
                relate(parent, keys[0], "contains", unit.text)
            following = units[idx + 1] if idx + 1 < len(units) else None
            if (keys and following is not None and following.kind == "prose" and following.section == idx
                    and heading_name(unit.text)):
                # a heading that is one name ("PRAGMA cache_size", "X-Frame-Options") is defined, as a term line
                # is, by the sentence that opens its section
                definitions.setdefault(keys[0], _clip(f"{unit.text}: {following.text}"))
        elif unit.kind == "code line" and keys:
            # a command, import or header its section's code shows: the section's subject uses it
            relate(subject_of(unit.section), keys[0], "uses", unit.text)
        elif unit.kind == "term" and keys:
            following = units[idx + 1] if idx + 1 < len(units) else None
            definition = unit.text
            if following is not None and following.kind == "prose" and following.section == unit.section:
                definition = f"{unit.text}: {following.text}"
            definition = _clip(definition)
            for key in keys:
                definitions.setdefault(key, definition)
                relate(subject_of(unit.section), key, "defines", definition)
    return definitions, list(best.values())


def _clip(text: str) -> str:
    if len(text) <= DESCRIPTION_MAX_CHARS:
        return text
    cut = text.rfind(" ", 0, DESCRIPTION_MAX_CHARS)
    return text[:cut if cut > 0 else DESCRIPTION_MAX_CHARS] + "..."


_COORDINATION = re.compile(r"^(?:,\s*(?:and\s+)?|\s+and\s+|\s*&\s*)$")


def _type_coordinated_people(per_sentence: list[list[_Mention]], sentences: list[str],
                             entities: dict[str, dict]) -> None:
    """Names listed with a person ("Paul Dubois, Travis Oliphant and Reggie Dugard") are people too, when they
    are shaped like a personal name (2-3 capitalised words, no head noun) and were typed only by default."""
    for mentions, sentence in zip(per_sentence, sentences):
        changed = True
        while changed:
            changed = False
            for a, b in zip(mentions, mentions[1:]):
                if not _COORDINATION.match(sentence[a.end:b.start]):
                    continue
                ta, tb = entities[a.key]["type"], entities[b.key]["type"]
                for key, other in ((a.key, tb), (b.key, ta)):
                    record = entities[key]
                    if other == "person" and record["type"] in ("concept", "location") and personal_shape(record["name"]):
                        record["type"] = "person"
                        changed = True


def personal_shape(name: str) -> bool:
    """2-3 capitalised words with no head noun or place: shaped like a person's name."""
    words = name.split()
    return (2 <= len(words) <= 3 and all(w[:1].isupper() and w.replace("-", "").replace("'", "").isalpha() for w in words)
            and not any(w.lower() in _GENERIC_HEADS or w.lower() in _PLACES for w in words))


def _key(name: str) -> str:
    """Identity of a name within one chunk: case-, punctuation- and leading-article-insensitive."""
    key = _KEY_STRIP.sub(" ", name.casefold()).strip()
    if key.startswith("the "):
        key = key[4:]
    return key or (name if is_operator(name) else "")   # "->>": no word characters, but a name


def _person_aliases(entities: dict[str, dict], order: list[str]) -> dict[str, str]:
    """Map a lone surname or given name to the one multi-word name it abbreviates ("Curie" -> "Marie Curie").

    Only person names shaped like one (2-4 capitalised words, no connector) are targets, and only when
    exactly one of them ends or starts with the lone word.
    """
    by_part: dict[str, set[str]] = {}
    for key in order:
        record = entities[key]
        if record["type"] != "person" or not _PERSON_SHAPE.fullmatch(record["name"]):
            continue
        parts = key.split()
        for part in (parts[0], parts[-1]):
            by_part.setdefault(part, set()).add(key)
    aliases = {}
    for key in order:
        if " " in key or key not in by_part:
            continue
        targets = by_part[key]
        if len(targets) == 1 and entities[key]["type"] in ("concept", "person", "location"):
            aliases[key] = next(iter(targets))
    return aliases


def _title_type(sentences: list[str]) -> str:
    """Type a title entity from how its opening sentence describes it ("... was an American actor")."""
    match = _DEFINITION.search(sentences[0].lower()) if sentences else None
    if match:
        for word in match.group(1).split():
            if word in _PERSON_CUES:
                return "person"
            if word in _ORG_HEADS or word in ("company", "organization", "organisation"):
                return "organization"
            if word in _LOCATION_HEADS or word in ("country", "capital", "region", "neighborhood", "suburb"):
                return "location"
            if word in _WORK_NOUNS:
                return "work"
            if word in _EVENT_HEADS:
                return "event"
    return "concept"


_DEFINITION = re.compile(r"\b(?:is|was|are|were)\s+(?:an?|the)\s+((?:[\w-]+\s+){0,5}[\w-]+)")
_WORK_NOUNS = _WORDS["work_nouns"]


def _describe(sentence_ids: list[int], sentences: list[str]) -> str:
    """The first sentences mentioning an entity, trimmed: what the text says about it."""
    if not sentence_ids:
        return sentences[0][:DESCRIPTION_MAX_CHARS] if sentences else ""
    parts: list[str] = []
    size = 0
    for idx in sentence_ids[:2]:
        sentence = sentences[idx]
        if parts and size + len(sentence) + 1 > DESCRIPTION_MAX_CHARS:
            break
        parts.append(sentence)
        size += len(sentence) + 1
    text = " ".join(parts)
    if len(text) > DESCRIPTION_MAX_CHARS:
        cut = text.rfind(" ", 0, DESCRIPTION_MAX_CHARS)
        text = text[:cut if cut > 0 else DESCRIPTION_MAX_CHARS] + "..."
    return text


# words and numbers: a number (a date, an amount) between the verb and the mention keeps the prepositions
# before it out of the phrase ("founded in 1892 by" -> "founded by")
_GAP_WORD = re.compile(r"[A-Za-z][\w'-]*|\d[\w.,]*")


def relation_keywords(gap: str) -> str:
    """The verb phrase linking two mentions, from the words between them ("published monthly by the").

    The nearest verb-like word before the mention plus the prepositions right before it ("published
    by", "born in"); a copula keeps the noun it follows ("editor is"); short gaps are kept as they are.
    """
    words = [w.lower() for w in _GAP_WORD.findall(gap)]
    while words and words[-1] in _ARTICLES:
        words.pop()
    preps: list[str] = []
    while words and (words[-1] in _RELATION_PREPS or words[-1] in _ARTICLES):
        word = words.pop()
        if word not in _ARTICLES:
            preps.insert(0, word)
    verb_at = -1
    for j in range(len(words) - 1, -1, -1):
        word = words[j]
        if word in _VERB_HINTS or (len(word) > 4 and word.endswith("ed")):
            verb_at = j
            break
    if verb_at >= 0:
        phrase = [words[verb_at]]
        if words[verb_at] in _COPULAS:
            if verb_at > 0 and words[verb_at - 1] not in _FUNCTION_WORDS:
                phrase.insert(0, words[verb_at - 1])  # "editor is"
            phrase.extend([w for w in words[verb_at + 1:] if w not in _FUNCTION_WORDS][:2])  # "is sister publication"
        elif verb_at + 1 < len(words) and words[verb_at + 1] not in _FUNCTION_WORDS and len(words) - verb_at <= 3:
            phrase.append(words[verb_at + 1])
        return " ".join(phrase + preps[:2])
    content = [w for w in words if w not in _FUNCTION_WORDS]
    if content:
        return " ".join(content[-3:] + preps[:2])
    return " ".join(preps[:2])


def _strength(distance: int) -> float:
    """Closer mentions relate more strongly: 10 when adjacent, down to 1 about 36 words apart."""
    return round(max(1.0, 10.0 - distance / 4.0), 1)


def _relations(per_sentence: list[list[_Mention]], sentences: list[str], entities: dict[str, dict],
               title_key: str, units: list[Unit] | None = None) -> list[Relation]:
    """Co-occurrence relations: neighbours within a sentence, the sentence subject, and the title.

    Each entity links to its next ``RELATION_NEIGHBOURS`` mentions and the sentence's first mention to
    all others, so a sentence of n mentions yields O(n) pairs. A pair seen in several sentences keeps
    its strongest (closest) occurrence; keywords are read only for the pairs that are kept.
    """
    # pair -> (strength, source key, target key, sentence index, gap pieces)
    best: dict[tuple[str, str], tuple[float, str, str, int, tuple[str, ...]]] = {}

    def add(a: str, b: str, idx: int, pieces: tuple[str, ...], words: int) -> None:
        if a == b:
            return
        pair = (a, b) if a < b else (b, a)
        strength = _strength(words)
        current = best.get(pair)
        if current is None or strength > current[0]:
            best[pair] = (strength, a, b, idx, pieces)

    def between(sentence: str, mentions: list[_Mention], i: int, j: int, start: int | None = None) -> tuple[tuple[str, ...], int]:
        """Text from mention i (or offset ``start``) to mention j, without the mentions in between."""
        cursor = mentions[i].end if start is None else start
        pieces = []
        for m in mentions[(i + 1 if start is None else 0):j]:
            if m.start >= cursor:
                pieces.append(sentence[cursor:m.start])
                cursor = m.end
        pieces.append(sentence[cursor:mentions[j].start])
        origin = mentions[i].end if start is None else start
        return tuple(pieces), sentence.count(" ", origin, mentions[j].start)

    for idx, mentions in enumerate(per_sentence):
        if units is not None and units[idx].kind == "heading":
            continue   # a heading relates its name to the section's (``_structure``), not its words to each other
        sentence = sentences[idx]
        mentions = [m for m in mentions if m.key in entities]
        n = len(mentions)
        for i in range(n):
            for j in range(i + 1, min(n, i + 1 + RELATION_NEIGHBOURS)):
                add(mentions[i].key, mentions[j].key, idx, *between(sentence, mentions, i, j))
        for j in range(RELATION_NEIGHBOURS + 1, n):
            add(mentions[0].key, mentions[j].key, idx, *between(sentence, mentions, 0, j))
        if title_key and (idx < TITLE_LEAD_SENTENCES or _opens_with_pronoun(sentence)):
            at = next((i for i, m in enumerate(mentions) if m.key == title_key), -1)
            for j, m in enumerate(mentions):
                if m.key == title_key:
                    continue
                if 0 <= at < j:
                    add(title_key, m.key, idx, *between(sentence, mentions, at, j))
                elif at < 0:
                    pieces, _ = between(sentence, mentions, j, j, mentions[j - 1].end if j else 0)
                    add(title_key, m.key, idx, pieces, sentence.count(" ", 0, m.start))

    relations = []
    for strength, a, b, idx, pieces in best.values():
        relations.append(relation_of(entities[a]["name"], entities[b]["name"], relation_keywords(" ".join(pieces)),
                                     sentences[idx], strength))
    return relations


def _opens_with_pronoun(sentence: str) -> bool:
    """Sentences opening "It ...", "He ...", "The journal ..." usually speak about the passage subject."""
    match = _FIRST_WORD.match(sentence)
    if not match:
        return False
    word = match.group(1).lower()
    if word != "the":
        return word in _PRONOUN_OPENERS
    rest = sentence[match.end():].lstrip()
    return bool(rest) and rest[0].islower()
