"""DuckDB storage: schema of the public tables and short-lived connections that respect the single-writer rule.

DuckDB allows one read-write process at a time (or many read-only ones, never both). Every Dagster run
is its own process and the CLI is another, so connections here are opened late, held briefly, and
retried with backoff while another process holds the lock. LLM calls and parsing happen outside them.
Table columns are documented in docs/tables.md; names are stable.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timezone
import os
import random
import re
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import duckdb

from pathrag_pipeline.config import DEFAULT_DUCKDB_MEMORY_LIMIT, DEFAULT_SQL_MAX_TEMP, usable_cores
from pathrag_pipeline.errors import PipelineError
from pathrag_pipeline.storage.row_group_merging import SETTLE_AFTER_BYTES, before_close, merging_off, wal_bytes

T = TypeVar("T")

SCHEMA_VERSION = 1

DDL = [
    """
    CREATE TABLE IF NOT EXISTS documents (
        id            VARCHAR PRIMARY KEY,   -- relative path, or 'path#record-id' for a JSONL record
        path          VARCHAR NOT NULL,      -- file path relative to the indexed folder (named in the documents_parse_cleanly check)
        title         VARCHAR,               -- first heading, HTML <title>, PDF/DOCX metadata, JSONL title, or file name
        format        VARCHAR,               -- txt, md, html, pdf, docx, jsonl
        content_hash  VARCHAR,               -- sha256 of this document's source bytes (the file, or the JSONL line)
        file_hash     VARCHAR,               -- sha256 of the whole file (change detection per file)
        size_bytes    BIGINT,                -- size of the file
        status        VARCHAR NOT NULL,      -- 'indexed' or 'error'
        error         VARCHAR,               -- what went wrong and what to do, when status = 'error'
        text          VARCHAR,               -- the main content as plain text, headings as '#' lines, code fenced with ```, inline code in backticks (text/structure.py); chunk offsets point into it
        created_at    TIMESTAMP NOT NULL,    -- UTC, first indexed
        updated_at    TIMESTAMP NOT NULL,    -- UTC, last change of content or status
        warning       VARCHAR                -- set when the file was read, but not as intended: an HTML page whose main content was not found, read whole
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS chunks (
        id            VARCHAR PRIMARY KEY,   -- 'chunk-' + hash(document id, text, repeat index): stable for unchanged text
        document_id   VARCHAR NOT NULL,      -- documents.id
        ordinal       INTEGER NOT NULL,      -- 0-based position in the document
        text          VARCHAR NOT NULL,      -- the window's text, trimmed, without the folder's template lines, after the headings it sits under (and an opening code fence when it starts inside code): ingest/chunking.py
        token_count   INTEGER NOT NULL,      -- tokens in the window (offline tokenizer, see tokenizer.py)
        char_start    INTEGER NOT NULL,      -- offset of the window in documents.text (the window is documents.text[char_start:char_end] less any template line)
        char_end      INTEGER NOT NULL,      -- end offset (exclusive) into documents.text
        content_hash  VARCHAR NOT NULL,      -- sha256 of text (the extraction cache key)
        section       VARCHAR                -- the heading path the window starts under, ' > '-joined ('' when none)
    )
    """,
    "CREATE INDEX IF NOT EXISTS chunks_document ON chunks(document_id)",
    """
    CREATE TABLE IF NOT EXISTS document_lines (
        document_id   VARCHAR NOT NULL,      -- documents.id (indexed documents only)
        line_hash     BIGINT NOT NULL,       -- template_lines.line_key of one distinct line of it (headings, code fences and lines of under 3 letters are not counted)
        in_text       BOOLEAN NOT NULL       -- the line is in documents.text; false: only on the whole HTML page (its furniture), counted but not in the text
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS template_lines (
        line_hash     BIGINT PRIMARY KEY,    -- the line's key (document_lines.line_hash)
        line          VARCHAR NOT NULL,      -- the line, as one of its documents writes it
        documents     INTEGER NOT NULL       -- indexed documents holding it when last counted: at least half the folder's (ingest/template_lines.py); chunks leave it out
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS pathrag_meta (
        key           VARCHAR PRIMARY KEY,   -- e.g. 'chunking': the chunk settings the chunks table was built with
        value         VARCHAR                -- the setting's value
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS ingest_runs (
        run_id        VARCHAR NOT NULL,      -- the Dagster run id (whole) of the index_folder run; a 12-hex id from run_indexing
        started_at    TIMESTAMP NOT NULL,    -- UTC
        finished_at   TIMESTAMP,             -- UTC
        trigger       VARCHAR,               -- cli, quickstart, python, sensor, schedule, dagster (UI launch), eval, bench
        folder        VARCHAR,               -- absolute path of the indexed folder
        files_seen    INTEGER,               -- supported files found by the scan
        files_new     INTEGER,               -- not indexed before
        files_changed INTEGER,               -- content hash differs from the indexed one
        files_deleted INTEGER,               -- indexed before, gone from the folder (their rows were removed)
        files_unchanged INTEGER,             -- skipped: same content hash
        files_failed  INTEGER,               -- status 'error' or some JSONL records malformed
        documents     INTEGER,               -- documents (re)written by this run
        chunks        INTEGER,               -- chunks (re)written by this run
        seconds       DOUBLE                 -- wall time of the sync
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS extractions (
        chunk_id      VARCHAR PRIMARY KEY,   -- chunks.id: one extraction record per chunk, the source of truth of the graph
        chunk_hash    VARCHAR NOT NULL,      -- chunks.content_hash of the text that was extracted
        document_id   VARCHAR NOT NULL,
        extractor     VARCHAR NOT NULL,      -- identity of what extracted: provider + model + prompt version + gleaning
        status        VARCHAR NOT NULL,      -- 'ok' (result is merged into the graph), 'failed' (ignored by the merge) or 'empty' (a chunk with content the model extracted nothing from, even when asked again: a schema echo or empty lists, typical of a model too small for the prompt); failed and empty chunks are retried on the next run
        error         VARCHAR,               -- what went wrong and what to do, when status = 'failed' or 'empty'; for 'ok', what was cut when the result was trimmed to the per-chunk cap (extraction_models.result_cap), else NULL
        result        JSON,                  -- ChunkExtraction: {"entities":[{name,type,description}],"relations":[{source,target,keywords,description,strength}]}
        calls         INTEGER,               -- LLM calls spent on this chunk (0 for a cache hit or the offline extractor)
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        created_at    TIMESTAMP NOT NULL,
        failed_runs   INTEGER,               -- 'failed'/'empty': runs in a row this text failed with this extractor and retry_key; after 3 it is not retried until one of them changes or `pathrag index --retry-failed` (NULL for 'ok')
        retry_key     VARCHAR                -- the extraction settings outside the extractor identity a failure depends on (LLM mode and output cap, e.g. 'md_json:4096'); '' offline
    )
    """,
    "CREATE INDEX IF NOT EXISTS extractions_document ON extractions(document_id)",
    """
    CREATE TABLE IF NOT EXISTS extraction_cache (
        chunk_hash    VARCHAR NOT NULL,      -- sha256 of the chunk text: same text, same result, whatever its chunk id
        extractor     VARCHAR NOT NULL,      -- same meaning as extractions.extractor; a new model or prompt misses the cache
        result        JSON NOT NULL,         -- ChunkExtraction as JSON of a replaced or deleted 'ok' record
        calls         INTEGER,               -- LLM calls the original extraction cost
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        created_at    TIMESTAMP NOT NULL,
        PRIMARY KEY (chunk_hash, extractor)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS entities (
        entity_key    VARCHAR PRIMARY KEY,   -- names.name_key of the name, resolved through active entity_aliases
        name          VARCHAR NOT NULL,      -- most frequent surface form among the mentions (ties: longest, then A-Z)
        type          VARCHAR NOT NULL,      -- majority type of the mentions; 'other' (added endpoints) votes only when nothing else does
        description   VARCHAR NOT NULL,      -- distinct description sentences by frequency, or an LLM summary past the token budget
        description_tokens INTEGER NOT NULL, -- tokenizer.count_tokens(description)
        mention_count INTEGER NOT NULL,      -- entity entries in ok extraction records (+1 per chunk naming it only as a relation endpoint)
        source_chunk_ids VARCHAR[] NOT NULL, -- the 300 smallest (graph_merge.MAX_SOURCE_IDS; LightRAG's cap) distinct chunk ids whose records mention it, sorted; every one: entity_mentions
        document_ids  VARCHAR[] NOT NULL,    -- sorted distinct document ids of those chunks
        updated_at    TIMESTAMP NOT NULL     -- last time the row's content changed
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS relations (
        relation_key  VARCHAR PRIMARY KEY,   -- src_key || '<|>' || tgt_key (undirected: the two keys in sorted order)
        src_key       VARCHAR NOT NULL,      -- entities.entity_key, the smaller of the two
        tgt_key       VARCHAR NOT NULL,      -- entities.entity_key, the larger of the two
        keywords      VARCHAR NOT NULL,      -- distinct comma-separated keywords by frequency, joined with ', '
        description   VARCHAR NOT NULL,      -- merged like entities.description
        description_tokens INTEGER NOT NULL,
        strength      DOUBLE NOT NULL,       -- sum of the strengths of its mentions
        mention_count INTEGER NOT NULL,      -- relation entries in ok extraction records (either direction)
        source_chunk_ids VARCHAR[] NOT NULL, -- like entities.source_chunk_ids (at most 300); every one: relation_mentions
        document_ids  VARCHAR[] NOT NULL,    -- sorted distinct document ids of those chunks
        updated_at    TIMESTAMP NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS description_summaries (
        input_hash    VARCHAR PRIMARY KEY,   -- sha256 of (kind, name, distinct descriptions, token budget): same input, no new LLM call
        summary       VARCHAR NOT NULL,
        model         VARCHAR,               -- who summarised (the summariser's identity), for inspection only
        created_at    TIMESTAMP NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS entity_names (
        chunk_id      VARCHAR NOT NULL,      -- extractions.chunk_id of the ok record the mentions are in
        name_key      VARCHAR NOT NULL,      -- names.name_key of the surface form, before any alias
        name          VARCHAR NOT NULL,      -- the surface form as extracted
        type          VARCHAR,               -- lower-cased extracted type; 'other' for a relation endpoint the chunk names in no entity entry; NULL when empty
        mentions      INTEGER NOT NULL       -- entries of this record with this key, name and type
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS entity_mentions (
        chunk_id      VARCHAR NOT NULL,      -- extractions.chunk_id of the ok record the entry is in
        document_id   VARCHAR NOT NULL,      -- extractions.document_id
        ord           INTEGER NOT NULL,      -- 1-based position of the entry in the record's entity list
        name_key      VARCHAR NOT NULL,      -- names.name_key of the name, before any alias
        name          VARCHAR NOT NULL,      -- the name as extracted
        type          VARCHAR                -- lower-cased extracted type; NULL when empty
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS relation_mentions (
        chunk_id      VARCHAR NOT NULL,      -- extractions.chunk_id of the ok record the entry is in
        document_id   VARCHAR NOT NULL,
        ord           INTEGER NOT NULL,      -- 1-based position of the entry in the record's relation list
        source_key    VARCHAR NOT NULL,      -- names.name_key of the source as extracted, before any alias
        target_key    VARCHAR NOT NULL,      -- names.name_key of the target (never equal to source_key: such entries are dropped)
        source        VARCHAR NOT NULL,      -- the source name as extracted
        target        VARCHAR NOT NULL,      -- the target name as extracted
        strength      DOUBLE NOT NULL,       -- the entry's strength (1.0 when it gave none)
        keyword_parts STRUCT(fold VARCHAR, text VARCHAR)[],      -- its keywords split at , ; and newlines, in order: each whitespace-normalised (text) and case-folded (fold, what merging compares)
        description_parts STRUCT(fold VARCHAR, text VARCHAR)[]   -- its description's sentences in order, likewise
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS mention_texts (
        chunk_id      VARCHAR NOT NULL,      -- the mention's chunk (entity_mentions.chunk_id)
        ord           INTEGER NOT NULL,      -- the mention's ord (entity_mentions.ord)
        field         VARCHAR NOT NULL,      -- 'entity_description' (relation parts are lists in relation_mentions)
        pos           INTEGER NOT NULL,      -- 0-based position of the part within its field
        fold          VARCHAR NOT NULL,      -- the part case-folded: what merging compares
        text          VARCHAR NOT NULL       -- a description sentence, whitespace-normalised
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS ranked_parts (
        field         VARCHAR NOT NULL,      -- 'entity_description' or 'relation_description' (mention_texts.field)
        key           VARCHAR NOT NULL,      -- entities.entity_key or relations.relation_key (aliases applied)
        fold          VARCHAR NOT NULL,      -- the part case-folded (mention_texts.fold)
        n             BIGINT NOT NULL,       -- how many mentions of the key hold the part
        first_chunk   VARCHAR NOT NULL,      -- first appearance of the part among them: chunk id,
        first_ord     INTEGER NOT NULL,      -- the entry's ord in that chunk's record,
        first_pos     INTEGER NOT NULL,      -- and the part's position in the entry
        text          VARCHAR NOT NULL       -- the part as it reads at its first appearance
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS ranked_parts_keys (
        field         VARCHAR NOT NULL,      -- as in ranked_parts
        key           VARCHAR NOT NULL,      -- a key whose ranking ranked_parts holds the top of
        n             BIGINT NOT NULL,       -- the bound: every part of the key not in ranked_parts ranks strictly below
        first_chunk   VARCHAR NOT NULL,      -- the bound part's first appearance: chunk id,
        first_ord     INTEGER NOT NULL,      -- entry ord
        first_pos     INTEGER NOT NULL,      -- and position in the entry (as in ranked_parts)
        complete      BOOLEAN NOT NULL,      -- true: ranked_parts holds every part of the key (the bound is then its last)
        PRIMARY KEY (field, key)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS dirty_parts (
        field         VARCHAR NOT NULL,      -- as in ranked_parts
        source_key    VARCHAR NOT NULL,      -- the mention's raw name key (entity) or source name key (relation), before aliases
        target_key    VARCHAR,               -- the relation mention's raw target name key; NULL for an entity
        fold          VARCHAR NOT NULL       -- a part whose count or first appearance a written or deleted record changed
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS entity_tallies (
        key           VARCHAR NOT NULL,      -- entities.entity_key of a key with a tally (entity_tally_keys)
        name          VARCHAR NOT NULL,      -- a surface form its mentions give (entity_names.name)
        type          VARCHAR,               -- with this type (entity_names.type; NULL when empty)
        n             BIGINT NOT NULL        -- how many of its mentions give this name and type
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS entity_tally_chunks (
        key           VARCHAR NOT NULL,      -- as in entity_tallies
        chunk_id      VARCHAR NOT NULL,      -- one of the key's smallest distinct chunk ids (twice as many as entities.source_chunk_ids lists)
        document_id   VARCHAR NOT NULL       -- that chunk's document
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS entity_tally_keys (
        key           VARCHAR PRIMARY KEY,   -- an entity key with many mentions and no alias whose tallies are kept
        complete      BOOLEAN NOT NULL       -- true: entity_tally_chunks holds every chunk of the key; false: every other chunk is larger than its largest there
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS tally_changes (
        sign          TINYINT NOT NULL,      -- 1: the row was written, -1: deleted, since the key was last merged
        chunk_id      VARCHAR NOT NULL,      -- as in entity_names
        name_key      VARCHAR NOT NULL,      -- a key of entity_tally_keys
        name          VARCHAR NOT NULL,      -- as in entity_names
        type          VARCHAR,               -- as in entity_names
        n             INTEGER NOT NULL       -- entity_names.mentions
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS vector_rows (
        table_name    VARCHAR NOT NULL,      -- the LanceDB table: 'entities', 'relations' or 'chunks'
        key           VARCHAR NOT NULL,      -- the row's key there (entity_key, relation_key, chunks.id)
        fingerprint   VARCHAR NOT NULL,      -- hash of the row (key, embedded text, payload) the embedding stage last wrote; '' stale
        PRIMARY KEY (table_name, key)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS entity_aliases (
        alias_key     VARCHAR PRIMARY KEY,   -- a name key whose mentions are merged into another entity
        canonical_key VARCHAR NOT NULL,      -- the key they are merged into (chains a->b->c resolve to c)
        method        VARCHAR NOT NULL,      -- 'string', 'embedding' or 'manual'
        score         DOUBLE,                -- similarity that proposed it (1.0 for manual)
        created_at    TIMESTAMP NOT NULL,
        disabled      BOOLEAN NOT NULL DEFAULT false  -- true un-merges on the next merge and stops detection re-adding it
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS llm_usage (
        run_id        VARCHAR NOT NULL,      -- the Dagster run id (whole), or run_indexing's id; equals ingest_runs.run_id of the same run
        stage         VARCHAR NOT NULL,      -- 'extract' (first pass + gleaning) or 'summarise' (description summaries)
        extractor     VARCHAR,               -- identity of the extractor or summariser (model, prompt version; never a key)
        items         INTEGER,               -- chunks pending extraction, or descriptions summarised
        calls         INTEGER NOT NULL,      -- HTTP requests sent, retries and re-asks included (0 offline)
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        cache_hits    INTEGER NOT NULL,      -- items answered from stored results (extractions, extraction_cache) / description_summaries without a call
        failed        INTEGER NOT NULL,      -- items whose output stayed invalid or empty (extractions.status = 'failed' or 'empty')
        seconds       DOUBLE,                -- wall time of the stage (so far, while the run goes on)
        created_at    TIMESTAMP NOT NULL     -- one row per stage per run, rewritten as calls are made: a killed run's calls are in it
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS queries (
        query_id      VARCHAR NOT NULL,      -- uuid of one question asked (append-only log, one row per query)
        asked_at      TIMESTAMP NOT NULL,    -- UTC
        question      VARCHAR NOT NULL,      -- verbatim, as asked
        mode          VARCHAR NOT NULL,      -- path, naive, local, global, hybrid or neuropath
        params        JSON NOT NULL,         -- top_n, top_k, alpha, theta, max_hops, variant, ordering, prompt, token_budget, chunk_search, seed_search, passages, seed_pass, revert (path ablations), path_seeds and seed_query (only when not the default: all, each), embedder, graph_version ...
        keywords      JSON,                  -- {"low_level": [...], "high_level": [...]}
        provider      VARCHAR NOT NULL,      -- 'offline' or the LLM provider
        model         VARCHAR NOT NULL,      -- 'offline' or the LLM model
        answer_kind   VARCHAR NOT NULL,      -- 'llm', 'extractive', 'none' (retrieval only, e.g. evaluation) or 'failed' (see error)
        tokens        JSON NOT NULL,         -- per stage: {"keywords": {calls, prompt_tokens, completion_tokens}, "prompt": {...}, "answer": {...}}; neuropath adds "tracking" and "completion" (per hop: the tracking column)
        ms            JSON NOT NULL,         -- milliseconds per stage: keywords, graph, retrieval, pruning, sources, prompt, answer (neuropath: tracking instead of pruning)
        total_ms      DOUBLE NOT NULL,
        answer        VARCHAR NOT NULL,
        chunk_ids     VARCHAR[] NOT NULL,    -- passages ranked by the retrieved paths/nodes/edges (evaluation: recall@k)
        document_ids  VARCHAR[] NOT NULL,    -- documents of those passages, in first-appearance order
        tracking      JSON,                  -- neuropath only: {"tracker": 'llm:<model>' or 'heuristic:embedder+bm25' (no LLM: a heuristic tracker, not NeuroPath's), "stop_reason", "hops": [{hop, candidates, shown, reasoning_chain, expansion_requirement, valid_paths, valid, expand, continue, calls, prompt_tokens, completion_tokens, ms}], "seeds", "reasoning_chain", "expansion_requirement", "completion_query", "error", "tracker_error" (the paper's variant: the tracker's answer stayed invalid and the query went on from the completion alone, stop_reason 'tracker_invalid')}; NULL for other modes
        llm_calls     INTEGER,               -- LLM requests over every stage of the query (re-asks and retries included; 0 offline)
        llm_tokens    INTEGER,               -- LLM prompt + completion tokens over every stage of the query (0 offline)
        error         VARCHAR                -- why the query failed (e.g. the neuropath tracker's output stayed invalid after its re-ask); NULL when it succeeded
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS path_traces (
        query_id      VARCHAR NOT NULL,      -- queries.query_id
        rank          INTEGER NOT NULL,      -- 1 = most reliable (it is the last path in the prompt); neuropath: tracked paths, deepest hop first
        reliability   DOUBLE NOT NULL,       -- path reliability S(P) (PathRAG Eq. 4); neuropath: the tracker's score (offline: RRF of cosine and BM25; LLM: 1 / position in its answer)
        hops          INTEGER NOT NULL,
        node_names    VARCHAR[] NOT NULL,    -- entity display names along the path
        edge_ids      VARCHAR[] NOT NULL,    -- relations.relation_key along the path
        text          VARCHAR NOT NULL,      -- the path as rendered for the prompt
        chunk_ids     VARCHAR[] NOT NULL,    -- source chunks of its edges, then of its nodes
        document_ids  VARCHAR[] NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS retrieved_nodes (
        query_id      VARCHAR NOT NULL,      -- queries.query_id
        keyword       VARCHAR NOT NULL,      -- the query keyword whose vector search found the entity
        rank          INTEGER NOT NULL,      -- 0-based position in the round-robin merge over keywords
        entity_key    VARCHAR NOT NULL,
        entity_name   VARCHAR NOT NULL,
        similarity    DOUBLE NOT NULL        -- cosine similarity of keyword and entity vectors
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS eval_runs (
        run_id        VARCHAR PRIMARY KEY,   -- uuid of one `pathrag eval retrieval` run
        started_at    TIMESTAMP NOT NULL,    -- UTC
        dataset       VARCHAR NOT NULL,      -- dataset folder name, e.g. musique-100; 'musique-100 (oracle hop questions)' for --hop-questions (MuSiQue's own decomposition: an oracle, not used to choose anything)
        dataset_path  VARCHAR NOT NULL,      -- absolute path of the dataset folder
        dataset_hash  VARCHAR NOT NULL,      -- sha256 over the corpus, questions and (when used) triples files
        questions     INTEGER NOT NULL,      -- questions evaluated (after --limit)
        modes         VARCHAR[] NOT NULL,    -- query modes evaluated, in order
        ks            INTEGER[] NOT NULL,    -- the k of each recall@k
        params        JSON NOT NULL,         -- query parameters (top_n, top_k, alpha, theta, max_hops, variant, ...)
        extractor     VARCHAR NOT NULL,      -- identity of what built the graph: 'import:<hash>' for triples, else the extractor
        embedder      VARCHAR NOT NULL,      -- identity of the embedder of the evaluated index (the model: 'st:all-MiniLM-L6-v2' on any runtime)
        llm           VARCHAR NOT NULL,      -- LLM model for query keywords and answers, or 'offline'
        use_triples   BOOLEAN NOT NULL,      -- true: graph imported from the dataset's triples.jsonl
        workdir       VARCHAR NOT NULL,      -- the evaluation index's own PATHRAG_HOME
        index_seconds DOUBLE,                -- wall time of (re)indexing; near zero when the index was reused
        documents_indexed INTEGER,           -- documents (re)written by this run's ingest (0 = index reused)
        seconds       DOUBLE,                -- wall time of the whole run
        verdict       VARCHAR,               -- the best graph mode against the strongest flat baseline, per k with paired 95% bootstrap intervals and beats/ties/trails (NULL without a graph mode or a baseline, and for runs before it was stored)
        embedder_runtime VARCHAR,            -- what computed the vectors: 'st-onnx:all-MiniLM-L6-v2' on onnxruntime, else the embedder identity (NULL for runs before it was stored)
        graph         VARCHAR                -- where the graph came from (--graph): 'offline' (the offline rules), 'llm' (the configured LLM extractor) or 'triples' (the dataset's triples.jsonl); NULL for runs before it was stored
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS eval_results (
        run_id        VARCHAR NOT NULL,      -- eval_runs.run_id
        mode          VARCHAR NOT NULL,      -- path, naive, local, global, hybrid, neuropath, a baseline (bm25, dense, bm25+dense) or an ablation (path:*, neuropath:*)
        k             INTEGER NOT NULL,      -- passages considered
        recall        DOUBLE NOT NULL,       -- share of gold passages among the first k distinct passages, mean over questions
        questions     INTEGER NOT NULL,      -- questions averaged
        median_ms     DOUBLE,                -- median wall time of one query in this mode
        llm_calls     DOUBLE,                -- mean LLM requests per query in this mode (keywords, neuropath tracking; 0 offline)
        llm_tokens    DOUBLE,                -- mean LLM prompt + completion tokens per query in this mode (0 offline)
        compared_to   VARCHAR,               -- the mode diff is taken against: 'path' for a baseline or a path:* ablation, 'neuropath' for a neuropath:* ablation; NULL for a query mode (or when that mode was not in the run)
        diff          DOUBLE,                -- mean over questions of this mode's recall@k minus compared_to's (paired, same questions)
        ci_low        DOUBLE,                -- low end of the paired 95% bootstrap interval of diff (10,000 resamples of the questions, seed 0; evaluation/bootstrap.py)
        ci_high       DOUBLE,                -- high end of that interval: 'beats' when ci_low > 0, 'trails' when ci_high < 0, else 'ties'
        mean_diff     DOUBLE,                -- the same for each question's recall averaged over the run's ks (mean R): mean difference (equal on every k row of the mode)
        mean_ci_low   DOUBLE,                -- low end of mean_diff's paired 95% bootstrap interval
        mean_ci_high  DOUBLE                 -- high end of mean_diff's paired 95% bootstrap interval
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS eval_questions (
        run_id        VARCHAR NOT NULL,      -- eval_runs.run_id
        mode          VARCHAR NOT NULL,      -- query mode
        question_id   VARCHAR NOT NULL,      -- the dataset's question id ('<id>/hop<k>' for --hop-questions)
        gold_ids      VARCHAR[] NOT NULL,    -- corpus ids of the supporting passages
        passage_ids   VARCHAR[] NOT NULL,    -- corpus ids the mode ranked, best first (first 20, or max k if larger)
        recall        JSON NOT NULL,         -- {"recall@2": ..., "recall@5": ...} for this question
        total_ms      DOUBLE                 -- wall time of the query
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS eval_prompts (
        run_id        VARCHAR NOT NULL,      -- eval_runs.run_id
        mode          VARCHAR NOT NULL,      -- evaluated mode (query mode, baseline or ablation)
        question_id   VARCHAR NOT NULL,      -- the dataset's question id
        budget        INTEGER NOT NULL,      -- token budget the mode's answer prompt was rendered at (--budgets)
        prompt_tokens INTEGER NOT NULL,      -- tokens of that prompt (system + user message), at most the budget
        answer_in_context BOOLEAN NOT NULL,  -- a gold answer, normalised as SQuAD does, occurs in the prompt
        quoted_recall DOUBLE NOT NULL,       -- share of the question's gold passages whose text the prompt quotes
        quoted_ids    VARCHAR[] NOT NULL     -- corpus ids of the passages the prompt quotes, in prompt order
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS eval_answers (
        run_id        VARCHAR NOT NULL,      -- one `pathrag eval answers` run (a resumed run keeps its run_id)
        config_hash   VARCHAR NOT NULL,      -- hash of what the answers depend on (dataset, budget, query parameters, LLM identity, embedder, graph); the same command resumes the newest run with this hash
        mode          VARCHAR NOT NULL,      -- evaluated mode: a query mode, a flat baseline (bm25, dense, bm25+dense), a path prompt layout (path:*_prompt) or an ablation
        question_id   VARCHAR NOT NULL,      -- the dataset's question id
        answer        VARCHAR NOT NULL,      -- the LLM's answer ('' when the query failed); offline, the extractive answer
        exact_match   DOUBLE NOT NULL,       -- 1.0 when the SQuAD-normalised answer equals a normalised gold answer or alias, else 0.0
        f1            DOUBLE NOT NULL,       -- best SQuAD token F1 of the answer against the gold answers and aliases
        answer_in_context BOOLEAN NOT NULL,  -- a gold answer (normalised) occurs in the prompt the LLM read
        recall_at_5   DOUBLE NOT NULL,       -- share of the question's gold passages among the first 5 passages the mode ranked
        prompt_tokens INTEGER NOT NULL,      -- tokens of the answer prompt (system + user message), at most the run's budget
        llm_calls     INTEGER NOT NULL,      -- LLM requests the query needs on its own: keywords, NeuroPath tracking, the answer (a keyword call shared with another mode of the same question is counted in each)
        llm_tokens    INTEGER NOT NULL,      -- prompt + completion tokens of those requests
        latency_ms    DOUBLE NOT NULL,       -- wall time of the whole query, answer included
        answer_ms     DOUBLE NOT NULL,       -- of which the answer call
        error         VARCHAR,               -- why the query failed (invalid LLM output, endpoint down); NULL when it answered. A failed row is retried by the next resume, which appends a new row
        passage_ids   VARCHAR[] NOT NULL,    -- corpus ids the mode ranked, best first (first 20)
        prompt        VARCHAR NOT NULL,      -- the answer prompt as the LLM read it (system + user message)
        answered_at   TIMESTAMP NOT NULL,    -- UTC; the newest row of a (run_id, mode, question_id) is the one that counts
        answer_key    VARCHAR,               -- hash of what this mode's answer depends on: dataset, budget, LLM, embedder, graph source, prompt wording, the query mode and the parameters that mode reads. A later run asking the same question with the same key reuses the row instead of asking the LLM again. NULL in rows written before the column
        reused_from   VARCHAR,               -- the run_id whose row this one copies (same answer_key); NULL when this run asked the LLM
        raw_answer    VARCHAR                -- the model's reply as it came, when ``answer`` is cut from it (a short answer cut to its answer span: query/answering.py short_answer); NULL when the reply is the answer
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS eval_answer_runs (
        run_id        VARCHAR NOT NULL,      -- eval_answers.run_id: one row per invocation (a resumed run has several)
        started_at    TIMESTAMP NOT NULL,    -- UTC start of this invocation
        dataset       VARCHAR NOT NULL,      -- dataset folder name, e.g. musique-100
        dataset_hash  VARCHAR NOT NULL,      -- sha256 over the corpus, questions and (when used) triples files
        config_hash   VARCHAR NOT NULL,      -- eval_answers.config_hash
        budget        INTEGER NOT NULL,      -- token budget of every mode's answer prompt (--budget)
        llm           VARCHAR NOT NULL,      -- the answering model (keywords and tracking too), or 'offline' (extractive answers)
        embedder      VARCHAR NOT NULL,      -- what computed the vectors, e.g. 'st-onnx:all-MiniLM-L6-v2'
        extractor     VARCHAR NOT NULL,      -- what built the graph: 'import:<hash>' for the dataset's triples, else the extractor
        modes         VARCHAR[] NOT NULL,    -- evaluated modes, in order
        planned       INTEGER NOT NULL,      -- questions asked for (after --limit)
        questions     INTEGER NOT NULL,      -- questions every mode has answered so far (the paired comparisons use these)
        resumed       INTEGER NOT NULL,      -- answers found from earlier invocations of the run
        answered      INTEGER NOT NULL,      -- answers this invocation asked the LLM for
        stopped       VARCHAR,               -- why this invocation ended before every question was answered (time limit, failed answers); NULL when complete
        params        JSON NOT NULL,         -- query parameters (the answer is asked with response='short')
        workdir       VARCHAR NOT NULL,      -- the evaluation index's own PATHRAG_HOME
        seconds       DOUBLE NOT NULL,       -- wall time of this invocation
        verdict       VARCHAR,               -- the default path mode against the flat chunk prompt with the best F1, with paired 95% bootstrap intervals (NULL without both)
        reused        INTEGER,               -- answers this invocation copied from earlier runs with the same eval_answers.answer_key (no LLM call)
        graph         VARCHAR,               -- where the graph came from (--graph): 'offline', 'llm' or 'triples'; 'home' for --questions over an indexed home; NULL for runs before it was stored
        index_seconds DOUBLE                 -- wall time of (re)indexing before the answers (not counted by --time-limit); NULL for runs before it was stored
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS winrate_runs (
        run_id        VARCHAR PRIMARY KEY,   -- uuid of one `pathrag eval winrate` run
        started_at    TIMESTAMP NOT NULL,    -- UTC
        label_a       VARCHAR NOT NULL,      -- side A: answers file name or 'mode:<mode>'
        label_b       VARCHAR NOT NULL,      -- side B
        judge         VARCHAR NOT NULL,      -- judge LLM model (endpoint without credentials is in params)
        questions     INTEGER NOT NULL,      -- questions judged
        judgments     INTEGER NOT NULL,      -- judge calls that returned a verdict (2 per question with both orders)
        failed        INTEGER NOT NULL,      -- judge calls whose output stayed invalid (left out of the rates)
        orders        VARCHAR NOT NULL,      -- 'alternate' (A first on even questions) or 'both' (each question twice)
        params        JSON NOT NULL,         -- judge identity, prompt version, query parameters when answers were generated
        seconds       DOUBLE                 -- wall time of the run
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS winrate_results (
        run_id        VARCHAR NOT NULL,      -- winrate_runs.run_id
        dimension     VARCHAR NOT NULL,      -- comprehensiveness, diversity, logicality, relevance, coherence or overall
        wins_a        INTEGER NOT NULL,      -- judgments won by side A
        wins_b        INTEGER NOT NULL,      -- judgments won by side B
        rate_a        DOUBLE NOT NULL,       -- wins_a / (wins_a + wins_b)
        rate_b        DOUBLE NOT NULL        -- wins_b / (wins_a + wins_b)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS winrate_verdicts (
        run_id        VARCHAR NOT NULL,      -- winrate_runs.run_id
        question_id   VARCHAR NOT NULL,      -- the question's id, or its 1-based position when it has none
        question      VARCHAR NOT NULL,      -- the question judged
        a_position    VARCHAR NOT NULL,      -- where side A was shown to the judge: 'Answer 1' or 'Answer 2'
        answer_a      VARCHAR NOT NULL,      -- side A's answer
        answer_b      VARCHAR NOT NULL,      -- side B's answer
        winners       JSON,                  -- per dimension and overall: 'A' or 'B' (already un-swapped); null if failed
        verdict       JSON,                  -- the judge's verdict as returned (winner as 'Answer 1'/'Answer 2', explanations)
        error         VARCHAR                -- why the judgment failed, when it did
    )
    """,
]


def lock_holder(exc: BaseException) -> str:
    """Who holds the DuckDB file, from DuckDB's lock error ("Conflicting lock is held in PROGRAM (PID N)"): the
    pid and, where /proc shows it, that process's command line; "another process" when the message has none."""
    match = re.search(r"\(PID (\d+)\)", str(exc))
    if not match:
        return "another process"
    pid = match.group(1)
    try:
        command = " ".join(Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace").replace("\0", " ")
                           .split())
    except OSError:
        command = ""
    if len(command) > 120:
        command = command[:117] + "..."
    return f"pid {pid} ({command})" if command else f"pid {pid}"


class StoreLockedError(PipelineError, RuntimeError):
    """Another process holds the DuckDB file for writing and did not release it in time."""


class StoreMemoryError(PipelineError, RuntimeError):
    """DuckDB needed more memory than its limit (PATHRAG_DUCKDB_MEMORY_LIMIT) for a statement on the index."""


_MEMORY_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*")


_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def _bytes(size: str) -> float | None:
    """Bytes of a DuckDB size such as '2GB' or '512MiB' (None when it does not parse)."""
    match = _MEMORY_SIZE.fullmatch(size)
    unit = _UNITS.get(match.group(2).upper()) if match else None
    return float(match.group(1)) * unit if match and unit else None


def out_of_memory_message(path: Path, memory_limit: str, exc: BaseException) -> str:
    """One line for a DuckDB ``OutOfMemoryException``: what ran out (DuckDB's memory limit and its setting),
    DuckDB's own figures, and what to set (four times the limit, with the machine's memory beside it)."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    match = _MEMORY_SIZE.fullmatch(memory_limit)
    larger = f"{float(match.group(1)) * 4:g}{match.group(2)}" if match else "8GB"
    if (_bytes(larger) or 0) < (_bytes(DEFAULT_DUCKDB_MEMORY_LIMIT) or 0):
        larger = DEFAULT_DUCKDB_MEMORY_LIMIT   # a tiny limit: suggest the default, not 4KB
    ram = _physical_memory()
    machine = f" (this machine has {ram / 2**30:.0f} GiB)" if ram else ""
    return (f"DuckDB ran out of memory on {path}: it may use {memory_limit} (PATHRAG_DUCKDB_MEMORY_LIMIT) and this "
            f"statement needed more ({detail}). Set PATHRAG_DUCKDB_MEMORY_LIMIT higher, e.g. "
            f"PATHRAG_DUCKDB_MEMORY_LIMIT={larger}{machine}, and run the command again")


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    if "Unique file handle conflict" in text:
        # another thread of this process is opening or closing its own connection to the file right now
        return True
    return "lock" in text.lower() and ("Could not set lock" in text or "Conflicting lock" in text or "lock on file" in text)


LockNotice = Callable[[str], None]


SQL_SESSION_PREFIX = "sql-"


def _remove_dead_sessions(temp_directory: Path) -> None:
    """Spill folders of `pathrag sql` sessions whose process is gone (killed before it could remove them)."""
    if not temp_directory.is_dir():
        return
    for folder in temp_directory.glob(f"{SQL_SESSION_PREFIX}*"):
        try:
            pid = int(folder.name[len(SQL_SESSION_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            pass   # alive under another user: not ours to remove


def _stderr_notice(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class _ModeLock:
    """Within one process, DuckDB refuses a read-only and a read-write connection to the same file at once
    ("a different configuration than existing connections"). Threads of one process (the query service's
    workers, one answering while another logs) take this before opening one: read-only connections share it,
    read-write ones hold it alone; a waiting writer goes before new readers. Re-entrant in the thread that holds
    it; a thread asking for a read-write connection while it holds a read-only one is a bug and says so."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer: int | None = None
        self._writer_depth = 0
        self._waiting_writers = 0
        self._local = threading.local()

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        depth = getattr(self._local, "depth", 0)
        if depth or self._writer == threading.get_ident():
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth = depth
            return
        with self._cond:
            while self._writer is not None or self._waiting_writers:
                self._cond.wait()
            self._readers += 1
        self._local.depth = 1
        try:
            yield
        finally:
            self._local.depth = 0
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        me = threading.get_ident()
        if self._writer == me:
            self._writer_depth += 1
            try:
                yield
            finally:
                self._writer_depth -= 1
            return
        if getattr(self._local, "depth", 0):
            raise RuntimeError("a read-write DuckDB connection was asked for inside a read-only one of the same "
                               "thread (Store.reading or connect(read_only=True)); close the read-only one first")
        with self._cond:
            self._waiting_writers += 1
            try:
                while self._writer is not None or self._readers:
                    self._cond.wait()
            finally:
                self._waiting_writers -= 1
            self._writer, self._writer_depth = me, 1
        try:
            yield
        finally:
            with self._cond:
                self._writer, self._writer_depth = None, 0
                self._cond.notify_all()


_mode_locks: dict[str, _ModeLock] = {}
_mode_locks_guard = threading.Lock()


def _mode_lock(path: Path) -> _ModeLock:
    key = os.path.abspath(path)
    with _mode_locks_guard:
        return _mode_locks.setdefault(key, _ModeLock())


class Store:
    """The DuckDB file of one PATHRAG_HOME. Open connections with ``with store.connect() as con:``.

    Every connection gets an explicit ``memory_limit`` (DuckDB's own default is 80% of RAM) and a
    ``temp_directory`` next to the file, so statements that scale with the corpus spill to disk instead of
    growing without bound. While another process holds the file, ``connect`` retries and, after
    ``notice_after`` seconds, says so once through ``on_wait`` (stderr by default): waits are never silent.
    A statement that needs more than the memory limit raises ``StoreMemoryError`` (a ``PipelineError``: one
    line naming PATHRAG_DUCKDB_MEMORY_LIMIT) out of the ``with`` block, DuckDB's own exception chained to it.
    """

    def __init__(self, path: Path | str, lock_timeout: float = 120.0, *, memory_limit: str = DEFAULT_DUCKDB_MEMORY_LIMIT,
                 temp_directory: Path | str | None = None, on_wait: LockNotice | None = _stderr_notice,
                 notice_after: float = 1.0, sql_max_temp: str = DEFAULT_SQL_MAX_TEMP):
        self.path = Path(path)
        self.sql_max_temp = sql_max_temp
        self.lock_timeout = lock_timeout
        self.memory_limit = memory_limit
        self.temp_directory = Path(temp_directory) if temp_directory else self.path.parent / "duckdb_tmp"
        self.on_wait = on_wait
        self.notice_after = notice_after
        self._initialised = False
        self._reading = threading.local()   # this thread's connection while inside ``reading()``
        self._holding = threading.local()   # this thread's write connection while inside ``holding()``
        self.row_group_merges = 0   # write connections of this store that let DuckDB merge row groups
        self._unmerged_bytes = 0    # write-ahead log its writes left since this store last merged
        self._merge_next = False

    @classmethod
    def for_settings(cls, settings, **options) -> "Store":
        """The store of ``settings.home`` with its configured memory limit (PATHRAG_DUCKDB_MEMORY_LIMIT)."""
        return cls(settings.duckdb_path, memory_limit=settings.duckdb_memory_limit,
                   sql_max_temp=settings.sql_max_temp, **options)

    @contextlib.contextmanager
    def connect(self, read_only: bool = False, *, sandboxed: bool = False,
                wait: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
        """A short-lived connection; ``wait=False`` raises ``StoreLockedError`` at once, without a notice, when
        another process holds the file (a caller with somewhere else to put its rows: the query log spool). ``sandboxed`` (with read_only, for user SQL) also disables access to
        other files (COPY ... TO, read_csv('/etc/...')), so the connection can only read the index, and locks
        its limits for the session (``lock_configuration``: a statement cannot ``SET memory_limit`` past the
        configured cap, nor threads or the spill folder): it spills at most ``sql_max_temp`` to a folder of its
        own, removed when the connection closes (and, for a session that was killed, by the next one)."""
        if read_only and not self.path.exists():
            raise FileNotFoundError(
                f"no index at {self.path}: run `pathrag index PATH` or `pathrag quickstart` first"
            )
        if getattr(self._holding, "active", False) and not sandboxed:
            with self._held_cursor(wait) as cursor:   # takes the exclusive lock for the held connection
                yield cursor
            return
        lock = _mode_lock(self.path)
        with lock.shared() if read_only else lock.exclusive():
            with self._connect(read_only, sandboxed, wait) as con:
                yield con

    @contextlib.contextmanager
    def _connect(self, read_only: bool, sandboxed: bool, wait: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        anchor = getattr(self._reading, "con", None)
        if anchor is not None and read_only and not sandboxed:
            # inside ``reading()``: a cursor on the connection already open (opening the file costs ~10 ms)
            with self._cursor_on(anchor) as cursor:
                yield cursor
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        config: dict = {"memory_limit": self.memory_limit}
        spill: Path | None = None
        if sandboxed:
            _remove_dead_sessions(self.temp_directory)
            spill = self.temp_directory / f"{SQL_SESSION_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
            config.update(enable_external_access=False, temp_directory=str(spill), threads=usable_cores())
        else:
            config["temp_directory"] = str(self.temp_directory)
        con = self._open(read_only, config, wait=wait)
        try:
            if sandboxed:
                # set here, not in the connect config: DuckDB 2.0 shows a max_temp_directory_size given at
                # connect but does not enforce it (a 1MB cap let a statement spill 780MB; SET enforces it)
                con.execute("SET max_temp_directory_size = ?", [self.sql_max_temp])
                con.execute("SET enable_progress_bar = false")   # never on stdout, where --json rows go
                con.execute("SET lock_configuration = true")
            if not read_only and not self._initialised:
                init_schema(con)
                self._initialised = True
            if not read_only:
                merging_off(con)   # set, not a connect option: connections to one file in a process share those
            yield con
            if not read_only:
                self._before_close(con)
        except duckdb.OutOfMemoryException as exc:
            # an expected failure the user can act on: one line naming the setting, never a traceback
            message = out_of_memory_message(self.path, self.memory_limit, exc)
            if sandboxed:
                message += f" (a `pathrag sql` statement may also spill {self.sql_max_temp} to disk: PATHRAG_SQL_MAX_TEMP)"
            raise StoreMemoryError(message) from exc
        finally:
            con.close()
            if spill is not None:
                shutil.rmtree(spill, ignore_errors=True)

    def _before_close(self, con: duckdb.DuckDBPyConnection) -> None:
        """Row-group merging at this write's checkpoint (``row_group_merging``). Best effort: a write whose
        block ended normally but left its transaction unusable is closed (and rolled back) as before."""
        logged = wal_bytes(self.path)
        try:
            merged = before_close(con, logged, merge=self._merge_next)
        except duckdb.Error:
            return
        if merged:
            self.row_group_merges += 1
            self._unmerged_bytes = 0
        elif merged is not None:
            self._unmerged_bytes += logged

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Within this block, this thread's ``connect()`` calls (read or write, not sandboxed) are cursors on one
        write connection, opened by the first of them and closed (its checkpoint, row-group merging counted as
        for one write) when the block ends: a run of many short connections pays one open and one close
        (issue 23: an offline one-file edit at 100 MB opened the file 14 times, ~0.05 s each with its close).
        While the connection is open no other process can open the file and other threads of this one wait,
        so hold it only around work that is short and uses no LLM (``pipeline.run_indexing`` decides). Each
        cursor has its own transactions and temp tables, as separate connections do. Nested blocks reuse the
        outer one."""
        if getattr(self._holding, "active", False):
            yield
            return
        self._holding.active, self._holding.con, self._holding.locked = True, None, None
        try:
            yield
        finally:
            try:
                self._release_held()
            finally:
                self._holding.active = False

    @contextlib.contextmanager
    def _held_cursor(self, wait: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        if self._holding.con is None:
            locked = contextlib.ExitStack()
            locked.enter_context(_mode_lock(self.path).exclusive())
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                con = self._open(False, {"memory_limit": self.memory_limit,
                                         "temp_directory": str(self.temp_directory)}, wait=wait)
            except BaseException:
                locked.close()
                raise
            try:
                if not self._initialised:
                    init_schema(con)
                    self._initialised = True
                merging_off(con)
            except BaseException:
                con.close()
                locked.close()
                raise
            self._holding.con, self._holding.locked = con, locked
        with self._cursor_on(self._holding.con) as cursor:
            yield cursor

    @contextlib.contextmanager
    def _cursor_on(self, con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor on an open connection (its own transactions and temp tables), closed when the block ends."""
        cursor = con.cursor()
        try:
            yield cursor
        except duckdb.OutOfMemoryException as exc:
            raise StoreMemoryError(out_of_memory_message(self.path, self.memory_limit, exc)) from exc
        finally:
            cursor.close()

    def _release_held(self) -> None:
        """Close the connection ``holding()`` opened, if any (row-group merging as at any write's close)."""
        con, locked = getattr(self._holding, "con", None), getattr(self._holding, "locked", None)
        if con is None:
            return
        self._holding.con = self._holding.locked = None
        try:
            self._before_close(con)
        finally:
            con.close()
            locked.close()

    def settle_row_groups(self) -> bool:
        """Merge row groups now if this store's writes logged ``SETTLE_AFTER_BYTES`` or more since it last merged
        (a large run's batches), so that run pays for merging them rather than a later small write. Returns
        whether it merged."""
        unmerged = self._unmerged_bytes
        if getattr(self._holding, "con", None) is not None:
            unmerged += wal_bytes(self.path)   # what the connection ``holding()`` keeps open logged so far
        if unmerged < SETTLE_AFTER_BYTES:
            return False
        self._merge_next = True
        try:
            with self.connect():
                pass
            self._release_held()   # inside ``holding()``: its connection's close is the one that merges
        finally:
            self._merge_next = False
        return self._unmerged_bytes == 0

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Within this block, this thread's read-only ``connect()`` calls share one open connection: a query reads
        the graph version, the lexical index version and its passages on three connections, and opening the file
        is most of what each costs. Keep the block short (one query): while it is open this process holds the
        file's read lock, so a writer (an index run) waits for its end. Nested blocks reuse the outer one."""
        if getattr(self._reading, "con", None) is not None or getattr(self._holding, "active", False):
            yield   # inside ``holding()``, reads are cursors on its connection already
            return
        if not self.path.exists():
            raise FileNotFoundError(
                f"no index at {self.path}: run `pathrag index PATH` or `pathrag quickstart` first"
            )
        with _mode_lock(self.path).shared():
            con = self._open(True, {"memory_limit": self.memory_limit, "temp_directory": str(self.temp_directory)})
            self._reading.con, self._reading.memo = con, {}
            try:
                yield
            finally:
                self._reading.con = self._reading.memo = None
                con.close()

    def read_memo(self) -> dict | None:
        """Inside ``reading()``, a dict this thread's readers may keep what they read from the file in (the graph
        snapshot, the lexical index: what a version check would only confirm), valid until the block ends: while
        it is open this process holds the file's read lock, so no writer can change a row. None outside a block."""
        if getattr(self._reading, "con", None) is None:
            return None
        return self._reading.memo

    def read_once(self, key: str, load: Callable[[], T]) -> T:
        """``load()``, kept under ``key`` in ``read_memo()`` for the rest of the read block (so its queries load or
        check it once); outside a block, ``load()`` every time."""
        memo = self.read_memo()
        if memo is None:
            return load()
        if key not in memo:
            memo[key] = load()
        return memo[key]

    def _open(self, read_only: bool, config: dict | None = None, wait: bool = True) -> duckdb.DuckDBPyConnection:
        started = time.monotonic()
        deadline = started + (self.lock_timeout if wait else 0.0)
        delay = 0.05
        told = False
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only, config=config or {})
            except (duckdb.IOException, duckdb.ResourceInUseException) as exc:  # busy elsewhere: retry
                if not _is_lock_error(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise StoreLockedError(
                        f"{self.path} is locked by {lock_holder(exc)} (a running Dagster run or pathrag command) "
                        f"for more than {self.lock_timeout if wait else 0:.0f}s; wait for it to finish and retry"
                    ) from exc
                if not told and self.on_wait is not None and time.monotonic() - started >= self.notice_after:
                    told = True
                    self.on_wait(f"waiting for {self.path}: {lock_holder(exc)} is writing to it (a `pathrag "
                                 f"index`, Dagster run or another command); retrying for up to "
                                 f"{self.lock_timeout:.0f}s ...")
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 2.0)


