"""How many sample questions the offline pipeline answers, per mode (``pathrag bench sample-answers``).

The sample documents are indexed offline into a temporary home; each question of
``data/sample_questions.md`` is asked in each mode, offline (rule-based keywords, hashing embedder,
extractive answers). A question counts as **answered** when the answer key's lead name appears in the
extractive answer, compared without case, punctuation or a leading "The". The lead name is the Answer cell up
to its first parenthesis, comma or semicolon ("The Tarrant Yard (Oswin Tarrant's), at Saltmouth" ->
"Tarrant Yard"): the entity the question asks for. An answer that quotes the right sentence among others
counts, an extract that only names the question's own entities does not. Answers that are not a name
("She was his daughter") can only count if that phrase is quoted; the report lists the lead names used.

Nine questions are few, and the extract's rules were written with them in sight, so the same count is made on
a public multi-hop set the rules were not written for: musique-100 indexed offline from its corpus and
triples, each question asked in each mode, counted when one of its gold answers or aliases appears in the
extract (``run_dataset_answers``).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from pathrag_lab.bench.query import SAMPLE_QUESTIONS, parse_markdown_table
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


def run_dataset_answers(dataset: Path, workdir: Path, modes: tuple[str, ...] = MODES,
                        log: Callable[[str], None] = lambda _: None) -> dict[str, Any] | None:
    """Index ``dataset`` (corpus.jsonl + triples.jsonl) offline and count, per mode, the questions whose gold
    answer (or an alias) appears in the extractive answer; None when the dataset is not there."""
    from pathrag_lab.bench.indexing import _settings, timed_index

    corpus, triples, questions = (dataset / n for n in ("corpus.jsonl", "triples.jsonl", "questions.jsonl"))
    if not all(p.is_file() for p in (corpus, triples, questions)):
        return None
    docs, home = workdir / "docs", workdir / "home"
    shutil.rmtree(home, ignore_errors=True)
    docs.mkdir(parents=True, exist_ok=True)
    shutil.copy(corpus, docs / "corpus.jsonl")
    settings = _settings(home, docs)
    log(f"answers bench: indexing {dataset.name} offline (corpus + triples)")
    timed_index(settings, docs, triples=triples)
    rows = [json.loads(line) for line in questions.read_text().splitlines() if line.strip()]
    rag = PathRAG(settings, record=False)
    out: dict[str, Any] = {"dataset": dataset.name, "questions": len(rows), "modes": {}}
    runs = {mode: (mode, {}) for mode in modes} | EXTRA_RUNS
    for run, (mode, options) in runs.items():
        log(f"answers bench: {dataset.name}, {run}")
        found = 0
        for row in rows:
            answer = _fold(rag.query(row["question"], mode=mode, **options).answer)
            golds = [_fold(g) for g in [*row.get("answers", []), *row.get("answer_aliases", [])]]
            found += any(g and f" {g} " in f" {answer} " for g in golds)
        out["modes"][run] = found
    return out


def run_answers_bench(docs: Path = SAMPLE_DOCS, key_path: Path = SAMPLE_QUESTIONS,
                      modes: tuple[str, ...] = MODES, workdir: Path | None = None,
                      log: Callable[[str], None] = lambda _: None, dataset: Path | None | bool = True) -> dict[str, Any]:
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
    out["docs"], out["key"] = str(docs), str(key_path)
    if dataset is True:
        from pathrag_lab.bench.indexing import MUSIQUE

        dataset = MUSIQUE
    out["dataset"] = run_dataset_answers(dataset, home.parent / "dataset", modes, log) if dataset else None
    return out
