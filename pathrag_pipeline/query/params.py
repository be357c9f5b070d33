"""Query options: the modes, pruning variants and orderings, their defaults, and ``QueryParams``.

Pure Python with no heavy imports, so the CLI can declare its options (and ``pathrag --help`` can list
them) without loading numpy, igraph, LanceDB or a model client.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
# Where query keywords come from: "auto" is LightRAG's keyword prompt when an LLM is configured and the offline
# rules otherwise; "offline" keeps the rules even with an LLM (the path:offline_keywords ablation, which measures
# what the LLM's keywords add). NeuroPath's tracker likewise: "auto" (the LLM when configured) or "offline".
KEYWORD_SOURCES = ("auto", "offline")
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
PRESETS: dict[str, dict[str, object]] = {
    "paper": {"prompt": "paths", "passages": "path_order", "revert": REVERTIBLE, "variant": "paper",
              "seed_search": "vector", "seed_pass": False, "path_seeds": "all", "path_pooling": "off"},
}


@dataclass(frozen=True)
class QueryParams:
    """Knobs of one query; ``theta`` and ``max_hops`` default per pruning variant (None = the variant's)."""

    top_n: int = DEFAULT_TOP_N
    top_k: int = 15
    alpha: float = 0.8
    theta: float | None = None
    max_hops: int | None = None
    variant: str = "paper"
    ordering: str = "reliability"
    # PROMPT_STYLES; chosen by answer F1 over both local readers and two question sets (docs/methods.md, the rule;
    # docs/benchmarks.md "Choosing the answer prompt"); "paths" is the paper's layout (`--preset paper`)
    prompt: str = "passages_paths"
    token_budget: int = DEFAULT_TOKEN_BUDGET
    excerpts: bool = False
    answer: bool = True               # False: retrieval only (evaluation), no answer and no answer LLM call
    chunk_search: str = "auto"        # CHUNK_SEARCHES: naive mode's chunks, path mode's text evidence
    seed_search: str = "vector"       # SEED_SEARCHES: entities per keyword by vector (the paper), or fused with BM25
    passages: str = "no_paths"        # PASSAGE_RANKINGS: how path mode ranks returned passages (see above)
    passage_order: str = "rank"       # PASSAGE_ORDERS: the order the prompt shows its quoted passages in
    seed_pass: bool = False           # False: the paper's literal early stop; True: seeds always pass their
                                      # first hop (our departure, query/pruning.py says why it is not the default)
    seed_query: str = "each"          # SEED_QUERIES: one entity search per keyword (ours) or all joined (public code)
    path_seeds: str = "all"           # PATH_SEEDS: paths between all top-N seeds (the paper) or the standing ones
    path_pooling: str = "off"         # PATH_POOLINGS: Path Pooling of the kept paths (rerank / reselect)
    pool_variant: str = "paper"       # POOL_VARIANTS: the paper's Algorithm 1 (default, issue 24) or our formula
    np_max_hops: int = DEFAULT_NP_MAX_HOPS            # neuropath: hop cap of path tracking
    np_candidates: int = DEFAULT_NP_CANDIDATES        # neuropath: candidate paths per hop shown to the tracker
    np_token_budget: int = DEFAULT_NP_TOKEN_BUDGET    # neuropath: LLM tokens for keywords + tracking per query
    np_coref_threshold: float = DEFAULT_NP_COREF_THRESHOLD  # neuropath: name-embedding similarity of coreference
    np_passages: str = "auto"                         # NP_PASSAGES: neuropath's passage ranking (ablations)
    np_variant: str = "paper"                         # NP_VARIANTS: the paper's NeuroPath, or our earlier variant
    revert: tuple[str, ...] = DEFAULT_REVERT          # REVERTIBLE: tuned path-mode choices set back to the simpler rule
    keywords: str = "auto"            # KEYWORD_SOURCES: the LLM's keywords when configured, or the offline rules
    np_tracker: str = "auto"          # NP_TRACKERS: neuropath's tracker, the LLM when configured, or the offline one
    response: str = "default"         # RESPONSES: a concise answer, or the answer alone as a short phrase

    def resolved(self) -> "QueryParams":
        """Validated, with the variant's defaults filled in; errors name the value and the accepted range."""
        if self.variant not in VARIANTS:
            raise ValueError(f"variant={self.variant!r} is not one of {', '.join(VARIANTS)}")
        if self.ordering not in ORDERINGS:
            raise ValueError(f"ordering={self.ordering!r} is not one of {', '.join(ORDERINGS)}")
        if self.prompt not in PROMPT_STYLES:
            raise ValueError(f"prompt={self.prompt!r} is not one of {', '.join(PROMPT_STYLES)}")
        for name, value, allowed in (("chunk_search", self.chunk_search, CHUNK_SEARCHES),
                                     ("seed_search", self.seed_search, SEED_SEARCHES),
                                     ("passages", self.passages, PASSAGE_RANKINGS),
                                     ("passage_order", self.passage_order, PASSAGE_ORDERS),
                                     ("path_seeds", self.path_seeds, PATH_SEEDS),
                                     ("seed_query", self.seed_query, SEED_QUERIES),
                                     ("path_pooling", self.path_pooling, PATH_POOLINGS),
                                     ("pool_variant", self.pool_variant, POOL_VARIANTS),
                                     ("np_passages", self.np_passages, NP_PASSAGES),
                                     ("np_variant", self.np_variant, NP_VARIANTS),
                                     ("keywords", self.keywords, KEYWORD_SOURCES),
                                     ("np_tracker", self.np_tracker, NP_TRACKERS),
                                     ("response", self.response, RESPONSES)):
            if value not in allowed:
                raise ValueError(f"{name}={value!r} is not one of {', '.join(allowed)}")
        if self.top_n < 1:
            raise ValueError(f"top_n={self.top_n} must be at least 1 (PathRAG retrieves 40 nodes)")
        if self.top_k < 1:
            raise ValueError(f"top_k={self.top_k} must be at least 1 (PathRAG keeps 15 paths)")
        if not 0.0 < self.alpha <= 1.0:
            raise ValueError(f"alpha={self.alpha} must be in (0, 1] (the paper uses 0.8)")
        theta = DEFAULT_THETA[self.variant] if self.theta is None else self.theta
        max_hops = DEFAULT_MAX_HOPS[self.variant] if self.max_hops is None else self.max_hops
        if theta < 0:
            raise ValueError(f"theta={theta} must be >= 0 (the paper uses 0.05)")
        if max_hops < 1:
            raise ValueError(f"max_hops={max_hops} must be at least 1")
        if self.token_budget < 200:
            raise ValueError(f"token_budget={self.token_budget} is too small; give at least 200 (default 4000)")
        if not 1 <= self.np_max_hops <= 10:
            raise ValueError(f"np_max_hops={self.np_max_hops} must be between 1 and 10 (NeuroPath tracks 2 hops)")
        if not 1 <= self.np_candidates <= 500:
            raise ValueError(f"np_candidates={self.np_candidates} must be between 1 and 500 (NeuroPath keeps 30)")
        if self.np_token_budget < 1:
            raise ValueError(f"np_token_budget={self.np_token_budget} must be at least 1 token "
                             f"(default {DEFAULT_NP_TOKEN_BUDGET})")
        if not 0.0 < self.np_coref_threshold <= 1.0:
            raise ValueError(f"np_coref_threshold={self.np_coref_threshold} must be in (0, 1] "
                             f"(default {DEFAULT_NP_COREF_THRESHOLD})")
        if any(r not in REVERTIBLE for r in self.revert):
            raise ValueError(f"revert={self.revert!r}: each must be one of {', '.join(REVERTIBLE)}")
        np_passages = NP_DEFAULT_PASSAGES[self.np_variant] if self.np_passages == "auto" else self.np_passages
        return replace(self, theta=theta, max_hops=max_hops, revert=tuple(self.revert), np_passages=np_passages)

    def chunk_search_for(self, mode: str) -> str:
        """The chunk retriever a mode uses: ``auto`` is "vector" for naive, "hybrid" otherwise."""
        if self.chunk_search != "auto":
            return self.chunk_search
        return "vector" if mode == "naive" else "hybrid"


# What each query mode reads of QueryParams: path mode alone uses the pruning and prompt-layout knobs, neuropath
# alone its tracking knobs. A query's logged params and an answer evaluation's per-mode key keep only these, so
# changing a knob (or a default) that a mode does not read never makes its results look different.
PATH_ONLY = ("top_k", "alpha", "theta", "max_hops", "variant", "ordering", "prompt", "excerpts", "passages",
             "passage_order", "seed_pass", "seed_query", "path_seeds", "path_pooling", "pool_variant", "revert")
NEUROPATH_ONLY = ("np_max_hops", "np_candidates", "np_token_budget", "np_coref_threshold", "np_passages",
                  "np_tracker", "np_variant")


def mode_params(mode: str, params: QueryParams) -> dict:
    """``params`` as a dict of the fields query ``mode`` reads (``asdict`` minus the other modes' knobs)."""
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
