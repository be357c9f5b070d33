"""The append-only query log: every question asked, its retained paths and its retrieved nodes.

Tables ``queries``, ``path_traces`` and ``retrieved_nodes`` (DDL in ``store.DDL``, documented in
docs/tables.md) make queries inspectable and comparable with plain SQL, e.g. which paths a question got,
how long each stage took, or how answers changed across graph versions. Rows are only ever inserted.
Questions and answers are bound as parameters, never spliced into SQL. A batch of results is written on
one short connection, after every LLM call of the batch has returned, so the DuckDB file is never held
while a model is thinking.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pathrag_pipeline.storage.store import Store, transaction

if TYPE_CHECKING:
    from pathrag_pipeline.query.results import QueryResult

_QUERY_SQL = """
INSERT INTO queries (query_id, asked_at, question, mode, params, keywords, provider, model, answer_kind,
                     tokens, ms, total_ms, answer, chunk_ids, document_ids, tracking, llm_calls, llm_tokens, error)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_PATH_SQL = """
INSERT INTO path_traces (query_id, rank, reliability, hops, node_names, edge_ids, text, chunk_ids, document_ids)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_NODE_SQL = """
INSERT INTO retrieved_nodes (query_id, keyword, rank, entity_key, entity_name, similarity)
VALUES (?, ?, ?, ?, ?, ?)
"""


def write_results(store: Store, results: Sequence["QueryResult"]) -> None:
    """Append ``results`` to the three log tables in one transaction on one short connection."""
    if not results:
        return
    queries, paths, nodes = [], [], []
    for r in results:
        queries.append([
            r.query_id, r.asked_at, r.question, r.mode, json.dumps(r.params, sort_keys=True),
            json.dumps(r.keywords), r.provider, r.model, r.answer_kind, json.dumps(r.tokens),
            json.dumps(r.timings_ms), r.total_ms, r.answer, list(r.chunk_ids), list(r.document_ids),
            json.dumps(r.tracking) if r.tracking is not None else None, r.llm_calls, r.llm_tokens, r.error,
        ])
        paths.extend(
            [r.query_id, p.rank, p.reliability, p.hops, list(p.nodes), list(p.edge_ids), p.text,
             list(p.chunk_ids), list(p.document_ids)]
            for p in r.paths
        )
        nodes.extend(
            [r.query_id, n.keyword, n.rank, n.entity_key, n.entity_name, n.similarity]
            for n in r.retrieved
        )
    with store.connect() as con, transaction(con):
        con.executemany(_QUERY_SQL, queries)
        if paths:
            con.executemany(_PATH_SQL, paths)
        if nodes:
            con.executemany(_NODE_SQL, nodes)
