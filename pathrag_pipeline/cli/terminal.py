"""The rich console every CLI command prints through.

On a terminal rich fits its width; piped into a file or another program it would fall back to 80 columns and
fold tables, so piped output gets a wide fixed width instead.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

PIPED_WIDTH = 200


def make_console() -> "Console":
    from rich.console import Console   # here, not at import: `pathrag index` handing its run to the service reads
    # PIPED_WIDTH and prints the service's text without rich

    return Console(width=None if sys.stdout.isatty() else PIPED_WIDTH)
