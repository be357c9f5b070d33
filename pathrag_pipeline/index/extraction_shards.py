"""Extraction fanned out over worker processes, with DuckDB written by one process only.

DuckDB admits one writing process, but extraction is LLM calls: it parallelises across machines or
processes as long as the workers never open the DuckDB file. So the work splits in three:

1. ``plan_shards`` (the writer's process, a short read): the distinct texts that need the extractor
   (not cached, not already extracted), dealt round-robin into N shards;
2. ``extract_shard`` (any process, no DuckDB): run the extractor over one shard; returns picklable results;
3. ``ReplayExtractor`` + ``run_extraction`` (the writer's process): the ordinary extraction stage with an
   extractor that answers from the shards' results, so records, cache, merge, summaries and ``llm_usage``
   are written exactly as one process would write them.

assets/fanout.py wires these into a Dagster job whose middle step runs in parallel subprocesses (the
multiprocess executor; on a cluster, the k8s/celery/docker executors run the same step on other machines).
"""

from __future__ import annotations

from dataclasses import dataclass

from pathrag_pipeline.index.extraction_stage import plan_extraction
from pathrag_pipeline.index.llm_extraction import ExtractionOutcome, Extractor
from pathrag_pipeline.llm.client import LLMError, LLMUnavailableError, Usage
from pathrag_pipeline.storage.store import Store


@dataclass(frozen=True)
class ShardItem:
    text: str
    title: str | None


@dataclass
class ShardResult:
    outcome: ExtractionOutcome | None = None
    error: str | None = None              # the LLMError's message when the chunk failed
    unavailable: bool = False
    usage: tuple[int, int, int] = (0, 0, 0)  # calls, prompt tokens, completion tokens spent on a failure
    stage: str = "extract"
    model: str = ""


def plan_shards(store: Store, extractor_identity: str, shards: int) -> list[list[ShardItem]]:
    """The distinct pending texts without a cached result, split into at most ``shards`` non-empty lists."""
    if shards < 1:
        raise ValueError(f"shards={shards} must be at least 1")
    with store.connect() as con:
        plan = plan_extraction(con, extractor_identity)
    seen: set[str] = set()
    items: list[ShardItem] = []
    for chunk in plan.pending:
        if chunk.chunk_hash in plan.cached or chunk.text in seen:
            continue
        seen.add(chunk.text)
        items.append(ShardItem(chunk.text, chunk.title))
    return [s for s in (items[i::shards] for i in range(shards)) if s]


def extract_shard(extractor: Extractor, items: list[ShardItem]) -> dict[str, ShardResult]:
    """Run the extractor over one shard (no DuckDB access); keyed by the chunk text."""
    out: dict[str, ShardResult] = {}
    for item in items:
        try:
            out[item.text] = ShardResult(outcome=extractor.extract(item.text, item.title))
        except LLMError as exc:
            u = exc.usage
            out[item.text] = ShardResult(error=str(exc), unavailable=isinstance(exc, LLMUnavailableError),
                                         usage=(u.calls, u.prompt_tokens, u.completion_tokens),
                                         stage=exc.stage, model=exc.model)
    return out


class ReplayExtractor:
    """An extractor with the real one's identity that answers from shard results (the real one for any text
    that appeared after planning), so ``run_extraction`` writes what a single process would have written."""

    def __init__(self, real: Extractor, results: dict[str, ShardResult]):
        self.real = real
        self.identity = real.identity
        self.results = results
        self.replayed = 0

    def extract(self, text: str, title: str | None = None) -> ExtractionOutcome:
        result = self.results.get(text)
        if result is None:
            return self.real.extract(text, title)
        self.replayed += 1
        if result.error is not None:
            cls = LLMUnavailableError if result.unavailable else LLMError
            raise cls(result.error, stage=result.stage, model=result.model, last_error=result.error,
                      usage=Usage(calls=result.usage[0], prompt_tokens=result.usage[1],
                                  completion_tokens=result.usage[2]))
        return result.outcome
