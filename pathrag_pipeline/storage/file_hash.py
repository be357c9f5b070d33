"""The sha256 of a file's bytes, read in blocks (bounded memory whatever the file's size): what the folder scan
compares to find changed documents (ingest/folder_sync.py) and what the vector sums record (storage/vector_sums.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

BLOCK = 1 << 20


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()
