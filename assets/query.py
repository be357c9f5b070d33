"""The query job: answer one question or a batch from the Dagster UI and log answers and path traces.

Run config (Launchpad), e.g.::

    ops:
      answer_questions:
        config:
          questions: ["On which river lies the birthplace of the first director of the Pellingham Institute of Hydrology?"]
          mode: path          # path (PathRAG), naive, local, global, hybrid, neuropath
          top_k: 15

`questions_file` takes a JSONL ({"question": ...} per line), CSV (a `question` column) or text file instead.
The results are appended to the `queries`, `path_traces` and `retrieved_nodes` tables, exactly as
`pathrag ask` and the Python API write them.
"""

from typing import Any, Literal

import dagster as dg

from assets.failures import one_line_failures
import pydantic
from pydantic import Field

from assets.automation import ROW_COUNT, RUN_TAGS
from assets.ingestion import DUCKDB_POOL
from assets.resources import PathragResource
from assets.run_config import bounded_run_config
from pathrag_pipeline.query.answer_page import PAGES_DIR, write_pages
from pathrag_pipeline.query.engine import load_questions, run_questions
from pathrag_pipeline.query.params import MODES, SETTINGS, Setting

# The config fields that are not QueryParams (every other field is passed to the query as it is).
NOT_QUERY_PARAMS = ("question", "questions", "questions_file", "mode")


def _field(spec: Setting) -> tuple[Any, Any]:
    """A query setting as a config field: its choices a Literal (a Dagster enum: the Launchpad and `dagster job
    launch` reject `variant: "papper"` before a run is created), its bounds pydantic's, which Dagster's schema
    lacks: the job checks them at launch through assets/run_config.bounded_run_config, so `theta: 5` is refused
    before a run is created, naming the field and its range."""
    kind: Any = {"int": int, "float": float, "bool": bool, "str": str}.get(spec.kind)
    if spec.choices:
        kind = Literal[spec.choices]  # type: ignore[valid-type]
    if spec.kind == "list":
        kind = list[str]   # Dagster has no list of enums: _Questions checks the items against the choices
    if spec.optional:
        kind = kind | None
    bounds = {("gt" if spec.lo_open else "ge"): spec.lo} if spec.lo is not None else {}
    if spec.hi is not None:
        bounds["le"] = spec.hi
    default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
    description = f"{spec.help} ({spec.bounds()}; {spec.origin})" if spec.bounds() else f"{spec.help} ({spec.origin})"
    return kind, Field(default=default, description=description, **bounds)


class _Questions(dg.Config):
    question: str | None = None
    questions: list[str] = []
    questions_file: str | None = None
    mode: Literal[MODES] = Field(default="path",  # type: ignore[valid-type]
                                 description="path (PathRAG), naive, local, global, hybrid or neuropath")

    @pydantic.model_validator(mode="after")
    def _some_question(self) -> "_Questions":
        # checked at launch by bounded_run_config (the Launchpad's pre-filled `questions: []` used to start a run
        # that failed at step time), and again when the step builds its config
        if not ((self.question or "").strip() or any(q.strip() for q in self.questions) or self.questions_file):
            raise ValueError("no question given: set `question`, `questions` or `questions_file`")
        for name, spec in SETTINGS.items():
            if spec.kind == "list":
                spec.check(tuple(getattr(self, name)))
        return self

    def all_questions(self) -> list[str]:
        items = ([self.question] if self.question else []) + list(self.questions)
        if self.questions_file:
            items += load_questions(self.questions_file)
        if not items:
            raise dg.Failure("no question given: set `question`, `questions` or `questions_file` in the run config")
        return items


# The questions, the mode, and every query setting from its one declaration (query/params.py).
QuestionsConfig = pydantic.create_model("QuestionsConfig", __base__=_Questions,
                                        **{name: _field(spec) for name, spec in SETTINGS.items()})


