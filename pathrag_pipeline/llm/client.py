"""The LLM client: one OpenAI-compatible endpoint, structured output via instructor, usage accounting.

Why this shape:
- Any OpenAI-compatible server works (OpenAI, vLLM, Ollama, llama.cpp, LM Studio): ``openai.OpenAI`` with a
  ``base_url``; local servers need no key, so a missing key becomes the placeholder ``"not-needed"``.
- Transport faults are retried by openai itself (checked in openai 3.3 ``_base_client.SyncAPIClient.request``):
  timeouts, connection errors, 408/409/429 and 5xx are retried up to ``max_retries`` times with exponential
  backoff (0.5 s doubling to 8 s, minus up to 25 % jitter). A ``retry-after-ms`` or ``Retry-After`` header
  between 0 and 120 s (exclusive of 0) replaces the backoff; ``Retry-After: 0`` therefore falls back to it.
- Output faults are instructor's job: an answer that does not validate against the response model is sent
  back with the validation error (a re-ask), up to ``validation_retries`` times.
- Every HTTP request is counted by the transport when it is sent, per calling thread, so ``Usage.calls`` is
  the number of requests the endpoint really received, transport retries and re-asks included (an attempt
  refused because the client stopped is not one).
- The API key is held only inside the openai client: it is absent from ``repr``, ``identity``, logs and
  error messages (any echo of it in a server's error text is redacted, in our messages and in every log
  record: ``redaction``).
- Local servers (llama.cpp, Ollama) need more than openai's retries: ``transport.GuardedTransport`` bounds
  concurrency per HTTP attempt (halving it after timeouts), gives every attempt a total deadline of
  ``timeout`` seconds, stops the whole client after ``stop_after`` failed attempts in a row (so a run gives up
  after about ``stop_after x timeout``, not after every chunk exhausted its retries), stops at once on a
  ``response_format`` the server rejects, retries ``choices: []`` and reports a structured answer cut at
  ``max_tokens`` as ``LLMTruncatedError``.
- Every request carries ``max_tokens`` (per stage, ``DEFAULT_MAX_TOKENS``): local servers otherwise generate
  until their context is full.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel

from pathrag_pipeline.config import ConfigError, Settings
from pathrag_pipeline.errors import PipelineError
from pathrag_pipeline.llm.redaction import chain_contains_secret, redact, register_secret, route_instructor_logging

log = logging.getLogger(__name__)

# instructor modes by setting value. openai is imported when a client first calls its endpoint (LLMClient._clients,
# through slim_imports), instructor at its first structured call, so offline runs, and every command that only needs
# a client's identity, never pay their import time.
MODES: dict[str, str] = {"json": "JSON", "json_schema": "JSON_SCHEMA", "tools": "TOOLS", "md_json": "MD_JSON"}
OPENAI_BASE_URL = "https://api.openai.com/v1"
KEYLESS_PLACEHOLDER = "not-needed"
# Output caps per stage ("*" for any other stage). Extraction answers are long JSON; the rest is prose.
DEFAULT_MAX_TOKENS: dict[str, int] = {"extract": 4096, "extract-gleaning": 4096, "*": 1024}

ModelT = TypeVar("ModelT", bound=BaseModel)
ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


# ---- results and accounting -------------------------------------------------------------------
@dataclass(frozen=True)
class Usage:
    """What one or more LLM calls cost: HTTP requests sent, tokens, and requests beyond the first per call."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            retries=self.retries + other.retries,
        )


@dataclass(frozen=True)
class StructuredResult(Generic[ModelT]):
    value: ModelT
    usage: Usage


@dataclass(frozen=True)
class CompletionResult:
    text: str
    usage: Usage
    truncated: bool = False  # the text stopped at the output cap (finish_reason "length")


class LLMError(PipelineError, RuntimeError):
    """An LLM call failed for good; names the stage, the model and the last error so the fix is findable."""

    def __init__(self, message: str, *, stage: str, model: str, last_error: str, usage: Usage) -> None:
        super().__init__(message)
        self.stage = stage
        self.model = model
        self.last_error = last_error
        self.usage = usage


