"""A tiny hand-made index (documents, chunks, entities, relations, vectors) for the query tests.

The graph is written straight into the tables so tests know exactly which paths exist:

    Lindenholm -- Helena Voss -- Aldermere University -- Brackwater -- Varne River -- Grey Sea
                       |
                  Tomas Arden
    Oldport -- Copper Kettle -- Rye Bread          (a separate component)
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pathrag_pipeline.config import Settings
from pathrag_pipeline.llm.embedding import HashingEmbedder
from pathrag_pipeline.storage.store import Store, transaction
from pathrag_pipeline.text.tokenizer import count_tokens
from pathrag_pipeline.storage.vector_store import VectorStore

DOCS = {
    "aldermere.md": ("Aldermere University",
                     "Aldermere University was founded by Helena Voss in 1852. "
                     "The university is located in Brackwater."),
    "voss.md": ("Helena Voss",
                "Helena Voss was a chemist born in Lindenholm. She studied under Tomas Arden in her youth."),
    "brackwater.md": ("Brackwater",
                      "Brackwater is a port city on the Varne River. The Varne River flows into the Grey Sea."),
    "kettle.md": ("Copper Kettle", "The Copper Kettle is a bakery in Oldport. It sells rye bread every morning."),
}

# key: (name, type, description, document)
ENTITIES = {
    "aldermere university": ("Aldermere University", "organization", "A university founded in 1852 in Brackwater.", "aldermere.md"),
    "helena voss": ("Helena Voss", "person", "A chemist who founded Aldermere University.", "voss.md"),
    "brackwater": ("Brackwater", "location", "A port city on the Varne River.", "brackwater.md"),
    "lindenholm": ("Lindenholm", "location", "A small town in the northern hills.", "voss.md"),
    "tomas arden": ("Tomas Arden", "person", "A chemistry teacher.", "voss.md"),
    "varne river": ("Varne River", "location", "A river flowing into the Grey Sea.", "brackwater.md"),
    "grey sea": ("Grey Sea", "location", "A sea fed by the Varne River.", "brackwater.md"),
    "copper kettle": ("Copper Kettle", "organization", "A bakery in Oldport.", "kettle.md"),
    "oldport": ("Oldport", "location", "A town with a bakery.", "kettle.md"),
    "rye bread": ("Rye Bread", "concept", "Bread sold by the Copper Kettle.", "kettle.md"),
}

# (src, tgt, keywords, description, document)
RELATIONS = [
    ("aldermere university", "helena voss", "founded by", "Helena Voss founded Aldermere University in 1852.", "aldermere.md"),
    ("aldermere university", "brackwater", "located in", "Aldermere University is located in Brackwater.", "aldermere.md"),
    ("helena voss", "lindenholm", "born in", "Helena Voss was born in Lindenholm.", "voss.md"),
    ("helena voss", "tomas arden", "studied under", "Helena Voss studied under Tomas Arden.", "voss.md"),
    ("brackwater", "varne river", "lies on", "Brackwater lies on the Varne River.", "brackwater.md"),
    ("grey sea", "varne river", "flows into", "The Varne River flows into the Grey Sea.", "brackwater.md"),
    ("copper kettle", "oldport", "located in", "The Copper Kettle bakery is in Oldport.", "kettle.md"),
    ("copper kettle", "rye bread", "sells", "The Copper Kettle sells rye bread.", "kettle.md"),
]


def chunk_id(doc: str) -> str:
    return f"chunk-{doc.split('.')[0]}"


def relation_key(a: str, b: str) -> str:
    a, b = sorted((a, b))
    return f"{a}<|>{b}"


def build_tiny_index(home: Path) -> Settings:
    """Write the tiny graph into a fresh PATHRAG_HOME and embed it offline; returns its settings."""
    settings = Settings(home=home, docs=home / "docs")
    now = datetime(2026, 1, 1, 12, 0, 0)
    store = Store(settings.duckdb_path)
    with store.connect() as con, transaction(con):
        for path, (title, text) in DOCS.items():
            con.execute(
                "INSERT INTO documents (id, path, title, format, status, text, created_at, updated_at) "
                "VALUES (?, ?, ?, 'md', 'indexed', ?, ?, ?)", [path, path, title, text, now, now])
            con.execute(
                "INSERT INTO chunks VALUES (?, ?, 0, ?, ?, 0, ?, ?, NULL)",
                [chunk_id(path), path, text, count_tokens(text), len(text), chunk_id(path)])
        for key, (name, etype, desc, doc) in ENTITIES.items():
            con.execute(
                "INSERT INTO entities VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?)",
                [key, name, etype, desc, count_tokens(desc), [chunk_id(doc)], [doc], now])
        for src, tgt, kw, desc, doc in RELATIONS:
            a, b = sorted((src, tgt))
            con.execute(
                "INSERT INTO relations VALUES (?, ?, ?, ?, ?, ?, 1.0, 1, ?, ?, ?)",
                [relation_key(a, b), a, b, kw, desc, count_tokens(desc), [chunk_id(doc)], [doc], now])
    sync_vectors(settings)
    return settings


def sync_vectors(settings: Settings) -> None:
    """Embed entities, relations and chunks of the DuckDB tables into LanceDB (LightRAG's vector texts)."""
    embedder = HashingEmbedder()
    vectors = VectorStore(settings.lancedb_path)
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        entities = con.execute("SELECT entity_key, name, description FROM entities").fetchall()
        relations = con.execute(
            "SELECT r.relation_key, r.keywords, a.name, b.name, r.description FROM relations r "
            "JOIN entities a ON a.entity_key = r.src_key JOIN entities b ON b.entity_key = r.tgt_key").fetchall()
        chunks = con.execute("SELECT id, text FROM chunks").fetchall()
    vectors.sync("entities", [(k, f"{n}\n{d}") for k, n, d in entities], embedder)
    vectors.sync("relations", [(k, f"{kw}\t{a}\n{b}\n{d}") for k, kw, a, b, d in relations], embedder)
    vectors.sync("chunks", [(k, t) for k, t in chunks], embedder)


def tiny_index_home(tmp_path: Path, monkeypatch) -> Settings:
    """The tiny index in ``tmp_path/home``, set as PATHRAG_HOME for the CLI, with the in-process graph cache
    cleared (another test's graph of the same path must not be reused)."""
    from pathrag_pipeline.query import graph_cache

    graph_cache.clear_cache()
    settings = build_tiny_index(tmp_path / "home")
    monkeypatch.setenv("PATHRAG_HOME", str(settings.home))
    return settings
