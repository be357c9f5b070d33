"""The scripted model of `pathrag bench peers`: one chat responder that answers PathRAG, LightRAG and nano-graphrag
each in the format its own parser reads, with the same entities and relations for a given passage.

A passage's graph is its LLM-extracted triples (musique-100's ``triples.jsonl``): subjects and objects become
entities, each triple a relation (the predicate its keywords, the sentence "subject predicate object" its
description). The first extraction pass answers with the first 4/5 of the entities (and the relations among them),
the gleaning pass with the rest, as ``indexing.OfflineBackedModel`` does for ours, so every system's gleaning call
has something to find.

Formats, as read from each peer's ``prompt.py`` and parser (versions pinned in ``peers.py``):

- ours: JSON ``{"entities": [{name, type, description}], "relations": [{source, target, keywords, description,
  strength}]}`` (``extraction_models.ChunkExtraction``);
- LightRAG 1.5.7 (``operate._process_extraction_result``): one record a line,
  ``entity<|#|>name<|#|>type<|#|>description`` and ``relation<|#|>source<|#|>target<|#|>keywords<|#|>description``,
  then ``<|COMPLETE|>``;
- nano-graphrag 0.0.8.2 (``_op.extract_entities``): records ``("entity"<|>"name"<|>"type"<|>"description")`` and
  ``("relationship"<|>"source"<|>"target"<|>"description"<|>strength)`` joined by ``##``, then ``<|COMPLETE|>``.

Every request is classified (``classify``) as (system, kind) and tallied: calls, prompt and completion words (the
fake server's tokens). Answer prompts are kept, so the benchmark can look for the gold passages' titles in what each
system would send its LLM.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

ENTITY_TYPE = "concept"   # the triples carry no types: every system gets the same one
LIGHTRAG_TUPLE = "<|#|>"
LIGHTRAG_DONE = "<|COMPLETE|>"
NANO_TUPLE = "<|>"
NANO_RECORD = "##"
NANO_DONE = "<|COMPLETE|>"
ANSWER = "The context does not say."   # every system's answer: the benchmark measures what reaches the prompt

# How each system's prompts open (read from its prompt.py; ours from pathrag_pipeline)
OURS_EXTRACT = "Given a text document and a list of entity types, identify all entities of those types in the text"
OURS_GLEAN = "Some entities and relations may have been missed in the last extraction"
OURS_SUMMARY = "Given one entity or a pair of related entities, and a list of descriptions"
OURS_KEYWORDS = "You identify the keywords of a user's question"
OURS_ANSWER = "You are a helpful assistant answering questions from a knowledge graph"
LR_EXTRACT = "You are a Knowledge Graph Specialist responsible for extracting entities and relationships"
LR_GLEAN = "Based on the last extraction task, identify and extract any missed"
LR_SUMMARY = "You are a Knowledge Graph Specialist, proficient in data curation and synthesis"
LR_KEYWORDS = "You are an expert keyword extractor"
LR_ANSWER = "You are an expert AI assistant specializing in synthesizing information"
NANO_EXTRACT = "Given a text document that is potentially relevant to this activity and a list of entity types"
NANO_GLEAN = "MANY entities were missed in the last extraction"
NANO_IF_LOOP = "It appears some entities may have still been missed"
NANO_SUMMARY = "Given one or two entities, and a list of descriptions"
NANO_REPORT = "Write a comprehensive report of a community"
NANO_LOCAL_ANSWER = "You are a helpful assistant responding to questions about data in the tables provided"

_STOP = frozenset("""a an the of in on at by for from with as to into and or but is was were are be been who whom whose
what which when where why how that this these those did does do has have had its his her their it he she they
there than then not no also first last many much""".split())


def _clean(name: str) -> str:
    """A name or description every format can carry: one line, no double quotes, no delimiters."""
    text = " ".join(str(name).split()).replace('"', "'")
    for marker in (LIGHTRAG_TUPLE, NANO_TUPLE, NANO_RECORD, LIGHTRAG_DONE, "<|", "|>"):
        text = text.replace(marker, " ")
    return " ".join(text.split())


@dataclass(frozen=True)
class PassageGraph:
    """One passage and the entities and relations every system is told it holds."""

    doc_id: str
    title: str
    text: str
    entities: tuple[tuple[str, str], ...]               # (name, description)
    relations: tuple[tuple[str, str, str, str], ...]    # (source, target, keywords, description)

    @classmethod
    def of(cls, doc_id: str, title: str, text: str, triples: Iterable[tuple[str, str, str]]) -> "PassageGraph":
        facts: dict[str, list[str]] = defaultdict(list)
        order: list[str] = []
        relations: list[tuple[str, str, str, str]] = []
        seen_pairs: set[tuple[str, str]] = set()
        for s, p, o in triples:
            s, p, o = _clean(s), _clean(p), _clean(o)
            if not s or not o or s.casefold() == o.casefold():
                continue   # LightRAG drops self-loops; no system gets one
            sentence = f"{s} {p} {o}".strip()
            for name in (s, o):
                if name not in facts:
                    order.append(name)
                facts[name].append(sentence)
            pair = (s.casefold(), o.casefold())
            if pair not in seen_pairs:   # one relation a pair, as each system merges them
                seen_pairs.add(pair)
                relations.append((s, o, p or "related to", sentence))
        entities = tuple((n, "; ".join(dict.fromkeys(facts[n]))) for n in order)
        return cls(doc_id, title, text, entities, tuple(relations))

    def passes(self) -> tuple["PassageGraph", "PassageGraph"]:
        """(first pass, gleaning pass): 4/5 of the entities with the relations among them, then the rest."""
        keep = max(1, (len(self.entities) * 4) // 5) if self.entities else 0
        first = {n for n, _ in self.entities[:keep]}
        inner = tuple(r for r in self.relations if r[0] in first and r[1] in first)
        outer = tuple(r for r in self.relations if not (r[0] in first and r[1] in first))
        return (PassageGraph(self.doc_id, self.title, self.text, self.entities[:keep], inner),
                PassageGraph(self.doc_id, self.title, self.text, self.entities[keep:], outer))

    @property
    def file_text(self) -> str:
        """The passage as a .txt file of the benchmark's corpus: its title, a blank line, its text."""
        return f"{self.title}\n\n{self.text}\n"