@dg.multi_asset(
    specs=[
        dg.AssetSpec("queries", deps=["entities", "relations", "embeddings"], group_name="query", kinds={"duckdb"},
                     description="Append-only log: one row per question (mode, parameters, tokens and ms per stage, answer)."),
        dg.AssetSpec("path_traces", deps=["queries"], group_name="query", kinds={"duckdb"},
                     description="Append-only: the relational paths behind each answer with reliability and provenance."),
        dg.AssetSpec("retrieved_nodes", deps=["queries"], group_name="query", kinds={"duckdb"},
                     description="Append-only: the entities each query keyword retrieved, with similarity."),
    ],
    name="answer_questions",
    pool=DUCKDB_POOL,
    description="Answer the configured questions with PathRAG (or a baseline mode) and log everything.",
)
@one_line_failures
def answer_questions(context: dg.AssetExecutionContext, config: QuestionsConfig, pathrag: PathragResource):
    params = {k: getattr(config, k) for k in QuestionsConfig.model_fields if k not in NOT_QUERY_PARAMS}
    results = run_questions(pathrag.settings(), config.all_questions(), config.mode, params,
                            asked_from=f"dagster run {context.run_id}")
    lines = [f"**{r.question}** ({r.mode}, {r.answer_kind}): {r.answer[:300]}" for r in results]
    for r in results:
        if r.error:
            context.log.warning(f"{r.query_id} failed: {r.error}")
        else:
            context.log.info(f"{r.query_id}: {r.answer[:200]}")
    rows = _log_rows(pathrag)
    page_links = _pages(context, pathrag, [r for r in results if not r.error])
    yield dg.MaterializeResult(asset_key="queries", metadata={
        "pages": dg.MetadataValue.md(page_links or "no answer to draw"),
        **rows.get("queries", {}),
        "questions": len(results),
        "mode": config.mode,
        "model": results[0].model if results else "",
        "query_ids": dg.MetadataValue.json([r.query_id for r in results]),
        "median_total_ms": sorted(r.total_ms for r in results)[len(results) // 2],
        "failed": sum(r.error is not None for r in results),
        "llm_tokens": sum(r.llm_tokens for r in results),
        "answers": dg.MetadataValue.md("\n\n".join(lines)),
    })
    yield dg.MaterializeResult(asset_key="path_traces", metadata={**rows.get("path_traces", {}),
                                                                  "paths": sum(len(r.paths) for r in results)})
    yield dg.MaterializeResult(asset_key="retrieved_nodes",
                               metadata={**rows.get("retrieved_nodes", {}),
                                         "nodes": sum(len(r.retrieved) for r in results)})


def _pages(context: dg.AssetExecutionContext, pathrag: PathragResource, results: list) -> str:
    """Each answer drawn as `pathrag ask --html` draws it, one page per question in PATHRAG_HOME/pages/RUN_ID/,
    as Markdown links for the materialisation (a note instead when another process holds the file)."""
    from pathrag_pipeline.storage.store import StoreLockedError

    folder = pathrag.settings().home / PAGES_DIR / context.run_id
    try:
        pages = write_pages(pathrag.store(), results, folder)
    except StoreLockedError:
        return "not drawn: another process held the index; `pathrag ask --show QUERY_ID --html FILE` draws any"
    return "\n".join(f"- [{r.question}]({p.as_uri()}) `{p}`" for r, p in zip(results, pages)) or "no answer to draw"


def _log_rows(pathrag: PathragResource) -> dict[str, dict[str, int]]:
    """Each log table's row count after this run's asks (the mark the sensor's reports of other asks start
    from); nothing when another process holds the file (this run's rows then wait in the spool)."""
    from pathrag_pipeline.query.query_log import log_rows
    from pathrag_pipeline.storage.store import StoreLockedError

    try:
        with pathrag.store().connect(read_only=True) as con:
            return {t: {ROW_COUNT: n} for t, n in log_rows(con).items()}
    except StoreLockedError:
        return {}


# Defined here, not in automation.py with the index jobs, so `pathrag index` (assets/runs.py) does not import the
# query engine.
query_job = dg.define_asset_job(
    "ask_questions",
    selection=dg.AssetSelection.groups("query"),
    executor_def=dg.in_process_executor,
    tags=RUN_TAGS,
    config=bounded_run_config({"answer_questions": QuestionsConfig}),  # numeric bounds checked at launch
    description="Answer one question or a batch (run config: question / questions / questions_file, mode, "
                "PathRAG parameters); appends to queries, path_traces and retrieved_nodes.",
)
