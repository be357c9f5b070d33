"""NeuroPath's tracker: the judgement made at every hop of dynamic path tracking (``query/neuropath.py``).

At each hop the loop hands the tracker the question, the reasoning so far and the candidate paths (chains of
graph triples, pruned to the top N by similarity to the previous hop's expansion requirement). The tracker
returns a :class:`TrackerStep`: the reasoning chain, the valid paths, the paths to expand, the expansion
requirement (what the next hop must find) and whether to continue.

- :class:`LLMTracker` asks the model (instructor, with the candidate ids checked: an id not on the list fails
  validation and is re-asked once with the error, then the query fails with ``TrackerOutputError``). Its calls
  and tokens are counted per hop. ``style="paper"`` (the default ``np_variant``) sends the paper's Figure 14
  prompt verbatim and reads its JSON object (:class:`PaperTrackerStep`: ``current_chain``, ``valid_ids``,
  ``expansion_requirements``, ``need_expand_ids``, ``continue``; ids from 0, as in its reference code);
  ``style="ours"`` sends our earlier prompt (:class:`TrackerStep`, ids from 1). Both become a :class:`TrackerStep`
  with ids from 1 for the loop.
- :class:`OfflineTracker` replaces the model's judgement when no LLM is configured: a **heuristic tracker, not
  NeuroPath's LLM**, and every output says so (``identity`` = ``heuristic:embedder+bm25``; evaluation tables
  label its rows ``neuropath (heuristic tracker)``). Each candidate is scored against the *question* by two signals fused
  by reciprocal rank (RRF, k=60): the configured embedder's cosine between the question and the path's newest
  triple, and BM25 (``query/lexical.py``) support: the best rank, among the question's BM25 passage hits, of a
  passage stating that triple. The ``OFFLINE_VALID`` best candidates are valid, the ``OFFLINE_EXPAND`` best of
  them are expanded, the expansion requirement is the question's content words not yet named by the kept
  paths (entity names, relation keywords), and tracking continues while such words remain. The two sizes are
  small fixed constants (5 and 3), not tuned on a benchmark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from pathrag_pipeline.errors import PipelineError
from pathrag_pipeline.llm.client import LLMClient, LLMOutputError, LLMTruncatedError, Usage
from pathrag_pipeline.query.lexical import tokenize
from pathrag_pipeline.query.prompting import (
    NEUROPATH_PAPER_TRACKER_PROMPT,
    NEUROPATH_TRACKER_PROMPT,
    neuropath_paper_tracker_message,
    neuropath_tracker_message,
)
from pathrag_pipeline.query.ranking import RRF_K

ModelT = TypeVar("ModelT", bound=BaseModel)

OFFLINE_VALID = 5
OFFLINE_EXPAND = 3
# An invalid tracker answer is sent back once with the validation error; a second invalid one fails the query.
TRACKER_REASKS = 1
# Our departure from the paper (issue 27): small models ran into the tracker's output cap at hop 1 with a long
# reasoning chain and the query failed. The field descriptions ask for at most 60 / 25 words, and an answer cut
# at the cap is asked again once, for the same judgement in fewer words, before the query fails.
BRIEF_REASK = ("Your answer was cut at the output limit before the JSON was complete. Answer again with the same "
               "judgement, the {chain} in at most 40 words and the {requirement} in at most 15.")
OFFLINE_TRACKER = "heuristic:embedder+bm25"


class TrackerStep(BaseModel):
    """One hop's judgement. Ids refer to the numbered candidate paths shown at this hop."""

    reasoning_chain: str = Field(
        description="The reasoning so far as a short chain of facts from the question towards the answer, "
                    "built from the valid paths; at most 60 words.")
    valid_paths: list[int] = Field(
        default_factory=list,
        description="Ids of the candidate paths that carry knowledge needed to answer the question.")
    paths_to_expand: list[int] = Field(
        default_factory=list,
        description="Ids of valid paths whose last entity should be followed to find the missing knowledge.")
    expansion_requirement: str = Field(
        default="",
        description="The knowledge still missing to answer the question: what the next hop must find; at most "
                    "25 words.")
    continue_tracking: bool = Field(
        description="true if the question cannot be answered yet and expanding the paths can find the missing "
                    "knowledge; false if the reasoning chain already answers it or nothing is worth expanding.")


