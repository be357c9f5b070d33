"""LanceDB at a URI (PATHRAG_LANCEDB_URI): settings parsing and redaction here; index + ask against a local
S3-compatible server (moto) in the slow test, which skips when moto's server is not installed."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys

import pytest

from pathrag_pipeline.config import ConfigError, Settings
from pathrag_pipeline.storage.vector_location import VectorLocation

OPTIONS = {"aws_endpoint": "http://127.0.0.1:9000", "aws_access_key_id": "AKIAEXAMPLEKEYID",
           "aws_secret_access_key": "very-secret-value-123", "allow_http": True, "aws_region": "us-east-1"}


_OPEN_A_TABLE = """
import sys
from pathrag_pipeline.storage.vector_location import VectorLocation
db = VectorLocation(sys.argv[1]).connect()
table = db.create_table("t", data=[{"id": "a", "vector": [1.0, 2.0]}, {"id": "b", "vector": [2.0, -1.0]}])
print(table.search([1.0, 2.0]).limit(1).to_list()[0]["id"])
print("api imported:", "lance_namespace_urllib3_client.api" in sys.modules)
import lance_namespace_urllib3_client as client
print(bool(client.__version__), client.ApiClient.__name__, client.DataApi.__name__,
      "lance_namespace_urllib3_client.api.data_api" in sys.modules)
