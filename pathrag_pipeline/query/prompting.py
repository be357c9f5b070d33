"""Prompts: PathRAG's path-ordered context, the flat ablation, and LightRAG-style context for the baselines.

PathRAG (Sec. 4.3, Eq. 5-6) turns each retained path into text — the node and edge descriptions along it — and
puts the paths after the question in *ascending* reliability, so the most reliable path sits last, next to
where the model starts answering (LLMs attend most to the start and the end of a long prompt). Here the
question goes last, after the context (our departure, ``PROMPT_VERSION`` below; docs/methods.md lists every
departure). A token budget is met by dropping the least reliable paths first. ``flat`` renders the same nodes and edges
deduplicated and without path structure, which is the paper's ablation of path-based prompting.
The baseline modes get LightRAG's context: CSV sections of entities, relationships and sources.
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Sequence
from dataclasses import dataclass, field

from pathrag_pipeline.query.graph_cache import GraphSnapshot
from pathrag_pipeline.query.params import DEFAULT_TOKEN_BUDGET
from pathrag_pipeline.query.pruning import ScoredPath
from pathrag_pipeline.text.tokenizer import count_tokens, truncate_to_tokens

# One element (node or edge description) may take at most this many tokens, so one bloated description
# cannot crowd every other path out of the budget.
MAX_ELEMENT_TOKENS = 150
MAX_EXCERPT_TOKENS = 80

SYSTEM_PROMPT = (
    "You are a helpful assistant answering questions from a knowledge graph built from the user's documents. "
    "Use only the information given below. If it does not contain the answer, say that you do not know; "
    "do not make anything up. Answer concisely and directly."
)


@dataclass(frozen=True)
class PathTrace:
    """One retained path as the query reports it (rank 1 = most reliable)."""

    rank: int
    reliability: float
    hops: int
    nodes: tuple[str, ...]          # display names along the path
    node_keys: tuple[str, ...]
    edge_ids: tuple[str, ...]       # relation keys along the path
    text: str
    chunk_ids: tuple[str, ...]      # provenance: the edges' source chunks first, then the nodes'
    document_ids: tuple[str, ...]
    keywords: tuple[str, ...] = ()  # each edge's relation keywords, along the path

    def to_dict(self) -> dict:
        return {
            "rank": self.rank, "reliability": self.reliability, "hops": self.hops, "nodes": list(self.nodes),
            "edge_ids": list(self.edge_ids), "text": self.text, "chunk_ids": list(self.chunk_ids),
            "document_ids": list(self.document_ids),
        }


@dataclass(frozen=True)
class Prompt:
    """The chat messages for the answer model, and what the budget let in."""

    system: str
    user: str
    tokens: int
    included: tuple[int, ...] = ()     # ranks of the paths (or items) that fit, best first
    dropped: int = 0                   # how many fell outside the budget
    quoted: tuple[str, ...] = ()       # chunk ids whose text (or an excerpt of it) the prompt quotes, in order

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]

    @property
    def text(self) -> str:
        return f"{self.system}\n\n{self.user}"


@functools.lru_cache(maxsize=2048)
def one_line(text: str) -> str:
    """``text`` with every run of whitespace made one space (remembered, as ``clip``: a passage is shown again and
    again by a process that answers queries; at most 2,048 passages, a few MB)."""
    return " ".join(text.split())


@functools.lru_cache(maxsize=8192)
def clip(text: str, max_tokens: int = MAX_ELEMENT_TOKENS) -> str:
    """Whitespace collapsed and cut to ``max_tokens`` tokens, with " ..." marking a cut. Remembered: a process
    that answers queries (``pathrag serve``, a Python API user) shows the same descriptions again and again."""
    text = " ".join(str(text).split())
    clipped = truncate_to_tokens(text, max_tokens)
    return clipped if clipped == text else clipped.rstrip() + " ..."


def node_line(snapshot: GraphSnapshot, node: int) -> str:
    desc = clip(snapshot.entity_descriptions[node]) or "(no description)"
    return f"{snapshot.entity_names[node]} ({snapshot.entity_types[node]}): {desc}"


def edge_line(snapshot: GraphSnapshot, row: int, first: int, second: int) -> str:
    """A relation seen from ``first`` to ``second`` (the path's direction)."""
    desc = clip(snapshot.relation_descriptions[row]) or "(no description)"
    keywords = clip(snapshot.relation_keywords[row], 30)
    label = f" [{keywords}]" if keywords else ""
    return f"{snapshot.entity_names[first]} -- {snapshot.entity_names[second]}{label}: {desc}"


def _ordered_unique(groups: Sequence[Sequence[str]]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for group in groups:
        for item in group:
            seen.setdefault(item, None)
    return tuple(seen)


def render_paths(snapshot: GraphSnapshot, paths: Sequence[ScoredPath]) -> list[PathTrace]:
    """Turn scored paths (best first) into traces: node and edge descriptions alternating along the path."""
    traces: list[PathTrace] = []
    for rank, path in enumerate(paths, start=1):
        rows = [snapshot.relation_row_of_edge(e) for e in path.edges]
        lines = [node_line(snapshot, path.nodes[0])]
        for i, row in enumerate(rows):
            lines.append(edge_line(snapshot, row, path.nodes[i], path.nodes[i + 1]))
            lines.append(node_line(snapshot, path.nodes[i + 1]))
        chunk_ids = _ordered_unique([snapshot.relation_chunks[r] for r in rows]
                                    + [snapshot.entity_chunks[n] for n in path.nodes])
        document_ids = _ordered_unique([snapshot.relation_documents[r] for r in rows]
                                       + [snapshot.entity_documents[n] for n in path.nodes])
        traces.append(PathTrace(
            rank=rank,
            reliability=float(path.score),
            hops=int(path.hops),
            nodes=tuple(snapshot.entity_names[n] for n in path.nodes),
            node_keys=tuple(snapshot.entity_keys[n] for n in path.nodes),
            edge_ids=tuple(snapshot.relation_keys[r] for r in rows),
            text="\n".join(lines),
            chunk_ids=chunk_ids,
            document_ids=document_ids,
            keywords=tuple(" ".join(snapshot.relation_keywords[r].split()) for r in rows),
        ))
    return traces


@dataclass(frozen=True)
class Excerpt:
    """A passage quoted under a path (``--excerpts``): where it comes from and the quoted text."""

    source: str
    text: str
    chunk_id: str = ""


@dataclass(frozen=True)
class Passage:
    """A source passage a prompt may quote whole: its chunk, its document's title and its text."""

    chunk_id: str
    title: str
    text: str


# A block's token count, remembered: a prompt counts each of its path and passage blocks up to four times while it
# shares the budget out, and a running process (``pathrag serve``) quotes the same passages again and again.
_block_tokens = functools.lru_cache(maxsize=4096)(count_tokens)


def joined_tokens(blocks: Sequence[str]) -> int:
    """``count_tokens("\n\n".join(blocks))`` from the blocks' own (remembered) counts: the blank line between two
    blocks is two tokens ("\n", "\n") and changes neither block's tokens, as long as no block is empty or starts or
    ends with whitespace (then the joined text is counted). Counting a 4,000-token prompt again was a tenth of a
    one-call query's own time (issue 64)."""
    if any(not b or b[0].isspace() or b[-1].isspace() for b in blocks):
        return count_tokens("\n\n".join(blocks))
    return sum(map(_block_tokens, blocks)) + 2 * (len(blocks) - 1)


def _fit(blocks_best_first: Sequence[str], budget: int) -> list[int]:
    """Indices of the longest best-first prefix of blocks whose tokens fit in ``budget``; a best block that
    alone exceeds it is not dropped but truncated by the caller (index -1 signals that)."""
    kept: list[int] = []
    used = 0
    for i, block in enumerate(blocks_best_first):
        cost = _block_tokens(block) + 2  # the blank line between blocks
        if used + cost > budget:
            break
        kept.append(i)
        used += cost
    if not kept and blocks_best_first:
        return [-1]
    return kept


def _check_budget(fixed: int, budget: int) -> None:
    if budget < fixed + 20:
        raise ValueError(
            f"token_budget={budget} leaves no room for context: the instructions and question alone take "
            f"{fixed} tokens; raise the budget (default {DEFAULT_TOKEN_BUDGET})"
        )


# Every answer prompt ends with the question, after the context, as the public PathRAG and LightRAG code ask
# it (the context goes in the system message there, the question is the user message that follows), so the
# model reads the question last, right where it starts answering. The question used to open the prompt; moving
# it keeps every prompt's size, so what fits a budget is unchanged.
PROMPT_VERSION = "question-last-1"


def _asking(question: str, instruction: str) -> str:
    """The prompt's closing lines: the instruction, then the question."""
    return f"{instruction}\n\nQuestion: {question.strip()}"


def _assemble(head: str, blocks_in_order: Sequence[str], tail: str) -> str:
    return "\n\n".join([head, *blocks_in_order, tail])


def _budgeted(question_head: str, tail: str, blocks_best_first: list[str], token_budget: int,
              empty_note: str) -> tuple[str, list[int]]:
    """User message with as many best-first blocks as the budget allows, laid out least reliable first."""
    fixed = count_tokens(SYSTEM_PROMPT) + count_tokens(question_head) + count_tokens(tail) + 4
    _check_budget(fixed, token_budget)
    if not blocks_best_first:
        return _assemble(question_head, [empty_note], tail), []
    kept = _fit(blocks_best_first, token_budget - fixed)
    if kept == [-1]:
        kept, chosen = [0], [truncate_to_tokens(blocks_best_first[0], token_budget - fixed - 2)]
    else:
        chosen = [blocks_best_first[i] for i in kept]
    return _assemble(question_head, list(reversed(chosen)), tail), kept


# Share of the context budget the paths get when a path prompt also quotes passages; the rest goes to the
# passages, and either side's unused share passes to the other. The public PathRAG code caps its path context
# at max_token_for_local_context = 5000 tokens and its source text at max_token_for_text_unit = 4000
# (PathRAG/base.py QueryParam): we keep that 5:4 ratio rather than tune a share of our own.
PATH_SHARE = 5 / 9
# The ``passages_paths`` layout shows at most this many paths: PathRAG-lt's K, the paper's configuration for a
# smaller prompt (Sec. 5.5, token cost: N = 20 nodes, K = 5 paths), against the K = 15 of its full prompt.
PATHS_LT = 5


def _path_block(trace: PathTrace, excerpts: dict[int, Sequence[Excerpt]] | None, chain: bool = False) -> str:
    """A path for the prompt: its header and node/edge descriptions, or with ``chain`` its chain of names and
    relation keywords alone (``paths_passages``); any excerpts quoted under it."""
    head = (f"Path rank {trace.rank} (reliability {trace.reliability:.4f}, {trace.hops} "
            f"hop{'s' if trace.hops != 1 else ''}): ")
    if chain:
        block = head + trace.nodes[0]
        for i, node in enumerate(trace.nodes[1:]):
            keywords = clip(trace.keywords[i], 12) if i < len(trace.keywords) and trace.keywords[i] else ""
            block += f" --[{keywords}]-- {node}" if keywords else f" -- {node}"
    else:
        block = head + f"{' -> '.join(trace.nodes)}\n{trace.text}"
    quoted = (excerpts or {}).get(trace.rank) or ()
    if quoted:
        block += "\nSource excerpts:\n" + "\n".join(
            f"- [{e.source}] {clip(e.text, MAX_EXCERPT_TOKENS)}" for e in quoted)
    return block


def _excerpt_ids(traces: Sequence[PathTrace], kept: Sequence[int],
                 excerpts: dict[int, Sequence[Excerpt]] | None) -> list[str]:
    """Chunks quoted by the excerpts under the kept paths, in prompt order (least reliable path first)."""
    return [e.chunk_id for i in reversed(kept) for e in (excerpts or {}).get(traces[i].rank) or () if e.chunk_id]


def _prefix_cost(blocks: Sequence[str], budget: int) -> tuple[int, int]:
    """How many leading blocks fit ``budget`` tokens (none when even the first does not) and their cost."""
    kept = _fit(blocks, budget)
    if kept == [-1]:
        return 0, 0
    return len(kept), sum(_block_tokens(blocks[i]) + 2 for i in kept)


def path_prompt(question: str, traces: Sequence[PathTrace], *, token_budget: int = DEFAULT_TOKEN_BUDGET,
                excerpts: dict[int, Sequence[Excerpt]] | None = None,
                fallback_nodes: Sequence[str] = (), passages: Sequence[Passage] = (),
                path_share: float = PATH_SHARE, passages_last: bool = False,
                max_paths: int | None = None) -> Prompt:
    """PathRAG's prompt: the paths in ascending reliability (most reliable last), then the question.

    ``traces`` are best first; paths that do not fit ``token_budget`` (counted over the whole prompt) are
    dropped from the least reliable end. ``excerpts`` maps a path rank to source passages quoted under it.
    When pruning found no path, ``fallback_nodes`` (rendered retrieved entities, best first) are given instead.

    ``passages`` (best first; the ``paths_passages`` layout, our departure from the paper's paths-only prompt)
    puts the top-ranked source passages before the paths: the paths get ``path_share`` of the
    context budget and the passages the rest, each side's unused share passing to the other; the paths keep the
    paper's ascending order and come last before the question, next to where the model starts answering. In this layout a path is its
    chain of names and relation keywords: its node and edge descriptions were drawn from the very passages the
    prompt quotes, and repeating them would spend the budget twice on the same text (the paper's layout, without
    passages, keeps the descriptions).

    ``passages_last`` (the ``passages_last`` layout) keeps the same paths and passages, chosen by the same shares,
    and swaps the two sections: the paths first, then the passages in ascending rank, so the best passage sits
    last, next to the question (the public code puts its relations before its sources; best-last is the paper's
    ordering principle applied to the passages).

    ``max_paths`` (the ``passages_paths`` layout: ``PATHS_LT``) shows only that many of the most reliable paths,
    the share they leave passing to the passages, and its closing instruction does not ask the model to weigh the
    paths above the passages.
    """
    if not passages:
        return _paths_only_prompt(question, traces, token_budget, excerpts, fallback_nodes)
    if max_paths is not None:
        traces, fallback_nodes = traces[:max_paths], fallback_nodes[:max_paths]
    if traces:
        path_blocks = [_path_block(t, excerpts, chain=True) for t in traces]
        paths_head = ("Relational paths between the entities of the question follow, as chains of entities and "
                      "relations, in ascending order of reliability: the last path is the most reliable.")
        tail = _asking(question, "Answer the question using the paths and the passages above, giving most "
                                 "weight to the most relevant (last) passages."
                       if passages_last else "Answer the question using the passages and the paths above."
                       if max_paths is not None else "Answer the question using the passages and the paths above, "
                                                     "giving most weight to the most reliable (last) paths.")
    else:
        path_blocks = [f"Entity: {line}" for line in fallback_nodes]
        paths_head = "Entities from the knowledge graph follow, least relevant first."
        tail = _asking(question, "Answer the question using the entities and the passages above."
                       if passages_last else "Answer the question using the passages and the entities above.")
    head = ("Source passages follow, the most relevant last."
            if passages_last else "Source passages follow, the most relevant first.")
    passage_blocks = [f"[{p.title}] {one_line(p.text)}" for p in passages]
    fixed = (_block_tokens(SYSTEM_PROMPT) + _block_tokens(head) + count_tokens(tail) + _block_tokens(paths_head)
             + 6)
    _check_budget(fixed, token_budget)
    context = token_budget - fixed
    n_paths, paths_cost = _prefix_cost(path_blocks, int(context * path_share))
    n_passages, passages_cost = _prefix_cost(passage_blocks, context - paths_cost)
    shown_passages = passage_blocks[:n_passages]
    if n_passages == 0 and context - paths_cost >= 40:
        # the best passage alone is longer than what is left: quote its beginning rather than nothing
        shown_passages = [truncate_to_tokens(passage_blocks[0], context - paths_cost - 2)]
        n_passages, passages_cost = 1, count_tokens(shown_passages[0]) + 2
    n_paths, _ = _prefix_cost(path_blocks, context - passages_cost)   # the passages' unused share
    kept = list(range(n_paths))
    path_section = [paths_head, *reversed([path_blocks[i] for i in kept])] if kept else []
    if passages_last:
        blocks = [*path_section, head, *reversed(shown_passages), tail]
    else:
        blocks = [head, *shown_passages, *path_section, tail]
    user = "\n\n".join(blocks)
    quoted = [p.chunk_id for p in passages[:n_passages]] + (_excerpt_ids(traces, kept, excerpts) if traces else [])
    ranks = tuple(traces[i].rank for i in kept) if traces else ()
    return Prompt(SYSTEM_PROMPT, user, _block_tokens(SYSTEM_PROMPT) + joined_tokens(blocks), ranks,
                  len(path_blocks) - n_paths + len(passage_blocks) - n_passages, tuple(dict.fromkeys(quoted)))


def _paths_only_prompt(question: str, traces: Sequence[PathTrace], token_budget: int,
                       excerpts: dict[int, Sequence[Excerpt]] | None, fallback_nodes: Sequence[str]) -> Prompt:
    """The paper's layout: paths only, ascending reliability (or the retrieved entities when no path)."""
    blocks: list[str] = []
    if traces:
        head = ("Relational paths from the knowledge graph follow, in ascending order of reliability: "
                "the last path is the most reliable.")
        blocks = [_path_block(t, excerpts) for t in traces]
        tail = _asking(question, "Answer the question using the paths above, giving most weight to the most "
                                 "reliable (last) ones.")
    else:
        head = "No relational path joins the retrieved entities; these entities follow, least relevant first."
        blocks = [f"Entity: {line}" for line in fallback_nodes]
        tail = _asking(question, "Answer the question using the entities above.")
    user, kept = _budgeted(head, tail, blocks, token_budget, "(nothing relevant was found in the knowledge graph)")
    ranks = tuple(traces[i].rank for i in kept) if traces else ()
    quoted = _excerpt_ids(traces, kept, excerpts) if traces else []
    return Prompt(SYSTEM_PROMPT, user, count_tokens(SYSTEM_PROMPT) + count_tokens(user), ranks,
                  len(blocks) - len(kept), tuple(dict.fromkeys(quoted)))


def flat_prompt(question: str, snapshot: GraphSnapshot, paths: Sequence[ScoredPath], *,
                token_budget: int = DEFAULT_TOKEN_BUDGET) -> Prompt:
    """The ablation: the paths' nodes and edges deduplicated and listed without path structure.

    Elements are ranked by the best path they occur in and laid out like the path prompt (most relevant
    last), so the two prompts differ only in structure, not in content or order of relevance.
    """
    items: list[str] = []
    seen_nodes: set[int] = set()
    seen_rows: set[int] = set()
    for path in paths:
        for i, node in enumerate(path.nodes):
            if node not in seen_nodes:
                seen_nodes.add(node)
                items.append("Entity: " + node_line(snapshot, node))
            if i < len(path.edges):
                row = snapshot.relation_row_of_edge(path.edges[i])
                if row not in seen_rows:
                    seen_rows.add(row)
                    src, tgt = snapshot.relation_src[row], snapshot.relation_tgt[row]
                    items.append("Relation: " + edge_line(snapshot, row, src, tgt))
    head = "Entities and relations from the knowledge graph follow, least relevant first."
    tail = _asking(question, "Answer the question using the entities and relations above.")
    user, kept = _budgeted(head, tail, items, token_budget, "(nothing relevant was found in the knowledge graph)")
    return Prompt(SYSTEM_PROMPT, user, count_tokens(SYSTEM_PROMPT) + count_tokens(user),
                  tuple(i + 1 for i in kept), len(items) - len(kept))


@dataclass
class Section:
    """One CSV section of a LightRAG context: header row and data rows best first; ``ids`` (when the rows are
    passages) names each row's chunk, so the prompt can say which passages it quotes."""

    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    ascending: bool = False         # rows are fitted best first but shown best last (paths, as PathRAG orders them)


def _csv(header: list[str], rows: Sequence[Sequence[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue().rstrip("\n")


def _fit_section(section: Section, budget: int) -> tuple[str, int, int]:
    """The section with as many leading rows as fit ``budget`` tokens, the tokens it used, the rows kept."""
    wrapper = f"-----{section.title}-----\n```csv\n"
    used = count_tokens(wrapper + _csv(section.header, []) + "\n```")
    kept: list[Sequence[str]] = []
    for row in section.rows:
        cost = count_tokens(_csv([], [row])) + 1
        if used + cost > budget:
            break
        kept.append(row)
        used += cost
    shown = list(reversed(kept)) if section.ascending else kept
    return wrapper + _csv(section.header, shown) + "\n```", used, len(kept)


def lightrag_prompt(question: str, sections: Sequence[Section], *, token_budget: int = DEFAULT_TOKEN_BUDGET,
                    shares: Sequence[float] | None = None) -> Prompt:
    """LightRAG's context layout: CSV sections (entities, relationships, sources), each given a share of
    the budget (equal by default); a section's unused share passes on to the following ones."""
    head = "Data tables from the knowledge base:"
    tail = _asking(question, "Answer the question using the data tables above.")
    fixed = count_tokens(SYSTEM_PROMPT) + count_tokens(head) + count_tokens(tail) + 4
    _check_budget(fixed, token_budget)
    shares = list(shares) if shares is not None else [1.0 / len(sections)] * len(sections)
    if len(shares) != len(sections) or abs(sum(shares) - 1.0) > 1e-6:
        raise ValueError(f"shares {shares} must give one fraction per section and sum to 1")
    left = token_budget - fixed
    carry = 0
    blocks: list[str] = []
    dropped = 0
    quoted: list[str] = []
    for section, share in zip(sections, shares):
        allowance = int(left * share) + carry
        block, used, shown = _fit_section(section, allowance)
        carry = max(allowance - used, 0)
        dropped += len(section.rows) - shown
        quoted += section.ids[:shown]
        blocks.append(block)
    user = _assemble(head, blocks, tail)
    return Prompt(SYSTEM_PROMPT, user, count_tokens(SYSTEM_PROMPT) + count_tokens(user), (), dropped,
                  tuple(quoted))


# ---- NeuroPath (query/neuropath.py) ------------------------------------------------------------------
# The paper's prompts (np_variant="paper", the default), verbatim from its Appendix I (002_0d443a49977e0766.txt,
# Figure 14: path tracking; Figure 13: key entities of a query), as its reference code sends them: the tracking
# prompt as the system message, the query and the numbered paths (ids from 0) as the user message. Zero-shot, as
# in the paper's experiments (Sec. 4.1, "use a Zero-Shot prompting setup"; Figure 15's one-shot example is not sent).
NEUROPATH_PAPER_TRACKER_PROMPT = """To answer a given query, you need to select a set of valid clue paths to form a chain of reasoning and determine whether some paths need to be expanded with more information to help answer the query.
# Explanation
Valid paths can provide intermediate reasoning steps or evidence to help answer the query. Paths may be redundant, filter them out.
A path that contains the <expandable> tag is an expandable path, which identifies a phrase that can be expanded with additional information.
If information is sufficient or no more valid information can be added, stop expanding.
Return the required JSON object.
# JSON object format
{
    "current_chain": "A string. You should think step by step. Try to form the current chain of reasoning.",
    "valid_ids": [List of valid path IDs (int) (sort by helpfulness to query)],
    "expansion_requirements": "A string. If need expand, provide the specific requirements of the expansion. Otherwise set to an empty string.",
    "need_expand_ids": [List of path IDs (int) that need to be expanded. (if any)],
    "continue": 0 or 1 (0 = stop expanding, 1 = continue expanding)
}"""

NEUROPATH_NER_PROMPT = """Please extract all named entities that are important for solving the questions below. Place the named entities in json format.
# Example 1
Question: Who wrote the book that was published earlier, "The Great Gatsby" or "To Kill a Mockingbird"?
Output:
{
    "named_entities": ["The Great Gatsby", "To Kill a Mockingbird"]
}
# Example 2
Question: Are the cities of Paris and Berlin located in the same country?
Output:
{
    "named_entities": ["Paris", "Berlin"]
}"""


def neuropath_paper_tracker_message(question: str, lines: Sequence[str]) -> str:
    """The paper's tracking user message (its reference code): the query, then the paths numbered from 0."""
    return f"Query: {question.strip()}\nPaths:\n" + "".join(f"{i}: {line}\n" for i, line in enumerate(lines)) + "\nOutput:\n"


def neuropath_ner_message(question: str) -> str:
    """Figure 13's last lines, with the question filled in."""
    return f"Question: {question.strip()}\nOutput:"


# np_variant="ours": our tracker prompt, written before the paper's text was at hand (issue 24 keeps it reachable
# and measured): the same outputs under our field names, candidates numbered from 1, the previous hop's reasoning
# and requirement shown to the model.
NEUROPATH_TRACKER_PROMPT = """You are tracking reasoning paths through a knowledge graph to answer a multi-hop question.
A path is a chain of (subject, relation, object) triples. At each step you are given the question, the reasoning
chain so far, the expansion requirement of the previous step, and numbered candidate paths.

Return:
- reasoning_chain: the reasoning supported so far, as a short chain of facts leading from the question towards the answer.
- valid_paths: ids of the candidate paths that carry knowledge needed to answer the question.
- paths_to_expand: ids of valid paths whose last entity should be followed to find the knowledge still missing.
- expansion_requirement: what knowledge is still missing, phrased as what the next step must find.
- continue_tracking: true if the question cannot be answered yet and expanding can find the missing knowledge;
  false if the reasoning chain already answers the question or no path is worth expanding.

Use only ids from the list. Do not invent facts that no path states."""

NEUROPATH_ANSWER_HEAD = ("Relevant knowledge follows: paths tracked through the knowledge graph, the reasoning "
                         "chain built while tracking them, and the source passages.")


def neuropath_tracker_message(question: str, hop: int, reasoning: str, requirement: str,
                              candidates: Sequence[str]) -> str:
    """The tracker's user message for one hop: candidates numbered from 1."""
    lines = [f"Question: {question.strip()}", f"Step: {hop}",
             f"Reasoning chain so far: {reasoning.strip() or '(none yet)'}",
             f"Expansion requirement: {requirement.strip() or question.strip()}",
             "Candidate paths:"]
    lines += [f"[{i}] {text}" for i, text in enumerate(candidates, start=1)]
    return "\n".join(lines)


def neuropath_prompt(question: str, reasoning: str, traces: Sequence[PathTrace], passages: Sequence[Passage], *,
                     token_budget: int = DEFAULT_TOKEN_BUDGET) -> Prompt:
    """NeuroPath's answer prompt: the question, the tracked paths and passages (most relevant last) and the
    reasoning chain, within ``token_budget``; passages and paths that do not fit are dropped least relevant first."""
    head = NEUROPATH_ANSWER_HEAD
    tail = (f"Reasoning chain: {clip(reasoning, MAX_ELEMENT_TOKENS) or '(none)'}\n\n"
            + _asking(question, "Answer the question using the paths, the passages and the reasoning "
                                "chain above."))
    blocks = [f"Tracked path {t.rank}: {' -> '.join(t.nodes)}\n{t.text}" for t in traces]
    blocks += [f"Passage: {clip(p.text, 300)}" for p in passages]
    user, kept = _budgeted(head, tail, blocks, token_budget, "(nothing relevant was found)")
    quoted = [passages[i - len(traces)].chunk_id for i in reversed(kept) if i >= len(traces)]
    return Prompt(SYSTEM_PROMPT, user, count_tokens(SYSTEM_PROMPT) + count_tokens(user),
                  tuple(i + 1 for i in kept), len(blocks) - len(kept), tuple(quoted))
