"""The service's page in a real headless browser (Debian's Chromium): open it as `pathrag page` does, ask a sample
question, and read the rendered DOM (issue 63). Skipped where no Chromium is installed (`.ci/run` installs it)."""

from __future__ import annotations

import html
import re
import threading
import urllib.parse

import pytest

from pathrag_pipeline.config import Settings
from pathrag_pipeline.query.service import serve, wait_ready
from pathrag_pipeline.storage.store import Store
from tests.browser import SCREENSHOTS, chromium, needs_chromium
from tests.query_fixtures import tiny_index_home

QUESTION = "Which sea does the Varne River flow into?"

pytestmark = [pytest.mark.e2e, needs_chromium]


def test_the_page_in_chromium_shows_the_answer_every_path_entity_and_the_top_passage(tmp_path, monkeypatch):
    settings = tiny_index_home(tmp_path, monkeypatch)
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(Settings.from_env(),), kwargs={"stop": stop, "log": lambda _: None},
                              daemon=True)
    thread.start()
    try:
        info = wait_ready(settings.home)
        profile = tmp_path / "profile"
        # the address `pathrag page` opens: the service sets the cookie and sends the browser on to the page
        landing = chromium(profile, "--dump-dom", f"{info.url}/?token={info.token}")
        assert '<form class="ask"' in landing and info.token not in landing
        asked = f"{info.url}/page?{urllib.parse.urlencode({'question': QUESTION, 'mode': 'path'})}"
        dom = chromium(profile, "--dump-dom", asked)
        with Store(settings.duckdb_path).connect(read_only=True) as con:
            query_id, answer = con.execute("SELECT query_id, answer FROM queries ORDER BY asked_at DESC").fetchone()
            paths = con.execute("SELECT node_names, chunk_ids FROM path_traces WHERE query_id = ? ORDER BY rank",
                                [query_id]).fetchall()
            top = con.execute("SELECT text FROM chunks WHERE id = ?", [paths[0][1][0]]).fetchone()[0]
        text = html.unescape(re.sub(r"<[^>]+>", "", dom))   # what a reader sees: the answer's [n] marks are links
        assert answer[-40:] in text                                            # the answer text
        assert '<a href="#cite-1">[1]</a>' in dom and 'id="cite-1"' in dom      # [1] leads to its cited passage
        drawn = [html.unescape(n) for n in re.findall(r'<g class="node[^"]*" data-name="([^"]+)"', dom)]
        assert sorted(drawn) == sorted({n for names, _ in paths for n in names})   # one node per path entity
        assert top[:50] in text                                                # the top path's passage
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shot = SCREENSHOTS / "service-page.png"
        chromium(profile, "--window-size=1000,1300", f"--screenshot={shot}", asked)
        assert shot.stat().st_size > 10_000                                   # for a person to look at
    finally:
        stop.set()
        thread.join(timeout=30)
