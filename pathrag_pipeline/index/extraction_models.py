"""The shape of what extraction produces for one chunk, shared by the LLM and the offline extractor.

These pydantic models are also the instructor response models, so their field descriptions are part of
the prompt the LLM sees. Validation keeps names non-empty and rejects an answer that repeats the JSON
schema instead of data (weak models do that in json/md_json mode; instructor re-asks with the message).
``ChunkExtraction.normalised()`` then drops names that are not names (``name_problem``: a validator's
error URL the model repeated after a re-ask, markup, runaway text) and adds relation endpoints missing from
the entity list, described from their relations.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from pathrag_pipeline.index.identifiers import is_operator

MAX_NAME_CHARS = 120
MAX_NAME_WORDS = 16
_NOT_A_NAME = re.compile(
    r"errors\.pydantic\.dev|https?://|www\.|```|</?[A-Za-z][^>]*>|\[/?[A-Za-z][^\]]*\]|[{}]|"
    r"\b(validation error|value_error|Field required|For further information visit)\b",
    re.IGNORECASE,
)
SCHEMA_KEYS = {"properties", "$defs", "$schema", "required"}

# What one chunk's record may store (its JSON in extractions.result), whatever the extractor. DuckDB reads the
# records about 2048 rows at a time (one vector), so runaway rows (the offline rules once quoted a 7.6 kB
# unpunctuated "sentence" in each of ~350 relations: 5.7 MB for one chunk) exhaust its memory limit in every
# statement that reads them, in this run and every later one. The cap stops such rows; it is not meant to shape
# ordinary results, which stay below it: prose gives 7-13 bytes of JSON per byte of chunk text offline (up to
# ~180 on a short passage that is one long list sentence: 240 kB at most on musique-100), and the floor is about
# what an LLM can return for one chunk at the default output cap (4096 tokens a call; a first pass, a re-ask and
# a gleaning pass on each of up to four halves of the chunk: some 200-250 kB).
RESULT_BYTES_PER_TEXT_BYTE = 32
RESULT_MIN_CAP_BYTES = 256 * 1024


def result_cap(text: str) -> int:
    """The most bytes of JSON a chunk of ``text`` may store: ``RESULT_BYTES_PER_TEXT_BYTE`` per byte of its
    UTF-8 text, and at least ``RESULT_MIN_CAP_BYTES`` (short chunks, LLM descriptions)."""
    return max(RESULT_MIN_CAP_BYTES, RESULT_BYTES_PER_TEXT_BYTE * len(text.encode("utf-8")))


# Words small models return as entity names that are the prompt's or the schema's own labels, type names or
# placeholders, never a name from the text (issue 27: "Document Title", "Text", "ChunkExtraction", "string" ...).
# Compared whole, case-insensitively: "Journal of Hydrology" or "Text Encoding Initiative" are names.
LABEL_NAMES = frozenset({
    # the extraction prompt's labels and the response schema's field and class names
    "document title", "title", "text", "real data", "goal", "steps", "document", "chunk", "chunkextraction",
    "entity", "entities", "relation", "relations", "relationship", "relationships", "name", "type",
    "description", "source", "target", "keywords", "strength", "source entity", "target entity", "entity name",
    "entity type", "name of the entity",
    # entity types and JSON schema types
    "person", "organization", "organisation", "location", "event", "work", "date", "concept", "other",
    "string", "object", "array", "integer", "number", "boolean", "null",
    # placeholders and generic role nouns
    "unknown", "n/a", "na", "none", "example", "placeholder", "tbd", "untitled", "author", "journal",
    "company", "publisher", "article", "paper", "table", "figure", "section", "chapter", "page", "appendix",
    # section labels of papers and documentation (issue 25: "Method", "Appendix D" became entities)
    "abstract", "introduction", "conclusion", "conclusions", "method", "methods", "methodology", "results",
    "discussion", "references", "bibliography", "acknowledgements", "acknowledgments", "related work",
    "background", "overview", "summary", "contents", "table of contents", "index", "preface", "notes",
    "installation", "usage", "examples", "getting started", "changelog", "license", "faq", "limitations",
    "experiments", "evaluation", "contributions", "future work",
    # imperative verbs that open instructions ("Add the nodes ...", "Use the flow ...")
    "add", "use", "run", "install", "see", "note", "set", "call", "create", "make", "get", "check", "open",
    "read", "write", "pass", "return", "import", "define", "update", "remove", "delete", "click", "select",
    "enter", "configure", "enable", "disable", "follow", "try", "start", "stop", "build", "load", "save",
    "print", "show", "list", "compute", "apply", "define", "replace", "change", "find", "let", "consider",
})
# a label with its number or letter: "Appendix D", "Table 2", "Fig. 3", "Section 4.1", "Eq. (5)"
_NUMBERED_LABEL = re.compile(r"(appendix|table|figure|fig\.?|section|sec\.?|chapter|equation|eq\.?|algorithm|"
                             r"listing|step|part|page|theorem|lemma|definition)\s+\(?(\d+(\.\d+)*[a-z]?|[a-z]|[ivxlc]+)\)?",
                             re.IGNORECASE)
# A document's own file name or stem echoed back (issue 27: "varne_valley_railway.md", "the_varne_review"): a name
# ending in an indexed format's suffix, or a snake_case phrase opening with an article. Other snake_case names are
# code names documentation writes (shared_buffers, sqlite3_busy_timeout: issue 58) and pass.
_FILE_NAME = re.compile(r"[\w.-]+\.(?:txt|md|markdown|mdx|rst|html?|pdf|docx|jsonl|ipynb)", re.IGNORECASE)
_ARTICLE_SNAKE = re.compile(r"(?:the|a|an)_[a-z0-9]+(?:_[a-z0-9]+)*", re.IGNORECASE)
_HANDLE = re.compile(r"[#@]\w")                                   # #PellinghamInstitute, @someone
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")                    # C0 and C1 control characters, DEL


def _mojibake(name: str) -> bool:
    """UTF-8 text decoded as CP1252 or Latin-1 ("Ã©cole", "â€™") or holding the replacement character: encoding
    it back gives valid UTF-8 that differs (real names such as "São Paulo" do not encode to valid UTF-8)."""
    if "\ufffd" in name:
        return True
    for encoding in ("cp1252", "latin-1"):
        try:
            if name.encode(encoding).decode("utf-8") != name:
                return True
        except (UnicodeEncodeError, UnicodeDecodeError):
            continue
    return False


@functools.lru_cache(maxsize=1 << 16)
def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an entity name (None when it can): a URL (the validator's error link a model
    repeated after a re-ask), markup or code fragments, validation-error text, or more than
    ``MAX_NAME_CHARS`` characters / ``MAX_NAME_WORDS`` words (a sentence, not a name); a label of the prompt or
    schema, a type name or a placeholder (``LABEL_NAMES``); a hashtag or handle; a document's file name or stem
    (``_FILE_NAME``); mojibake or control characters. Memoised (a pure function of the name): a chunk's extraction
    checks each relation endpoint, so the same few names hundreds of times."""
    if len(name) > MAX_NAME_CHARS or len(name.split()) > MAX_NAME_WORDS:
        return f"longer than {MAX_NAME_CHARS} characters or {MAX_NAME_WORDS} words"
    if _NOT_A_NAME.search(name):
        return "a URL, markup or validation-error text, not a name"
    if not any(ch.isalnum() for ch in name) and not is_operator(name.strip()):
        return "no letters or digits"   # an operator ("->>", "||") is a name documentation gives
    if " ".join(name.casefold().split()) in LABEL_NAMES or _NUMBERED_LABEL.fullmatch(name.strip()):
        return ("a label of the prompt, the schema or a document's structure, a type name, a placeholder or an "
                "instruction verb, not a name from the text")
    if _HANDLE.match(name):
        return "a hashtag or handle, not a name as written"
    if _FILE_NAME.fullmatch(name) or _ARTICLE_SNAKE.fullmatch(name):
        return "a document's file name or stem, not a name from its text"
    if _mojibake(name) or _CONTROL.search(name):
        return "mojibake or control characters"
    return None


