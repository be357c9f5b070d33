"""The ``pathrag`` command line: one module per command group, each a thin shell over the core.

Owns: argument parsing, tables for people, JSON/CSV for programs, exit codes. May import every core
package (config, text, storage, llm, ingest, index, query, evaluation) and ``bench``; nothing imports it
back. Module-level imports stay light (click, config); each command imports the stages it runs inside
its function, so ``pathrag --version`` and ``--help`` load no Dagster, LanceDB, igraph, openai or torch.
"""

from pathrag_pipeline.cli.main import main

__all__ = ["main"]
