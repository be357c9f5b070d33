"""File hashes remembered by stat signature (ingest/hash_cache.py): an unchanged folder is scanned without reading
its files, and any write, even one that restores the mtime, is seen."""
from __future__ import annotations

import os
import time

import pytest

from pathrag_pipeline.ingest import folder_sync
from pathrag_pipeline.ingest.folder_sync import file_sha256, scan_folder
from pathrag_pipeline.ingest.hash_cache import RACY_MARGIN_NS, HashCache


@pytest.fixture
def old_folder(tmp_path):
    """Two files last written well before the scan (not racy)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in (("a.md", "# A\n\nAda founded Valmere.\n"), ("b.txt", "Carrick is a town.\n")):
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _age(monkeypatch, seconds: float) -> None:
    """Scans start ``seconds`` later than now (so files written now count as old)."""
    real = time.time_ns
    monkeypatch.setattr("pathrag_pipeline.ingest.hash_cache.time.time_ns", lambda: real() + int(seconds * 1e9))


def _counting(monkeypatch) -> list[str]:
    read: list[str] = []

    def counted(path):
        read.append(os.path.basename(path))
        return file_sha256(path)

    monkeypatch.setattr(folder_sync, "file_sha256", counted)
    return read


def test_a_second_scan_of_an_unchanged_folder_reads_no_file(tmp_path, old_folder, monkeypatch):
    _age(monkeypatch, 10)
    read = _counting(monkeypatch)
    first = scan_folder(old_folder, max_bytes=10**6, cache=HashCache.for_home(tmp_path / "home", old_folder))
    assert sorted(read) == ["a.md", "b.txt"]
    read.clear()
    cache = HashCache.for_home(tmp_path / "home", old_folder)
    second = scan_folder(old_folder, max_bytes=10**6, cache=cache)
    assert read == [] and cache.hits == 2
    assert {k: v.file_hash for k, v in second.items()} == {k: v.file_hash for k, v in first.items()}


def test_a_write_that_keeps_size_and_restores_mtime_is_still_seen(tmp_path, old_folder, monkeypatch):
    _age(monkeypatch, 10)
    home = tmp_path / "home"
    scan_folder(old_folder, max_bytes=10**6, cache=HashCache.for_home(home, old_folder))
    path = old_folder / "b.txt"
    before = path.stat()
    time.sleep(0.01)
    path.write_text("Carrick is a city.\n"[:len("Carrick is a town.\n")], encoding="utf-8")   # same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))                             # mtime put back
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    scan = scan_folder(old_folder, max_bytes=10**6, cache=HashCache.for_home(home, old_folder))
    assert scan["b.txt"].file_hash == file_sha256(path)   # ctime moved: hashed again


def test_racy_files_are_hashed_every_time_and_foreign_or_broken_caches_are_ignored(tmp_path, old_folder,
                                                                                    monkeypatch):
    home = tmp_path / "home"
    read = _counting(monkeypatch)
    scan_folder(old_folder, max_bytes=10**6, cache=HashCache.for_home(home, old_folder))   # files just written
    read.clear()
    scan_folder(old_folder, max_bytes=10**6, cache=HashCache.for_home(home, old_folder))
    assert sorted(read) == ["a.md", "b.txt"]          # within RACY_MARGIN_NS of the scan: never remembered
    assert RACY_MARGIN_NS >= 1_000_000_000
    _age(monkeypatch, 10)
    scan_folder(old_folder, max_bytes=10**6, cache=HashCache.for_home(home, old_folder))
    read.clear()
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.md").write_bytes((old_folder / "a.md").read_bytes())
    scan_folder(other, max_bytes=10**6, cache=HashCache.for_home(home, other))    # another root: not trusted
    assert read == ["a.md"]
    read.clear()
    (home / "cache" / "file_hashes.json").write_text("{not json", encoding="utf-8")
    scan = scan_folder(old_folder, max_bytes=10**6, cache=HashCache.for_home(home, old_folder))
    assert sorted(read) == ["a.md", "b.txt"] and len(scan) == 2