class PaperTrackerStep(BaseModel):
    """The JSON object of the paper's tracking prompt (Figure 14), field for field; ids from 0.

    Readings: a missing ``continue`` is 0 (stop), as the prompt says to stop when nothing more can be added. An
    answer that does not parse is re-asked once with the error and then fails the query (``TrackerOutputError``);
    the reference code instead drops every path and stops tracking, answering from the completion alone, which
    would hide a broken tracker inside the recall figures."""

    model_config = ConfigDict(populate_by_name=True)

    current_chain: str = ""
    valid_ids: list[int] = Field(default_factory=list)
    expansion_requirements: str = ""
    need_expand_ids: list[int] = Field(default_factory=list)
    continue_: int = Field(0, alias="continue", ge=0, le=1)

    def as_step(self) -> TrackerStep:
        """The loop's form: ids from 1."""
        return TrackerStep(reasoning_chain=self.current_chain, valid_paths=[i + 1 for i in self.valid_ids],
                           paths_to_expand=[i + 1 for i in self.need_expand_ids],
                           expansion_requirement=self.expansion_requirements,
                           continue_tracking=bool(self.continue_))


def _ids_checked(base: type[ModelT], fields: tuple[str, str], first: int, candidates: int) -> type[ModelT]:
    """``base`` whose id ``fields`` must lie between ``first`` and ``first + candidates - 1`` (a wrong id is a
    validation error, which instructor sends back to the model as a re-ask); repeated ids are kept once."""
    last = first + candidates - 1

    def check(cls: Any, ids: list[int]) -> list[int]:
        bad = [i for i in ids if not first <= i <= last]
        if bad:
            raise ValueError(f"ids {bad} are not candidate path ids; use ids between {first} and {last}")
        return list(dict.fromkeys(ids))

    return create_model(  # type: ignore[call-overload]
        base.__name__, __base__=base, __validators__={"ids_on_the_list": field_validator(*fields)(check)})


def paper_step_model(candidates: int) -> type[PaperTrackerStep]:
    """``PaperTrackerStep`` whose ids must be between 0 and ``candidates - 1``."""
    return _ids_checked(PaperTrackerStep, ("valid_ids", "need_expand_ids"), 0, candidates)


def step_model(candidates: int) -> type[TrackerStep]:
    """``TrackerStep`` whose ids must be between 1 and ``candidates``."""
    return _ids_checked(TrackerStep, ("valid_paths", "paths_to_expand"), 1, candidates)


@dataclass(frozen=True)
class Candidate:
    """A candidate path at one hop, as the loop scored it."""

    id: int                       # 1-based, as shown to the tracker
    text: str                     # the chain as shown: A --[keywords]--> B --[...]--> C, with the new triple's description
    new_text: str                 # entity names and keywords of the newest triple (for the offline requirement)
    requirement_similarity: float  # cosine of the newest triple to the previous expansion requirement (pruning)
    question_similarity: float    # cosine to the question: newest triple (ours), whole path (paper); heuristic tracker
    lexical_rank: int | None      # best rank (from 1) of a passage stating the newest triple in the question's BM25 hits
    expandable: bool = True       # the loop may expand it (paper variant: the paths new at this hop)
    link: str = ""                # paper variant: the phrase its <expandable> tag names (the path's last entity)


@dataclass(frozen=True)
class Judgement:
    step: TrackerStep
    usage: Usage
    scores: dict[int, float]      # candidate id -> the tracker's score (offline: fused RRF; LLM: 1 / position)


class TrackerOutputError(PipelineError, RuntimeError):
    """The tracker's answer stayed invalid after the re-ask: this query fails, the batch goes on."""

    def __init__(self, message: str, usage: Usage) -> None:
        super().__init__(message)
        self.usage = usage


