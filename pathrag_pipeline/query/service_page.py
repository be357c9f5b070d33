"""The query service's page (``pathrag serve``, ``GET /``): ask from a browser, see the answer drawn, go back to
earlier asks (issue 63).

Server-rendered HTML, no script: a form (question, mode) that posts to ``/page``, the answer drawn as
``query/answer_page.py`` draws it, and the home's recent asks from ``queries``, each linking to ``/show/QUERY_ID``.
The page reaches the service on 127.0.0.1 with its token as every request does: ``pathrag page`` opens
``/?token=...`` once, the service answers with the token in an HttpOnly, SameSite=Strict cookie and sends the
browser on to ``/``, so nobody pastes it and the address bar no longer shows it.
"""

from __future__ import annotations

import html
from typing import Any, Sequence

from pathrag_pipeline.query.answer_page import page
from pathrag_pipeline.query.params import MODES

RECENT = 20
COOKIE = "pathrag_token"


def form(question: str = "", mode: str = "path", message: str = "") -> str:
    options = "".join(f'<option value="{m}"{" selected" if m == mode else ""}>{m}</option>' for m in MODES)
    error = f'<p class="error" id="error">{html.escape(message)}</p>' if message else ""
    return (f'<form class="ask" method="post" action="/page"><input type="text" name="question" '
            f'value="{html.escape(question)}" placeholder="Ask the index a question" autofocus>'
            f'<select name="mode">{options}</select><button type="submit">Ask</button></form>{error}')


def recent_asks(con: Any, limit: int = RECENT) -> list[tuple[str, str, str, str]]:
    """(query id, asked at, question, mode) of the home's latest asks, newest first."""
    return con.execute("SELECT query_id, strftime(asked_at, '%Y-%m-%d %H:%M'), question, mode FROM queries "
                       "ORDER BY asked_at DESC LIMIT ?", [limit]).fetchall()


def recent(rows: Sequence[tuple[str, str, str, str]]) -> str:
    if not rows:
        return '<h2>Recent asks</h2><p class="meta">None yet.</p>'
    items = "".join(f'<li><a href="/show/{html.escape(q)}">{html.escape(text)}</a> '
                    f'<span class="meta">{html.escape(mode)} · {html.escape(at)}</span></li>'
                    for q, at, text, mode in rows)
    return f'<h2>Recent asks</h2><ul class="recent">{items}</ul>'


def home(rows: Sequence[tuple[str, str, str, str]], *, message: str = "", question: str = "",
         mode: str = "path") -> str:
    """The page without an answer: the form (with ``message``, e.g. why an ask was refused) and the recent asks."""
    return page("pathrag", f"<h1>Ask the index</h1>{form(question, mode, message)}{recent(rows)}")
