"""The root ``pathrag`` group. Its commands live in their own modules and are imported when used."""

from __future__ import annotations

import sys

import click

from pathrag_pipeline.cli.lazy import LazyGroup

COMMANDS: dict[str, tuple[str, str, str]] = {
    "quickstart": ("pathrag_pipeline.cli.indexing", "quickstart",
                   "Index the bundled sample documents offline and show what was built and where."),
    "index": ("pathrag_pipeline.cli.indexing", "index",
              "Index the documents under PATH: only new or changed files are processed, deleted ones are removed."),
    "ask": ("pathrag_pipeline.cli.ask", "ask",
            "Answer QUESTION from the index; the query is logged in the queries/path_traces tables."),
    "serve": ("pathrag_pipeline.cli.serve", "serve",
              "Answer `pathrag ask` and run `pathrag index` for PATHRAG_HOME from one long-lived process."),
    "page": ("pathrag_pipeline.cli.serve", "page",
             "Open the query service's page (ask, see the paths drawn, earlier asks) in a browser."),
    "sql": ("pathrag_pipeline.cli.inspect", "sql",
            "Run a read-only SQL QUERY against the index (tables: see docs/tables.md)."),
    "status": ("pathrag_pipeline.cli.inspect", "status",
               "Documents by status, chunks, the last runs, and the Dagster sensor, schedule and runs."),
    "dev": ("pathrag_pipeline.cli.dev", "dev",
            "Open the Dagster UI (`dg dev`) with DAGSTER_HOME in PATHRAG_HOME, so runs and sensor cursors persist."),
    "eval": ("pathrag_pipeline.cli.eval", "eval_group",
             "Evaluate retrieval (recall@k on a QA dataset), answers (exact match, token F1) and LLM-judged "
             "win rates."),
}
# Commands of other packages (entry-point group PLUGIN_GROUP; this repository's lab adds `bench`) join these,
# discovered from the installed metadata without importing them (cli/lazy.py).
PLUGIN_GROUP = "pathrag.commands"


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, plugin_group=PLUGIN_GROUP)
@click.version_option(package_name="pathrag-pipeline")
def main() -> None:
    """PathRAG graph-RAG pipeline. Settings come from PATHRAG_* environment variables (see docs/configuration.md)."""
    from pathrag_pipeline.cli import gc_policy

    gc_policy.apply()   # this process's garbage collector: rarely while modules load, not at exit (cli/gc_policy.py)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
