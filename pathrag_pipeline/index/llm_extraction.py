"""Entity and relation extraction from one chunk: the LLM prompts (with gleaning) and the offline fallback.

Both extractors share one small interface so the extraction stage does not care which one runs: it hands
over a chunk's text and its document title and gets back a ``ChunkExtraction`` plus what it cost. The
extractor's ``identity`` names everything that shapes its output (model, prompt version, gleaning passes);
the stage keys its cache and records on it, so changing any of them re-extracts instead of reusing stale
results. Bump ``PROMPT_VERSION`` whenever the prompt text below changes.

The prompt follows LightRAG's entity/relation extraction prompt (which PathRAG reuses), adapted to
structured output: instead of delimiter-separated tuples the model fills the ``ChunkExtraction`` JSON
schema, whose field descriptions come from ``extraction_models``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from pathrag_pipeline.config import Settings
from pathrag_pipeline.index.extraction_models import ENTITY_TYPES, ChunkExtraction, Entity, Relation
from pathrag_pipeline.llm.client import (
    LLMClient,
    LLMError,
    LLMOutputError,
    LLMTruncatedError,
    Usage,
    llm_from_settings,
)
from pathrag_pipeline.text.names import name_key
from pathrag_pipeline.index.offline_extraction import OFFLINE_EXTRACTOR_ID, extract_offline

PROMPT_VERSION = "extract-v1"

EXTRACTION_SYSTEM_PROMPT = """-Goal-
Given a text document and a list of entity types, identify all entities of those types in the text and \
all relationships among the identified entities. The result feeds a knowledge graph used to answer \
questions about the documents, so be complete and faithful to the text.

-Steps-
1. Identify all entities. For each entity give:
- name: the name of the entity as written in the text, in the language of the text. If the text is in \
English, capitalise the name. Use the same name every time the same entity appears.
- type: one of the following types: [{entity_types}]
- description: a comprehensive description of the entity's attributes and activities, according to the text.
2. From the entities identified in step 1, identify all pairs (source, target) that are *clearly related* \
to each other. For each related pair give:
- source: the name of the source entity, exactly as in step 1
- target: the name of the target entity, exactly as in step 1
- description: why the source and the target are related to each other
- keywords: one or more high-level key words, comma-separated, that summarise the overarching nature of \
the relationship, focusing on concepts or themes rather than specific details
- strength: a number from 1 (weak) to 10 (strong) for how strongly the text ties them together
3. Write names, descriptions and keywords in the language of the text. Do not invent facts the text does \
not state. Leave a list empty when the text holds nothing of that kind.
"""

EXTRACTION_USER_PROMPT = """-Real data-
Document title: {title}
Text:
{text}
"""

SUMMARY_PROMPT = """You are a helpful assistant responsible for generating a comprehensive summary of the data \
provided below. Given one entity or a pair of related entities, and a list of descriptions, all related to \
the same entity or pair, concatenate all of these into a single, comprehensive description. Make sure to \
include information collected from all the descriptions. If the descriptions are contradictory, resolve \
the contradictions and provide a single, coherent summary. Write in the third person and include the \
entity names so the summary stands on its own. Write in the language of the descriptions. Stay under \
{max_words} words. Answer with the summary only.

-Data-
{kind}: {name}
Description list:
{descriptions}
"""

EMPTY_REASK_PROMPT = (
    "Your answer holds no entities and no relations (or it repeated the JSON schema). The text above does "
    "name people, places, organisations, works, dates or concepts: answer with the JSON object whose "
    '"entities" and "relations" lists are filled from the text.'
)
# A chunk with at least this many words is expected to name something; an empty extraction of it is
# suspicious (re-asked once, then recorded with status 'empty').
MIN_WORDS_FOR_CONTENT = 12
MAX_SPLITS = 2  # a chunk whose answer hit the output cap is halved, at most twice in depth

GLEANING_PROMPT = (
    "Some entities and relations may have been missed in the last extraction; add them. "
    "Return only entities and relations that are not in the last extraction, with the same fields; "
    "return empty lists if nothing was missed."
)


@dataclass(frozen=True)
class ExtractionOutcome:
    """One chunk's extraction and the LLM usage it took (zero for offline extraction)."""

    extraction: ChunkExtraction
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    status: str = "ok"        # 'empty': nothing extracted from a chunk with content, even after a re-ask
    note: str | None = None   # why, for status 'empty'; for 'ok', the split parts that were lost ("partial: ...")


class Extractor(Protocol):
    """Turns one chunk into entities and relations. ``identity`` changes whenever the output may change."""

    identity: str

    def extract(self, text: str, title: str | None) -> ExtractionOutcome: ...


