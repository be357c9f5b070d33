"""The rich console every CLI command prints through.

On a terminal rich fits its width; piped into a file or another program it would fall back to 80 columns and
fold tables, so piped output gets a wide fixed width instead.
"""

from __future__ import annotations

import sys

from rich.console import Console

PIPED_WIDTH = 200


def make_console() -> Console:
    return Console(width=None if sys.stdout.isatty() else PIPED_WIDTH)
