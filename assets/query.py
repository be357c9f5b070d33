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

from typing import Literal

import dagster as dg

from assets.failures import one_line_failures
import pydantic
from pydantic import Field

from assets.automation import ROW_COUNT, RUN_TAGS
from assets.ingestion import DUCKDB_POOL
from assets.resources import PathragResource
from assets.run_config import bounded_run_config
from pathrag_pipeline.query.engine import load_questions, run_questions
from pathrag_pipeline.query.params import (
    DEFAULT_NP_CANDIDATES,
    DEFAULT_NP_COREF_THRESHOLD,
    DEFAULT_NP_MAX_HOPS,
    DEFAULT_NP_TOKEN_BUDGET,
    DEFAULT_TOKEN_BUDGET,
    DEFAULT_TOP_N,
    QueryParams,
)


Mode = Literal["path", "naive", "local", "global", "hybrid", "neuropath"]
Variant = Literal["paper", "reference"]
Ordering = Literal["reliability", "hop_first", "random"]
PromptStyle = Literal["paths", "paths_passages", "passages_last", "public", "passages", "flat", "passages_paths"]
PassageOrder = Literal["rank", "question"]
PathPooling = Literal["off", "rerank", "reselect"]
PathSeeds = Literal["all", "standing"]
SeedQuery = Literal["each", "joined"]
PoolVariant = Literal["ours", "paper"]
NpVariant = Literal["paper", "ours"]
# The Literal types are Dagster config enums: the Launchpad and `dagster job launch` reject `mode: "pathh"`
# before a run is created. tests/test_dagster.py checks they list exactly MODES, VARIANTS, ORDERINGS and
# PROMPT_STYLES of pathrag_pipeline/query/params.py. Dagster's config schema has no numeric ranges: the job
# (assets/automation.py) checks the bounds below at launch through assets/run_config.bounded_run_config, so
# `theta: 5` is refused before a run is created, naming the field and its range.


# The config fields that are not QueryParams (every other field is passed to the query as it is).
NOT_QUERY_PARAMS = ("question", "questions", "questions_file", "mode")


class QuestionsConfig(dg.Config):
    question: str | None = None
    questions: list[str] = []
    questions_file: str | None = None
    mode: Mode = Field(default="path", description="path (PathRAG), naive, local, global, hybrid or neuropath")
    top_n: int = Field(default=DEFAULT_TOP_N, ge=1, le=1000, description="nodes retrieved (1-1000)")
    top_k: int = Field(default=15, ge=1, le=200, description="paths or passages kept (1-200)")
    alpha: float = Field(default=0.8, gt=0.0, le=1.0, description="decay rate in (0, 1]")
    theta: float | None = Field(default=None, ge=0.0, le=1.0,
                                description="early-stop threshold in [0, 1]; unset: 0.05 paper, 0.3 reference")
    max_hops: int | None = Field(default=None, ge=1, le=10, description="1-10; unset: 4 paper, 3 reference")
    variant: Variant = "paper"
    ordering: Ordering = "reliability"
    prompt: PromptStyle = QueryParams.prompt      # the API's default layout, one place
    passage_order: PassageOrder = Field(default=QueryParams.passage_order,
                                        description="order of the prompt's passages: rank (the ranker's) or "
                                                    "question (most similar to the question first)")
    token_budget: int = Field(default=DEFAULT_TOKEN_BUDGET, ge=200, le=200_000, description="prompt tokens (200-200000)")
    path_seeds: PathSeeds = Field(default=QueryParams.path_seeds,
                                  description="paths between all top-N seeds (the paper) or only the standing ones")
    seed_query: SeedQuery = Field(default=QueryParams.seed_query,
                                  description="seeds per keyword, merged round-robin (each), or one search for "
                                              "the keywords joined (joined, as the public PathRAG code)")
    path_pooling: PathPooling = Field(default="off", description="Path Pooling of path mode's paths: off, rerank, reselect")
    pool_variant: PoolVariant = Field(default=QueryParams.pool_variant,
                                      description="Path Pooling formula: ours, or paper (the paper's Algorithm 1)")
    np_max_hops: int = Field(default=DEFAULT_NP_MAX_HOPS, ge=1, le=10, description="neuropath: hop cap (1-10)")
    np_candidates: int = Field(default=DEFAULT_NP_CANDIDATES, ge=1, le=500,
                               description="neuropath: candidate paths per hop (1-500)")
    np_token_budget: int = Field(default=DEFAULT_NP_TOKEN_BUDGET, ge=1, le=10_000_000,
                                 description="neuropath: LLM tokens for keywords and tracking per query")
    np_coref_threshold: float = Field(default=DEFAULT_NP_COREF_THRESHOLD, gt=0.0, le=1.0,
                                      description="neuropath: name similarity of coreferent entities in (0, 1]")
    np_variant: NpVariant = Field(default=QueryParams.np_variant,
                                  description="neuropath: paper (the paper's method) or ours (our earlier variant)")

    @pydantic.model_validator(mode="after")
    def _some_question(self) -> "QuestionsConfig":
        # checked at launch by bounded_run_config (the Launchpad's pre-filled `questions: []` used to start a run
        # that failed at step time), and again when the step builds its config
        if not ((self.question or "").strip() or any(q.strip() for q in self.questions) or self.questions_file):
            raise ValueError("no question given: set `question`, `questions` or `questions_file`")
        return self

    def all_questions(self) -> list[str]:
        items = ([self.question] if self.question else []) + list(self.questions)
        if self.questions_file:
            items += load_questions(self.questions_file)
        if not items:
            raise dg.Failure("no question given: set `question`, `questions` or `questions_file` in the run config")
        return items


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
    results = run_questions(pathrag.settings(), config.all_questions(), config.mode, params)
    lines = [f"**{r.question}** ({r.mode}, {r.answer_kind}): {r.answer[:300]}" for r in results]
    for r in results:
        if r.error:
            context.log.warning(f"{r.query_id} failed: {r.error}")
        else:
            context.log.info(f"{r.query_id}: {r.answer[:200]}")
    rows = _log_rows(pathrag)
    yield dg.MaterializeResult(asset_key="queries", metadata={
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
