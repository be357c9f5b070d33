"""Query options: the modes, pruning variants and orderings, their defaults, and ``QueryParams``.

Pure Python with no heavy imports, so the CLI can declare its options (and ``pathrag --help`` can list
them) without loading numpy, igraph, LanceDB or a model client.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields, replace

# how an offline (extractive) answer starts; here so `pathrag ask` can strip it without importing the engine
EXTRACTIVE_LABEL = "Extractive answer (offline mode, no LLM):"
MODES = ("path", "naive", "local", "global", "hybrid", "neuropath")
# The path prompt's layouts (query/prompting.py): "paths", the paper's (paths in ascending reliability, best
# last); "paths_passages", the paths after the top-ranked passages, split 5:4 as the public PathRAG code caps its
# path and source contexts; "passages_last", the same paths and passages in the other order (the paths first, then
# the passages in ascending rank so the best passage sits last, next to the question: the public code's order of
# relations before sources, with the paper's best-last principle applied to the passages); "public", the public
# code's three sections (entities, relations as paths, sources); "passages", the ranked passages alone (an
# ablation: the ranker without paths); "flat", the paper's ablation (the paths' nodes and edges without path
# structure); "passages_paths", the top-ranked passages, then only the paper's light configuration's
# K = 5 most reliable paths (PathRAG-lt, Sec. 5.5) in ascending reliability, best last (their unused share goes to
# the passages).
PROMPT_STYLES = ("paths", "paths_passages", "passages_last", "public", "passages", "flat", "passages_paths")
# In what order a layout shows the passages it quotes (which passages it quotes is the ranker's choice either way):
# "rank", the ranker's order; "question", most similar to the question first (the embedder's cosine, as the flat
# chunk prompts order theirs): the walk ranks the passages of the question's own entities first, and those name
# the bridge entity, not the answer. Measured with a 0.5B reader it tied the default on answer F1, as did
# "passages_paths", so neither is the default (docs/benchmarks.md, "Two more layouts against the same diagnosis").
PASSAGE_ORDERS = ("rank", "question")
VARIANTS = ("paper", "reference")
ORDERINGS = ("reliability", "hop_first", "random")
DEFAULT_THETA = {"paper": 0.05, "reference": 0.3}
DEFAULT_MAX_HOPS = {"paper": 4, "reference": 3}
DEFAULT_TOP_N = 40
# Text retrieval of chunks (naive mode; path mode fuses it with graph evidence) and of seed entities.
# "vector": the embedder alone; "bm25": offline Okapi BM25; "hybrid": both, by reciprocal rank fusion (the
# vector list joins only when the embedder is semantic: the offline hashing embedder is a weaker lexical signal);
# "auto": "vector" in naive mode (LightRAG's naive, unchanged) and "hybrid" for path mode's text evidence.
CHUNK_SEARCHES = ("auto", "hybrid", "vector", "bm25")
SEED_SEARCHES = ("hybrid", "vector")
# How path mode ranks the passages it returns (not the prompt's path order):
# "no_paths" (the default): personalised PageRank over the entity-passage graph (HippoRAG 2-style, not in the
# PathRAG paper) restarting at the seeds and the text retrievers' hits (query/ranking.py); "fused": the same with
# the kept paths' passages restarting the walk too (it gained nothing its interval supports on musique-100, so it
# is not the default; the paths still go to the prompt); "graph": seeds + paths, no text; "seeds": seeds alone;
# "unweighted": "fused" with restart weights by rank alone (revert "similarity" does the same to the default);
# "legacy": the earlier seed-rank + path blend; "path_order": the kept paths' provenance in the prompt's order,
# then the seeds' chunks (the paper's: what its prompt is built from); "text_fused": the "no_paths" walk's
# ranking and the question's own text ranking (the hybrid chunk search) fused by RRF as two equal votes.
PASSAGE_RANKINGS = ("fused", "no_paths", "graph", "seeds", "unweighted", "legacy", "path_order", "text_fused")
DEFAULT_TOKEN_BUDGET = 4000
# Path Pooling (query/path_pooling.py) over path mode's relation/path context: "off"; "rerank" orders the kept
# paths by pooled relation scores; "reselect" keeps the top_k of a larger pruned pool by that score.
PATH_POOLINGS = ("off", "rerank", "reselect")
# Which Path Pooling formula (query/path_pooling.py): "ours" (interpolated mean pooling, an absolute positional
# bonus; what the published pool figures measured) or "paper" (Algorithm 1 as printed: kernel mean, relative
# positional score s_min / (i * a), max over kernels, unreachable triples as one-hop kernels).
POOL_VARIANTS = ("ours", "paper")
# NeuroPath (query/neuropath.py): hops of dynamic path tracking (the paper's default is 2), candidate paths kept
# per hop by similarity to the previous hop's expansion requirement (the paper's 30), the LLM token budget of
# one query's keyword + tracking calls, and the name-embedding similarity above which entities are coreferent.
DEFAULT_NP_MAX_HOPS = 2
DEFAULT_NP_CANDIDATES = 30
DEFAULT_NP_TOKEN_BUDGET = 30_000
DEFAULT_NP_COREF_THRESHOLD = 0.8
# How neuropath ranks the passages it returns: "auto" (the variant's own: "union" for the paper's, "fused" for
# ours), "fused" (our merge: tracked paths' passages and the post-retrieval completion, by RRF), "union" (the
# paper's D_p ∪ D_e: the tracked paths' passages first, then the completion's), or one side alone ("tracked",
# "completion") for ablations.
NP_PASSAGES = ("auto", "fused", "union", "tracked", "completion")
# Which NeuroPath (query/neuropath.py): "paper" (the default, issue 24: the paper's Sec. 3.3-3.4 and Algorithm 1 with
# its reference code's reading: coreference sets at every hop, the valid paths re-judged each hop, pruning by the
# whole path's similarity, the union merge with a dense completion, the NER and tracker prompts of Appendix I) or
# "ours" (what the figures before issue 24 measured: coreference at the seeds only, every hop's valid paths kept,
# pruning by the newest triple, the RRF merge with a BM25+dense completion, LightRAG's keywords as key entities).
NP_VARIANTS = ("paper", "ours")
# np_passages="auto": each variant's own merge
NP_DEFAULT_PASSAGES = {"paper": "union", "ours": "fused"}
# Tuned path-mode choices an evaluation ablation reverts to the simpler or the paper's rule (docs/benchmarks.md,
# "How a tuned choice is adopted"): "question_seed" drops the whole question as an extra seed query (the keywords
# alone, as in PathRAG); "exact_name" drops the exact-name head of a keyword's seeds (retriever order alone);
# "both_ends" weighs a kept path by its weaker end seed instead of both; "damping" uses HippoRAG's 0.5, not 0.85;
# "similarity" weighs the walk's restart items by rank alone, not similarity x rank; "seed_gate" keeps the top-N
# seeds even when none stands out of its keyword's background (retrieval.seeds_stand_out), as PathRAG does.
# Where query keywords come from: "llm" is LightRAG's keyword prompt (PathRAG's too) when an LLM is configured and
# the offline rules otherwise; "offline" keeps the rules even with an LLM; "auto" is each mode's default (``keywords_
# for``): the offline rules for path mode, the LLM's keywords for the LightRAG modes and NeuroPath (their papers').
# Path mode's default is our departure from PathRAG, chosen on answers: with a local 0.5B reader on musique-100 the
# offline keywords answered better than the LLM's (docs/benchmarks.md, "Query keywords from the LLM or the offline
# rules") for one model call a query instead of two; the paper's keyword call is `keywords="llm"` (the
# path:llm_keywords row, and the "paper" and "public-code" presets). NeuroPath's tracker: "auto" (the LLM when
# configured) or "offline".
KEYWORD_SOURCES = ("auto", "llm", "offline")
# what "auto" is for each mode (absent: "llm")
DEFAULT_KEYWORDS = {"path": "offline"}
NP_TRACKERS = ("auto", "offline")
# What the answer should look like: "default", a concise free answer; "short", the answer alone as a short
# phrase (a name, a date, a number), as QA benchmarks score it by exact match and token F1.
RESPONSES = ("default", "short")
# Between which seeds path mode prunes its paths: "all" the top-N seeds (the paper); "standing" only the seeds that
# stand out of their own keyword's background (retrieval.standing_seeds, the bar ``seed_gate`` applies to the seeds
# as a whole), our departure: a keyword such as "country" always has N nearest entities, and the paths between such
# loosely matched seeds filled the prompt. The passages are
# ranked from all N seeds either way; only the paths shown change.
PATH_SEEDS = ("all", "standing")
# How path mode's keywords query the entities: "each" keyword on its own, the rankings merged round-robin (our
# reading of the paper's node retrieval, query/retrieval.py); "joined": the low-level keywords joined by ", " into
# one query, one search for the top N, as the public PathRAG code's kg_query does (and LightRAG's).
SEED_QUERIES = ("each", "joined")
REVERTIBLE = ("question_seed", "exact_name", "both_ends", "damping", "similarity", "seed_gate")
# The tuned choices that failed the adoption rule when rechecked with paired bootstrap intervals on musique-100
# (docs/benchmarks.md, "How a tuned choice is adopted"): reverted by default; their tuned rule stays reachable by
# leaving it out of ``revert`` (the path:question_seed ablation). The same recheck set seed_search to "vector"
# (the paper's seeds by the embedder alone) and passages to "no_paths" (the kept paths do not restart the walk).
DEFAULT_REVERT = ("question_seed", "both_ends")
# Presets: a paper's method end to end, one option away (`pathrag ask --preset paper`; the evaluated mode
# `path:paper`, measured beside the default in every `eval answers` run). "paper": PathRAG as its paper describes it
# (Sec. 4): the paths-only prompt in ascending reliability ("paths"), the returned passages the kept paths'
# provenance in the prompt's order then the seeds' ("path_order": no PageRank walk, no text retrieval), every tuned
# departure of ours set back (REVERTIBLE), seeds by the embedder alone, the literal early stop, the top-N seeds and
# no Path Pooling; the pruning's own values (variant "paper": N = 40, K = 15, alpha = 0.8, theta = 0.05, 4-hop cap)
# are the defaults already and stay as they are.
# "public-code": PathRAG as its public code (github.com/BUPT-GAMMA/PathRAG, PathRAG/operate.py, kg_query) runs it:
# the low-level keywords joined into one entity search ("joined"), every simple path of up to 3 hops scored by its
# edge flow (variant "reference", theta 0.3), the prompt's entities + relational paths + sources sections
# ("public"), and sources taken from the seed entities' chunks ("seeds", its _find_most_related_text_unit_from_
# entities), with none of our tuned departures. The evaluated mode is `path:public_code`.
PRESETS: dict[str, dict[str, object]] = {
    "paper": {"prompt": "paths", "passages": "path_order", "revert": REVERTIBLE, "variant": "paper",
              "seed_search": "vector", "seed_pass": False, "path_seeds": "all", "path_pooling": "off",
              "keywords": "llm"},
    "public-code": {"prompt": "public", "passages": "seeds", "revert": REVERTIBLE, "variant": "reference",
                    "seed_query": "joined", "seed_search": "vector", "seed_pass": False, "path_seeds": "all",
                    "path_pooling": "off", "keywords": "llm"},
}


# ---- every query setting, declared once ------------------------------------------------------------------------
# Each QueryParams field below is declared with ``setting(...)``: its default, bounds or choices, which modes read
# it, whose it is, and one line of help. The CLI options (`pathrag ask --NAME` / `--set NAME=VALUE`), the Dagster
# config of the ask_questions job (assets/query.py), the Python API's validation (``QueryParams.resolved``) and the
# table in docs/configuration.md (``settings_markdown``; a test keeps it current) all come from it.
ORIGINS = ("PathRAG paper", "PathRAG public code", "NeuroPath paper", "Path Pooling paper", "ours", "ablation")
SCOPES = ("all", "path", "neuropath")


@dataclass(frozen=True)
class Setting:
    """One query setting as every interface shows it."""

    name: str
    kind: str                          # "int", "float", "str", "bool" or "list" (of choices)
    default: object
    help: str                          # one line
    origin: str                        # ORIGINS: whose the setting (and its default) is
    scope: str = "all"                 # SCOPES: the mode that reads it ("all": every mode)
    choices: tuple[str, ...] = ()
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False              # the lower bound itself is not allowed
    optional: bool = False             # None is allowed (the variant's own value)
    front: bool = False                # shown in `pathrag ask --help` (the rest: `--set NAME=VALUE`)

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    def bounds(self) -> str:
        """The allowed values as text: 'one of a, b', '1..1000', '(0, 1]', 'true/false'."""
        if self.choices:
            return ("any of " if self.kind == "list" else "one of ") + ", ".join(self.choices)
        if self.kind == "bool":
            return "true or false"
        if self.lo is None and self.hi is None:
            return ""
        lo = "" if self.lo is None else f"{self.lo:g}"
        hi = "" if self.hi is None else f"{self.hi:g}"
        if self.kind == "float" or self.lo_open:
            return f"{'(' if self.lo_open else '['}{lo}, {hi}]"
        return f"{lo}..{hi}" if hi else f">= {lo}"

    def check(self, value: object) -> None:
        """Raise ValueError naming the setting, the value and what is allowed."""
        if value is None and self.optional:
            return
        if self.kind == "list":
            bad = [v for v in value if v not in self.choices]  # type: ignore[union-attr]
            if bad:
                raise ValueError(f"{self.name}={value!r}: each must be one of {', '.join(self.choices)}")
            return
        if self.choices:
            if value not in self.choices:
                raise ValueError(f"{self.name}={value!r} is not one of {', '.join(self.choices)}")
            return
        if self.kind in ("int", "float") and (
                isinstance(value, bool) or not isinstance(value, (int, float))
                or (self.kind == "int" and not isinstance(value, int))):
            raise ValueError(f"{self.name}={value!r} must be a{'n integer' if self.kind == 'int' else ' number'}")
        low_fails = self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo)  # type: ignore[operator]
        if low_fails or (self.hi is not None and value > self.hi):  # type: ignore[operator]
            raise ValueError(f"{self.name}={value!r} is out of range: allowed {self.bounds()} "
                             f"(default {self.shown_default()})")

    def shown_default(self) -> str:
        if self.default is None:
            return "the variant's"
        if isinstance(self.default, tuple):
            return ",".join(self.default) or "none"
        return str(self.default).lower() if isinstance(self.default, bool) else str(self.default)


def setting(default: object, help: str, origin: str, *, kind: str | None = None, **meta: object):
    """A QueryParams field carrying its Setting (name and kind filled in from the field)."""
    assert origin in ORIGINS and meta.get("scope", "all") in SCOPES, (origin, meta)
    kind = kind or ("list" if isinstance(default, tuple) else "str" if meta.get("choices") else
                    "bool" if isinstance(default, bool) else type(default).__name__)
    return field(default=default, metadata={"setting": dict(kind=kind, default=default, help=help, origin=origin,
                                                            **meta)})


@dataclass(frozen=True)
class QueryParams:
    """Every setting of one query (declared once, here); ``theta`` and ``max_hops`` default per pruning variant
    (None = the variant's). ``SETTINGS`` describes each; ``resolved()`` validates them."""

    top_n: int = setting(DEFAULT_TOP_N, "Entity nodes retrieved from the keywords, in all (PathRAG's N).",
                         "PathRAG paper", lo=1, hi=1000, front=True)
    top_k: int = setting(15, "Paths kept after pruning (PathRAG's K).", "PathRAG paper", scope="path", lo=1, hi=200,
                         front=True)
    alpha: float = setting(0.8, "Decay rate of the resource flow.", "PathRAG paper", scope="path", lo=0.0, hi=1.0,
                           lo_open=True)
    theta: float | None = setting(None, "Early-stop threshold (unset: 0.05 for the paper variant, 0.3 reference).",
                                  "PathRAG paper", kind="float", scope="path", lo=0.0, hi=1.0, optional=True)
    max_hops: int | None = setting(None, "Longest path in edges (unset: 4 paper variant, 3 reference; the paper "
                                         "has no cap: 14 is its uncapped flow at the defaults).",
                                   "ours", kind="int", scope="path", lo=1, hi=20, optional=True)
    variant: str = setting("paper", "Pruning: paper = the paper's flow; reference = the public code's (theta 0.3, "
                                    "3 hops, every simple path, its own order).", "PathRAG paper", scope="path",
                           choices=VARIANTS)
    ordering: str = setting("reliability", "How kept paths are ranked (hop_first, random: the paper's ablations).",
                            "PathRAG paper", scope="path", choices=ORDERINGS)
    # chosen by answer F1 over both local readers and two question sets (docs/methods.md, the rule;
    # docs/benchmarks.md "Choosing the answer prompt"); "paths" is the paper's layout (`--preset paper`)
    prompt: str = setting("passages_paths", "Answer-prompt layout: passages_paths = the top passages, then the 5 most reliable paths; paths = the paper's; the others: docs/methods.md.",
                          "ours", scope="path", choices=PROMPT_STYLES, front=True)
    token_budget: int = setting(DEFAULT_TOKEN_BUDGET, "Tokens of retrieved context in the answer prompt.", "ours",
                                lo=200, hi=200_000, front=True)
    excerpts: bool = setting(False, "Quote source sentences under each path in the prompt.", "ours", scope="path")
    answer: bool = setting(True, "false: retrieval only, no answer and no answer LLM call (evaluation).", "ours")
    chunk_search: str = setting("auto", "Text retrieval of chunks: auto = vector in naive mode (LightRAG's), "
                                        "hybrid (BM25 + dense) for path mode's text evidence.", "ours",
                                choices=CHUNK_SEARCHES)
    seed_search: str = setting("vector", "Seed entities by the embedder (the paper) or fused with BM25 (hybrid).",
                               "PathRAG paper", choices=SEED_SEARCHES)
    passages: str = setting("no_paths", "How path mode ranks the passages it returns: no_paths = a PageRank walk "
                                        "from the seeds and text hits; path_order = the paper's; the rest ablations.", "ours", scope="path", choices=PASSAGE_RANKINGS)
    passage_order: str = setting("rank", "Order of the passages a prompt quotes: the ranker's, or most similar to "
                                         "the question first.", "ablation", scope="path", choices=PASSAGE_ORDERS)
    seed_pass: bool = setting(False, "true: seeds always pass their first hop (query/pruning.py says why it is "
                                     "not the default); false: the paper's literal early stop.", "ablation",
                              scope="path")
    seed_query: str = setting("each", "each = one entity search per keyword, merged round-robin; joined = one "
                                      "search for the keywords joined (the public code).", "ours", scope="path",
                              choices=SEED_QUERIES)
    path_seeds: str = setting("all", "Paths between all top-N seeds (the paper) or only the standing ones.",
                              "PathRAG paper", scope="path", choices=PATH_SEEDS)
    path_pooling: str = setting("off", "Path Pooling of the kept paths: rerank them, or reselect top-k from a "
                                       "larger pool.", "Path Pooling paper", scope="path", choices=PATH_POOLINGS)
    pool_variant: str = setting("paper", "Path Pooling formula: the paper's Algorithm 1, or ours.",
                                "Path Pooling paper", scope="path", choices=POOL_VARIANTS)
    np_max_hops: int = setting(DEFAULT_NP_MAX_HOPS, "neuropath: hop cap of path tracking.", "NeuroPath paper",
                               scope="neuropath", lo=1, hi=10)
    np_candidates: int = setting(DEFAULT_NP_CANDIDATES, "neuropath: candidate paths per hop shown to the tracker.",
                                 "NeuroPath paper", scope="neuropath", lo=1, hi=500)
    np_token_budget: int = setting(DEFAULT_NP_TOKEN_BUDGET, "neuropath: LLM tokens for keywords and tracking of "
                                                            "one query.", "ours", scope="neuropath", lo=1,
                                   hi=10_000_000)
    np_coref_threshold: float = setting(DEFAULT_NP_COREF_THRESHOLD, "neuropath: name-embedding similarity of "
                                                                    "coreferent entities.", "NeuroPath paper",
                                        scope="neuropath", lo=0.0, hi=1.0, lo_open=True)
    np_passages: str = setting("auto", "neuropath: passage ranking (auto = the variant's own; the rest ablations).",
                               "ablation", scope="neuropath", choices=NP_PASSAGES)
    np_variant: str = setting("paper", "neuropath: the paper's method, or our earlier variant.", "NeuroPath paper",
                              scope="neuropath", choices=NP_VARIANTS)
    revert: tuple[str, ...] = setting(DEFAULT_REVERT, "Tuned path-mode rules set back to the simpler one "
                                                      "(comma-separated; docs/methods.md, Retrieval).", "ablation",
                                      scope="path", choices=REVERTIBLE)
    keywords: str = setting("auto", "Query keywords: llm = the LLM's when configured, else the offline rules; "
                                    "auto = offline for path, llm for the others.", "ours", choices=KEYWORD_SOURCES)
    np_tracker: str = setting("auto", "neuropath: the tracker, the LLM when configured, or the offline one.",
                              "ablation", scope="neuropath", choices=NP_TRACKERS)
    response: str = setting("default", "The answer: a concise one, or the answer alone as a short phrase.", "ours",
                            choices=RESPONSES)

    def resolved(self) -> "QueryParams":
        """Validated against ``SETTINGS``, with the variant's defaults filled in; errors name the value and what is
        allowed."""
        for name, spec in SETTINGS.items():
            value = getattr(self, name)
            spec.check(tuple(value) if spec.kind == "list" and isinstance(value, list) else value)
        theta = DEFAULT_THETA[self.variant] if self.theta is None else self.theta
        max_hops = DEFAULT_MAX_HOPS[self.variant] if self.max_hops is None else self.max_hops
        np_passages = NP_DEFAULT_PASSAGES[self.np_variant] if self.np_passages == "auto" else self.np_passages
        return replace(self, theta=theta, max_hops=max_hops, revert=tuple(self.revert), np_passages=np_passages)

    def keywords_for(self, mode: str) -> str:
        """Where ``mode``'s keywords come from, "llm" or "offline": ``auto`` is the mode's default
        (``DEFAULT_KEYWORDS``). "llm" still means the offline rules when no LLM is configured."""
        return DEFAULT_KEYWORDS.get(mode, "llm") if self.keywords == "auto" else self.keywords

    def chunk_search_for(self, mode: str) -> str:
        """The chunk retriever a mode uses: ``auto`` is "vector" for naive, "hybrid" otherwise."""
        if self.chunk_search != "auto":
            return self.chunk_search
        return "vector" if mode == "naive" else "hybrid"


SETTINGS: dict[str, Setting] = {f.name: Setting(name=f.name, **f.metadata["setting"]) for f in fields(QueryParams)}

# What each query mode reads of QueryParams (each setting's ``scope``): path mode alone uses the pruning and
# prompt-layout knobs, neuropath alone its tracking knobs. A query's logged params and an answer evaluation's
# per-mode key keep only these, so changing a knob (or a default) that a mode does not read never makes its results
# look different.
PATH_ONLY = tuple(name for name, spec in SETTINGS.items() if spec.scope == "path")
NEUROPATH_ONLY = tuple(name for name, spec in SETTINGS.items() if spec.scope == "neuropath")


def parse_setting(name: str, text: str) -> object:
    """``text`` (from `--set NAME=VALUE`, a query string or a config file) as setting ``name``'s value, checked;
    ValueError names the setting and what is allowed."""
    import difflib

    spec = SETTINGS.get(name)
    if spec is None:
        near = difflib.get_close_matches(name, SETTINGS, n=3)
        raise ValueError(f"{name!r} is not a query setting" + (f"; did you mean {', '.join(near)}?" if near else
                                                               "; `pathrag ask --settings` lists them"))
    text = text.strip()
    value: object
    if spec.optional and text.lower() in ("", "none", "default"):
        value = None
    elif spec.kind == "bool":
        if text.lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
            raise ValueError(f"{name}={text!r} must be true or false")
        value = text.lower() in ("true", "1", "yes", "on")
    elif spec.kind == "int":
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{name}={text!r} must be an integer ({spec.bounds()})") from None
    elif spec.kind == "float":
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{name}={text!r} must be a number ({spec.bounds()})") from None
    elif spec.kind == "list":
        value = tuple(item.strip() for item in text.split(",") if item.strip() and item.strip() != "none")
    else:
        value = text
    spec.check(value)
    return value


def settings_markdown() -> str:
    """The table of every query setting for docs/configuration.md (generated; tests/test_settings.py keeps the
    page equal to it)."""
    lines = ["| setting | default | allowed | read by | whose | what |", "| --- | --- | --- | --- | --- | --- |"]
    for spec in SETTINGS.values():
        scope = {"all": "every mode", "path": "path", "neuropath": "neuropath"}[spec.scope]
        lines.append(f"| `{spec.name}` | `{spec.shown_default()}` | {spec.bounds().replace('|', '/')} | {scope} | "
                     f"{spec.origin} | {spec.help} |")
    return "\n".join(lines) + "\n"


def mode_params(mode: str, params: QueryParams) -> dict:
    """``params`` as a dict of the fields query ``mode`` reads (``asdict`` minus the other modes' knobs): a new dict
    each call (callers add to it), made once per distinct ``(mode, params)`` (``asdict`` walks every field, ~0.3 ms,
    and a process asks with the same few settings again and again)."""
    return dict(_mode_params(mode, params))


@functools.lru_cache(maxsize=64)
def _mode_params(mode: str, params: QueryParams) -> dict:
    from dataclasses import asdict

    record = asdict(params)
    dropped = (PATH_ONLY if mode != "path" else ()) + (NEUROPATH_ONLY if mode != "neuropath" else ())
    for key in dropped:
        record.pop(key)
    if record.get("path_pooling") == "off":
        record.pop("pool_variant", None)   # read only when pooling is on: keys of unpooled queries stay as before
    if record.get("passage_order") == "rank":
        record.pop("passage_order")        # the order before the option existed: those keys stay as before
    for key, before in (("path_seeds", "all"), ("seed_query", "each")):
        if record.get(key) == before:
            record.pop(key)                # likewise: as before these options existed
    return record
