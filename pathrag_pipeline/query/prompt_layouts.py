"""The answer prompt of each query mode and path-prompt layout (``QueryParams.prompt``), from what the engine
retrieved: LightRAG's CSV sections for the baselines, and for path mode the paper's paths, the flat ablation, the
public code's sections, or the passages-and-paths layouts (query/prompting.py renders them). The engine
(query/engine.py) retrieves; this module lays the result out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pathrag_pipeline.index.offline_extraction import text_sentences
from pathrag_pipeline.query.answering import mentions
from pathrag_pipeline.query.graph_cache import GraphSnapshot
from pathrag_pipeline.query.params import QueryParams
from pathrag_pipeline.query.prompting import (
    PATH_SHARE,
    PATHS_LT,
    Excerpt,
    Passage,
    PathTrace,
    Prompt,
    Section,
    flat_prompt,
    lightrag_prompt,
    node_line,
    path_prompt,
)
from pathrag_pipeline.query.results import BudgetedPrompt
from pathrag_pipeline.query.retrieval import ModeContext, RetrievedNode

EXCERPTS_PER_PATH = 2   # --excerpts: sentences quoted under each path


@dataclass(frozen=True)
class ChunkSource:
    """A passage as the prompt quotes it (engine.fetch_chunks reads them)."""

    id: str
    document_id: str
    title: str
    text: str


def _path_excerpts(trace: PathTrace, sources: dict[str, ChunkSource]) -> list[Excerpt]:
    """For ``--excerpts``: from each of the path's first source chunks, the sentence naming most of its nodes."""
    out: list[Excerpt] = []
    for chunk_id in trace.chunk_ids:
        source = sources.get(chunk_id)
        if source is None:
            continue
        best, best_named = "", 0
        for sentence in text_sentences(source.text):
            named = sum(mentions(sentence.casefold(), n) for n in trace.nodes)
            if named > best_named:
                best, best_named = sentence, named
        if best:
            out.append(Excerpt(source.title, best, chunk_id))
        if len(out) >= EXCERPTS_PER_PATH:
            break
    return out


def _sections(snapshot: GraphSnapshot, ctx: ModeContext, sources: dict[str, ChunkSource]) -> list[Section]:
    degree = snapshot.view.degree
    entities = Section("Entities", ["id", "entity", "type", "description", "rank"], [
        [str(i), snapshot.entity_names[n.node], snapshot.entity_types[n.node],
         " ".join(snapshot.entity_descriptions[n.node].split()), str(degree(n.node))]
        for i, n in enumerate(ctx.nodes)
    ])
    relations = Section("Relationships", ["id", "source", "target", "description", "keywords", "weight", "rank"], [
        [str(i), snapshot.entity_names[snapshot.relation_src[r]], snapshot.entity_names[snapshot.relation_tgt[r]],
         " ".join(snapshot.relation_descriptions[r].split()), snapshot.relation_keywords[r],
         f"{snapshot.relation_strengths[r]:g}", str(degree(snapshot.relation_src[r]) + degree(snapshot.relation_tgt[r]))]
        for i, r in enumerate(ctx.relations)
    ])
    return [entities, relations, _sources_section(ctx.chunk_ids, sources)]


def _sources_section(chunk_ids: Sequence[str], sources: dict[str, ChunkSource]) -> Section:
    present = [c for c in dict.fromkeys(chunk_ids) if c in sources]
    return Section("Sources", ["id", "content"], [[str(i), " ".join(sources[c].text.split())]
                                                  for i, c in enumerate(present)], ids=present)


def passages_of(chunk_ids: Sequence[str], sources: dict[str, ChunkSource]) -> list[Passage]:
    return [Passage(c, sources[c].title, sources[c].text) for c in chunk_ids if c in sources]


# The ``public`` layout (the public PathRAG code's context: entities, relations as paths, sources). Its code caps
# paths at 5000 and sources at 4000 tokens and the entities only by count (top 40); we give the entities the
# quarter our LightRAG modes give them and split the rest 5:4, as prompting.PATH_SHARE does.
PUBLIC_SHARES = (0.25, 0.75 * PATH_SHARE, 0.75 * (1 - PATH_SHARE))
# the path layouts that quote passages through path_prompt
PASSAGE_LAYOUTS = ("paths_passages", "passages_last", "passages_paths")


