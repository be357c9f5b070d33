"""How many sample questions the offline pipeline answers, per mode (``pathrag bench sample-answers``).

The sample documents are indexed offline into a temporary home; each question of
``data/sample_questions.md`` is asked in each mode, offline (rule-based keywords, hashing embedder,
extractive answers). A question counts as **answered** when the answer key's lead name appears in the
extractive answer, compared without case, punctuation or a leading "The". The lead name is the Answer cell up
to its first parenthesis, comma or semicolon ("The Tarrant Yard (Oswin Tarrant's), at Saltmouth" ->
"Tarrant Yard"): the entity the question asks for. An answer that quotes the right sentence among others
counts, an extract that only names the question's own entities does not. Answers that are not a name
("She was his daughter") can only count if that phrase is quoted; the report lists the lead names used.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any, Callable

from pathrag_pipeline.bench.query import SAMPLE_QUESTIONS, parse_markdown_table
from pathrag_pipeline.config import SAMPLE_DOCS, Settings
from pathrag_pipeline.index.pipeline import run_indexing
from pathrag_pipeline.query.engine import MODES, PathRAG

# Path mode with Path Pooling's reselection, next to the query modes.
EXTRA_RUNS = {"path+pool_reselect": ("path", {"path_pooling": "reselect"})}

_CUT = re.compile(r"\s*[(,;]")
_NON_WORD = re.compile(r"[^\w]+")


def _fold(text: str) -> str:
    words = _NON_WORD.sub(" ", text.casefold()).split()
    if words and words[0] == "the":
        words = words[1:]
    return " ".join(words)


def lead_name(answer_cell: str) -> str:
    """The answer key's lead name: the cell up to its first parenthesis, comma or semicolon, folded."""
    return _fold(_CUT.split(answer_cell.strip(), maxsplit=1)[0])


def is_answered(answer: str, lead: str) -> bool:
    """Whether the folded ``lead`` occurs as whole words in the folded answer text."""
    return bool(lead) and f" {lead} " in f" {_fold(answer)} "


def parse_answer_key(path: Path = SAMPLE_QUESTIONS) -> list[tuple[str, str]]:
    """(question, answer cell) of each row of the first Markdown table with Question and Answer columns."""
    return [(q, a) for q, a in parse_markdown_table(path, ("Question", "Answer"), "answer key")]


def run_answers_bench(docs: Path = SAMPLE_DOCS, key_path: Path = SAMPLE_QUESTIONS,
                      modes: tuple[str, ...] = MODES, workdir: Path | None = None,
                      log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Index ``docs`` offline and ask every sample question in every mode; count the answered ones.

    Returns ``{"questions": [{"question", "lead"}], "modes": {run: {"answered", "of", "which": [bool]}}}``.
    """
    key = parse_answer_key(key_path)
    home = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-answers-")) / "home"
    settings = Settings.from_env(env={}, home=home, docs=Path(docs))
    log(f"answers bench: indexing {docs} offline")
    run_indexing(settings, folder=Path(docs), trigger="bench")
    rag = PathRAG(settings, record=False)
    runs = {mode: (mode, {}) for mode in modes} | EXTRA_RUNS
    out: dict[str, Any] = {"questions": [{"question": q, "lead": lead_name(a)} for q, a in key], "modes": {}}
    for run, (mode, options) in runs.items():
        log(f"answers bench: {run}, {len(key)} questions")
        which = []
        for question, answer in key:
            result = rag.query(question, mode=mode, **options)
            which.append(is_answered(result.answer, lead_name(answer)))
        out["modes"][run] = {"answered": sum(which), "of": len(which), "which": which}
    out["llm"] = "offline" if rag.llm is None else rag.llm.model
    return out
