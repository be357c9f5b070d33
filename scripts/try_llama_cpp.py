"""Index the bundled sample documents with a local GGUF model served by llama-cpp-python (manual check).

Not part of the tests or CI. Run it with the Python of an environment that holds *both* this project
(``pip install -e .``) and the server (``pip install "llama-cpp-python[server]"``: from source some 20-30 minutes
on a small machine, or in seconds from the portable wheel named in docs/llm-endpoints.md), because it imports the
pipeline and starts ``python -m llama_cpp.server`` with the same interpreter; and a chat/instruct GGUF file you
give. Ctrl-C stops the run and the server with one line. It starts

    python -m llama_cpp.server --model FILE.gguf --model_alias local --n_ctx N --host 127.0.0.1 --port P

waits until ``/v1/models`` answers, runs ``pathrag index data/sample`` against it in a fresh temporary
PATHRAG_HOME (or ``--home``) with the settings README's "Local models" section recommends, and prints the
calls made, the chunks that failed or came back empty, and the entity and relation counts. The server's own
output goes to ``llama_server.log`` in that home. Examples:

    python scripts/try_llama_cpp.py ~/models/qwen2.5-1.5b-instruct-q4_k_m.gguf
    python scripts/try_llama_cpp.py model.gguf --mode json --n-ctx 8192 --timeout 900 --keep
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_server(base_url: str, server: subprocess.Popen, log: Path, limit: float) -> None:
    """Until GET /v1/models answers (loading a model takes a while), or the server exits."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if server.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            sys.exit(f"llama_cpp.server exited with code {server.returncode}; the end of {log}:\n{tail}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=5) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    sys.exit(f"llama_cpp.server did not answer {base_url}/models within {limit:.0f} s; see {log}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf", type=Path, help="a chat/instruct model in GGUF format")
    parser.add_argument("--mode", default="md_json", choices=["json", "md_json", "tools", "json_schema"],
                        help="PATHRAG_LLM_MODE (json_schema is refused by llama_cpp.server: a check of that message)")
    parser.add_argument("--n-ctx", type=int, default=8192, help="the server's context size (its default is 2048)")
    parser.add_argument("--threads", type=int, default=None, help="the server's --n_threads")
    parser.add_argument("--concurrency", type=int, default=1, help="PATHRAG_LLM_MAX_CONCURRENCY")
    parser.add_argument("--timeout", type=int, default=600, help="PATHRAG_LLM_TIMEOUT, seconds per request")
    parser.add_argument("--max-tokens", type=int, default=1500, help="PATHRAG_LLM_MAX_TOKENS (extraction cap)")
    parser.add_argument("--chunk-tokens", type=int, default=600, help="PATHRAG_CHUNK_TOKENS")
    parser.add_argument("--gleaning", type=int, default=0, help="PATHRAG_GLEANING")
    parser.add_argument("--home", type=Path, default=None, help="PATHRAG_HOME (default: a new temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home to inspect the tables")
    parser.add_argument("--load-timeout", type=float, default=600, help="seconds to wait for the model to load")
    args = parser.parse_args()
    if not args.gguf.is_file():
        sys.exit(f"{args.gguf}: no such file; give the path of a .gguf model")
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError:
        sys.exit('llama_cpp.server is not installed: pip install "llama-cpp-python[server]" (builds from source)')

    home = args.home or Path(tempfile.mkdtemp(prefix="pathrag-llama-"))
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    log = home / "llama_server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(args.gguf), "--model_alias", "local",
               "--n_ctx", str(args.n_ctx), "--host", "127.0.0.1", "--port", str(port)]
    if args.threads:
        command += ["--n_threads", str(args.threads)]
    print("starting:", " ".join(command), flush=True)
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_server(base_url, server, log, args.load_timeout)
        os.environ.update({
            "PATHRAG_HOME": str(home), "PATHRAG_LLM_BASE_URL": base_url, "PATHRAG_LLM_MODEL": "local",
            "PATHRAG_LLM_MODE": args.mode, "PATHRAG_LLM_MAX_CONCURRENCY": str(args.concurrency),
            "PATHRAG_LLM_TIMEOUT": str(args.timeout), "PATHRAG_LLM_MAX_TOKENS": str(args.max_tokens),
            "PATHRAG_CHUNK_TOKENS": str(args.chunk_tokens), "PATHRAG_CHUNK_OVERLAP": "50",
            "PATHRAG_GLEANING": str(args.gleaning),
        })
        report_run(home)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            server.kill()
        if args.home is None and not args.keep:
            import shutil

            shutil.rmtree(home, ignore_errors=True)
        else:
            print(f"tables kept in {home} (PATHRAG_HOME={home} pathrag sql \"SELECT * FROM extractions\")")


def report_run(home: Path) -> None:
    from pathrag_pipeline.config import SAMPLE_DOCS, Settings
    from pathrag_pipeline.errors import PipelineError
    from pathrag_pipeline.index.pipeline import run_indexing
    from pathrag_pipeline.storage.store import Store

    settings = Settings.from_env()
    started = time.monotonic()
    stopped = None
    try:
        run_indexing(settings, folder=SAMPLE_DOCS, trigger="script")
    except PipelineError as exc:
        stopped = str(exc)
    seconds = time.monotonic() - started
    with Store(settings.duckdb_path).connect() as con:
        calls, prompt, completion = con.execute(
            "SELECT coalesce(sum(calls), 0), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) "
            "FROM llm_usage").fetchone()
        statuses = dict(con.execute("SELECT status, count(*) FROM extractions GROUP BY status").fetchall())
        errors = con.execute("SELECT chunk_id, status, error FROM extractions WHERE status <> 'ok' "
                             "ORDER BY chunk_id LIMIT 5").fetchall()
        entities, undescribed = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE coalesce(trim(description), '') = '') FROM entities").fetchone()
        relations = con.execute("SELECT count(*) FROM relations").fetchone()[0]
        top = con.execute("SELECT name, type FROM entities ORDER BY mention_count DESC, name LIMIT 10").fetchall()
    print(json.dumps({
        "seconds": round(seconds, 1), "stopped": stopped, "llm_calls": calls, "prompt_tokens": prompt,
        "completion_tokens": completion, "chunks_by_status": statuses, "entities": entities,
        "entities_without_description": undescribed, "relations": relations,
        "top_entities": [f"{name} ({kind})" for name, kind in top],
        "failures": [{"chunk": c, "status": s, "error": (e or "")[:300]} for c, s, e in errors],
    }, indent=1))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        # the `finally` in main() has stopped the server; a generation in progress ends with it (a SIGTERM to
        # llama_cpp.server alone does not stop a generation: terminate() then kill() after 30 s does)
        sys.exit("interrupted: the server was stopped; nothing of the run is kept unless --home or --keep")
