"""Checksums of the vector store's files, so a file damaged in place is seen (issue 61).

LanceDB's files carry no checksum of their own: a data file overwritten with other bytes of the same length reads
back without an error, as wrong vectors. But a Lance table never changes a file once written (each commit adds
data, deletion, index and manifest files; only the pointers to the newest version, ``_latest.manifest`` and
``latest_version_hint.json``, are rewritten), so the sha256 of
each file, taken when an index run has written it, holds for as long as the file exists. ``record`` (called at the
end of every embedding stage) hashes the files it has not seen and forgets the ones LanceDB removed, into
``SUMS_FILE`` inside the vector folder (it moves with the folder when ``--reembed`` swaps a new one in);
``verify`` (``pathrag status --check``) hashes every recorded file again; ``changed_sizes`` (the no-op check of
``pathrag index``) only compares sizes, with no read, so a cut file is not "Up to date". A local vector folder
only: an object store (``PATHRAG_LANCEDB_URI``) checks its objects itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pathrag_pipeline.storage.file_hash import file_sha256

SUMS_FILE = "_pathrag_sums.json"
MUTABLE = "latest"   # in the names of LanceDB's pointers to the newest version, rewritten by every commit


def _files(root: Path):
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name != SUMS_FILE and MUTABLE not in path.name \
                and not path.name.endswith(".tmp"):
            yield path


def load(root: Path) -> dict[str, dict]:
    """{relative path: {"size": bytes, "sha256": hex}} as last recorded ({} when none is)."""
    try:
        sums = json.loads((Path(root) / SUMS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return sums if isinstance(sums, dict) else {}


def record(root: Path) -> int:
    """Hash the vector folder's files not recorded yet (a recorded one keeps its sum: it never changes), drop the
    ones gone; returns how many files were hashed."""
    root = Path(root)
    if not root.is_dir():
        return 0
    known = load(root)
    now: dict[str, dict] = {}
    hashed = 0
    for path in _files(root):
        name = path.relative_to(root).as_posix()
        if name in known:
            now[name] = known[name]
        else:
            now[name] = {"size": path.stat().st_size, "sha256": file_sha256(path)}
            hashed += 1
    if now != known:
        target = root / SUMS_FILE
        temporary = target.with_name(target.name + ".tmp")
        temporary.write_text(json.dumps(now, indent=0, sort_keys=True), encoding="utf-8")
        os.replace(temporary, target)
    return hashed


def verify(root: Path) -> list[str]:
    """Recorded files whose bytes changed since they were written (size or sha256), by relative path. A recorded
    file that is gone is not reported here: LanceDB reading the table fails on it."""
    root = Path(root)
    out = []
    for name, entry in sorted(load(root).items()):
        path = root / name
        if not path.is_file():
            continue
        if path.stat().st_size != entry.get("size") or file_sha256(path) != entry.get("sha256"):
            out.append(name)
    return out


def changed_sizes(root: Path) -> list[str]:
    """Recorded files gone or of another size than written: a stat per file, no read."""
    root = Path(root)
    out = []
    for name, entry in sorted(load(root).items()):
        try:
            size = (root / name).stat().st_size
        except OSError:
            out.append(name)
            continue
        if size != entry.get("size"):
            out.append(name)
    return out
