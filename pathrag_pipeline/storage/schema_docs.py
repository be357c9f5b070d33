"""docs/tables.md generated from the DDL in store.py, so the column documentation cannot drift from the schema.

Each column's meaning is the SQL comment on its line in ``schema.DDL``; table introductions live in
``TABLE_NOTES``. `python -m pathrag_pipeline.storage.schema_docs > docs/tables.md` rewrites the file; a test
checks it is current.
"""

from __future__ import annotations

import re

from pathrag_pipeline.storage.schema import DDL

TABLE_NOTES = {
    "documents": "One row per document. A file is one document, except a `.jsonl` file, where each line is one.",
    "chunks": "Token windows over documents.text (default 1200 tokens, 100 overlap), cut without the folder's template lines; a window that starts under headings (or inside a code block) begins with those headings (and an opening fence), so it reads as it does in place.",
    "document_lines": "Derived, for the template-line guard (`ingest/template_lines.py`): one row per distinct counted line of each indexed document, as a 64-bit key. Written and deleted with the document.",
    "template_lines": "Lines found in at least half of the folder's documents (and in at least 5): page furniture that main-content extraction left (a menu, a licence footer, \"Edit this page\"). Chunks are cut without them; `documents.text` keeps them. Recounted after every sync that changed the folder, and the documents holding a line that entered or left the set are chunked again.",
    "pathrag_meta": "Key/value settings the stored tables were built with (e.g. `chunking` = `tokens/overlap/tokenizer`), and state the index stages keep: `chunks_version` (changes whenever chunks or titles change), `graph_dirty` (extraction records not yet merged), `embeddings_synced` (fingerprint of the rows LanceDB was last brought fully in line with, for the no-op check of `pathrag index`), `embeddings_unembedded` (JSON {table: rows} the last embedding stage left without vectors; absent when none: `pathrag status` and `pathrag ask` say the index is partial), `docs_folder` (the absolute path of the one folder the home indexes, written by each folder sync; another folder, or an empty one, is refused unless `--replace`), `row_groups_unmerged_writes` (write connections since DuckDB last merged row groups: one in 64 does, `storage/row_group_merging.py`), `schema` (a fingerprint of the tables and columns the code that last created them expects: a write connection that finds its own skips creating them, `storage/schema.py`).",
    "ingest_runs": "Append-only: one row per folder sync, from every entry point (`pathrag index`, `pathrag quickstart`, the sensor, the nightly schedule, a UI launch, `run_indexing`). A `pathrag index` that finds nothing to do launches no run and writes no row, like a sensor tick that finds no change, so this table and the Dagster run list stay in step.",
    "extractions": "One record per chunk: the source of truth the graph tables are derived from.",
    "extraction_cache": "Results by (chunk text hash, extractor identity) of extraction records that were replaced or deleted, copied here as they go: with the ok records of `extractions` (looked up by the same key), what makes an unchanged text never cost an LLM call twice, under any chunk id. A result still in `extractions` is not stored here too (before issue 23 every result was: each record's JSON twice).",
    "entities": "The deduplicated graph nodes, derived from `extractions` (never edited by hand: use `entity_aliases`).",
    "relations": "The deduplicated undirected graph edges, derived from `extractions`.",
    "description_summaries": "Cache of LLM summaries of merged descriptions past the token budget.",
    "entity_names": "Every surface form the current ok extraction records give each name key, before aliases, per chunk: what alias detection reads, so aliases depend on the records and not on the order documents arrived in. Kept in step with `extractions`.",
    "entity_mentions": "One row per entity entry of the current ok extraction records, before aliases: with `relation_mentions` and `mention_texts`, what the graph merge aggregates in SQL, so an edit re-aggregates the keys it touches without parsing any record but its own. Kept in step with `extractions`.",
    "relation_mentions": "One row per relation entry of the current ok extraction records whose endpoints have different name keys, before aliases, with its keyword parts and description sentences split and case-folded once. Kept in step with `extractions`.",
    "mention_texts": "The description sentences of every row of `entity_mentions`, split and case-folded once, so merging ranks them in SQL (a relation mention holds its own parts: `relation_mentions.keyword_parts`, `description_parts`). Kept in step with `extractions`.",
    "ranked_parts": "Derived, for speed only (issue 23): the top of the description-part ranking (count, then first appearance) of each entity or relation with at least twice as many mentions as a merged description can use parts (1,002 at the default 500 tokens), so a merge by difference re-ranks only the parts an edit changed (`index/part_rankings.py`). Rebuilt by a full merge; never read by queries.",
    "ranked_parts_keys": "Derived, for speed only: per key of `ranked_parts`, the bound below which its other parts rank.",
    "dirty_parts": "Derived, for speed only: parts of mentions written or deleted since the last merge of their key, what a merge by difference re-counts. Emptied by the merges that consume it.",
    "entity_tallies": "Derived, for speed only (issue 23): per entity with at least as many mentions as `ranked_parts` keeps a ranking for and no alias, its mentions counted by name and type, so a merge by difference adds an edit's own mentions instead of counting every mention of the key again (`index/entity_tallies.py`). Rebuilt by a full merge; never read by queries.",
    "entity_tally_chunks": "Derived, for speed only: per key of `entity_tallies`, its smallest chunk ids (what `entities.source_chunk_ids` lists, with a margin) and their documents.",
    "entity_tally_keys": "Derived, for speed only: the keys `entity_tallies` holds, and whether `entity_tally_chunks` lists all their chunks.",
    "tally_changes": "Derived, for speed only: the `entity_names` rows of tallied keys written (+1) or deleted (-1) since the last merge of their key, what a merge by difference adds to the tallies. Emptied by the merges that consume it.",
    "vector_rows": "What the LanceDB tables hold, as of the embedding stage's last write: per table and key, a fingerprint of the row written. The writers of `entities`, `relations` and `chunks` mark the keys whose rows they change stale (fingerprint `''`, `storage/vector_ledger.py`), so the next sync sends the keys this table lacks or holds as stale, without fingerprinting the other rows (see `index/embedding_stage.py`). Trusted only while the LanceDB table is the one it describes (`pathrag_meta` keys `vector_rows:<table>`); otherwise rebuilt by sending every row again.",
    "entity_aliases": "Near-duplicate names merged into one entity; reversible (set `disabled`) and inspectable.",
    "llm_usage": "Cost log: one row per stage per indexing run, kept current while the run makes its calls.",
    "queries": "Append-only: one row per question asked (CLI, Python API or Dagster query job). A query asked while another process held the database, answered by the query service (`pathrag serve`) while more asks waited, or asked through the Python API while its process kept the database open for its next query (about a second after each, `KEEP_READING_S`; merged once that connection closes: idle, `rag.close()`, the process's exit, or before the process reads the database otherwise), waits in `PATHRAG_HOME/query_spool/` and arrives here (with its `path_traces` and `retrieved_nodes`) when the next ask, the idle service, `pathrag sql` or `pathrag status` finds the database free (`pathrag sql` and `pathrag status` merge it before they read); `asked_at` is still when it was asked.",
    "path_traces": "Append-only: the relational paths behind each answer, rank 1 = most reliable.",
    "retrieved_nodes": "Append-only: the entities each query keyword retrieved.",
    "eval_runs": "Append-only: one row per `pathrag eval retrieval` run, with everything the figures depend on.",
    "eval_results": "Append-only: recall@k per mode of each evaluation run, and for a baseline or an ablation its paired difference from the default mode with a 95% bootstrap interval over the questions.",
    "eval_questions": "Append-only: per question and mode, the ranked passages and recalls of an evaluation run (enough to recompute any interval with `evaluation.bootstrap`).",
    "eval_prompts": "Append-only: what the LLM reads. Per question, mode and token budget of an evaluation run, the mode's actual answer prompt scored without an LLM: its size, whether it holds a gold answer and which passages it quotes (`pathrag eval retrieval --budgets`).",
    "eval_answers": "Append-only: every answer of `pathrag eval answers`, scored against the gold answers, with the prompt the LLM read, its cost and its latency. Written as each answer arrives, so a killed run keeps what it finished; the newest row of a (run, mode, question) counts.",
    "eval_answer_runs": "Append-only: one row per invocation of `pathrag eval answers` (a resumed run has one per invocation).",
    "winrate_runs": "Append-only: one row per `pathrag eval winrate` run.",
    "winrate_results": "Append-only: win rates per dimension of each judged run.",
    "winrate_verdicts": "Append-only: every judge verdict, un-swapped to A/B, with its explanations.",
}

