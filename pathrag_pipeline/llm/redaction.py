"""Keep API keys out of every message and log record the pipeline emits or lets through.

Some endpoints and proxies echo the key in an error body ("invalid key sk-..."). That text then travels in
openai's exceptions, instructor's retry log lines, our own error messages and, under Dagster, into compute
logs and run storage. Two guards, both installed by the clients that hold a key:

- ``redact(text)`` replaces every registered secret with ``***``; the LLM client and the embedder pass every
  error message they raise through it (and drop the chained cause when it carries a secret).
- ``install_log_redaction()`` wraps the logging record factory, so a record from any logger (openai, httpx,
  instructor, dagster, ours) has the secret replaced in its message, arguments and traceback text before a
  handler formats it. A ``logging.Filter`` on named loggers would miss their child loggers
  (``openai._base_client``), which is where the records come from.

Instructor logs "API call failed on attempt N: ..." at ERROR on every transport fault and re-ask;
``route_instructor_logging()`` re-emits those records at DEBUG on this project's logger, so the terminal
shows at most the one line per failed chunk that the extraction stage writes.
"""

from __future__ import annotations

import logging
import threading

MASK = "***"
MIN_SECRET_LENGTH = 6  # shorter values (placeholders, test keys like "x") would mask ordinary words

_secrets: tuple[str, ...] = ()  # longest first; replaced whole (never mutated) so readers need no lock
_lock = threading.Lock()
_installed = False
_previous_factory = None
log = logging.getLogger("pathrag_pipeline.llm")


def register_secret(secret: str | None) -> None:
    """Remember ``secret`` so that every later message and log record has it replaced by ``***``."""
    if not secret or len(secret) < MIN_SECRET_LENGTH or secret == "not-needed":
        return
    global _secrets
    with _lock:
        if secret not in _secrets:
            _secrets = tuple(sorted({*_secrets, secret}, key=len, reverse=True))
    install_log_redaction()
    route_instructor_logging()


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``***``."""
    if not _secrets or not text:
        return text
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def contains_secret(text: str) -> bool:
    return any(secret in text for secret in _secrets)


def chain_contains_secret(exc: BaseException) -> bool:
    """Whether any exception in ``exc``'s cause/context chain mentions a registered secret."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        try:
            text = f"{current!s} {current!r} {getattr(current, 'body', '')}"
        except Exception:  # noqa: BLE001 - a broken __str__ must not hide the original failure
            text = ""
        if contains_secret(text):
            return True
        current = current.__cause__ or current.__context__
    return False


def _redacting_factory(*args, **kwargs) -> logging.LogRecord:
    assert _previous_factory is not None
    record = _previous_factory(*args, **kwargs)
    if not _secrets:
        return record
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - leave malformed records to logging's own error handling
        return record
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and record.exc_info[1] is not None:
        text = logging.Formatter().formatException(record.exc_info)
        if contains_secret(text):
            record.exc_text = redact(text)
            record.exc_info = None  # formatters would otherwise render the raw traceback again
    return record


def install_log_redaction() -> None:
    """Wrap the log record factory once per process (idempotent; keeps any factory installed before)."""
    global _installed, _previous_factory
    with _lock:
        if _installed:
            return
        _previous_factory = logging.getLogRecordFactory()
        logging.setLogRecordFactory(_redacting_factory)
        _installed = True


class _ToProjectDebug(logging.Handler):
    """Re-emits instructor's records at DEBUG on the project's logger (redacted like every record)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            log.debug("instructor: %s", record.getMessage())
        except Exception:  # noqa: BLE001
            self.handleError(record)


_routed = False


def route_instructor_logging() -> None:
    """Instructor's per-attempt ERROR lines go to ``pathrag_pipeline.llm`` at DEBUG instead of stderr."""
    global _routed
    with _lock:
        if _routed:
            return
        instructor_log = logging.getLogger("instructor")
        instructor_log.addHandler(_ToProjectDebug())
        instructor_log.propagate = False
        _routed = True
