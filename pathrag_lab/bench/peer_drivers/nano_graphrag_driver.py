"""nano-graphrag driver of `pathrag bench peers`: run with the side environment's Python.

``index`` inserts every .txt file of ``--docs``; ``edit`` inserts the file's new text (nano-graphrag keys a document
by the hash of its content and has no delete or update: the old version stays in the index, and every insert
re-clusters the graph and rewrites every community report); ``delete`` is not supported (the driver says so and
exits 3); ``query`` answers ``--questions`` in one process in ``--mode`` (local by default). Storage is
nano-graphrag's default (JSON KV, nano-vectordb, NetworkX) in ``--workdir``. The model functions are the scripted
server's through the openai client, without nano-graphrag's response cache (its cache lives in its own OpenAI
functions). Prints ``PEER-RESULT {json}`` last.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from _peer_common import arguments, emit, install_word_tokenizer, openai_functions, read_folder

install_word_tokenizer()

from nano_graphrag import GraphRAG, QueryParam  # noqa: E402
from nano_graphrag._utils import EmbeddingFunc  # noqa: E402


def make(args) -> GraphRAG:
    chat, embed = openai_functions(args.base_url)

    async def model(prompt, system_prompt=None, history_messages=None, **kwargs) -> str:
        return await chat(prompt, system_prompt=system_prompt, history_messages=history_messages)

    return GraphRAG(working_dir=str(args.workdir), best_model_func=model, cheap_model_func=model,
                    embedding_func=EmbeddingFunc(embedding_dim=args.dim, max_token_size=8192, func=embed))


async def main() -> None:
    args = arguments()
    if args.step == "delete":
        print("nano-graphrag 0.0.8.2 has no way to delete a document", file=sys.stderr)
        sys.exit(3)
    args.workdir.mkdir(parents=True, exist_ok=True)
    rag = make(args)
    out: dict = {}
    if args.step == "index":
        await rag.ainsert([text for _, _, text in read_folder(args.docs)])
    elif args.step == "edit":   # step_s: the work alone, as in a process that keeps nano-graphrag loaded
        started = time.perf_counter()
        await rag.ainsert(args.file.read_text(encoding="utf-8"))
        out["step_s"] = round(time.perf_counter() - started, 4)
    else:
        questions = json.loads(args.questions.read_text(encoding="utf-8"))
        mode = args.mode or "local"
        await rag.aquery("What is this collection of passages about?", param=QueryParam(mode=mode))   # warm-up
        seconds = []
        for q in questions:
            started = time.perf_counter()
            await rag.aquery(q, param=QueryParam(mode=mode))
            seconds.append(round(time.perf_counter() - started, 4))
        out["query_s"] = seconds
    graph = getattr(rag.chunk_entity_relation_graph, "_graph", None)
    if graph is not None:
        out["entities"], out["relations"] = graph.number_of_nodes(), graph.number_of_edges()
    out["documents"] = len(await rag.full_docs.all_keys()) if hasattr(rag.full_docs, "all_keys") else None
    emit(out)


if __name__ == "__main__":
    asyncio.run(main())
