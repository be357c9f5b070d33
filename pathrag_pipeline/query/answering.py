"""Answers: the LLM's, or offline an extractive one that leads with the sentence stating the asked fact.

Without an LLM the pipeline still answers, honestly: it quotes sentences of the retrieved evidence and says that it
is an extract rather than a generated answer. It quotes few, and the one that answers first:

1. **What is asked** (``QuestionProfile``): the question word and the noun after it give the kind of fact that
   answers ("how many" a number, "when" or "which version" a date or version, "who" a name, "which option" or
   "which function" a code name, "which river" a name holding "river").
2. **Candidates**: the sentences of the evidence's chunks, headings and code blocks left out; a definition's term
   line is read with the sentence after it ("`--autosquash`: When the commit log message begins ...").
3. **Score**: the question's terms a sentence shares, weighted by how rare they are among the candidates (so
   "the" and the question's own entity count less than "born" or "fixup"), a bonus when it holds a fact of the
   asked kind that the question does not already hold, and, for PathRAG, a bonus for stating a kept path's
   final hop (the path is read from the end the question names: its final hop is where it leaves what the
   question knows).
4. **Chain**: when the best sentence holds no fact of the asked kind, a name it brings (not in the question) is
   followed to sentences that mention it (or open with a pronoun in a passage about it), up to ``MAX_HOPS``
   times, until one holds such a fact: "the first director ... is Agnes Morrow" -> "She was born in ... Hesketh
   Mill" -> "Hesketh Mill ... on the River Lode".
5. **Answer**: the answering sentence first, then the sentences that led to it, each marked with a number that the
   closing "Sources:" line resolves to its document and section (so the sentences come first, not their places);
   no code blocks, at most ``MAX_SENTENCE_TOKENS`` tokens a sentence, ``max_sentences`` in all. The same numbers
   come with the answer as data (``Answer.citations``: each number's document, section, the chunks its sentences
   came from and the sentences as quoted), so a page or a program shows each [n] with the passage it quotes
   rather than matching the "Sources:" text against the retrieved passages (their order is retrieval's, not the
   answer's: a page once showed passage [1] of one document under an answer citing another as [1]).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pathrag_pipeline.index.identifiers import CODE_SPAN, bare_names, code_name
from pathrag_pipeline.index.offline_extraction import NameContext, classify, find_candidates, personal_shape, read_units
from pathrag_pipeline.llm.client import LLMClient, Usage
from pathrag_pipeline.llm.embedding import STOPWORDS
from pathrag_pipeline.query.params import EXTRACTIVE_LABEL
from pathrag_pipeline.query.prompting import Prompt, clip
from pathrag_pipeline.text.structure import SECTION_SEPARATOR, plain
from pathrag_pipeline.text.tokenizer import truncate_to_tokens

NO_EVIDENCE = "no sentence of the retrieved sources mentions the question's terms."
DEFAULT_MAX_SENTENCES = 4   # three lost a gold answer on 3 of musique-100's questions (29 -> 26 quoted anywhere)
MAX_SENTENCE_TOKENS = 60  # table rows and run-on lines come out of the splitter as one "sentence"
MAX_HOPS = 3
MAX_DEFINITION_TOKENS = 90
MAX_ANTECEDENT_WORDS = 40   # a longer sentence before "This ..." is more than the subject "this" refers to
CHAINED = frozenset({"name", "person"})
"""Kinds of fact a chain of sentences is followed for: a name is reached through names ("the director of X" ->
"born in Y" -> "Y on the River Z"); a number, date or code name is stated where its subject is (a setting's
default in its definition), and a chain through names only wanders off."""
TYPED_SHARE = 0.5
"""Else the most relevant sentence holding such a fact leads, if it is at least this share as relevant as the
best."""
DEFINITION_SENTENCES = 3
MAX_DEFINITION_UNITS = 12
HOP_BONUS = 0.25
"""Relevance added to a sentence stating a kept path's final hop (another hop of it: half as much)."""
NAME_BONUS = 0.25
"""... to one naming a code name of the question (twice that when its term line defines it)."""
PATH_BONUS = 0.15
"""... to one naming an entity of the kept paths that the question does not name (the first ``PATH_NAMES`` of them,
in the paths' order of reliability)."""
PATH_NAMES = 20
RANK_PRIOR = 0.01
"""... and taken from one per rank of the evidence it came from (a tie-break: retrieval ranked the passages)."""

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)*\b|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|"
                     r"eleven|twelve|twenty|thirty|hundred|thousand|million|billion|once|twice|double|single)\b",
                     re.IGNORECASE)