"""


@pytest.mark.e2e
def test_lancedb_opens_without_importing_its_rest_client_which_still_loads_when_asked(tmp_path):
    """slim_imports: LanceDB's REST namespace client's API modules (~0.9 s) load only when one of their names is
    looked up; a local table works without them (a fresh process: this one may hold them already)."""
    script = tmp_path / "open_a_table.py"
    script.write_text(_OPEN_A_TABLE)
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "lancedb")], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:3] == ["a", "api imported: False", "True ApiClient DataApi True"], run.stdout


def test_the_default_is_the_homes_folder(tmp_path):
    settings = Settings.from_env({"PATHRAG_HOME": str(tmp_path / "home")})
    location = VectorLocation.for_settings(settings)
    assert settings.lancedb_uri is None and location.is_local and location.path == tmp_path / "home" / "lancedb"
    assert not location.has_table("entities")


def test_an_object_store_uri_and_its_options_are_read_and_never_shown(tmp_path):
    settings = Settings.from_env({"PATHRAG_HOME": str(tmp_path), "PATHRAG_LANCEDB_URI": "s3://bucket/pathrag/lancedb/",
                                  "PATHRAG_LANCEDB_STORAGE_OPTIONS": json.dumps(OPTIONS)})
    location = VectorLocation.for_settings(settings)
    assert location.uri == "s3://bucket/pathrag/lancedb" and not location.is_local
    assert dict(location.storage_options)["allow_http"] == "true"   # LanceDB takes strings
    shown = json.dumps(settings.public()) + repr(settings) + repr(location) + json.dumps(location.public())
    assert "very-secret-value-123" not in shown and "AKIAEXAMPLEKEYID" not in shown
    assert settings.public()["lancedb_storage_options"]["aws_endpoint"] == "http://127.0.0.1:9000"
    assert location.sibling(".reembed").uri == "s3://bucket/pathrag/lancedb.reembed"


def test_a_folder_uri_is_a_local_folder(tmp_path):
    settings = Settings.from_env({"PATHRAG_LANCEDB_URI": f"file://{tmp_path}/vectors"})
    assert VectorLocation.for_settings(settings).path == tmp_path / "vectors"


@pytest.mark.parametrize("name, value, words", [
    ("PATHRAG_LANCEDB_URI", "ftp://host/x", "scheme 'ftp' is not supported"),
    ("PATHRAG_LANCEDB_URI", "s3://", "must name a bucket"),
    ("PATHRAG_LANCEDB_URI", "s3://key:secret-abc@bucket/x", "carry no credentials"),
    ("PATHRAG_LANCEDB_STORAGE_OPTIONS", '{"aws_secret_access_key": "secret-abc', "is not valid JSON"),
    ("PATHRAG_LANCEDB_STORAGE_OPTIONS", '["a"]', "must be a JSON object"),
    ("PATHRAG_LANCEDB_STORAGE_OPTIONS", '{"aws_endpoint": {"x": 1}}', "must be a string, number or boolean"),
])
def test_a_bad_setting_is_one_line_naming_it_and_never_quoting_a_secret(name, value, words):
    with pytest.raises(ConfigError, match=name) as info:
        Settings.from_env({name: value})
    message = str(info.value)
    assert words in message and "\n" not in message and "secret-abc" not in message


# ---- against a real S3-compatible server ---------------------------------------------------------------------
@pytest.fixture()
def s3(tmp_path):
    from pathrag_lab.testing.backing_services import S3Server, ServiceUnavailable

    try:
        server = S3Server(tmp_path / "moto").start()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    try:
        server.create_bucket("vectors")
        yield server
    finally:
        server.stop()


def _sample(tmp_path):
    from pathrag_pipeline.config import SAMPLE_DOCS

    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE_DOCS, docs)
    return docs


def _answers(settings, questions):
    from pathrag_pipeline.query import PathRAG

    rag = PathRAG(settings=settings)
    out = []
    for q in questions:
        r = rag.query(q, mode="path", top_k=10)
        out.append((r.answer, [(p.nodes, round(p.reliability, 6)) for p in r.paths]))
    return out


QUESTIONS = ["Who trained the engineer who designed the Corran Ford Bridge?", "What did the institute measure?"]


@pytest.mark.slow
def test_index_and_ask_with_lancedb_on_a_local_s3_server_as_in_the_home_folder(tmp_path, s3, monkeypatch, caplog):
    from pathrag_pipeline.index.pipeline import run_indexing
    from pathrag_pipeline.storage.vector_store import VectorStore

    docs = _sample(tmp_path)
    local = Settings.from_env({"PATHRAG_HOME": str(tmp_path / "local"), "PATHRAG_DOCS": str(docs)})
    run_indexing(local)
    # the keys only in PATHRAG_LANCEDB_STORAGE_OPTIONS: nothing in AWS_* (a process that has no AWS profile)
    env = {"PATHRAG_HOME": str(tmp_path / "remote"), "PATHRAG_DOCS": str(docs),
           "PATHRAG_LANCEDB_URI": "s3://vectors/pathrag/lancedb",
           "PATHRAG_LANCEDB_STORAGE_OPTIONS": json.dumps(s3.storage_options())}
    remote = Settings.from_env(env)
    caplog.set_level(logging.DEBUG)
    report = run_indexing(remote)
    assert report.embeddings.tables["entities"].total == report.graph["entities"] > 0
    assert not (tmp_path / "remote" / "lancedb").exists()          # nothing in the home's folder
    store = VectorStore.for_settings(remote)
    assert sorted(store.tables()) == ["chunks", "entities", "relations"]
    assert _answers(remote, QUESTIONS) == _answers(local, QUESTIONS)
    # an unchanged folder is a no-op on the object store too (the no-op check lists the bucket's tables)
    from pathrag_pipeline.index.pending_work import up_to_date_report

    assert up_to_date_report(remote, docs)[0] is not None
    # a re-embed replaces the tables in place on the object store
    again = run_indexing(remote, reembed=True)
    assert again.embeddings.tables["entities"].total == report.graph["entities"]
    assert sorted(VectorStore.for_settings(remote).tables()) == ["chunks", "entities", "relations"]
    assert VectorStore(VectorLocation.for_settings(remote).sibling(".reembed")).tables() == []
    assert _answers(remote, QUESTIONS[:1]) == _answers(local, QUESTIONS[:1])
    assert s3.storage_options()["aws_secret_access_key"] not in caplog.text
