"""Sections of the Markdown benchmark report (docs/benchmarks.md), addressed by their ``## `` heading.

Benchmarks too long for ``pathrag bench report`` (scale) write their own section into the report with
:func:`splice`. The report does not carry such a section over from the file it replaces: every figure in a
regenerated report is measured by the code that wrote it, and a section it did not measure says which
command adds it. :func:`repo_path` spells the paths of "Reproduce" lines relative to the repository.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pathrag_pipeline.config import PACKAGE_ROOT


def repo_path(path: str | Path) -> str:
    """``path`` as a "Reproduce" line names it: relative to the repository root (``../shared/bench/...`` for
    the benchmark data beside the checkout), never a machine's absolute path; relative paths stay as given."""
    path = Path(path)
    if not path.is_absolute():
        return path.as_posix()
    try:
        return Path(os.path.relpath(path, PACKAGE_ROOT)).as_posix()
    except ValueError:  # another drive (Windows): no relative spelling exists
        return path.as_posix()


def _pattern(heading: str) -> re.Pattern[str]:
    return re.compile(rf"^## {re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)


def read_section(markdown_path: Path, heading: str) -> str | None:
    """The ``## heading`` section of the report (heading line included), or None when absent."""
    if not markdown_path.is_file():
        return None
    match = _pattern(heading).search(markdown_path.read_text(encoding="utf-8"))
    return match.group(0).rstrip("\n") if match else None


def splice(markdown_path: Path, heading: str, section: str, before: str | None = None) -> None:
    """Replace the report's ``## heading`` section by ``section``; if absent, insert it before the
    ``## before`` section when there is one, else append it."""
    text = markdown_path.read_text(encoding="utf-8") if markdown_path.is_file() else ""
    body = section.rstrip("\n") + "\n\n"
    pattern = _pattern(heading)
    if pattern.search(text):
        text = pattern.sub(lambda _: body, text, count=1)
    elif before and re.search(rf"^## {re.escape(before)}\n", text, re.M):
        text = re.sub(rf"^## {re.escape(before)}\n", lambda m: body + m.group(0), text, count=1, flags=re.M)
    else:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + body
    markdown_path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")


def replace_key_figure(markdown_path: Path, starts_with: str, line: str) -> None:
    """Replace the "Key figures" bullet that starts with ``starts_with`` by ``line`` (nothing when absent)."""
    text = markdown_path.read_text(encoding="utf-8")
    text = re.sub(rf"^- {re.escape(starts_with)}.*$", lambda _: f"- {line}", text, count=1, flags=re.M)
    markdown_path.write_text(text, encoding="utf-8")