_YEAR_OR_VERSION = re.compile(r"(?<![\w.])(?:1[5-9]\d\d|20\d\d|\d+\.\d+(?:\.\d+)*)\b")
_MONTH = re.compile(r"\b(?:January|February|March|April|May|June|July|August|September|October|November|December)\b")
_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*(?:\s+(?:of|the|de|von|van|and)?\s*[A-Z][\w'’-]*)*")
# A sentence opening with one of these speaks of the previous sentence's subject: it also counts that one's terms.
# a chunk's first line opening so was cut from its sentence: punctuation, or a plain lower-case word not naming a
# manual page ("git - the stupid content tracker", "git-rebase - Reapply commits": a document's own first line)
_CUT_OPENING = re.compile(r"[,;:.)\]]|[a-z]+\b(?!-)(?! [-\u2013\u2014] )")
_ANAPHORIC_OPENER = re.compile(r"^(?:This|These|It|They|Such)\b")
_PRONOUN_OPENER = re.compile(r"^(?:He|She|It|They|Its|His|Her|Their|This|The (?:module|function|command|option|"
                             r"company|institute|university|journal|bridge|river|village|town|city))\b")

# The noun after "which"/"what" that asks for a code name.
_CODE_NOUNS = frozenset("""
option options flag flags switch argument arguments parameter parameters function functions method methods class
classes module modules command commands subcommand setting settings variable variables pragma pragmas constant
constants macro macros keyword keywords directive directives role roles builder builders extension extensions
key keys field fields attribute attributes property properties type types file files directory directories
statement statements clause clauses operator operators hook hooks event events api apis call calls tool tools
program programs utility utilities library libraries package packages format formats config
configuration env environment table tables column columns view views index indexes exception exceptions error
errors code codes header headers extension theme themes backend backends mode modes
""".split())
_NUMBER_NOUNS = frozenset("""
number count size length limit maximum minimum max min default port amount percentage percent many much
long large timeout depth width height bytes characters digits times offset
largest smallest highest lowest longest shortest greatest fewest biggest
""".split())
_DATE_NOUNS = frozenset("year version release date century decade month day".split())
_PATH = re.compile(r"^[$~.]?[\w.$-]*(?:/[\w.*$<>-]+)+/?$")
_ENV_VAR = re.compile(r"(?<![\w$])[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")
_FILE_NAME = re.compile(r"\w\.(?:conf|cfg|ini|txt|json|ya?ml|toml|py|sh|db|sqlite|log|lock|html?|md|rst|xml|csv)$")
_LETTERS_DIGITS = re.compile(r"(?<![\w.-])[a-z]{2,}\d+(?![\w-])")
# Words of one family that questions and answers use for each other ("birthplace" - "born").
_FAMILIES = [
    {"birthplace", "born", "birth"}, {"death", "died", "dies", "die"}, {"founder", "founded", "founding", "foundation"},
    {"author", "wrote", "written", "writer"}, {"director", "directed", "directs"}, {"location", "located", "lies"},
    {"creator", "created", "creates", "create"}, {"designer", "designed", "design"}, {"builder", "built", "build"},
    {"default", "defaults", "defaulting"}, {"inventor", "invented"}, {"owner", "owned", "owns"},
    {"publisher", "published"}, {"editor", "edited"}, {"successor", "succeeded"}, {"predecessor", "preceded"},
    {"remove", "removed", "removes", "delete", "deleted", "deletes"}, {"add", "added", "adds"},
    {"maximum", "max", "largest", "highest", "greatest"}, {"minimum", "min", "smallest", "lowest", "fewest"},
    {"raise", "raised", "raising", "increase", "increased", "increasing"},
]
_DEFAULT_WORDS = frozenset({"default", "defaulting"})   # stems of the family's words
_FAMILY_OF = {word: family for family in _FAMILIES for word in family}
_QUESTION_WORDS = frozenset("which what who whom whose when where how why".split())
_MAIN_QUESTION_WORDS = frozenset("which what who whom whose how".split())
_UNIT = re.compile(r"\b(?:milli|micro|nano|kilo|mega|giga)?(?:seconds?|bytes?)\b|\b(?:minutes?|hours?|days?|pages?|"
                   r"kilobytes?|megabytes?|KB|MB|GB|kB|ms|characters?|bits?|blocks?|rows?|percent)\b", re.IGNORECASE)
_UNSET = re.compile(r"\b(?:no|not|without|unless)\b[^?.]*\b(?:configured|set|specified|given|provided|chosen)\b",
                    re.IGNORECASE)
# a reference's number is no quantity: "see Chapter 17", "Section 9.4", a manual page's section ("git-gc(1)",
# "linkgit:git-log[1]")
_REFERENCE_NUMBER = re.compile(r"\b(?:chapter|section|table|figure|example|appendix|part|step|rfc|page|line|note)s?"
                               r"\s+[\d.]+|(?<=\w)[(\[]\d[a-z]?[)\]]", re.IGNORECASE)


@dataclass(frozen=True)
class Citation:
    """One numbered source of an extractive answer: the [n] its quoted sentences are marked with."""

    n: int
    document: str                 # the document's id (its path in the folder; a JSONL record: path#id)
    section: str                  # the heading path the sentences are under ("" at the top of the document)
    source: str                   # "document > section", as the answer's "Sources:" line writes it
    chunk_ids: tuple[str, ...]    # the chunks the sentences were quoted from, in the answer's order
    quotes: tuple[str, ...]       # the sentences as the answer quotes them

    def to_dict(self) -> dict:
        return {"n": self.n, "document": self.document, "section": self.section, "source": self.source,
                "chunk_ids": list(self.chunk_ids), "quotes": list(self.quotes)}


@dataclass(frozen=True)
class Answer:
    text: str
    kind: str                 # 'llm' or 'extractive'
    usage: Usage
    found: bool = True        # extractive: a sentence sharing a word with the question was quoted
    raw: str | None = None    # the model's reply as it came, when ``text`` was cut from it (``short_answer``)
    citations: tuple[Citation, ...] = ()   # extractive: what each [n] of ``text`` stands for (an LLM's: none)


@dataclass(frozen=True)
class Evidence:
    """One unit of retrieved evidence, best first: the entities it is about and the chunks it came from."""

    entity_names: Sequence[str]
    chunk_ids: Sequence[str]
    path: bool = False        # entity_names are a path's nodes in order: consecutive names are its hops


# ``response="short"``: the answer alone, as QA benchmarks score it (exact match, token F1). Appended to the
# system message, so the context and its budget are the same as for a default answer.
SHORT_ANSWER = ("Reply with the answer alone: a short phrase such as a name, a place, a date or a number, "
                "with no explanation and no full sentence.")


# What the short answer's post-processing is (``short_answer``): part of an evaluation's answer key, so answers
# cut by another rule, or not cut at all, are never reused as if cut by this one.
SHORT_ANSWER_VERSION = "span-2"
# A question answered by yes or no: its first word is an auxiliary verb ("Is ...", "Did ...", "Were both ...").
_YES_NO_QUESTION = re.compile(r"^\s*(is|are|was|were|do|does|did|can|could|has|have|had|will|would|should|may|might|"
                              r"must|shall|am)\b", re.IGNORECASE)
_ANSWER_LABEL = re.compile(r"^\s*(?:\**(?:final\s+)?answer\**\s*[:\-]\s*|the\s+answer\s+is\s*:?\s+)", re.IGNORECASE)
# "Yes," / "No." opening a reply; not "No such file ...", where "No" is part of the answer
_YES_NO_LEAD = re.compile(r"^\s*(yes|no)\s*(?:[,.;:!]+\s*|$)", re.IGNORECASE)
# where a reply's first sentence ends: a full stop, "!" or "?" and a space before a capital or a digit (not "U.S. Army")
_SENTENCE_END = re.compile(r"(?<!\b[A-Z])(?<!\b[A-Z][a-z])[.!?](?=\s+[A-Z0-9])")


def short_answer(reply: str, question: str) -> str:
    """The answer span of a reply asked for the answer alone (``response="short"``); our post-processing, not in
    the papers. Small readers add to it: "Yes, Christopher Nolan and ..." where a name was asked, "Answer: 1912.",
    a second sentence of explanation. Kept: the first line, without an "Answer:" label; for a question not answered
    by yes or no, without a leading "Yes,"/"No,"; for one that is, "yes" or "no" alone when the reply opens with it;
    the first sentence when the reply goes on with another; no closing full stop or surrounding quotes and bold
    marks. A reply with nothing left after the cut is returned as it came."""
    text = next((line.strip() for line in reply.strip().splitlines() if line.strip()), "")
    text = _ANSWER_LABEL.sub("", text, count=1)
    lead = _YES_NO_LEAD.match(text)
    if lead:
        if _YES_NO_QUESTION.match(question):
            return lead.group(1).lower()
        text = text[lead.end():]
    end = _SENTENCE_END.search(text)
    if end:
        text = text[:end.start()]
    text = text.strip().strip("*_`\"'“”‘’ ").rstrip(".").strip()
    return text or reply.strip()


def answer_with_llm(client: LLMClient, prompt: Prompt, response: str = "default", question: str = "") -> Answer:
    """The LLM's answer to ``prompt``; with ``response="short"`` asked for the answer alone and cut to its span
    (``short_answer``), the reply as it came kept in ``Answer.raw`` when the cut changed it."""
    messages = prompt.messages()
    if response == "short":
        messages[0] = {"role": "system", "content": f"{prompt.system}\n\n{SHORT_ANSWER}"}
    result = client.complete(messages, stage="answer")
    text = result.text.strip()
    if response != "short":
        return Answer(text, "llm", result.usage)
    cut = short_answer(text, question)
    return Answer(cut, "llm", result.usage, raw=text if cut != text else None)


def _stem(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


def _terms(text: str) -> set[str]:
    """Content words, casefolded, with a light plural strip so 'universities' meets 'university'."""
    out: set[str] = set()
    for word in _WORD.findall(text.casefold()):
        if len(word) < 3 or word in STOPWORDS:
            continue
        out.add(_stem(word))
    return out


def mentions(sentence_folded: str, name: str) -> bool:
    """Whether a casefolded sentence names ``name`` as a whole phrase (not inside a longer word)."""
    name = name.casefold().strip()
    return bool(name) and re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", sentence_folded) is not None


# ---- what is asked --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class QuestionProfile:
    """The kind of fact that answers a question: "number", "date", "code", "value" (a number or a code name),
    "person", "place" (for "where": a path or file name, or a name not a person's), "name" (a name holding
    ``focus``, or any name) or "" (anything new)."""

    expects: str
    focus: str = ""


def question_profile(question: str) -> QuestionProfile:
    words = [w.casefold() for w in _WORD.findall(question)]
    if not words:
        return QuestionProfile("")
    # the question's own word: "which" of "When several branches are merged, which strategy ...", not the "when" of
    # its clause; "when" or "where" only in a question with no other
    lead = next((i for i, w in enumerate(words) if w in _MAIN_QUESTION_WORDS),
                next((i for i, w in enumerate(words) if w in _QUESTION_WORDS), 0))
    wh = words[lead]
    after = [w for w in words[lead + 1:lead + 6] if w not in STOPWORDS and w not in ("does", "did", "do", "can")]
    if wh == "how" and len(words) > lead + 1 and words[lead + 1] in ("many", "much", "long", "large", "big", "old"):
        return QuestionProfile("number")
    if wh == "when":
        return QuestionProfile("date")
    if wh in ("who", "whom", "whose"):
        return QuestionProfile("person")
    if wh in ("which", "what"):
        if after and _stem(after[0]) in ("unit", "units"):
            return QuestionProfile("unit")
        # the noun right after the question word, up to 3 words: its head is its last noun with a kind ("what cookie
        # header size ...": a size, a number; not a header)
        phrase: list[str] = []
        for word in words[lead + 1:lead + 4]:
            if word in STOPWORDS or word in ("does", "did", "do", "can"):
                break
            phrase.append(word)
        head = next((w for w in reversed(phrase) if _kind_of(w)), None)
        if head is not None:   # its focus: the phrase's first word of that kind ("environment variable")
            kind = _kind_of(head)
            return QuestionProfile(kind, _stem(next(w for w in phrase if _kind_of(w) == kind)))
        for word in after[:3]:
            kind = _kind_of(word)
            if kind:
                return QuestionProfile(kind, _stem(word))
        if after:
            return QuestionProfile("name", _stem(after[0]))
    if wh == "where":
        return QuestionProfile("place")
    return QuestionProfile("")


def _kind_of(word: str) -> str:
    """The kind of fact a noun after "which"/"what" asks for, or "" for a noun of no kind."""
    stem = _stem(word)
    if stem in _DATE_NOUNS or word in _DATE_NOUNS:
        return "date"
    if word in _NUMBER_NOUNS or stem in _NUMBER_NOUNS:
        return "number"
    if stem == "value":   # "what value ...": a number ("0.05") or a literal or name ("`utf-8`", "`auto`")
        return "value"
    if word in _CODE_NOUNS or stem in _CODE_NOUNS:
        return "code"
    return ""


def _code_names(sentence: str) -> set[str]:
    """Code names a sentence writes: code spans (a path in one too: "`$GIT_DIR/info/exclude`"), bare technical names
    (``index/identifiers.py``) and names joining letters and digits ("unicode61", "fts5")."""
    spans = CODE_SPAN.findall(sentence)
    names = {code_name(span) or (span.strip("`") if _PATH.match(span.strip("`")) else None) for span in spans}
    rest = CODE_SPAN.sub(" ", sentence) if spans else sentence
    names.update(name for name, _, _ in bare_names(rest))
    names.update(_LETTERS_DIGITS.findall(rest))
    names.discard(None)
    return {n.casefold() for n in names}


def holds_fact(sentence: str, profile: QuestionProfile, question: str) -> int:
    """How surely ``sentence`` holds a fact of the asked kind that the question does not already hold: 2 surely
    (a number, a date, a code name, a person's name, a name holding the asked noun: "River Lode" for "which river"),
    1 loosely (a name in a sentence that uses the asked noun: "the village of Hesketh Mill"), 0 not."""
    asked = question.casefold()
    if profile.expects == "number":   # not a reference's number: "see Chapter 17", "Section 9.4"
        return 2 * any(m.group() not in question for m in _NUMBER.finditer(_REFERENCE_NUMBER.sub(" ", sentence)))
    if profile.expects == "date":
        return 2 * (any(m.group() not in question for m in _YEAR_OR_VERSION.finditer(sentence))
                    or any(m.group() not in question for m in _MONTH.finditer(sentence)))
    if profile.expects == "code":
        names = [name for name in _code_names(sentence) if name not in asked]
        if profile.focus == "environment" and names:
            # "which environment variable": a name shaped like one (GIT_NAMESPACE), not any code name
            return 2 if _ENV_VAR.search(CODE_SPAN.sub(lambda m: m.group().strip("`"), sentence)) else 1
        return 2 * bool(names)
    if profile.expects == "place":
        # "where ...?" in documentation: a file or a folder (a path, a file name) or a place's name (any name not
        # a person's nor a code name: the extractor's place type misses many)
        code = _code_names(sentence)
        return 2 * (any("/" in name or _FILE_NAME.search(name) for name in code if name not in asked)
                    or any(kind != "person" and name.casefold() not in code and not name.startswith("-")
                           for name, kind in _typed_names(sentence) if name.casefold() not in asked))
    if profile.expects == "value":
        return max(holds_fact(sentence, QuestionProfile(kind), question) for kind in ("number", "code"))
    typed = [(name, kind) for name, kind in _typed_names(sentence) if name.casefold() not in asked]
    if profile.expects == "person":
        # a person's name, or a name shaped like one that is not in capitals ("POSTGRES Berkeley" is not)
        return 2 * any(kind == "person" or (kind == "concept" and personal_shape(name) and not any(
            len(word) > 2 and word.isupper() for word in name.split())) for name, kind in typed)
    if profile.expects == "unit":
        return 2 * bool(_UNIT.search(sentence))
    if profile.expects == "name" and profile.focus:
        if any(profile.focus in _terms(name) for name, _ in typed):
            return 2
        folded = sentence.casefold()
        # the name right before or after the asked noun ("a PENDING lock", "the octopus strategy", "the default
        # tokenizer (unicode61)"), or a term whose definition uses the noun ("`octopus`: ... the default merge
        # strategy ...")
        near = [name for name, _ in typed] + [name for name in _code_names(sentence) if name not in asked]
        if any(re.search(rf"\b{re.escape(name.casefold())}\W+{profile.focus}|{profile.focus}\w*\W+(?:\w+\W+)?"
                         rf"{re.escape(name.casefold())}\b", folded) for name in near):
            return 2
        term, colon, definition = sentence.partition(": ")
        if colon and _code_names(term) and profile.focus in _terms(definition):
            return 2
        return int(bool(typed) and profile.focus in _terms(CODE_SPAN.sub(" ", sentence)))
    if profile.expects == "name":   # "where ...?" in documentation: a file or a path as often as a place
        return 2 * (bool(typed) or any(name not in asked for name in _code_names(sentence)))
    return 2 * (bool(typed) or bool(_NUMBER.search(sentence)) or bool(_code_names(sentence)))


def _typed_names(sentence: str) -> list[tuple[str, str]]:
    """The names the offline extractor finds in a sentence, with their types (dates and amounts left out)."""
    out = []
    for candidate in find_candidates(sentence, NameContext()):
        if candidate.type in ("date", "other"):
            continue
        out.append((candidate.name, candidate.type or classify(candidate.name, sentence, candidate.start)))
    return out


# ---- candidates -----------------------------------------------------------------------------------------------

@dataclass
class _Candidate:
    text: str
    chunk: str
    section: str
    subject: str              # what its passage is about (its title or first heading), for pronoun openers
    unit: int                 # rank of the evidence unit it came from (0: best)
    order: int                # position among all candidates
    terms: set[str] = field(default_factory=set)
    folded: str = ""
    hop: int = 2              # 0: states a path's final hop, 1: another hop, 2: none
    context: set[str] = field(default_factory=set)   # terms of the sentence "This ..." refers to
    before: str = ""          # the line right before it in its section (a short one or code too), if any
    after: str = ""           # the line right after it in its section, if any


@functools.lru_cache(maxsize=1024)
def _sentences(text: str) -> tuple[tuple[str, str, list[str], str, bool], ...]:
    """(sentence, section path, definition, antecedent, is code) of chunk text: a term line comes with the paragraph
    defining it (see ``_definition``), whose sentences are candidates of their own too; other sentences with none; a
    sentence opening "This ..." comes with the one before it, whose subject "this" is. A short code block is there
    as a line of its own (is code), never a candidate, only the neighbour of the line before or after it."""
    units = read_units(text, code=True)
    out: list[tuple[str, str, list[str], str, bool]] = []
    first = next((i for i, unit in enumerate(units) if unit.kind not in ("heading", "code")), None)
    read = [u for u in units if u.kind != "code"]   # what the sentences below read around: code lines are no prose
    at_read = {id(u): k for k, u in enumerate(read)}
    for i, unit in enumerate(units):
        if unit.kind == "heading":
            continue
        if i == first and unit.kind == "prose" and _CUT_OPENING.match(unit.text):
            # the chunk's window opened mid-sentence ("organization on GitHub allows ..." lost "The Pallets-Eco"):
            # a fragment without its subject; the chunk before holds the sentence whole (windows overlap)
            continue
        path: list[str] = []
        at = unit.section
        while at >= 0:
            path.append(plain(units[at].text))
            at = units[at].section
        section = SECTION_SEPARATOR.join(reversed(path))
        if unit.kind == "code":
            out.append((unit.text, section, [], "", True))
            continue
        k = at_read[id(unit)]
        if unit.kind == "term":
            following = read[k + 1] if k + 1 < len(read) else None
            if following is not None and following.kind == "prose" and following.section == unit.section:
                paragraph = []   # its prose up to the next term or heading: a definition may hold several paragraphs
                for later in read[k + 1:k + 1 + MAX_DEFINITION_UNITS]:
                    if later.kind != "prose" or later.section != unit.section:
                        break
                    paragraph.append(later.text)
                out.append((unit.text, section, paragraph, "", False))
            continue
        before = read[k - 1] if k else None
        if (_ANAPHORIC_OPENER.match(unit.text) and before is not None and before.kind == "prose"
                and before.section == unit.section and len(before.text.split()) <= MAX_ANTECEDENT_WORDS):
            # "This form ... requires an ACCESS EXCLUSIVE lock": its terms include the previous sentence's, which
            # says what "this" is ("VACUUM FULL rewrites ..."); quoted alone (quoting both would push the fact later)
            out.append((unit.text, section, [], before.text, False))
            continue
        out.append((unit.text, section, [], "", False))
    return tuple(out)   # memoised: a service or an evaluation reads the same passages for many questions


def _definition(term: str, paragraph: list[str], wanted: set[str], profile: QuestionProfile, question: str) -> str:
    """A term with its definition: the paragraph's first sentence, and the sentences that hold a fact of the asked
    kind or share the most question terms (up to ``DEFINITION_SENTENCES`` in all, in their order), within
    ``MAX_DEFINITION_TOKENS``: "`gc.auto`: When there are approximately more than this many loose objects ... The
    default value is 6700." for "... the default ...?"."""
    asks_default = "default" in wanted

    def weight(i: int) -> tuple[int, bool, int, int]:
        terms = _terms(paragraph[i])
        # "... by default?": documentation states a default in a sentence saying so ("The default is 128MB.")
        return (holds_fact(paragraph[i], profile, question) if profile.expects else 0,
                asks_default and bool(terms & _DEFAULT_WORDS), len(terms & wanted), -i)

    shared = sorted(range(1, len(paragraph)), key=weight, reverse=True)
    telling = [i for i in shared if any(weight(i)[:3])][:DEFINITION_SENTENCES - 1]
    # the sentences that answer first ("The default is 128MB."), then the definition's first sentence
    keep = [i for i in telling if weight(i)[0] == 2] + [0] + [i for i in telling if weight(i)[0] != 2]
    return f"{term}: {truncate_to_tokens(' '.join(paragraph[i] for i in keep), MAX_DEFINITION_TOKENS)}"


def _hops(unit: Evidence, question_terms: set[str]) -> list[tuple[str, str]]:
    """A path unit's hops, read from the end the question names (more shared words) to the other end; none when
    neither end shares a word with the question."""
    names = list(unit.entity_names)
    if len(names) < 2:
        return []
    first, last = len(_terms(names[0]) & question_terms), len(_terms(names[-1]) & question_terms)
    if not first and not last:
        return []      # a path between entities the question does not name answers nothing through its hops
    if last > first:
        names.reverse()
    return list(zip(names, names[1:]))


def _candidates(evidence: Sequence[Evidence], chunk_texts: dict[str, str], question_terms: set[str],
                subjects: dict[str, str], profile: QuestionProfile, question: str) -> list[_Candidate]:
    out: dict[tuple[str, str], _Candidate] = {}
    cache: dict[str, list[tuple[str, str]]] = {}
    order = 0
    for rank, unit in enumerate(evidence):
        hops = _hops(unit, question_terms) if unit.path else []
        for chunk in unit.chunk_ids:
            if chunk not in cache:
                cache[chunk] = _sentences(chunk_texts.get(chunk, ""))
            lines = cache[chunk]
            for j, (sentence, section, paragraph, antecedent, is_code) in enumerate(lines):
                order += 1
                if is_code:
                    continue
                before = lines[j - 1][0] if j and lines[j - 1][1] == section and not lines[j - 1][2] else ""
                after = (lines[j + 1][0] if j + 1 < len(lines) and lines[j + 1][1] == section
                         and not lines[j + 1][2] else "")
                if paragraph:
                    sentence = _definition(sentence, paragraph, question_terms, profile, question)
                if len(sentence.split()) < 4:   # headings and table cells answer nothing on their own
                    continue
                key = (chunk, sentence)
                folded = sentence.casefold()
                stated = [i for i, (a, b) in enumerate(hops) if mentions(folded, a) and mentions(folded, b)]
                hop = (0 if stated[-1] == len(hops) - 1 else 1) if stated else 2
                if key in out:
                    out[key].hop = min(out[key].hop, hop)
                    continue
                out[key] = _Candidate(sentence, chunk, section, subjects.get(chunk, ""), rank, order,
                                      _terms(sentence), folded, hop, _terms(antecedent), before, after)
    return list(out.values())


# ---- the answer ---------------------------------------------------------------------------------------------

def _expand(terms: set[str]) -> set[str]:
    out = set(terms)
    for term in terms:
        out |= {_stem(w) for w in _FAMILY_OF.get(term, ())}
    return out


def _covers(candidate: _Candidate, term: str) -> bool:
    return term in candidate.terms or bool(_FAMILY_OF.get(term, set()) & candidate.terms)


def _relevance(candidate: _Candidate, wanted: set[str], idf: dict[str, float], total: float,
               asked_names: set[str] = frozenset()) -> float:
    """The question terms the sentence shares (rarer ones count more) plus the path-hop bonus, as a share; plus
    ``NAME_BONUS`` when it names a code name of the question as written (``work_mem``, not
    ``maintenance_work_mem``), and as much again when its term line defines it."""
    # the terms in ``idf``'s order (sorted), not the set's: float sums in an order that hangs on the process's string
    # hashing made equal sentences tie differently from one run to the next
    own = [t for t in idf if _covers(candidate, t)]
    # a sentence opening "This ..." is also about what the sentence before it says, if it says something asked itself
    context = [t for t in idf if t in candidate.context and t not in own] if own else []
    shared = sum(idf.get(t, 0.0) for t in own + context)
    score = shared / total if total else 0.0
    term, colon, _ = candidate.text.partition(": ")
    defined = _code_names(term) if colon else set()
    if asked_names and asked_names & _code_names(candidate.text):
        score += NAME_BONUS * (1 + bool(asked_names & defined))
    elif any(_stem(name.lstrip("-")) in wanted for name in defined):
        score += NAME_BONUS / 2   # "`port`: The TCP port the server listens on" for "... which TCP port ..."
    return score + HOP_BONUS * (2 - candidate.hop) / 2 - RANK_PRIOR * candidate.unit


def _new_names(sentence: str, known: str) -> list[str]:
    """Names a sentence brings that ``known`` (the question) does not hold: capitalised phrases and code names,
    longest first."""
    found = [m.group().strip() for m in _CAPITALISED.finditer(CODE_SPAN.sub(" ", sentence))]
    found += [name for name in _code_names(sentence)]
    folded = known.casefold()
    names = [n for n in found if len(n) > 2 and n.casefold() not in folded
             and n.split()[0].casefold() not in STOPWORDS and n.split()[0] not in ("She", "He", "It", "They")]
    return sorted(dict.fromkeys(names), key=len, reverse=True)   # ties in first-seen order, not by string hash


def _about(candidate: _Candidate, name: str) -> bool:
    if mentions(candidate.folded, name):
        return True
    # "She was born ...", in a passage about the name (its title or first heading holds its words: "Morrow, Agnes")
    subject = _terms(candidate.subject)
    return bool(_PRONOUN_OPENER.match(candidate.text)) and bool(_terms(name)) and _terms(name) <= subject


def extractive_answer(question: str, keywords: Sequence[str], evidence: Sequence[Evidence],
                      chunk_texts: dict[str, str], *, names: Sequence[str] = (),
                      documents: dict[str, tuple[str, str]] | None = None, path_names: Sequence[str] = (),
                      max_sentences: int = DEFAULT_MAX_SENTENCES) -> Answer:
    """The sentences of the evidence's chunks that answer ``question``, the answering one first (see the module
    docstring). ``documents``: each chunk's (document id, title); the answer names the document of every sentence it
    quotes, and a passage's subject (for a sentence opening "She ...") is its first heading, else that title."""
    profile = question_profile(question)
    wanted = _terms(" ".join([question, *keywords]))
    if _UNSET.search(question):
        wanted.add("default")   # "when no timeout is configured" asks for the default: documentation says "default"
    documents = documents or {}
    subjects = {c: _subject(chunk_texts.get(c, ""), documents.get(c, ("", ""))[1])
                for u in evidence for c in u.chunk_ids}
    pool = _candidates(evidence, chunk_texts, wanted, subjects, profile, question)
    candidates = [c for c in pool if any(_covers(c, t) for t in wanted)]
    if not candidates:
        return Answer(f"{EXTRACTIVE_LABEL} {NO_EVIDENCE}", "extractive", Usage(), found=False)
    df: dict[str, int] = {}
    for c in pool:
        for t in wanted:
            df[t] = df.get(t, 0) + _covers(c, t)
    idf = {t: math.log(1 + len(pool) / (1 + df.get(t, 0))) for t in sorted(wanted)}
    total = sum(idf.values())
    asked_names = _code_names(question)
    relevance = {id(c): _relevance(c, wanted, idf, total, asked_names) for c in pool}
    if path_names:   # PathRAG's kept paths in the loop: a sentence naming an entity they reached beyond the question
        asked = question.casefold()
        reached = [n for n in path_names if n.casefold() not in asked and len(n) > 2][:PATH_NAMES]
        for c in pool:
            if any(mentions(c.folded, n) for n in reached):
                relevance[id(c)] += PATH_BONUS
    ranked = sorted(candidates, key=lambda c: (relevance[id(c)], -c.order), reverse=True)
    best = ranked[0]
    chain = [best]
    facts: dict[str, int] = {}

    def fact(sentence: str) -> int:
        if sentence not in facts:
            facts[sentence] = holds_fact(sentence, profile, question)
        return facts[sentence]

    if profile.expects and fact(best.text) < 2:
        if profile.expects in CHAINED:
            chain = _follow(best, pool, question, relevance, fact)
        if len(chain) == 1:
            # no chain reached a fact of the asked kind: the most relevant sentence that holds one, if it is
            # about as relevant as the best (half its score or more), else the best
            floor = TYPED_SHARE * relevance[id(best)]
            typed = next((c for c in ranked if relevance[id(c)] >= floor and fact(c.text) == 2), None)
            chain = [typed or best]
            if typed is None:
                # documentation states the fact on the line next to the one the question matches: a version
                # heading's "Released 2010-04-16", a description's code example, a setting's "Default: 'http'"
                chain = _with_neighbour(best, fact)
    adjacent = (len(chain) == 2 and chain[0].chunk == chain[1].chunk
                and abs(chain[0].order - chain[1].order) == 1)
    if adjacent:   # a line and its neighbour, as the page reads them
        chosen = sorted(chain, key=lambda c: c.order)
    else:          # the chain's end (the fact) first
        chosen = [chain[-1]] + list(reversed(chain[:-1]))
    said = {" ".join(_WORD.findall(c.folded)) for c in chosen}
    for c in ranked:
        if len(chosen) >= max_sentences:
            break
        same = " ".join(_WORD.findall(c.folded))
        if all(c is not x for x in chosen) and same not in said and not any(same in s or s in same for s in said):
            chosen.append(c)   # a sentence said already (a page and its source file) is not quoted twice
            said.add(same)
    chosen = chosen[:max_sentences]
    places: list[str] = []
    marks = []
    # each number's document, section, chunks and quoted sentences, gathered as the marks are given
    cited: dict[str, tuple[str, str, list[str], list[str]]] = {}
    quoted = [clip(c.text.replace("`", ""), MAX_DEFINITION_TOKENS if ": " in c.text else MAX_SENTENCE_TOKENS)
              for c in chosen]
    for c, quote in zip(chosen, quoted):
        document = documents.get(c.chunk, ("", ""))[0]
        section = _section(c)
        place = _place(c, document)
        if place and place not in places:
            places.append(place)
            cited[place] = (document, section, [], [])
        if place:
            chunks, quotes = cited[place][2], cited[place][3]
            if c.chunk not in chunks:
                chunks.append(c.chunk)
            quotes.append(quote)
        marks.append(f" [{places.index(place) + 1}]" if place else "")
    body = " ".join(quote + mark for quote, mark in zip(quoted, marks))
    if places:
        body += "\nSources: " + "; ".join(f"[{i}] {place}" for i, place in enumerate(places, 1))
    citations = tuple(Citation(i, cited[place][0], cited[place][1], place, tuple(cited[place][2]),
                               tuple(cited[place][3])) for i, place in enumerate(places, 1))
    return Answer(f"{EXTRACTIVE_LABEL} {body}", "extractive", Usage(), found=True, citations=citations)


def _with_neighbour(best: _Candidate, fact: Callable[[str], int]) -> list[_Candidate]:
    """``best`` and the line after (else before) it in its section when that line holds a fact of the asked kind
    and ``best`` does not: [best, neighbour]; else [best]."""
    for text, step in ((best.after, 1), (best.before, -1)):
        if text and len(text.split()) <= MAX_SENTENCE_TOKENS and fact(text) == 2:
            neighbour = dataclasses.replace(best, text=text, folded=text.casefold(), terms=_terms(text),
                                            order=best.order + step, before="", after="")
            return [best, neighbour]
    return [best]


def _ordered_terms(question: str) -> list[str]:
    """The question's content terms in the order it says them."""
    out: list[str] = []
    for word in _WORD.findall(question.casefold()):
        term = _stem(word)
        if len(word) >= 3 and word not in STOPWORDS and term not in out:
            out.append(term)
    return out


def _follow(best: _Candidate, pool: list[_Candidate], question: str, relevance: dict[int, float],
            fact: Callable[[str], int]) -> list[_Candidate]:
    """The chain from ``best`` to a sentence holding a fact of the asked kind, through the names each brings (see
    the module docstring); just ``best`` when none is reached within ``MAX_HOPS``. A question nests its hops
    outside in ("the river of the birthplace of the director of X"): each step prefers the sentence that states the
    question's last term not stated yet ("birthplace" after "director of X"), then one holding the fact."""
    chain = [best]
    ordered = _ordered_terms(question)
    covered = {t for t in ordered if _covers(best, t)}
    for _ in range(MAX_HOPS):
        current = chain[-1]
        options = []
        for name in _new_names(current.text, question):
            for c in pool:
                if any(c is x for x in chain) or not _about(c, name) or not any(_covers(c, t) for t in ordered):
                    continue   # a step says something the question asks about, not only the name it follows
                stated = [i for i, t in enumerate(ordered) if t not in covered and _covers(c, t)]
                options.append((max(stated, default=-1), fact(c.text), relevance[id(c)], -c.order, id(c), c))
        if not options:
            return [best]
        *key, step = max(options, key=lambda o: o[:4])
        chain.append(step)
        if key[1] == 2:
            return chain
        covered |= {t for t in ordered if _covers(step, t)}
    return [best]


def _subject(text: str, label: str) -> str:
    for line in text.split("\n"):
        if line.startswith("#"):
            return plain(line)
    return label


def _section(candidate: _Candidate) -> str:
    """The section a quoted sentence is under, as its place names it: "OPTIONS" (not "git-rebase(1) > OPTIONS")."""
    section = candidate.section
    top, _, rest = section.partition(SECTION_SEPARATOR)
    if top and top == plain(candidate.subject):
        section = rest     # the page's own title heading says nothing the document does not
    return section


def _place(candidate: _Candidate, document: str) -> str:
    """Where a quoted sentence is from: "git-rebase.html > OPTIONS"."""
    return SECTION_SEPARATOR.join(part for part in (document, _section(candidate)) if part)
