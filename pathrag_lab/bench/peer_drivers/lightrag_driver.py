"""LightRAG (lightrag-hku) driver of `pathrag bench peers`: run with the side environment's Python.

``index`` inserts every .txt file of ``--docs`` (doc id = file stem); ``edit`` deletes the file's document by id and
inserts its new text (LightRAG has no update); ``delete`` deletes it by id; ``query`` answers ``--questions`` in one
process in ``--mode`` (hybrid by default). ``edit`` and ``delete`` also report ``step_s``, the work alone (what a
process that keeps LightRAG loaded would wait). Storage is LightRAG's default (JSON KV, NanoVectorDB, NetworkX) in
``--workdir``. Prints ``PEER-RESULT {json}`` last.
"""

from __future__ import annotations

import asyncio
import json
import time

from _peer_common import arguments, emit, install_word_tokenizer, openai_functions, read_folder

install_word_tokenizer()

from lightrag import LightRAG, QueryParam  # noqa: E402
from lightrag.utils import EmbeddingFunc  # noqa: E402


async def make(args) -> LightRAG:
    chat, embed = openai_functions(args.base_url)
    rag = LightRAG(working_dir=str(args.workdir), llm_model_func=chat, llm_model_name="fake-chat",
                   embedding_func=EmbeddingFunc(embedding_dim=args.dim, max_token_size=8192, func=embed))
    await rag.initialize_storages()
    try:
        from lightrag.kg.shared_storage import initialize_pipeline_status
        await initialize_pipeline_status()
    except Exception:   # newer versions initialise it with the storages
        pass
    return rag


async def main() -> None:
    args = arguments()
    args.workdir.mkdir(parents=True, exist_ok=True)
    rag = await make(args)
    out: dict = {}
    try:
        if args.step == "index":
            docs = read_folder(args.docs)
            await rag.ainsert([t for _, _, t in docs], ids=[i for i, _, _ in docs], file_paths=[n for _, n, _ in docs])
        elif args.step == "edit":   # step_s: the work alone, as in a process that keeps LightRAG loaded
            started = time.perf_counter()
            result = await rag.adelete_by_doc_id(args.file.stem)
            out["delete_status"] = getattr(result, "status", str(result))
            await rag.ainsert(args.file.read_text(encoding="utf-8"), ids=args.file.stem, file_paths=args.file.name)
            out["step_s"] = round(time.perf_counter() - started, 4)
        elif args.step == "delete":
            started = time.perf_counter()
            result = await rag.adelete_by_doc_id(args.file.stem)
            out["delete_status"] = getattr(result, "status", str(result))
            out["step_s"] = round(time.perf_counter() - started, 4)
        else:
            questions = json.loads(args.questions.read_text(encoding="utf-8"))
            param = QueryParam(mode=args.mode or "hybrid")
            await rag.aquery("What is this collection of passages about?", param=param)   # warm-up, unmeasured
            seconds = []
            for q in questions:
                started = time.perf_counter()
                await rag.aquery(q, param=QueryParam(mode=args.mode or "hybrid"))
                seconds.append(round(time.perf_counter() - started, 4))
            out["query_s"] = seconds
        graph = getattr(rag.chunk_entity_relation_graph, "_graph", None)
        if graph is not None:
            out["entities"], out["relations"] = graph.number_of_nodes(), graph.number_of_edges()
    finally:
        await rag.finalize_storages()
    emit(out)


if __name__ == "__main__":
    asyncio.run(main())