def merge_extractions(base: ChunkExtraction, extra: ChunkExtraction) -> tuple[ChunkExtraction, int]:
    """Add ``extra``'s new items to ``base``; returns the merge and how many items were new.

    Entities are the same when their names have the same ``name_key`` (the graph's merge key); relations
    when they join the same pair of entities in either direction (the graph is undirected, as in PathRAG). A repeated entity only fills in
    a description the first pass left empty.
    """
    entities: dict[str, Entity] = {}
    for entity in base.entities:
        entities.setdefault(name_key(entity.name), entity)
    relations: dict[tuple[str, str], Relation] = {}
    for rel in base.relations:
        relations.setdefault(_pair_key(rel), rel)
    added = 0
    for entity in extra.entities:
        key = name_key(entity.name)
        known = entities.get(key)
        if known is None:
            entities[key] = entity
            added += 1
        elif not known.description and entity.description:
            entities[key] = known.model_copy(update={"description": entity.description})
    for rel in extra.relations:
        key = _pair_key(rel)
        if key not in relations:
            relations[key] = rel
            added += 1
    return ChunkExtraction(entities=list(entities.values()), relations=list(relations.values())), added


def _pair_key(rel: Relation) -> tuple[str, str]:
    a, b = name_key(rel.source), name_key(rel.target)
    return (a, b) if a <= b else (b, a)


class LLMExtractor:
    """Extraction through an OpenAI-compatible LLM with instructor-validated output and gleaning passes.

    Gleaning (from GraphRAG/LightRAG) asks the model, with the conversation so far, for what it missed;
    small models in particular leave out entities on the first pass. A pass that adds nothing ends
    gleaning early, since a further ask would see the same conversation.
    """

    def __init__(self, client: LLMClient, gleaning: int = 1):
        if gleaning < 0:
            raise ValueError(f"gleaning={gleaning} must be 0 (no gleaning) or more passes")
        self.client = client
        self.gleaning = gleaning
        model = client.identity.get("model") or "unknown-model"
        self.identity = f"llm:{model}:{PROMPT_VERSION}:glean{gleaning}"
        # what a failure depends on besides the identity: a chunk given up after failing several runs in a row
        # is tried again once the mode or the output cap changes (extraction_stage.MAX_FAILED_RUNS)
        self.retry_key = f"{getattr(client, 'mode', '')}:{client.max_tokens_for('extract')}"

    def extract(self, text: str, title: str | None) -> ExtractionOutcome:
        """First pass plus gleaning passes; an ``LLMError`` raised here carries the usage of every pass.

        Local models need three more things: an answer cut at the output cap (``LLMTruncatedError``) is
        never used: the text is halved and each half extracted (up to ``MAX_SPLITS`` deep); a cut gleaning
        answer ends gleaning. An empty answer for a chunk with content (a schema echo with every list left
        at its default, or empty lists) is re-asked once; if it stays empty the outcome has status 'empty'.
        """
        acc = [Usage()]
        lost: list[LLMError] = []
        try:
            extraction = self._extract(text, title, acc, depth=0, lost=lost)
        except LLMError as exc:
            # Re-raise the same kind of error with the whole chunk's cost, so the stage accounts for it.
            raise type(exc)(str(exc), stage=exc.stage, model=exc.model, last_error=exc.last_error,
                            usage=acc[0] + exc.usage) from exc
        usage = acc[0]
        result = extraction.normalised()
        words = len(text.split())
        if result.empty and words >= MIN_WORDS_FOR_CONTENT:
            mode = getattr(self.client, "mode", None)
            others = " or ".join(m for m in ("md_json", "json", "tools") if m != mode)   # never the mode in use
            note = (f"the model returned no entities and no relations for a chunk of {words} words, also when "
                    "asked again (a schema echo or empty lists): it may be too small to follow the extraction "
                    f"prompt; try PATHRAG_LLM_MODE={others} (now {mode}), or a larger model. Retried on the next "
                    "run")
            return ExtractionOutcome(result, usage.calls, usage.prompt_tokens, usage.completion_tokens,
                                     status="empty", note=note)
        note = None
        if lost:   # some split parts still failed: what the others found is kept, and the record says so
            note = (f"partial: {len(lost)} split part(s) of the chunk could not be extracted and are missing "
                    f"({' '.join(str(lost[0]).split())[:300]})")
        return ExtractionOutcome(result, usage.calls, usage.prompt_tokens, usage.completion_tokens, note=note)

    def _extract(self, text: str, title: str | None, acc: list[Usage], depth: int,
                 lost: list[LLMError] | None = None) -> ChunkExtraction:
        """One text's extraction; every call's usage is added to ``acc[0]`` as it happens. When a cut answer
        splits the text, a part whose answer stays cut or invalid is appended to ``lost`` and the other parts
        are kept; only when every part fails does the whole text fail."""
        lost = [] if lost is None else lost
        messages: list[dict[str, str]] = [
            {"role": "system", "content": EXTRACTION_SYSTEM_PROMPT.format(entity_types=", ".join(ENTITY_TYPES))},
            {"role": "user", "content": EXTRACTION_USER_PROMPT.format(title=title or "(untitled)", text=text)},
        ]
        try:
            first = self.client.structured(messages, ChunkExtraction, stage="extract")
        except LLMTruncatedError as exc:
            acc[0] += exc.usage
            halves = _halves(text)
            if depth >= MAX_SPLITS or halves is None:
                raise LLMTruncatedError(str(exc), stage=exc.stage, model=exc.model, last_error=exc.last_error,
                                        usage=Usage()) from None
            merged, failures = ChunkExtraction(), []
            for half in halves:
                try:
                    part = self._extract(half, title, acc, depth + 1, lost)
                except (LLMTruncatedError, LLMOutputError) as part_error:   # the endpoint's own faults propagate
                    acc[0] += part_error.usage   # counted once, here (a cut answer's already was: usage zero)
                    part_error.usage = Usage()
                    failures.append(part_error)
                    continue
                merged, _ = merge_extractions(merged, part)
            if len(failures) == len(halves):
                raise failures[0]
            lost.extend(failures)
            return merged
        acc[0] += first.usage
        extraction: ChunkExtraction = first.value
        if extraction.normalised().empty and len(text.split()) >= MIN_WORDS_FOR_CONTENT:
            again = self.client.structured(messages + [
                {"role": "assistant", "content": extraction.model_dump_json()},
                {"role": "user", "content": EMPTY_REASK_PROMPT},
            ], ChunkExtraction, stage="extract")
            acc[0] += again.usage
            extraction = again.value
            if extraction.normalised().empty:
                return extraction  # no gleaning on nothing
        last = extraction
        for _ in range(self.gleaning):
            messages = messages + [
                {"role": "assistant", "content": last.model_dump_json()},
                {"role": "user", "content": GLEANING_PROMPT},
            ]
            try:
                more = self.client.structured(messages, ChunkExtraction, stage="extract-gleaning")
            except LLMTruncatedError as exc:
                acc[0] += exc.usage  # a cut gleaning answer is dropped; what the first pass found stays
                break
            acc[0] += more.usage
            last = more.value
            extraction, added = merge_extractions(extraction, last)
            if added == 0:
                break
        return extraction