# Columns appended to a table after homes were created with it: ``init_schema`` adds any that an existing
# home lacks (``ADD COLUMN IF NOT EXISTS``), so old homes migrate on their next write connection and old rows
# read NULL there. The CREATE TABLE statements above carry the same columns for new homes.
ADDED_COLUMNS: list[tuple[str, str, str]] = [
    ("queries", "tracking", "JSON"),
    ("queries", "llm_calls", "INTEGER"),
    ("queries", "llm_tokens", "INTEGER"),
    ("queries", "error", "VARCHAR"),
    ("eval_results", "llm_calls", "DOUBLE"),
    ("eval_results", "llm_tokens", "DOUBLE"),
    ("eval_runs", "verdict", "VARCHAR"),
    ("eval_runs", "embedder_runtime", "VARCHAR"),
    ("eval_results", "compared_to", "VARCHAR"),
    ("eval_results", "diff", "DOUBLE"),
    ("eval_results", "ci_low", "DOUBLE"),
    ("eval_results", "ci_high", "DOUBLE"),
    ("eval_results", "mean_diff", "DOUBLE"),
    ("eval_results", "mean_ci_low", "DOUBLE"),
    ("eval_results", "mean_ci_high", "DOUBLE"),
    ("eval_answers", "answer_key", "VARCHAR"),
    ("eval_answers", "reused_from", "VARCHAR"),
    ("eval_answer_runs", "reused", "INTEGER"),
    ("extractions", "failed_runs", "INTEGER"),
    ("extractions", "retry_key", "VARCHAR"),
    ("relation_mentions", "keyword_parts", "STRUCT(fold VARCHAR, text VARCHAR)[]"),
    ("relation_mentions", "description_parts", "STRUCT(fold VARCHAR, text VARCHAR)[]"),
    ("chunks", "section", "VARCHAR"),
    ("documents", "warning", "VARCHAR"),
    ("eval_runs", "graph", "VARCHAR"),
    ("eval_answer_runs", "graph", "VARCHAR"),
    ("eval_answer_runs", "index_seconds", "DOUBLE"),
    ("eval_answers", "raw_answer", "VARCHAR"),
]


