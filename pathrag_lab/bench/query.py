"""Query latency per stage on the bundled sample corpus, offline, for every query mode.

The sample documents are indexed offline into a temporary home, then each question of
``data/sample_questions.md`` (the table's Question column) runs through ``PathRAG.query`` in each mode,
``rounds`` times. The first query of the process is reported apart (it loads the graph snapshot and opens
the vector store); the per-stage figures are medians over the remaining queries. Queries are not written to
the query log (``record=False``), so only the query path itself is timed; apart from that, the wall time of the
first mode's queries back to back as the Python API's default runs them (``record=True``: logged) is given beside
the same queries unlogged.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from pathrag_pipeline.config import PACKAGE_ROOT, SAMPLE_DOCS, Settings
from pathrag_pipeline.index.pipeline import run_indexing
from pathrag_pipeline.query.engine import MODES, PathRAG

SAMPLE_QUESTIONS = PACKAGE_ROOT / "data" / "sample_questions.md"
STAGE_ORDER = ("keywords", "graph", "retrieval", "pruning", "tracking", "sources", "prompt", "answer")  # tracking: neuropath


def parse_markdown_table(path: Path, columns: tuple[str, ...], what: str) -> list[tuple[str, ...]]:
    """The named ``columns`` (matched case-insensitively in the header) of each row of the first Markdown table
    in ``path`` that has them all; rows with an empty cell in one of them are skipped. ``what`` names the file
    in errors."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist")
    wanted = [c.lower() for c in columns]
    index: list[int] | None = None
    rows: list[tuple[str, ...]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped.startswith("|"):
            if rows:
                break
            index = None
            continue
        cells = [c.strip() for c in stripped.strip("|").split("|")]
        if index is None:
            lowered = [c.lower() for c in cells]
            index = [lowered.index(c) for c in wanted] if all(c in lowered for c in wanted) else None
            continue
        if set("".join(cells)) <= set("-: "):
            continue  # the header separator row
        if max(index) < len(cells) and all(cells[i] for i in index):
            rows.append(tuple(cells[i] for i in index))
    if not rows:
        named = " and ".join(f"'{c}'" for c in columns)
        raise ValueError(f"{path}: no Markdown table with {named} column{'s' if len(columns) > 1 else ''} "
                         "and rows was found")
    return rows


def parse_question_table(path: Path = SAMPLE_QUESTIONS) -> list[str]:
    """The Question column of the first Markdown table in ``path`` that has one."""
    return [row[0] for row in parse_markdown_table(path, ("Question",), "question file")]


def run_query_bench(docs: Path = SAMPLE_DOCS, questions_path: Path = SAMPLE_QUESTIONS,
                    modes: tuple[str, ...] = MODES, rounds: int = 3, workdir: Path | None = None,
                    log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Index ``docs`` offline, then time every question in every mode ``rounds`` times.

    Returns ``{"documents", "chunks", "entities", "relations", "questions", "rounds", "index_s",
    "first_query": {"mode", "total_ms", "timings_ms"}, "modes": {mode: {"queries", "median_ms": {stage: ms},
    "total_median_ms", "total_p95_ms", "mean_paths"}}}``.
    """
    if rounds < 1:
        raise ValueError(f"rounds={rounds} must be at least 1")
    questions = parse_question_table(questions_path)
    home = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-query-")) / "home"
    settings = Settings.from_env(env={}, home=home, docs=Path(docs))
    log(f"query bench: indexing {docs} offline")
    started = time.perf_counter()
    report = run_indexing(settings, folder=Path(docs), trigger="bench")
    index_s = time.perf_counter() - started
    rag = PathRAG(settings, record=False)
    first = rag.query(questions[0], mode=modes[0])
    out_modes: dict[str, Any] = {}
    for mode in modes:
        log(f"query bench: mode {mode}, {len(questions)} questions x {rounds}")
        results = [rag.query(q, mode=mode) for _ in range(rounds) for q in questions]
        stages = [s for s in STAGE_ORDER if any(s in r.timings_ms for r in results)]
        totals = [r.total_ms for r in results]
        out_modes[mode] = {
            "queries": len(results),
            "median_ms": {s: round(statistics.median(r.timings_ms.get(s, 0.0) for r in results), 3) for s in stages},
            "total_median_ms": round(statistics.median(totals), 2),
            "total_p95_ms": round(sorted(totals)[max(0, int(round(0.95 * len(totals))) - 1)], 2),
            "mean_paths": round(statistics.mean(len(r.paths) for r in results), 1),
        }
    logged = _logged_wall(settings, questions, rounds, modes[0])
    rag.close()
    return {
        "logged": logged,
        "documents": report.graph["documents"],
        "chunks": report.graph["chunks"],
        "entities": report.graph["entities"],
        "relations": report.graph["relations"],
        "questions": len(questions),
        "rounds": rounds,
        "index_s": round(index_s, 2),
        "first_query": {"mode": modes[0], "total_ms": round(first.total_ms, 2), "timings_ms": first.timings_ms},
        "modes": out_modes,
    }


def _logged_wall(settings: Settings, questions: list[str], rounds: int, mode: str) -> dict[str, Any]:
    """Median wall milliseconds of ``mode``'s queries asked back to back by an engine that logs them (the Python
    API's default) and by one that does not, alternating engines by round; the log's rows are merged before the
    logged engine's figures end (``close``)."""
    walls: dict[str, list[float]] = {"logged": [], "unlogged": []}
    engines = {"logged": PathRAG(settings), "unlogged": PathRAG(settings, record=False)}
    for _ in range(rounds):
        for name, rag in engines.items():
            rag.query(questions[0], mode=mode)   # each round's first query opens what the others keep
            for q in questions:
                started = time.perf_counter()
                rag.query(q, mode=mode)
                walls[name].append((time.perf_counter() - started) * 1000)
            rag.close()
    return {"mode": mode, "queries": len(walls["logged"]),
            **{f"{name}_wall_median_ms": round(statistics.median(v), 2) for name, v in walls.items()}}