class LLMUnavailableError(LLMError):
    """The endpoint could not be reached or kept refusing (timeouts, connection errors, HTTP errors)."""


class LLMStoppedError(LLMUnavailableError):
    """The client stopped calling the endpoint (repeated failures or a request it cannot serve); calls made
    until the stop lifts fail at once instead of each running through its retries."""


class LLMUnsupportedModeError(LLMStoppedError):
    """The server rejects the structured-output mode (e.g. llama.cpp answers HTTP 500 to json_schema)."""


class LLMOutputError(LLMError):
    """The endpoint answered, but the answer stayed invalid for the response model after every re-ask."""


class LLMTruncatedError(LLMOutputError):
    """The answer ended at the output cap (``max_tokens``); a cut answer is never used as valid output."""


# ---- the client -------------------------------------------------------------------------------
class LLMClient:
    """A thread-safe client for one model on one OpenAI-compatible endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        mode: str = "json",
        timeout: float = 120.0,
        max_retries: int = 3,
        validation_retries: int = 2,
        max_concurrency: int = 4,
        temperature: float | None = 0.0,
        max_tokens: int | Mapping[str, int] | None = None,
        stop_after: int | None = None,
        stop_cooldown: float = 60.0,
    ) -> None:
        if not base_url or urlsplit(base_url).scheme not in ("http", "https"):
            raise ConfigError(f"LLM base_url {base_url!r} must be an http(s) URL such as http://localhost:8000/v1")
        if not model:
            raise ConfigError("LLM model name is empty; set PATHRAG_LLM_MODEL to the model the endpoint serves")
        if mode not in MODES:
            raise ConfigError(f"LLM mode {mode!r} is unknown; use one of {', '.join(MODES)}")
        if timeout <= 0:
            raise ConfigError(f"LLM timeout {timeout!r} must be a positive number of seconds")
        if max_retries < 0 or validation_retries < 0:
            raise ConfigError(f"LLM retries must be >= 0 (got max_retries={max_retries}, "
                              f"validation_retries={validation_retries})")
        if max_concurrency < 1:
            raise ConfigError(f"LLM max_concurrency {max_concurrency!r} must be at least 1")
        caps = dict(DEFAULT_MAX_TOKENS)
        if isinstance(max_tokens, int):
            caps = {stage: max_tokens for stage in caps}
        elif max_tokens is not None:
            caps.update(max_tokens)
        if any(not isinstance(v, int) or v < 1 for v in caps.values()):
            raise ConfigError(f"LLM max_tokens {caps!r} must be positive whole numbers")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.mode = mode
        self.timeout = timeout
        self.max_retries = max_retries
        self.validation_retries = validation_retries
        self.max_concurrency = max_concurrency
        self.temperature = temperature
        self.max_tokens = caps
        self.stop_after = stop_after if stop_after is not None else max_retries + 1
        self._secret = api_key or None
        register_secret(api_key)
        route_instructor_logging()
        self._local = threading.local()
        self._totals_lock = threading.Lock()
        self._totals: dict[str, Usage] = {}
        self._stop_cooldown = stop_cooldown
        self._built: tuple[Any, Any] | None = None   # (transport, openai client)
        self._wrapped: Any = None                     # the instructor client over the openai one
        self._build_lock = threading.Lock()

    def _clients(self) -> tuple[Any, Any]:
        """The transport and the openai client, made on first use: importing openai costs ~0.2 s here (more on
        slower machines), which a process that only needs the client's identity (the no-op check of `pathrag
        index`, a report's mode line) never pays."""
        built = self._built
        if built is not None:
            return built
        with self._build_lock:
            if self._built is None:
                from pathrag_pipeline.llm.transport import GuardedTransport
                from pathrag_pipeline.slim_imports import import_openai

                openai = import_openai()
                transport = GuardedTransport(timeout=self.timeout, max_concurrency=self.max_concurrency,
                                             stop_after=self.stop_after, cooldown=self._stop_cooldown,
                                             base_url=self.identity["base_url"], on_send=self._count_request,
                                             on_usage=self._count_usage)
                client = openai.OpenAI(
                    base_url=self.base_url,
                    api_key=self._secret or KEYLESS_PLACEHOLDER,
                    timeout=self.timeout,
                    max_retries=self.max_retries,
                    http_client=openai.DefaultHttpxClient(transport=transport),
                )
                _post_structured_requests(client)   # before instructor wraps the create it finds
                self._built = (transport, client)
            return self._built

    @property
    def _transport(self) -> Any:
        return self._clients()[0]

    @property
    def _openai(self) -> Any:
        return self._clients()[1]

    @property
    def _instructor(self) -> Any:
        """instructor's client, made at the first structured call: a plain completion (an answer) never imports
        its provider code (~0.08 s of a new `pathrag ask`)."""
        wrapped = self._wrapped
        if wrapped is not None:
            return wrapped
        client = self._openai
        with self._build_lock:
            if self._wrapped is None:
                instructor = _import_instructor()
                self._wrapped = instructor.from_openai(client, mode=instructor.Mode[MODES[self.mode]])
            return self._wrapped

    # ---- public API ----------------------------------------------------------------------------
    def prepare(self) -> None:
        """Build the clients now, without calling the endpoint: a long-lived process (the query service) pays
        their imports at its start rather than in its first request's time."""
        self._instructor   # noqa: B018 - builds the openai client under it too

    @property
    def identity(self) -> dict[str, str]:
        """What produced an output, safe to store with it: endpoint (credentials stripped), model, mode."""
        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return {
            "provider": "openai-compatible",
            "base_url": urlunsplit((parts.scheme, netloc, parts.path, "", "")),
            "model": self.model,
            "mode": self.mode,
        }

    def __repr__(self) -> str:
        ident = self.identity
        return f"LLMClient(base_url={ident['base_url']!r}, model={self.model!r}, mode={self.mode!r})"

    def structured(self, messages: list[dict[str, Any]], response_model: type[ModelT], *,
                   stage: str = "", validation_retries: int | None = None) -> StructuredResult[ModelT]:
        """Ask for an answer shaped like ``response_model``; invalid answers are re-asked with the error, up to
        ``validation_retries`` times (default: the client's)."""
        reasks = self.validation_retries if validation_retries is None else validation_retries
        if reasks < 0:
            raise ValueError(f"validation_retries={reasks} must be >= 0")
        prompt_tokens = completion_tokens = 0

        def on_response(response: Any) -> None:
            nonlocal prompt_tokens, completion_tokens
            usage = getattr(response, "usage", None)
            prompt_tokens += getattr(usage, "prompt_tokens", 0) or 0
            completion_tokens += getattr(usage, "completion_tokens", 0) or 0

        Hooks = _import_instructor("instructor.core.hooks").Hooks

        hooks = Hooks()  # per call, so concurrent calls never share counters
        hooks.on("completion:response", on_response)  # fires once per parsed answer, re-asks included
        asked, left = messages, reasks
        with self._call(stage, structured=True) as max_tokens:
            while True:
                try:
                    value = self._instructor.chat.completions.create(
                        model=self.model,
                        messages=asked,
                        response_model=_schema_model(response_model),
                        max_retries=left,
                        hooks=hooks,
                        max_tokens=max_tokens,
                        **self._sampling(),
                    )
                    break
                except Exception as exc:
                    # instructor gives up at once, without its re-asks, when its JSON scanner refuses a reply
                    # ("malformed-input work limit exceeded": a small model's runaway brackets); that is invalid
                    # output like any other, so it is re-asked here within the same allowance (issue 27)
                    if left > 0 and _malformed_json(exc):
                        left -= 1
                        asked = messages + [{"role": "user", "content": MALFORMED_REASK}]
                        continue
                    error = self._classify(exc, stage, self._record(stage, prompt_tokens, completion_tokens),
                                           reasks)
                    if error is None:
                        raise
                    raise error from (None if chain_contains_secret(exc) else exc)
        usage = self._record(stage, prompt_tokens, completion_tokens)
        return StructuredResult(value=_plain(value, response_model), usage=usage)

    def complete(self, messages: list[dict[str, Any]], *, stage: str = "") -> CompletionResult:
        """Free-text answer (e.g. the final answer over retrieved paths)."""
        with self._call(stage, structured=False) as max_tokens:
            try:
                # the SDK's own request (its retries, headers and errors), sent by ``post`` as its README shows
                # for any route, and the reply read here: ``chat.completions.create`` first walks the body through
                # the typed parameter declarations (``maybe_transform``) and builds a ChatCompletion from the reply
                # (``construct_type``), ~3 ms of a one-call query on 2 cores, for a body of plain text messages
                # and the three fields read below. The transport has checked the reply is a JSON object with
                # choices (``transport._inspect``).
                import httpx2   # openai's HTTP library, loaded with it

                raw = self._openai.post(
                    "/chat/completions", cast_to=httpx2.Response,
                    body={"model": self.model, "messages": messages, "max_tokens": max_tokens, **self._sampling()},
                )
            except Exception as exc:
                error = self._classify(exc, stage, self._record(stage, 0, 0))
                if error is None:
                    raise
                raise error from (None if chain_contains_secret(exc) else exc)
        text, finish, prompt_tokens, completion_tokens = _chat_reply(raw.content)
        usage = self._record(stage, prompt_tokens, completion_tokens)
        if not text:
            hint = (f": the output cap of {max_tokens} tokens ran out first (a reasoning model spends it on "
                    "reasoning); raise PATHRAG_LLM_ANSWER_MAX_TOKENS") if finish == "length" else ""
            raise LLMOutputError(
                f"LLM stage {stage or '(none)'!r}: model {self.model!r} returned no text{hint}",
                stage=stage, model=self.model, last_error="empty message content", usage=usage,
            )
        truncated = finish == "length"
        if truncated:
            log.warning("LLM stage %s: the answer stopped at max_tokens=%d (kept as it is; raise "
                        "PATHRAG_LLM_ANSWER_MAX_TOKENS for longer answers)", stage or "(none)", max_tokens)
        return CompletionResult(text=text, usage=usage, truncated=truncated)

    def map(self, fn: Callable[[ItemT], ResultT], items: Iterable[ItemT]) -> list[ResultT]:
        """Apply ``fn`` (which calls this client) to every item, at most ``max_concurrency`` at a time, in order."""
        with ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix="llm") as pool:
            return list(pool.map(fn, items))

    def usage_by_stage(self) -> dict[str, Usage]:
        """Running totals since the client was made, keyed by the ``stage`` given to each call."""
        with self._totals_lock:
            return dict(self._totals)

    def total_usage(self) -> Usage:
        with self._totals_lock:
            return sum(self._totals.values(), Usage())

    def close(self) -> None:
        if self._built is not None:
            self._built[1].close()

    # ---- internals -----------------------------------------------------------------------------
    def _sampling(self) -> dict[str, Any]:
        return {} if self.temperature is None else {"temperature": self.temperature}

    def max_tokens_for(self, stage: str) -> int:
        return self.max_tokens.get(stage, self.max_tokens["*"])

    @property
    def stopped(self) -> str | None:
        """Why the client stopped calling the endpoint, while it is stopped; else None."""
        if self._built is None:
            return None   # nothing was sent yet: nothing stopped it (and no reason to import openai to say so)
        error = self._transport.state.stopped
        return redact(error.reason) if error is not None else None

    def resume(self) -> None:
        """Lift a stop (e.g. at the start of a new run): the next call tries the endpoint again. A client that
        never called has nothing to lift (and an index run with nothing to extract imports no openai for it)."""
        if self._built is not None:
            self._transport.resume()

    @property
    def concurrency_limit(self) -> int:
        """Requests allowed in flight now: ``max_concurrency``, halved after each timeout (down to 1)."""
        return self._transport.state.limit if self._built is not None else self.max_concurrency

    @contextmanager
    def _call(self, stage: str, *, structured: bool) -> Iterator[int]:
        """Per call: reset this thread's request counter and tell the transport the call's output cap.

        The concurrency bound is the transport's: it holds per HTTP attempt for every caller, whether it
        uses ``map`` or its own threads."""
        from pathrag_pipeline.llm.transport import CallContext

        max_tokens = self.max_tokens_for(stage)
        self._local.requests = 0
        self._local.tokens = (0, 0)
        self._transport.context.call = CallContext(structured=structured, max_tokens=max_tokens)
        try:
            yield max_tokens
        finally:
            self._transport.context.call = None

    def _count_request(self, request: Any) -> None:
        """Transport callback: runs in the calling thread for every attempt sent, retries included."""
        self._local.requests = getattr(self._local, "requests", 0) + 1

    def _count_usage(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Transport callback: the tokens of every reply of this thread's call, as the server reports them."""
        p, c = getattr(self._local, "tokens", (0, 0))
        self._local.tokens = (p + prompt_tokens, c + completion_tokens)

    def _record(self, stage: str, prompt_tokens: int, completion_tokens: int) -> Usage:
        """This call's usage: its requests, and its tokens as the server reported them for every reply (cut and
        refused answers included) when the server reports them, else the counts the caller parsed."""
        requests = getattr(self._local, "requests", 0)
        seen = getattr(self._local, "tokens", (0, 0))
        if seen != (0, 0):
            prompt_tokens, completion_tokens = seen
        usage = Usage(calls=requests, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                      retries=max(requests - 1, 0))
        with self._totals_lock:
            self._totals[stage] = self._totals.get(stage, Usage()) + usage
        log.debug("LLM stage=%s model=%s requests=%d prompt_tokens=%d completion_tokens=%d",
                  stage, self.model, usage.calls, prompt_tokens, completion_tokens)
        return usage

    def _redact(self, text: str) -> str:
        text = text.replace(self._secret, "***") if self._secret else text
        return redact(text)

    def _classify(self, exc: Exception, stage: str, usage: Usage, reasks: int | None = None) -> LLMError | None:
        """Map openai/instructor failures onto LLMUnavailableError (transport) or LLMOutputError (content).

        None means the failure is neither (a bug, e.g. a bad argument): the caller re-raises it unchanged.
        """
        from pathrag_pipeline.slim_imports import import_openai

        openai = import_openai()
        exceptions = _import_instructor("instructor.core.exceptions")
        IncompleteOutputException, InstructorRetryException = (exceptions.IncompleteOutputException,
                                                                exceptions.InstructorRetryException)

        from pathrag_pipeline.llm.transport import ClientStopped, EmptyReply, OutputTruncated, UnsupportedRequest

        where = f"LLM stage {stage or '(none)'!r}, model {self.model!r} at {self.identity['base_url']}"
        stopped = _find_cause(exc, ClientStopped)
        if stopped is not None:
            kind = LLMUnsupportedModeError if isinstance(stopped, UnsupportedRequest) else LLMStoppedError
            reason = self._redact(stopped.reason)  # type: ignore[attr-defined]
            return kind(f"{where}: stopped: {reason}", stage=stage, model=self.model, last_error=reason,
                        usage=usage)
        truncated = _find_cause(exc, OutputTruncated)
        if truncated is not None or _find_cause(exc, IncompleteOutputException) is not None:
            cap = self.max_tokens_for(stage)
            last = self._redact(str(truncated) if truncated is not None else "finish_reason 'length'")
            # the setting that caps this stage: extraction's own, or the one of answers, keywords and judgements
            advice = (f"Raise PATHRAG_LLM_MAX_TOKENS (now {cap}) or lower PATHRAG_CHUNK_TOKENS"
                      if stage.startswith("extract") else f"Raise PATHRAG_LLM_ANSWER_MAX_TOKENS (now {cap})")
            return LLMTruncatedError(f"{where}: {last}; the answer is cut, not used. {advice}", stage=stage,
                                     model=self.model, last_error=last, usage=usage)
        empty = _find_cause(exc, EmptyReply)
        if empty is not None:
            last = self._redact(str(empty))
            return LLMUnavailableError(
                f"{where}: {last} after {usage.calls} request(s) ({self.max_retries} retries allowed)",
                stage=stage, model=self.model, last_error=last, usage=usage)
        transport = _find_cause(exc, openai.APIError)
        if transport is not None and not isinstance(transport, openai.APIResponseValidationError):
            last = self._redact(f"{type(transport).__name__}: {transport}")
            return LLMUnavailableError(
                f"{where}: endpoint unavailable after {usage.calls} request(s) "
                f"({self.max_retries} transport retries allowed): {last}",
                stage=stage, model=self.model, last_error=last, usage=usage,
            )
        if isinstance(exc, (InstructorRetryException, IncompleteOutputException)) or transport is not None:
            last = self._redact(f"{type(exc.__cause__ or exc).__name__}: {exc.__cause__ or exc}")
            return LLMOutputError(
                f"{where}: output still invalid after {usage.calls} request(s) "
                f"({self.validation_retries if reasks is None else reasks} re-asks allowed): {last}",
                stage=stage, model=self.model, last_error=last, usage=usage,
            )
        return None


MALFORMED_REASK = ("Your previous answer was not valid JSON (unbalanced or runaway brackets). Answer again with "
                   "exactly one JSON object of the requested shape and nothing else.")


def _chat_reply(body: bytes) -> tuple[str | None, str | None, int, int]:
    """Text, finish reason, prompt and completion tokens of a chat completion's JSON body (the first choice); a
    field that is absent or of another type reads as None or 0, as the SDK's model left it."""
    data = json.loads(body)
    choices = data.get("choices") if isinstance(data, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    content, finish = message.get("content"), choice.get("finish_reason")
    usage = data.get("usage") if isinstance(data, dict) and isinstance(data.get("usage"), dict) else {}

    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return (content if isinstance(content, str) else None, finish if isinstance(finish, str) else None,
            count("prompt_tokens"), count("completion_tokens"))


def _malformed_json(exc: BaseException) -> bool:
    """Whether instructor's JSON extraction refused the reply (its scanner's limits), anywhere in the chain."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ValueError) and str(current).startswith("JSON extraction"):
            return True
        current = current.__cause__ or current.__context__
    return False


SDK_ONLY = ("stream", "extra_headers", "extra_query", "extra_body", "timeout")
"""Arguments of ``chat.completions.create`` that change how the request is sent, not only what it says: a call
with one of them goes through the SDK's ``create`` (see ``_post_structured_requests``)."""


def _post_structured_requests(client: Any) -> None:
    """Make ``client.chat.completions.create``, which instructor wraps for structured calls, send its body as given
    through the SDK's ``post`` (its retries, headers, errors and transport unchanged; the reply parsed into the same
    ``ChatCompletion``), as ``complete`` does: ``create`` first walks the body through the typed parameter
    declarations (``maybe_transform``, ~1.6 ms of CPU a call with an extraction prompt, ~0.65 s of a 400-call
    index), for a body of plain JSON (messages, model, sampling, and instructor's ``response_format`` or
    ``tools``) that it sends unchanged. A call with an argument in ``SDK_ONLY`` goes through ``create``."""
    from openai.types.chat import ChatCompletion

    create = client.chat.completions.create

    def post(**kwargs: Any) -> Any:
        if any(kwargs.get(name) is not None for name in SDK_ONLY):
            return create(**kwargs)
        return client.post("/chat/completions", cast_to=ChatCompletion, body=kwargs)

    client.chat.completions.create = post


def _import_instructor(module: str = "instructor") -> Any:
    """An instructor module, openai imported first through ``slim_imports``: instructor imports openai, and a plain
    ``import openai`` that comes first loads all of it (~0.3 s more)."""
    import importlib

    from pathrag_pipeline.slim_imports import import_openai

    import_openai()
    return importlib.import_module(module)


@functools.lru_cache(maxsize=32)
def _schema_model(response_model: type[ModelT]) -> type[ModelT]:
    """``response_model`` as instructor sends and parses it (``instructor.openai_schema``: the class it would
    otherwise build again at every call), with its JSON schema made once. Per structured call instructor built that
    class (a pydantic model class) and generated its JSON schema for the prompt or tool: ~4 ms of CPU a call, about
    1.6 s of a 400-call index of 200 passages. The schema is the one instructor would generate (same class name,
    fields and docstring), handed out as a fresh copy each time; asked with arguments, it is generated as before."""
    import copy

    wrapped = _import_instructor().openai_schema(response_model)
    schema = wrapped.model_json_schema()
    generate = wrapped.model_json_schema

    def model_json_schema(cls: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return generate(*args, **kwargs) if args or kwargs else copy.deepcopy(schema)

    namespace = {"__doc__": wrapped.__doc__, "__module__": wrapped.__module__, "__qualname__": wrapped.__qualname__,
                 "model_json_schema": classmethod(model_json_schema)}
    return type(wrapped)(wrapped.__name__, (wrapped,), namespace)


def _plain(value: BaseModel, response_model: type[ModelT]) -> ModelT:
    """The answer as a plain ``response_model``: instructor may hand back a generated subclass (tools mode)
    carrying ``_raw_response``/``_total_usage``, which is unequal to the same model built by hand and drags
    the raw completion along. Fields are already validated, so they are copied without validating again."""
    fields = {name: getattr(value, name) for name in response_model.model_fields}
    return response_model.model_construct(_fields_set=set(value.model_fields_set), **fields)


def _find_cause(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first exception of ``kind`` in the cause/context chain (instructor wraps openai's errors)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def llm_from_settings(settings: Settings, **options: Any) -> LLMClient | None:
    """The configured LLM client, or None for offline mode.

    - ``PATHRAG_LLM_BASE_URL`` and ``PATHRAG_LLM_MODEL`` set: that endpoint and model (key optional).
    - ``PATHRAG_LLM_MODEL`` set without a base URL, with an API key (``PATHRAG_LLM_API_KEY`` or
      ``OPENAI_API_KEY``): the official OpenAI endpoint.
    - Nothing set: None, and the pipeline runs its offline extractor and extractive answers. An
      ``OPENAI_API_KEY`` alone does not switch the pipeline online: configuring nothing means offline.
    A base URL without a model, or a model with neither URL nor key, is a configuration mistake and raises
    ``ConfigError`` rather than silently running offline. ``options`` go to ``LLMClient`` (mode, timeout, ...);
    by default they come from PATHRAG_LLM_MODE, PATHRAG_LLM_TIMEOUT and PATHRAG_LLM_MAX_CONCURRENCY.
    """
    options = {"mode": settings.llm_mode, "timeout": settings.llm_timeout,
               "max_concurrency": settings.llm_max_concurrency,
               "max_tokens": {"extract": settings.llm_max_tokens, "extract-gleaning": settings.llm_max_tokens,
                              "*": settings.llm_answer_max_tokens}, **options}
    base_url, model, key = settings.llm_base_url, settings.llm_model, settings.llm_api_key
    if base_url:
        if not model:
            raise ConfigError(f"PATHRAG_LLM_BASE_URL={base_url!r} is set but PATHRAG_LLM_MODEL is not; "
                              f"set it to a model the endpoint serves (GET {base_url}/models lists them)")
        return LLMClient(base_url, model, api_key=key, **options)
    if model:
        if key:
            return LLMClient(OPENAI_BASE_URL, model, api_key=key, **options)
        raise ConfigError(f"PATHRAG_LLM_MODEL={model!r} is set but there is no endpoint: set PATHRAG_LLM_BASE_URL "
                          "(e.g. http://localhost:11434/v1) or an API key for the official OpenAI endpoint")
    return None
