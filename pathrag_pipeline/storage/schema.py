"""The DuckDB schema of the home: every table's DDL (each column's meaning is the SQL comment on its line, from which
docs/tables.md is generated: storage/schema_docs.py), the columns added to homes made before them, and
``init_schema``, which creates what a home lacks in one transaction. ``storage/store.py`` opens the connections and
calls it.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import Iterator

import duckdb

DDL = [
    """
    CREATE TABLE IF NOT EXISTS documents (
        id            VARCHAR PRIMARY KEY,   -- relative path, or 'path#record-id' for a JSONL record
        path          VARCHAR NOT NULL,      -- file path relative to the indexed folder (named in the documents_parse_cleanly check)
        title         VARCHAR,               -- first heading, HTML <title>, PDF/DOCX metadata, JSONL title, or file name
        format        VARCHAR,               -- the extension without its dot (txt, md, rst, html, pdf, docx, ipynb, jsonl, ...); text: a file with no extension; .gz appended for a gzipped file (md.gz, text.gz)
        content_hash  VARCHAR,               -- sha256 of this document's source bytes (the file, decompressed for a .gz, or the JSONL line)
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
        line          VARCHAR NOT NULL,      -- the line, as a document whose text holds it writes it; '' when only HTML pages' furniture (outside their text) holds it
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
        error         VARCHAR,               -- why the query failed (e.g. the neuropath tracker's output stayed invalid after its re-ask); NULL when it succeeded
        asked_from    VARCHAR,               -- where the ask came from: 'pathrag ask' (answered in its process or handed to the service), 'pathrag serve' (its page, or another client of it), 'pathrag quickstart', 'dagster run <run id>' (the ask_questions job) or 'python' (the API); NULL for asks logged before it was recorded
        process       VARCHAR,               -- the process that asked, 'host:pid'
        citations     JSON                   -- what each [n] of the answer cites: [{n, document, section, source ("document > section", as the answer's Sources line), chunk_ids (the chunks its quoted sentences came from), quotes (those sentences as quoted)}]; [] when the answer numbers no source (an LLM's answer); NULL for asks logged before it was recorded
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


# Columns appended to a table after homes were created with it: ``init_schema`` adds any that an existing
# home lacks (``ADD COLUMN IF NOT EXISTS``), so old homes migrate on their next write connection and old rows
# read NULL there. The CREATE TABLE statements in ``DDL`` carry the same columns for new homes.
ADDED_COLUMNS: list[tuple[str, str, str]] = [
    ("queries", "tracking", "JSON"),
    ("queries", "llm_calls", "INTEGER"),
    ("queries", "llm_tokens", "INTEGER"),
    ("queries", "error", "VARCHAR"),
    ("queries", "asked_from", "VARCHAR"),
    ("queries", "process", "VARCHAR"),
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
    ("queries", "citations", "JSON"),
]


SCHEMA_META = "schema"
SCHEMA_FINGERPRINT = hashlib.sha256(("\n".join(DDL) + repr(ADDED_COLUMNS)).encode()).hexdigest()[:16]
"""``pathrag_meta`` key and value: the schema this code creates, recorded once created. A connection that finds
it there runs one read instead of the ~100 statements (35 ms on a 200-file home, paid by each of an index run's
four stores: issue 64); another value (a home made or last opened by other code) runs them all again."""


def init_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the tables (and added columns) a home lacks, all or nothing: one transaction, so a failure half-way
    (out of memory, disk full) leaves the database as it was, never with some tables and not others. Nothing to
    do when the home records this code's ``SCHEMA_FINGERPRINT``."""
    try:
        rows = con.execute("SELECT value FROM pathrag_meta WHERE key = ?", [SCHEMA_META]).fetchall()
    except duckdb.CatalogException:   # a new file: no pathrag_meta yet
        rows = []
    if rows and rows[0][0] == SCHEMA_FINGERPRINT:
        return
    with transaction(con):
        for statement in DDL:
            con.execute(statement)
        for table, column, sql_type in ADDED_COLUMNS:
            con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {sql_type}")
        con.execute("INSERT OR REPLACE INTO pathrag_meta VALUES (?, ?)", [SCHEMA_META, SCHEMA_FINGERPRINT])


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