class LLMTracker:
    """The paper's tracker: the LLM judges every hop's candidates. ``style``: "paper" (Figure 14 verbatim) or
    "ours" (our earlier prompt and field names)."""

    def __init__(self, client: LLMClient, style: str = "paper") -> None:
        self.client = client
        self.style = style
        self.identity = f"llm:{client.model}"

    def _ask(self, question: str, hop: int, reasoning: str, requirement: str,
             candidates: Sequence[Candidate]) -> tuple[list[dict[str, Any]], Any, str]:
        if self.style == "paper":
            lines = [c.text + (f" <expandable>: [{c.link}]" if c.expandable and c.link else "") for c in candidates]
            message = neuropath_paper_tracker_message(question, lines)
            brief = BRIEF_REASK.format(chain="current_chain", requirement="expansion_requirements")
            return ([{"role": "system", "content": NEUROPATH_PAPER_TRACKER_PROMPT},
                     {"role": "user", "content": message}], paper_step_model(len(candidates)), brief)
        message = neuropath_tracker_message(question, hop, reasoning, requirement, [c.text for c in candidates])
        brief = BRIEF_REASK.format(chain="reasoning_chain", requirement="expansion_requirement")
        return ([{"role": "system", "content": NEUROPATH_TRACKER_PROMPT}, {"role": "user", "content": message}],
                step_model(len(candidates)), brief)

    def judge(self, question: str, hop: int, reasoning: str, requirement: str,
              candidates: Sequence[Candidate], covered: Sequence[str] = ()) -> Judgement:
        messages, model, brief = self._ask(question, hop, reasoning, requirement, candidates)
        spent = Usage()
        for attempt in range(2):
            try:
                result = self.client.structured(messages, model, stage="neuropath-tracking",
                                                validation_retries=TRACKER_REASKS)
                break
            except LLMTruncatedError as exc:
                spent += exc.usage
                if attempt == 1:
                    raise TrackerOutputError(
                        f"NeuroPath tracker output at hop {hop} was cut at the output cap twice (the second time "
                        f"asked for fewer words): {exc.last_error}; raise PATHRAG_LLM_ANSWER_MAX_TOKENS", spent) \
                        from exc
                messages = messages + [{"role": "user", "content": brief}]
            except LLMOutputError as exc:
                raise TrackerOutputError(
                    f"NeuroPath tracker output at hop {hop} stayed invalid after {exc.usage.calls} request(s) "
                    f"({TRACKER_REASKS} re-ask): {exc.last_error}", spent + exc.usage) from exc
        value = result.value
        step = value.as_step() if isinstance(value, PaperTrackerStep) else value
        # the tracker's order is its judgement ("sort by helpfulness to query"): valid paths, then those to expand
        order = list(dict.fromkeys([*step.valid_paths, *step.paths_to_expand]))
        return Judgement(step, spent + result.usage, {cid: 1.0 / (i + 1) for i, cid in enumerate(order)})


class OfflineTracker:
    """The tracker without an LLM: embedder cosine and BM25 support against the question, fused by RRF."""

    def __init__(self, embedder_identity: str, style: str = "ours") -> None:
        self.identity = OFFLINE_TRACKER
        self.embedder_identity = embedder_identity
        self.style = style

    def judge(self, question: str, hop: int, reasoning: str, requirement: str,
              candidates: Sequence[Candidate], covered: Sequence[str] = ()) -> Judgement:
        scores = offline_scores(candidates)
        ranked = sorted(candidates, key=lambda c: (-scores[c.id], c.id))
        valid = [c.id for c in ranked[:OFFLINE_VALID]]
        by_id = {c.id: c for c in candidates}
        if self.style == "paper":
            # The paper's prompt asks the tracker to filter out redundant paths; the heuristic's reading: a valid
            # path that another valid path extends is redundant (the longer one states it and more).
            valid = [i for i in valid if not any(j != i and by_id[j].text.startswith(by_id[i].text + " ")
                                                 for j in valid)]
        expand = [i for i in valid if by_id[i].expandable][:OFFLINE_EXPAND]
        kept_text = " ".join([*covered, *(by_id[i].new_text for i in valid)])
        missing = remaining_terms(question, kept_text)
        # The chain is the best paths themselves (the offline label is in the tracker identity of every output,
        # not in this text, which feeds the post-retrieval completion query).
        chain = "; ".join(by_id[i].text.split("\n", 1)[0] for i in valid[:2])
        step = TrackerStep(
            reasoning_chain=chain,
            valid_paths=valid, paths_to_expand=expand if missing else [],
            expansion_requirement=" ".join(missing), continue_tracking=bool(missing and expand))
        return Judgement(step, Usage(), scores)


def offline_scores(candidates: Sequence[Candidate]) -> dict[int, float]:
    """RRF (k=60) of two rankings of the candidates: by question cosine, and by BM25 passage support (only
    candidates with support take part in that ranking)."""
    by_cosine = sorted(candidates, key=lambda c: (-c.question_similarity, c.id))
    by_lexical = sorted((c for c in candidates if c.lexical_rank is not None), key=lambda c: (c.lexical_rank, c.id))
    scores = {c.id: 0.0 for c in candidates}
    for ranking in (by_cosine, by_lexical):
        for rank, c in enumerate(ranking, start=1):
            scores[c.id] += 1.0 / (RRF_K + rank)
    return scores


def remaining_terms(question: str, covered_text: str) -> list[str]:
    """The question's content words (BM25 tokens, in order) that ``covered_text`` does not contain."""
    covered = set(tokenize(covered_text))
    return list(dict.fromkeys(t for t in tokenize(question) if t not in covered))