def _public_sections(snapshot: GraphSnapshot, retrieved: Sequence[RetrievedNode], traces: Sequence[PathTrace],
                     chunk_ids: Sequence[str], sources: dict[str, ChunkSource]) -> list[Section]:
    degree = snapshot.view.degree
    entities = Section("Entities", ["id", "entity", "type", "description", "rank"], [
        [str(i), snapshot.entity_names[n.node], snapshot.entity_types[n.node],
         " ".join(snapshot.entity_descriptions[n.node].split()), str(degree(n.node))]
        for i, n in enumerate(retrieved)])
    paths = Section("Relational paths (ascending reliability)", ["id", "context"], [
        [str(t.rank), " | ".join(t.text.splitlines())] for t in traces], ascending=True)
    return [entities, paths, _sources_section(chunk_ids, sources)]


def at_budget(prompt: Prompt, budget: int, sources: dict[str, ChunkSource]) -> BudgetedPrompt:
    documents = tuple(dict.fromkeys(sources[c].document_id for c in prompt.quoted if c in sources))
    return BudgetedPrompt(budget, prompt.text, prompt.tokens, documents)


def layout_prompt(text: str, mode: str, params: QueryParams, snapshot: GraphSnapshot | None, scored: list,
            traces: list[PathTrace], retrieved: list[RetrievedNode], ctx: ModeContext,
            sources: dict[str, ChunkSource], chunk_ids: Sequence[str] = ()) -> Prompt:
    """The answer prompt; in path mode ``params.prompt`` picks the layout (``query/params.py``) and
    ``chunk_ids`` are the ranked passages the passage-quoting layouts draw from, best first."""
    budget = params.token_budget
    if mode == "naive":
        return lightrag_prompt(text, [_sources_section(ctx.chunk_ids, sources)], token_budget=budget)
    assert snapshot is not None
    if mode != "path":
        return lightrag_prompt(text, _sections(snapshot, ctx, sources), token_budget=budget,
                               shares=(0.25, 0.25, 0.5))
    if params.prompt == "flat":
        return flat_prompt(text, snapshot, scored, token_budget=budget)
    if params.prompt == "passages":
        return lightrag_prompt(text, [_sources_section(chunk_ids, sources)], token_budget=budget)
    if params.prompt == "public":
        return lightrag_prompt(text, _public_sections(snapshot, retrieved, traces, chunk_ids, sources),
                               token_budget=budget, shares=PUBLIC_SHARES)
    quoted = {t.rank: _path_excerpts(t, sources) for t in traces} if params.excerpts else None
    return path_prompt(text, traces, token_budget=budget, excerpts=quoted,
                       fallback_nodes=[node_line(snapshot, n.node) for n in retrieved],
                       passages=(passages_of(chunk_ids, sources) if params.prompt in PASSAGE_LAYOUTS else ()),
                       passages_last=params.prompt == "passages_last",
                       max_paths=PATHS_LT if params.prompt == "passages_paths" else None)


def ordered_prompt(text: str, mode: str, params: QueryParams, snapshot: GraphSnapshot | None,
                    scored: list, traces: list[PathTrace], retrieved: list[RetrievedNode], ctx: ModeContext,
                    sources: dict[str, ChunkSource], chunk_ids: Sequence[str],
                    cosines: dict[str, float] | None) -> Prompt:
    """``layout_prompt``; with ``cosines`` (``params.passage_order == "question"``) the passages it quotes are shown
    most similar to the question first. The ranker still chooses which passages: the prompt is laid out once in
    rank order, the quoted ones (a prefix of ``chunk_ids``) are sorted by cosine, and the prompt is laid out
    again from that order. The same passages fit, since they cost the same tokens in any order."""
    prompt = layout_prompt(text, mode, params, snapshot, scored, traces, retrieved, ctx, sources, chunk_ids)
    if cosines is None:
        return prompt
    quoted = set(prompt.quoted)
    shown = 0
    while shown < len(chunk_ids) and chunk_ids[shown] in quoted:
        shown += 1
    if shown < 2:
        return prompt
    head = sorted(chunk_ids[:shown], key=lambda c: -cosines.get(c, -1.0))   # stable: ties keep rank order
    return layout_prompt(text, mode, params, snapshot, scored, traces, retrieved, ctx, sources,
                         [*head, *chunk_ids[shown:]])
