"""The Dagster UI as a user opens it with `pathrag dev`, read in headless Chromium (issue 62): after a CLI index and
CLI asks, the asset catalog shows the query tables materialised with their row counts and which command asked,
and the index run's page shows its steps. The UI is a JavaScript app: Chromium renders it with a virtual-time
budget before dumping the DOM, and the test reads the page's text, not only its screenshot."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.storage.store import Store
from tests.browser import SCREENSHOTS, chromium, needs_chromium, visible_text

pytestmark = [pytest.mark.e2e, needs_chromium]

RENDER = "--virtual-time-budget=30000"   # virtual ms for the app's scripts and GraphQL fetches to settle


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, process: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"`pathrag dev` exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"the Dagster UI did not answer at {url} within {timeout:.0f}s")


def run(*args: str):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_the_catalog_shows_cli_asks_and_the_run_page_its_steps(tmp_path, home, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Valmere\n\nValmere University was founded by Ada Halden in 1851 in Port Aster.\n")
    (docs / "b.txt").write_text("Drayton\n\nAda Halden designed the Drayton Railway, which reached Carrick in 1880.\n")
    run("index", str(docs))
    run("ask", "Who founded Valmere University?")
    run("ask", "When did the Drayton Railway reach Carrick?", "--mode", "naive")
    [index_run] = json.loads(run("status", "--json").output)["dagster"]["runs"]
    with Store(home / "pathrag.duckdb").connect(read_only=True) as con:
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("queries", "path_traces", "retrieved_nodes")}
    assert counts["queries"] == 2

    port = free_port()
    env = dict(os.environ, PATHRAG_HOME=str(home))
    dev = subprocess.Popen([sys.executable, "-m", "pathrag_pipeline.cli", "dev", "-p", str(port)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    profile = tmp_path / "profile"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    try:
        wait_for(f"{base}/server_info", dev)

        catalog = visible_text(chromium(profile, RENDER, "--dump-dom", f"{base}/assets"))
        for table in ("queries", "path_traces", "retrieved_nodes"):   # each row: name, description, group, status
            assert re.search(rf"\b{table} [^•]*? query Materialized •", catalog), (table, catalog[:3000])

        queries = visible_text(chromium(profile, RENDER, "--dump-dom", f"{base}/assets/queries"))
        assert "Latest materialization" in queries
        assert f"Row count {counts['queries']}" in queries, queries[:3000]
        assert "pathrag ask: 2" in queries and "reported_by" in queries
        assert "Join the Dagster community" not in queries   # the dialog our dagster.yaml turns off

        run_page = visible_text(chromium(profile, RENDER, "--dump-dom", f"{base}/runs/{index_run['run_id']}"))
        assert "index_folder" in run_page and "Success" in run_page
        assert 'Finished execution of step "ingest"' in run_page and "ASSET_MATERIALIZATION" in run_page

        for name, url in (("dagster-catalog", "/assets"), ("dagster-queries", "/assets/queries"),
                          ("dagster-run", f"/runs/{index_run['run_id']}")):
            shot = SCREENSHOTS / f"{name}.png"
            chromium(profile, RENDER, "--window-size=1400,1000", f"--screenshot={shot}", base + url)
            assert shot.stat().st_size > 10_000, name                    # for a person to look at
    finally:
        os.killpg(dev.pid, signal.SIGTERM)
        try:
            out, _ = dev.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)
            out, _ = dev.communicate()
    assert f"Dagster UI for PATHRAG_HOME {home}" in out and str(docs.resolve()) in out
    assert "the query tables gained 2 ask(s)" in out