def init_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the tables (and added columns) a home lacks, all or nothing: one transaction, so a failure half-way
    (out of memory, disk full) leaves the database as it was, never with some tables and not others."""
    with transaction(con):
        for statement in DDL:
            con.execute(statement)
        for table, column, sql_type in ADDED_COLUMNS:
            con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {sql_type}")


def utc_now() -> datetime:
    """Timestamps in every table are naive UTC."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def get_meta(con: duckdb.DuckDBPyConnection, key: str) -> str | None:
    # fetchall, not fetchone: a result left unfinished blocks con.register on this connection (DuckDB 1.5)
    rows = con.execute("SELECT value FROM pathrag_meta WHERE key = ?", [key]).fetchall()
    return rows[0][0] if rows else None


def set_meta(con: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
    con.execute("INSERT OR REPLACE INTO pathrag_meta VALUES (?, ?)", [key, value])


CHUNKS_VERSION_META = "chunks_version"
"""pathrag_meta key: a fresh random token written whenever ingest changes chunks or document titles, so readers
that cache something built from the chunks (the BM25 index) check one row instead of hashing every chunk. A
token rather than a counter: a home deleted and rebuilt at the same path never repeats an old value."""


def bump_chunks_version(con: duckdb.DuckDBPyConnection) -> None:
    set_meta(con, CHUNKS_VERSION_META, uuid.uuid4().hex)


PASSAGE_TEXT_SQL = "coalesce(d.title, '') || ' ' || c.text"
"""A passage as every text retriever sees it, over ``chunks c LEFT JOIN documents d ON d.id = c.document_id``: its
document's title, then the chunk text (a passage's title is part of the passage). BM25 indexes it
(query/lexical.py) and the ``chunks`` vector table embeds it (index/embedding_stage.py), so dense and BM25 search,
naive mode and path mode's text hits all rank the same text."""


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