# The entity types the extraction prompt offers; a reply's other types map here (``_entity_type``)
ENTITY_TYPES = ("person", "organization", "location", "event", "work", "date", "concept", "other")
_TYPE_SYNONYMS = {
    "org": "organization", "organisation": "organization", "company": "organization", "institution": "organization",
    "group": "organization", "agency": "organization", "university": "organization",
    "place": "location", "geo": "location", "city": "location", "country": "location", "region": "location",
    "people": "person", "human": "person", "individual": "person", "character": "person",
    "time": "date", "year": "date", "period": "date",
    "book": "work", "publication": "work", "creative work": "work", "artwork": "work",
    "idea": "concept", "topic": "concept", "theme": "concept",
}
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


# Lenient reading of what small models reply (issue 27): the shapes below are meaning-preserving, so they are
# read instead of re-asking the whole chunk (a 0.5B model repeats the same shape on every re-ask). Strict where
# meaning needs it: an empty name still fails, and a reply that is the schema itself is refused.
def _text(value: Any, sep: str) -> Any:
    """A list of strings where one string is wanted (``keywords: ["a", "b"]``) joined; numbers as text; None as ""."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return sep.join(str(v).strip() for v in value if v is not None and str(v).strip())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def _renamed(data: dict, synonyms: dict[str, tuple[str, ...]]) -> dict:
    """``data`` with the first present synonym of each missing field moved to the field's name
    (``entity_name`` -> ``name``, ``src_id`` -> ``source``: LightRAG's and common small-model spellings)."""
    data = dict(data)
    for field, names in synonyms.items():
        if field not in data:
            for name in names:
                if name in data:
                    data[field] = data.pop(name)
                    break
    return data


def _entity_type(value: Any) -> str:
    """The reply's type mapped to ``ENTITY_TYPES``: lower-cased, a list's first item, known synonyms (company ->
    organization, city -> location), anything else ``other``."""
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    if not isinstance(value, str) or not value.strip():
        return "concept"
    low = " ".join(value.strip().lower().replace("_", " ").split())
    if low in ENTITY_TYPES:
        return low
    return _TYPE_SYNONYMS.get(low, "other")


def _strength(value: Any) -> Any:
    """A number as text ("8", "8/10", "strength: 7") read as its first number; out of 1-10, clamped; none: 1."""
    if value is None or isinstance(value, bool):
        return 1.0
    if isinstance(value, str):
        match = _NUMBER.search(value)
        if match is None:
            return 1.0
        value = float(match.group())
    if isinstance(value, (int, float)):
        return min(10.0, max(0.0, float(value)))
    return value


class Entity(BaseModel):
    name: str = Field(description="Name of the entity, as written in the text (proper noun or key concept)")
    type: str = Field(default="concept", description="One of: person, organization, location, event, work, date, concept, other")
    description: str = Field(default="", description="What the text says about this entity")

    @model_validator(mode="before")
    @classmethod
    def _lenient(cls, data: Any) -> Any:
        if isinstance(data, str):   # a bare name in the entity list
            return {"name": data}
        if not isinstance(data, dict):
            return data
        data = _renamed(data, {"name": ("entity_name", "entity", "label"),
                               "type": ("entity_type", "category", "kind"),
                               "description": ("entity_description", "desc", "summary")})
        if "name" in data:
            data["name"] = _text(data["name"], " ")
        if "type" in data:
            data["type"] = _entity_type(data["type"])
        if "description" in data:
            data["description"] = _text(data["description"], " ")
        return data

    @field_validator("name")
    @classmethod
    def _name_not_empty(cls, value: str) -> str:
        value = " ".join(value.split())
        if not value:
            raise ValueError("entity name must not be empty")
        return value


class Relation(BaseModel):
    source: str = Field(description="Name of the source entity")
    target: str = Field(description="Name of the target entity")
    keywords: str = Field(default="", description="Comma-separated high-level keywords for the relationship")
    description: str = Field(default="", description="How source and target are related, according to the text")
    strength: float = Field(default=1.0, ge=0.0, le=10.0, description="Strength of the relationship, 1 (weak) to 10 (strong)")

    @model_validator(mode="before")
    @classmethod
    def _lenient(cls, data: Any) -> Any:
        if isinstance(data, (list, tuple)) and len(data) in (2, 3) and all(isinstance(v, str) for v in data):
            # a triple [source, keywords, target] or a pair [source, target]
            return ({"source": data[0], "keywords": data[1], "target": data[2]} if len(data) == 3
                    else {"source": data[0], "target": data[1]})
        if not isinstance(data, dict):
            return data
        data = _renamed(data, {"source": ("src_id", "src", "source_entity", "subject", "head", "from"),
                               "target": ("tgt_id", "tgt", "target_entity", "object", "tail", "to"),
                               "keywords": ("relationship_keywords", "relationship", "relation", "predicate",
                                            "type", "label"),
                               "description": ("relationship_description", "desc", "summary"),
                               "strength": ("relationship_strength", "weight", "score")})
        for field, sep in (("source", " "), ("target", " "), ("keywords", ", "), ("description", " ")):
            if field in data:
                data[field] = _text(data[field], sep)
        if "strength" in data:
            data["strength"] = _strength(data["strength"])
        return data

    @field_validator("source", "target")
    @classmethod
    def _endpoint_not_empty(cls, value: str) -> str:
        value = " ".join(value.split())
        if not value:
            raise ValueError("relation endpoints must not be empty")
        return value


def entity_of(name: str, type: str, description: str) -> Entity:
    """``Entity(name=..., type=..., description=...)`` for strings a rule-based extractor made: built without
    running the validators when they would change nothing (a non-empty name with single spaces and no space at
    either end, a type of ``ENTITY_TYPES``), else through them. The offline extractor builds ~80 entities and
    ~85 relations per chunk: validating them, and then pydantic's ``model_construct``, were each ~10% of its time
    (issue 23, the offline build on both cores)."""
    if type in _ENTITY_TYPE_SET and name and " ".join(name.split()) == name:
        return _constructed(Entity, {"name": name, "type": type, "description": description})
    return Entity(name=name, type=type, description=description)


def relation_of(source: str, target: str, keywords: str, description: str, strength: float) -> Relation:
    """``Relation(...)`` for strings and a float a rule-based extractor made, built as ``entity_of`` is: without
    the validators when they would change nothing (endpoints as ``entity_of``'s name, a float strength in 0-10)."""
    if (type(strength) is float and 0.0 <= strength <= 10.0 and source and target
            and " ".join(source.split()) == source and " ".join(target.split()) == target):
        return _constructed(Relation, {"source": source, "target": target, "keywords": keywords,
                                       "description": description, "strength": strength})
    return Relation(source=source, target=target, keywords=keywords, description=description, strength=strength)


_ENTITY_TYPE_SET = frozenset(ENTITY_TYPES)
_set = object.__setattr__


def _constructed(model: type[BaseModel], fields: dict[str, Any]) -> Any:
    """``model.model_construct(**fields)`` for ``fields`` holding every field of a model without aliases, private
    attributes or post-init (Entity, Relation): the four attributes pydantic's ``model_construct`` ends by
    setting, without its per-field search for aliases and defaults (that search was ~9% of the offline
    extractor's time; tests/test_extraction.py compares the two)."""
    made = model.__new__(model)
    _set(made, "__dict__", fields)
    _set(made, "__pydantic_fields_set__", set(fields))
    _set(made, "__pydantic_extra__", None)
    _set(made, "__pydantic_private__", None)
    return made


class ChunkExtraction(BaseModel):
    entities: list[Entity] = Field(default_factory=list)
    relations: list[Relation] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _not_a_schema_echo(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = _renamed(data, {"entities": ("entity", "nodes"), "relations": ("relationships", "edges")})
            for field in ("entities", "relations"):
                if field in data and data[field] is None:
                    data[field] = []
                elif isinstance(data.get(field), dict):   # one item where a list is wanted
                    data[field] = [data[field]]
        if isinstance(data, dict) and "entities" not in data and "relations" not in data and (
                SCHEMA_KEYS & data.keys() or (data.get("type") == "object" and "title" in data)):
            raise ValueError("the answer repeated the JSON schema instead of data: answer with an object "
                             '{"entities": [...], "relations": [...]} filled from the text')
        return data

    @property
    def empty(self) -> bool:
        return not self.entities and not self.relations

    def capped(self, max_bytes: int) -> tuple["ChunkExtraction", int]:
        """This extraction if its JSON fits in ``max_bytes``, else its longest prefix that does (entities in
        order, then relations in order, stopping at the first item that no longer fits); returns it and
        the JSON size of the whole extraction."""
        whole = len(self.model_dump_json().encode("utf-8"))
        if whole <= max_bytes:
            return self, whole
        used = len(ChunkExtraction().model_dump_json())
        kept: dict[str, list] = {"entities": [], "relations": []}
        for field, items in (("entities", self.entities), ("relations", self.relations)):
            for item in items:
                cost = len(item.model_dump_json().encode("utf-8")) + (1 if kept[field] else 0)  # + the comma
                if used + cost > max_bytes:
                    return ChunkExtraction(**kept), whole
                kept[field].append(item)
                used += cost
        return ChunkExtraction(**kept), whole

    def normalised(self) -> "ChunkExtraction":
        """Drop self-loops and items whose names are not names (``name_problem``); add entities that
        relations name but the entity list lacks, described from those relations (type ``other``)."""
        entities = [e for e in self.entities if name_problem(e.name) is None]
        known = {e.name.casefold() for e in entities}
        relations = []
        missing: dict[str, tuple[str, list[str]]] = {}  # casefolded name -> (name, relation descriptions)
        for rel in self.relations:
            if rel.source.casefold() == rel.target.casefold():
                continue
            if name_problem(rel.source) is not None or name_problem(rel.target) is not None:
                continue
            for endpoint in (rel.source, rel.target):
                if endpoint.casefold() not in known:
                    name, said = missing.setdefault(endpoint.casefold(), (endpoint, []))
                    if rel.description and rel.description not in said:
                        said.append(rel.description)
            relations.append(rel)
        for name, said in missing.values():
            entities.append(Entity(name=name, type="other", description=" ".join(said[:3])))
        return ChunkExtraction(entities=entities, relations=relations)