# Meanings of columns that recur across tables, used where a column has no comment of its own.
COMMON_COLUMNS = {
    "document_id": "documents.id",
    "prompt_tokens": "prompt tokens as reported by the LLM endpoint (0 offline)",
    "completion_tokens": "completion tokens as reported by the LLM endpoint (0 offline)",
    "created_at": "UTC time the row was written",
    "updated_at": "UTC time the row's content last changed",
    "description_tokens": "tokenizer.count_tokens(description)",
    "source_chunk_ids": "sorted distinct chunk ids whose extraction records mention it (provenance)",
    "document_ids": "distinct document ids of those chunks",
    "summary": "the summarised description",
    "total_ms": "wall time of the whole query in milliseconds",
    "answer": "the answer text (an extractive answer is labelled as such)",
    "reliability": "path reliability S(P): sum of node resources over the number of edges (PathRAG Eq. 4)",
    "hops": "number of edges on the path",
    "entity_key": "entities.entity_key",
    "entity_name": "entities.name",
}

_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+) \((.*)\)\s*$", re.S)
_COLUMN = re.compile(r"^\s*(\w+)\s+([A-Z][A-Z0-9\[\]]*(?:\([^)]*\)(?:\[\])?)?(?: PRIMARY KEY)?)[^-]*?(?:--\s*(.*))?$")