# ---- the three formats ---------------------------------------------------------------------------

def ours_format(g: PassageGraph) -> str:
    return json.dumps({
        "entities": [{"name": n, "type": ENTITY_TYPE, "description": d} for n, d in g.entities],
        "relations": [{"source": s, "target": t, "keywords": k, "description": d, "strength": 5.0}
                      for s, t, k, d in g.relations],
    })


def lightrag_format(g: PassageGraph) -> str:
    t = LIGHTRAG_TUPLE
    rows = [f"entity{t}{n}{t}{ENTITY_TYPE}{t}{d}" for n, d in g.entities]
    rows += [f"relation{t}{s}{t}{o}{t}{k}{t}{d}" for s, o, k, d in g.relations]
    return "\n".join(rows + [LIGHTRAG_DONE])


def nano_format(g: PassageGraph) -> str:
    t = NANO_TUPLE
    rows = [f'("entity"{t}"{n}"{t}"{ENTITY_TYPE}"{t}"{d}")' for n, d in g.entities]
    rows += [f'("relationship"{t}"{s}"{t}"{o}"{t}"{d}"{t}5)' for s, o, _, d in g.relations]
    return NANO_RECORD.join(rows) + NANO_DONE


# ---- parsing them back (the tests; each follows its system's parser) -----------------------------

Parsed = tuple[set[str], set[tuple[str, str]]]


def parse_ours(reply: str) -> Parsed:
    data = json.loads(reply)
    return ({e["name"] for e in data["entities"]}, {(r["source"], r["target"]) for r in data["relations"]})


def parse_lightrag(reply: str) -> Parsed:
    """LightRAG's text-mode rules: records split on new lines and the completion marker, fields on ``<|#|>``; an
    entity has exactly 4 fields, a relation exactly 5, and both a non-empty description."""
    entities, relations = set(), set()
    for line in re.split(r"\n|" + re.escape(LIGHTRAG_DONE), reply):
        parts = [p.strip() for p in line.strip().split(LIGHTRAG_TUPLE)]
        if len(parts) == 4 and "entity" in parts[0] and parts[1] and parts[3]:
            entities.add(parts[1])
        elif len(parts) == 5 and "relation" in parts[0] and parts[1] and parts[2] and parts[4]:
            relations.add((parts[1], parts[2]))
    return entities, relations


def parse_nano(reply: str) -> Parsed:
    """nano-graphrag's rules: records split on ``##`` and the completion marker, the part inside the outer
    parentheses split on ``<|>``; the first field must be ``"entity"`` (4+ fields) or ``"relationship"`` (5+)."""
    entities, relations = set(), set()
    for record in re.split(re.escape(NANO_RECORD) + "|" + re.escape(NANO_DONE), reply):
        found = re.search(r"\((.*)\)", record)
        if found is None:
            continue
        parts = found.group(1).split(NANO_TUPLE)
        unq = [p.strip().strip('"') for p in parts]
        if len(parts) >= 4 and parts[0] == '"entity"':
            entities.add(unq[1])
        elif len(parts) >= 5 and parts[0] == '"relationship"':
            relations.add((unq[1], unq[2]))
    return entities, relations


