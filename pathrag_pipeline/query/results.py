"""``QueryResult``: everything one query produced, as the API returns it and the query log stores it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from pathrag_pipeline.query.prompting import PathTrace
from pathrag_pipeline.query.retrieval import RetrievedNode


@dataclass(frozen=True)
class BudgetedPrompt:
    """The answer prompt a query renders at one token budget (``query_many(budgets=...)``, for evaluation)."""

    budget: int
    text: str                             # system + user message, as the LLM would read it
    tokens: int
    document_ids: tuple[str, ...]         # documents of the passages the prompt quotes, in prompt order


@dataclass
class QueryResult:
    """Everything one query produced; ``to_json`` is the machine-readable form ``pathrag ask --json`` prints."""

    query_id: str
    question: str
    mode: str
    asked_at: datetime
    answer: str
    answer_kind: str                      # 'llm' or 'extractive'
    provider: str                         # 'offline' without an LLM
    model: str
    params: dict[str, Any]
    keywords: dict[str, list[str]]
    paths: list[PathTrace]
    retrieved: list[RetrievedNode]
    chunk_ids: list[str]                  # ranked passages (provenance of paths, then nodes/edges; or chunk hits)
    document_ids: list[str]
    timings_ms: dict[str, float]
    tokens: dict[str, dict[str, int]]
    total_ms: float
    prompt: str = field(repr=False, default="")
    tracking: dict[str, Any] | None = None   # neuropath: tracker, stop reason, per-hop reasoning/requirement/cost
    error: str | None = None                 # why this query failed (e.g. the tracker's output stayed invalid)
    prompts: dict[int, BudgetedPrompt] = field(default_factory=dict, repr=False)  # budget -> prompt (evaluation)
    asked_from: str = "python"               # where the ask came from (queries.asked_from)
    raw_answer: str | None = None            # the model's reply as it came, when ``answer`` was cut from it (a short
                                             # answer cut to its span: query/answering.py short_answer)
    citations: list[dict[str, Any]] = field(default_factory=list)   # what each [n] of ``answer`` cites: {n, document,
                                             # section, source, chunk_ids, quotes} (query/answering.py Citation);
                                             # empty when the answer numbers no source (an LLM's answer)

    @property
    def llm_calls(self) -> int:
        """HTTP requests to the LLM over every stage of this query (0 offline)."""
        return sum(int(v.get("calls", 0)) for v in self.tokens.values() if "calls" in v)

    @property
    def llm_tokens(self) -> int:
        """LLM prompt + completion tokens over every stage that called the model (the answer prompt's own
        size in ``tokens["prompt"]`` is not a call and is not counted)."""
        return sum(int(v.get("prompt_tokens", 0)) + int(v.get("completion_tokens", 0))
                   for v in self.tokens.values() if "calls" in v)

    @property
    def standalone_llm(self) -> tuple[int, int]:
        """(calls, tokens) this query would have spent alone: ``llm_calls``/``llm_tokens`` plus the keyword call
        a memo hit saved (the same question asked before through the same ``PathRAG``, e.g. in another mode)."""
        memo_calls = sum(int(v.get("memo_calls", 0)) for v in self.tokens.values())
        memo_tokens = sum(int(v.get("memo_tokens", 0)) for v in self.tokens.values())
        return self.llm_calls + memo_calls, self.llm_tokens + memo_tokens

    def to_dict(self, include_prompt: bool = False) -> dict[str, Any]:
        out = {
            "query_id": self.query_id,
            "question": self.question,
            "mode": self.mode,
            "asked_at": self.asked_at.isoformat(),
            "answer": self.answer,
            "answer_kind": self.answer_kind,
            "provider": self.provider,
            "model": self.model,
            "params": self.params,
            "keywords": self.keywords,
            "paths": [p.to_dict() for p in self.paths],
            "retrieved_nodes": [asdict(n) for n in self.retrieved],
            "chunk_ids": self.chunk_ids,
            "document_ids": self.document_ids,
            "citations": self.citations,
            "timings_ms": self.timings_ms,
            "tokens": self.tokens,
            "total_ms": self.total_ms,
        }
        if self.tracking is not None:
            out["tracking"] = self.tracking
        if self.error is not None:
            out["error"] = self.error
        if self.raw_answer is not None:
            out["raw_answer"] = self.raw_answer
        out["llm_calls"], out["llm_tokens"] = self.llm_calls, self.llm_tokens
        if include_prompt:
            out["prompt"] = self.prompt
        return out

    def to_json(self, indent: int | None = None, include_prompt: bool = False) -> str:
        return json.dumps(self.to_dict(include_prompt), indent=indent, ensure_ascii=False)
