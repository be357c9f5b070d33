"""Question keywords split the LightRAG/PathRAG way: low-level (specific) and high-level (thematic).

Low-level keywords pick entity nodes (names, titles, dates, amounts); high-level keywords match
relations and themes ("first president", "published"). ``Keywords`` is also the instructor response
model of the LLM keyword extraction, so its field descriptions are prompt text. The offline extractor
reuses the entity candidate finder of ``offline_extraction`` and a stopword-split phrase chunker:
deterministic, ordered by salience, deduplicated case-insensitively.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from pathrag_pipeline.index.offline_extraction import Candidate, NameContext, find_candidates, normalise_text


class Keywords(BaseModel):
    low_level: list[str] = Field(
        default_factory=list,
        description="Specific entities and details the question names: people, organisations, places, titles, "
                    "dates, numbers, exact terms. Most specific first.",
    )
    high_level: list[str] = Field(
        default_factory=list,
        description="Overarching concepts and themes the question is about: relation types, roles, categories "
                    "(e.g. 'first president', 'publisher', 'birthplace'). Most salient first.",
    )


class NamedEntities(BaseModel):
    """The JSON object of NeuroPath's key-entity prompt (its Figure 13): the named entities of the question."""

    named_entities: list[str] = Field(default_factory=list)


# Words that carry no content in a question: wh-words, auxiliaries, pronouns, determiners, prepositions.
_STOPWORDS = frozenset("""
a an the this that these those what which who whom whose when where why how is was are were be been being
am do does did done has have had having can could will would shall should may might must of in on at by for
from with as to into onto upon about above after before during since until while between among through
under over within without against across along around near and or but nor so yet if then than also too very
it its he his him she her they them their we our you your i me my there here not no yes any some all each
every both either neither such own same other another many much more most few less least only just still
even ever also again named called known kind type sort one ones something someone anyone thing things way
did does do much many long often old tell give find name list
""".split())
_PHRASE_WORD = re.compile(r"[^\W_][\w'\u2019&.-]*")
_MAX_PHRASE_WORDS = 4
_POSSESSIVE_WORD = re.compile(r"['\u2019]s? ([a-z][\w-]*)")


def extract_keywords_offline(question: str) -> Keywords:
    """Low-level and high-level keywords of ``question`` by rules, for use without an LLM.

    Low level: entity candidates (names, quoted titles, acronyms, dates) in order of appearance, then
    a possessive name with what it owns ("Hello Love performer"); if the question names nothing (e.g. it
    is all lower case), its longest content phrases. High level: content phrases that are not names
    ("first president", "association", "published"), longer phrases first, then their single words.
    """
    if not isinstance(question, str):
        raise TypeError(f"extract_keywords_offline expects the question as str, got {type(question).__name__}")
    text = normalise_text(question)
    if not text:
        return Keywords()
    candidates = find_candidates(text, NameContext.of([text]))
    names = [c.name for c in candidates]

    masked = list(text)
    for c in candidates:
        masked[c.start:c.end] = ["\0"] * (c.end - c.start)
    phrases = _content_phrases("".join(masked))
    name_phrases = _phrases_with_names(text, candidates)

    low = _dedupe(names + name_phrases)
    if not low:
        low = _dedupe(sorted(phrases, key=len, reverse=True)[:3])
    single_words = [w for p in phrases if " " in p for w in p.split()]
    high = _dedupe(sorted(phrases, key=lambda p: -len(p.split())) + single_words)
    low_keys = {k.casefold() for k in low}
    high = [h for h in high if h.casefold() not in low_keys]
    return Keywords(low_level=low, high_level=high)


def _content_phrases(text: str) -> list[str]:
    """Runs of content words between stopwords, punctuation and masked names, in order."""
    phrases: list[str] = []
    current: list[str] = []
    last_end = 0
    for match in _PHRASE_WORD.finditer(text):
        word = match.group().strip(".'\u2019")
        gap = text[last_end:match.start()]
        last_end = match.end()
        if current and (gap.strip() or "\0" in gap):
            phrases.append(" ".join(current))
            current = []
        lower = word.lower()
        if not word or lower in _STOPWORDS or "\0" in word or len(word) < 2 and not word.isdigit():
            if current:
                phrases.append(" ".join(current))
                current = []
            continue
        current.append(lower if not word.isupper() else word)
        if len(current) == _MAX_PHRASE_WORDS:
            phrases.append(" ".join(current))
            current = []
    if current:
        phrases.append(" ".join(current))
    return phrases


def _phrases_with_names(text: str, candidates: list[Candidate]) -> list[str]:
    """A possessive name with what it owns: "Hello Love's performer" -> "Hello Love performer"."""
    out = []
    for c in candidates:
        match = _POSSESSIVE_WORD.match(text, c.end)
        if match and match.group(1).lower() not in _STOPWORDS:
            out.append(f"{c.name} {match.group(1).lower()}")
    return out


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        item = " ".join(item.split())
        key = item.casefold()
        if item and key not in seen:
            seen.add(key)
            out.append(item)
    return out
