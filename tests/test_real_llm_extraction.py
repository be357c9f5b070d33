"""Extraction through a real local LLM server with the README's settings (slow, optional; issue 27).

Runs `pathrag bench local-extraction`'s own run for one sample document in `json` mode with the Qwen 0.5B GGUF of
the [local-llm-model] extra: the README recommends that mode from this measurement, so it must keep giving a
graph, with no junk names stored and `llm_usage` equal to the tokens the server reported. Skipped, with what to
install, when the server or the model is missing; the default run uses the scripted server's replays instead.
"""

from __future__ import annotations

import shutil

import pytest

from pathrag_lab.bench.llm_answers import LocalServer, assemble_model, missing
from pathrag_lab.bench.local_extraction import CountingProxy, run_mode
from pathrag_pipeline.config import SAMPLE_DOCS

pytestmark = pytest.mark.slow


def test_the_recommended_mode_gives_a_clean_graph_with_the_servers_token_count(tmp_path):
    need = missing()
    if need:
        pytest.skip(f"no local LLM server: install {need}")
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(SAMPLE_DOCS / "the_varne_review.txt", docs)
    model = assemble_model(tmp_path / "models")
    with LocalServer(model, tmp_path / "server.log") as server:
        proxy = CountingProxy(server.base_url)
        try:
            run = run_mode(model.name, "json", docs, tmp_path / "home", proxy)
        finally:
            proxy.close()
    assert run["stopped"] is None and run["entities"] > 0 and run["relations"] > 0
    assert run["stored_junk"] == 0
    assert run["usage_tokens"] == run["server_tokens"] and sum(run["server_tokens"]) > 0