# ---- classifying a request -----------------------------------------------------------------------

def _contents(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [(str(m.get("role")), str(m.get("content") or "")) for m in request.get("messages") or []]


def classify(request: dict[str, Any]) -> tuple[str, str]:
    """(system, kind) of a chat request: system ours / lightrag / nano, kind extract, glean, if_loop, summary,
    keywords, answer, report; ("unknown", "unknown") for anything else."""
    msgs = _contents(request)
    every = "\n".join(c for _, c in msgs)
    last = msgs[-1][1] if msgs else ""
    if OURS_EXTRACT in every:
        return "ours", ("glean" if any(c.startswith(OURS_GLEAN) for _, c in msgs) else "extract")
    if LR_EXTRACT in every:
        return "lightrag", ("glean" if LR_GLEAN in last else "extract")
    if NANO_EXTRACT in every:
        if NANO_IF_LOOP in last:
            return "nano", "if_loop"
        return "nano", ("glean" if NANO_GLEAN in last else "extract")
    for marker, label in ((OURS_SUMMARY, ("ours", "summary")), (OURS_KEYWORDS, ("ours", "keywords")),
                          (OURS_ANSWER, ("ours", "answer")), (LR_SUMMARY, ("lightrag", "summary")),
                          (LR_KEYWORDS, ("lightrag", "keywords")), (LR_ANSWER, ("lightrag", "answer")),
                          (NANO_SUMMARY, ("nano", "summary")), (NANO_REPORT, ("nano", "report")),
                          (NANO_LOCAL_ANSWER, ("nano", "answer"))):
        if marker in every:
            return label
    return "unknown", "unknown"


def _words(text: str) -> int:
    return len(text.split())


@dataclass
class Tally:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def _word_in(key: str, text: str) -> bool:
    """Whether ``key`` occurs in ``text`` with no word character right before or after it."""
    return re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text) is not None


