"""The home's cache folder: files written whole, one per kind (the versions they supersede removed)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from pathrag_pipeline.llm.embedding import HashingEmbedder
from pathrag_pipeline.query import neuropath
from pathrag_pipeline.storage.cache_files import write_whole


def test_a_file_is_written_whole_and_replaces_what_it_supersedes(tmp_path):
    cache = tmp_path / "cache"
    assert write_whole(cache / "kind-1.bin", lambda out: out.write(b"one"), supersedes="kind-*.bin")
    (cache / "other-1.bin").write_bytes(b"another kind")
    assert write_whole(cache / "kind-2.bin", lambda out: out.write(b"two"), supersedes="kind-*.bin")
    assert sorted(p.name for p in cache.iterdir()) == ["kind-2.bin", "other-1.bin"]
    assert (cache / "kind-2.bin").read_bytes() == b"two"

    def fails(out):
        out.write(b"half")
        raise OSError("disk full")

    assert not write_whole(cache / "kind-3.bin", fails, supersedes="kind-*.bin")
    assert sorted(p.name for p in cache.iterdir()) == ["kind-2.bin", "other-1.bin"]   # no half file, nothing lost
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder should be")
    assert not write_whole(blocked / "kind-1.bin", lambda out: out.write(b"x"), supersedes="kind-*.bin")


def test_neuropath_keeps_one_names_file_per_embedder(tmp_path):
    embedder = HashingEmbedder()

    def snapshot(names, version):
        return SimpleNamespace(version=version, entity_names=names, node_count=len(names))

    first = neuropath.name_vectors(snapshot(["Agnes Morrow", "Hesketh Mill"], "v1"), embedder, tmp_path)
    second = neuropath.name_vectors(snapshot(["Agnes Morrow", "River Lode", "Saltmouth"], "v2"), embedder, tmp_path)
    files = list(tmp_path.glob("neuropath-names-*.npy"))
    assert len(files) == 1 and np.array_equal(np.load(files[0]), second) and first.shape[0] == 2
