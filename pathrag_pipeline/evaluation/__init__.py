"""Evaluation: recall@k of the query modes on multi-hop QA datasets, and the papers' pairwise LLM judge.
Runs are stored in the eval_* and winrate_* tables.

May import: every core package (``errors`` ... ``query``); never ``bench`` or ``cli``.
"""