def _halves(text: str) -> tuple[str, str] | None:
    """``text`` cut in two near its middle, at a paragraph, sentence or word boundary; None if too short."""
    if len(text.split()) < 2 * MIN_WORDS_FOR_CONTENT:
        return None
    middle = len(text) // 2
    for sep in ("\n\n", "\n", ". ", " "):
        left, right = text.rfind(sep, 0, middle), text.find(sep, middle)
        candidates = [i for i in (left, right) if i > 0]
        if candidates:
            cut = min(candidates, key=lambda i: abs(i - middle)) + len(sep)
            return text[:cut].strip(), text[cut:].strip()
    return None


class OfflineExtractor:
    """Rule-based extraction with no model: the default when no LLM endpoint is configured."""

    identity = OFFLINE_EXTRACTOR_ID
    cpu_bound = True    # pure Python: the extraction stage runs it in worker processes (one per core), not threads

    def extract(self, text: str, title: str | None) -> ExtractionOutcome:
        return ExtractionOutcome(extract_offline(text, title).normalised())


def extractor_from_settings(settings: Settings, llm: LLMClient | None = None, *, gleaning: int = 1) -> Extractor:
    """The LLM extractor when an LLM is given or configured (PATHRAG_LLM_BASE_URL or a key), else the offline one."""
    if llm is None:
        llm = llm_from_settings(settings)
    if llm is None:
        return OfflineExtractor()
    return LLMExtractor(llm, gleaning=gleaning)


class LLMSummariser:
    """The ``summarise(kind, name, descriptions)`` callable graph_merge uses for over-budget descriptions.

    LightRAG's description-summary prompt; graph_merge caches each summary by its input, so this is only
    called for new input. Keeps a running usage total for the stage's usage log.
    """

    def __init__(self, client: LLMClient, max_tokens: int = 500):
        self.client = client
        self.max_tokens = max_tokens
        self.identity = f"llm:{client.identity.get('model') or 'unknown-model'}:summary-v1"
        self._lock = threading.Lock()
        self.usage = Usage()
        self.summaries = 0

    def __call__(self, kind: str, name: str, descriptions: list[str]) -> str:
        prompt = SUMMARY_PROMPT.format(
            max_words=max(20, int(self.max_tokens * 0.7)), kind=kind, name=name,
            descriptions="\n".join(f"- {d}" for d in descriptions),
        )
        result = self.client.complete([{"role": "user", "content": prompt}], stage="summarise")
        with self._lock:
            self.usage += result.usage
            self.summaries += 1
        return result.text.strip()
