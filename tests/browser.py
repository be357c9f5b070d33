"""Headless Chromium (Debian's package) for the browser tests: dump a page's DOM or screenshot it. Skip a test with
``needs_chromium`` where it is not installed (`.ci/run` installs it)."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# as the workplace's notes say Chromium runs here: headless, as root without a sandbox, no background traffic
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]
SCREENSHOTS = Path(__file__).resolve().parent.parent / "data" / "screenshots"   # git-ignored, for a person

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: apt-get install chromium")


def chromium(profile: Path, *args: str) -> str:
    """Run Chromium once with ``args`` (``--dump-dom URL``, ``--screenshot=FILE URL``); its stdout."""
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=180)
    return done.stdout


def visible_text(dom: str) -> str:
    """The text a reader sees in a dumped DOM: scripts and styles dropped, tags removed, entities decoded, runs of
    white space made one space."""
    dom = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S | re.I)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())