class PeerModel:
    """The chat responder: one scripted model for the three systems (see the module docstring)."""

    def __init__(self, graphs: Iterable[PassageGraph], delay: float = 0.0) -> None:
        self.graphs = list(graphs)
        self.delay = delay   # seconds every chat reply waits (embeddings are not delayed)
        self._names = sorted({n for g in self.graphs for n, _ in g.entities}, key=len, reverse=True)
        # (name, folded name) of the names keywords() may pick, longest first; matched as words with _word_in.
        # Compiling a pattern per name per question cost 0.15 s of every keyword call (1,800 names, past re's
        # cache), a delay that only the systems asking for keywords (ours, LightRAG) paid
        self._keys = [(n, n.casefold()) for n in self._names if len(n.casefold()) > 2]
        self._texts = [(g, " ".join(g.text.split())) for g in self.graphs]
        self._lock = threading.Lock()
        self.tally: dict[tuple[str, str], Tally] = defaultdict(Tally)
        self.answer_prompts: list[tuple[str, str]] = []   # (system, every message of the answer request)
        self.unmatched = 0   # extraction prompts whose passage was not found (answered with nothing)

    def reset(self) -> None:
        with self._lock:
            self.tally.clear()
            self.answer_prompts.clear()
            self.unmatched = 0

    def totals(self, system: str) -> dict[str, int]:
        with self._lock:
            rows = [t for (s, _), t in self.tally.items() if s == system]
            by_kind = {k: t.calls for (s, k), t in self.tally.items() if s == system}
        return {"calls": sum(t.calls for t in rows), "prompt_tokens": sum(t.prompt_tokens for t in rows),
                "completion_tokens": sum(t.completion_tokens for t in rows), "by_kind": by_kind}

    # ---- matching --------------------------------------------------------------------------------
    def passage_in(self, text: str) -> PassageGraph | None:
        """The passage whose title and whole text the prompt carries; near-duplicate passages (musique has
        paragraphs of one article that differ by a dash) are told apart by their whole text, the longest match
        winning. A chunk holding only part of a passage is matched by its opening words."""
        flat = " ".join(text.split())
        found = [g for g, t in self._texts if t in flat and g.title in flat]
        if not found:
            found = [g for g, t in self._texts if t[:80] in flat and g.title in flat]
        return max(found, key=lambda g: (len(g.text), len(g.title))) if found else None

    def keywords(self, question: str) -> tuple[list[str], list[str]]:
        """(low level, high level) keywords of a question, the same for every system: the graph's entity names
        the question contains (longest first, at most 5), then its other content words (at most 5)."""
        folded = question.casefold()
        low: list[str] = []
        for name, key in self._keys:
            if key in folded and _word_in(key, folded) and not any(key in chosen.casefold() for chosen in low):
                low.append(name)
            if len(low) == 5:
                break
        taken = " ".join(low).casefold()
        high = [w for w in dict.fromkeys(re.findall(r"[A-Za-z][\w'-]+", question))
                if w.casefold() not in _STOP and w.casefold() not in taken and len(w) > 3][:5]
        return low, high

    # ---- answering -------------------------------------------------------------------------------
    def __call__(self, request: dict[str, Any]) -> str:
        system, kind = classify(request)
        msgs = _contents(request)
        reply = self._reply(system, kind, msgs)
        if self.delay:
            time.sleep(self.delay)
        with self._lock:
            t = self.tally[(system, kind)]
            t.calls += 1
            t.prompt_tokens += sum(_words(c) for _, c in msgs)
            t.completion_tokens += _words(reply)
            if kind == "answer":
                self.answer_prompts.append((system, "\n".join(c for _, c in msgs)))
        return reply

    def _extraction(self, system: str, kind: str, msgs: list[tuple[str, str]]) -> str:
        first_user = next((c for r, c in msgs if r == "user" and c), "")
        # the chunk: LightRAG's fenced ---Input Text--- block, nano-graphrag's -Real Data- block, our user message
        marker = {"lightrag": "---Input Text---", "nano": "-Real Data-"}.get(system)
        source = first_user.split(marker, 1)[-1] if marker else first_user
        graph = self.passage_in(source)
        if graph is None:
            with self._lock:
                self.unmatched += 1
            graph = PassageGraph("?", "?", "", (), ())
        part = graph.passes()[1 if kind == "glean" else 0]
        return {"ours": ours_format, "lightrag": lightrag_format, "nano": nano_format}[system](part)

    def _reply(self, system: str, kind: str, msgs: list[tuple[str, str]]) -> str:
        last = msgs[-1][1] if msgs else ""
        if kind in ("extract", "glean"):
            return self._extraction(system, kind, msgs)
        if kind == "if_loop":
            return "NO"
        if kind == "summary":
            after = re.split(r"Description List:|Description list:", last, maxsplit=1)[-1]
            return " ".join(after.replace("`", " ").split()[:60]) or "No description."
        if kind == "keywords":
            question = (last.split("User Query:", 1)[1].split("---Output---", 1)[0] if system == "lightrag"
                        else last.split("Question:", 1)[-1]).strip()
            low, high = self.keywords(question)
            if system == "lightrag":
                return json.dumps({"high_level_keywords": high, "low_level_keywords": low})
            return json.dumps({"low_level": low, "high_level": high})
        if kind == "report":
            names = re.findall(r"^\d+,([^,\n]+),", last, flags=re.M)[:3]
            title = " and ".join(n.strip().strip('"') for n in names) or "Community"
            return json.dumps({"title": title, "summary": f"A community around {title}.", "rating": 5.0,
                               "rating_explanation": "Scripted.",
                               "findings": [{"summary": title, "explanation": f"The entities of {title}."}]})
        if kind == "answer":
            return ANSWER
        return ANSWER


# ---- embeddings ------------------------------------------------------------------------------------

EMBED_DIM = 384
_TOKEN = re.compile(r"[a-z0-9]+")


def bow_embedding(text: str, dim: int = EMBED_DIM) -> list[float]:
    """A deterministic bag-of-words vector (signed feature hashing of lower-cased words, unit length): texts
    sharing words are close, as with a real embedder's lexical part, with no model. Same text, same vector."""
    vec = [0.0] * dim
    for word in _TOKEN.findall(text.lower()):
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        vec[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    norm = sum(x * x for x in vec) ** 0.5
    if norm == 0:
        vec[0], norm = 1.0, 1.0
    return [x / norm for x in vec]


def embed_responder(texts: list[str], model: str) -> list[list[float]]:
    return [bow_embedding(t) for t in texts]


def titles_in(prompt: str, question: str, titles: Iterable[str]) -> list[bool]:
    """Whether each title appears in an answer prompt, the question's own words taken out first (a title the
    question names is not retrieved context)."""
    context = prompt.replace(question, " ")
    return [t in context for t in titles]