def tables() -> list[tuple[str, list[tuple[str, str, str]]]]:
    """[(table, [(column, type, meaning)])] in DDL order."""
    out = []
    for statement in DDL:
        match = _TABLE.search(statement.strip())
        if not match:
            continue
        columns = []
        for line in match.group(2).splitlines():
            col = _COLUMN.match(line)
            if col and col.group(1).upper() != "PRIMARY":
                meaning = (col.group(3) or "").strip() or COMMON_COLUMNS.get(col.group(1), "")
                columns.append((col.group(1), col.group(2), meaning))
        out.append((match.group(1), columns))
    return out


def markdown() -> str:
    lines = [
        "# Tables",
        "",
        "<!-- Generated by `python -m pathrag_pipeline.storage.schema_docs > docs/tables.md` from the DDL in",
        "     pathrag_pipeline/storage/schema.py; edit the SQL comments there, not this file. -->",
        "",
        "All tables live in the DuckDB file `$PATHRAG_HOME/pathrag.duckdb` (default `data/pathrag.duckdb`); query",
        "them read-only with `pathrag sql \"...\"`. Names and columns are a public interface: they are only ever",
        "added to. Logs are append-only. Vectors live in LanceDB (`$PATHRAG_HOME/lancedb`, or the folder or object",
        "store `PATHRAG_LANCEDB_URI` names), tables `entities`, `relations` and `chunks` keyed like their DuckDB",
        "namesakes, each recording its embedding model and dimension. What an LLM was paid for (extraction",
        "results, description summaries) is also appended to `$PATHRAG_HOME/paid_work.jsonl`, one JSON object a",
        "line (`kind` 'extraction': `extractor`, `chunk_hash`, `result`, `calls`, `prompt_tokens`,",
        "`completion_tokens`, `at`; `kind` 'summary': `input_hash`, `summary`, `model`, `at`), never rewritten: a",
        "home whose DuckDB file is lost or damaged is rebuilt from it with no LLM call (`storage/paid_work.py`).",
    ]
    for name, columns in tables():
        lines += ["", f"## {name}", ""]
        if name in TABLE_NOTES:
            lines += [TABLE_NOTES[name], ""]
        lines += ["| column | type | meaning |", "| --- | --- | --- |"]
        lines += [f"| {c} | {t} | {m.replace('|', '/')} |" for c, t, m in columns]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(markdown(), end="")
