"""Finding and calling the query service of a home (``pathrag serve``, ``query/service.py``) from a light process.

``pathrag ask`` imports this, not the engine: a process that hands its question to a running service must
not pay the engine's imports (LanceDB's client, DuckDB, igraph: about 2 s of the 3 s a standalone ask costs
on 2 cores). Standard library only, plus ``config`` and ``storage.process_identity`` (both light).

The service describes itself in ``PATHRAG_HOME/query_service.json`` (mode 0600, removed when it stops):
its URL, a random token every request must carry, its process identity, the settings it runs with
(``Settings.public()``, so never a secret), a digest of its secrets keyed by the token
(``Settings.secrets_digest``), the code it runs (``code_version``) and whether a command started it in the
background (``cli/background_service.py``). A client uses it only when that process is alive, runs this code
and holds the same secrets, and the settings its request depends on equal the client's (an ask:
``QUERY_SETTINGS``; an index: every setting but the folder and ``auto_serve``, ``index_mismatch``); otherwise
the caller does the work in its own process, and a background service that differs is asked to stop (the
next command starts one that matches).
"""

from __future__ import annotations

import http.client
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

SERVICE_FILE = "query_service.json"
# Settings a query depends on: a service started with other values would answer differently from the client
QUERY_SETTINGS = ("llm_base_url", "llm_model", "llm_api_key", "llm_mode", "llm_timeout", "llm_answer_max_tokens",
                  "embed_base_url", "embed_model", "embed_api_key", "embed_timeout", "duckdb_memory_limit",
                  "lancedb_uri")
MAX_REQUEST_BYTES = 1 << 20   # a question plus its options; larger bodies are refused (413)


class ServiceUnavailable(RuntimeError):
    """No usable service: the caller answers in its own process (the message says why, for one stderr line;
    ``quiet`` when there simply is none, the usual case, which needs no line)."""

    def __init__(self, message: str, quiet: bool = False) -> None:
        super().__init__(message)
        self.quiet = quiet


class ServiceError(RuntimeError):
    """The service answered, with an error about this request (bad option, empty index, failed query)."""


@dataclass(frozen=True)
class ServiceInfo:
    url: str
    token: str
    process: str            # storage.process_identity identity of the serving process
    settings: dict[str, Any]
    started_at: str
    secrets: str = ""       # Settings.secrets_digest(token)
    code: str = ""          # code_version() of the serving process
    background: bool = False   # started by a command (cli/background_service.py), not by `pathrag serve`

    def to_json(self) -> str:
        return json.dumps({"url": self.url, "token": self.token, "process": self.process,
                           "settings": self.settings, "started_at": self.started_at, "secrets": self.secrets,
                           "code": self.code, "background": self.background}, indent=1)


def service_file(home: Path) -> Path:
    return Path(home) / SERVICE_FILE


def query_settings(public: dict[str, Any]) -> dict[str, Any]:
    """The query-relevant part of ``Settings.public()`` (secrets already reduced to set/unset)."""
    return {k: public.get(k) for k in QUERY_SETTINGS}


def read_info(home: Path) -> ServiceInfo | None:
    """The home's service description, or None when there is none or it is not one (a half-written or foreign
    file is ignored, never trusted)."""
    try:
        data = json.loads(service_file(home).read_text())
        return ServiceInfo(str(data["url"]), str(data["token"]), str(data["process"]), dict(data["settings"]),
                           str(data.get("started_at", "")), str(data.get("secrets", "")), str(data.get("code", "")),
                           bool(data.get("background", False)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_info(home: Path, info: ServiceInfo) -> None:
    """Write the description readable by its owner only (it holds the token), atomically."""
    path = service_file(home)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(info.to_json())
    os.replace(tmp, path)


def remove_info(home: Path, token: str) -> None:
    """Remove the description if it is still this service's (a newer service may have replaced it)."""
    info = read_info(home)
    if info is not None and info.token == token:
        service_file(home).unlink(missing_ok=True)


def live_service(home: Path) -> ServiceInfo | None:
    """The home's service if its process still runs (a description left by a killed service is ignored)."""
    from pathrag_pipeline.storage.process_identity import is_alive

    info = read_info(home)
    if info is None or is_alive(info.process) is False:
        return None
    return info


def code_version(roots: tuple[Path, ...] | None = None) -> str:
    """The package's version and the newest modification time of its Python files (``pathrag_pipeline`` and
    ``assets``): a service started before an upgrade or an edit of the checkout runs other code than a new
    command would, so it is not used (a background one is stopped). About 2 ms (a few hundred stats)."""
    import pathrag_pipeline

    newest = 0
    root = Path(pathrag_pipeline.__file__).resolve().parent
    for folder in roots or (root, root.parent / "assets"):
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in filenames:
                if name.endswith(".py"):
                    try:
                        newest = max(newest, os.stat(os.path.join(dirpath, name)).st_mtime_ns)
                    except OSError:
                        continue
    return f"{getattr(pathrag_pipeline, '__version__', '')}:{newest}"


SECRET_NAMES = "PATHRAG_LLM_API_KEY, PATHRAG_EMBED_API_KEY or PATHRAG_LANCEDB_STORAGE_OPTIONS"


def differences(info: ServiceInfo, settings: Any, compared: list[str]) -> list[str]:
    """What keeps the caller from using the service, for one message: the differing settings ``compared`` names
    (``settings_mismatch``/``index_mismatch``), a secret (named, never shown) and the code."""
    differ = [f"PATHRAG_{k.upper()}" for k in compared]
    if info.secrets != settings.secrets_digest(info.token):
        differ.append(f"a secret ({SECRET_NAMES})")
    if info.code != code_version():
        differ.append("the code (pathrag was updated or edited since it started)")
    return differ


# Knobs of a chat model (used only when one is configured: PATHRAG_LLM_BASE_URL or PATHRAG_LLM_MODEL) and of an
# embedding endpoint (only with PATHRAG_EMBED_BASE_URL)
LLM_ONLY = ("llm_mode", "llm_timeout", "llm_answer_max_tokens", "llm_api_key")
EMBED_ENDPOINT_ONLY = ("embed_timeout", "embed_api_key")


def settings_mismatch(info: ServiceInfo, public: dict[str, Any]) -> list[str]:
    """Names of the query settings whose values differ between the service and the caller, leaving out the knobs
    of a model or endpoint neither side uses: a shell whose PATHRAG_LLM_TIMEOUT differs, with no model configured
    on either side, would otherwise stop the service every other shell of the home asks."""
    mine, theirs = query_settings(public), info.settings
    ignored: set[str] = set()
    if not any(theirs.get(k) or mine.get(k) for k in ("llm_base_url", "llm_model")):
        ignored.update(LLM_ONLY)
    if not (theirs.get("embed_base_url") or mine.get("embed_base_url")):
        ignored.update(EMBED_ENDPOINT_ONLY)
    return [k for k in QUERY_SETTINGS if k not in ignored and theirs.get(k) != mine.get(k)]


def index_mismatch(info: ServiceInfo, public: dict[str, Any]) -> list[str]:
    """Names of the settings whose values differ between the service and a caller that would hand it an index
    run: every setting but the folder (``docs``, which the request names) and ``auto_serve`` (whether commands
    start a service, not how it works). A service whose description holds only the query settings (written before
    it could index) differs in the rest, so it is not handed one."""
    return sorted(k for k in set(public) | set(info.settings)
                  if k not in ("docs", "auto_serve") and info.settings.get(k) != public.get(k))


def call(info: ServiceInfo, path: str, payload: dict[str, Any] | None = None,
         timeout: float | None = 600.0) -> dict[str, Any]:
    """POST ``payload`` (GET when None) to the service; the decoded JSON reply. Connection faults raise
    ``ServiceUnavailable``; an error reply (4xx/5xx with ``{"error": ...}``) raises ``ServiceError``."""
    parts = urlsplit(info.url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)
    headers = {"Authorization": f"Bearer {info.token}", "Content-Type": "application/json"}
    try:
        if payload is None:
            conn.request("GET", path, headers=headers)
        else:
            conn.request("POST", path, body=json.dumps(payload).encode(), headers=headers)
        resp = conn.getresponse()
        body = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        raise ServiceUnavailable(f"the query service at {info.url} did not answer ({type(exc).__name__}: {exc})") \
            from None
    finally:
        conn.close()
    try:
        data = json.loads(body)
    except ValueError:
        raise ServiceUnavailable(f"the query service at {info.url} replied HTTP {resp.status} with a body that is "
                                 "not JSON") from None
    if resp.status != 200:
        message = data.get("error") if isinstance(data, dict) else None
        raise ServiceError(str(message or f"HTTP {resp.status}"))
    return data


def ask(settings: Any, question: str, mode: str, options: dict[str, Any]) -> dict[str, Any]:
    """Answer through the home's service: the result as ``QueryResult.to_dict()``. Raises ``ServiceUnavailable``
    when there is no live service with the caller's settings (the caller answers itself), ``ServiceError`` when
    the service refused or failed the query."""
    info = _usable(settings, settings_mismatch)
    return call(info, "/ask", {"question": question, "mode": mode, "options": options, "asked_from": "pathrag ask"})


def _usable(settings: Any, compare) -> ServiceInfo:
    """The home's live service if it can do the caller's work (``compare``: which settings must match); else
    ``ServiceUnavailable``, after asking a background service that differs to stop."""
    info = _running(settings.home)
    differ = differences(info, settings, compare(info, settings.public()))
    if not differ:
        return info
    stopped = ""
    if info.background:
        try:
            call(info, "/stop", {}, timeout=5.0)
            stopped = "; asked it to stop (the next command starts one with these)"
        except (ServiceUnavailable, ServiceError):
            pass
    raise ServiceUnavailable(f"the query service at {info.url} runs with other settings "
                             f"({', '.join(differ[:6])}{', ...' if len(differ) > 6 else ''}){stopped}")


def _running(home: Path) -> ServiceInfo:
    """The home's live service; ``ServiceUnavailable`` when there is none (quiet) or its process is gone (its
    description, which would otherwise send every request there, is removed)."""
    from pathrag_pipeline.storage.process_identity import describe, is_alive

    info = read_info(home)
    if info is None:
        raise ServiceUnavailable("no query service runs for this home", quiet=True)
    if is_alive(info.process) is False:
        remove_info(home, info.token)
        raise ServiceUnavailable(f"the query service recorded in {service_file(home)} is gone "
                                 f"({describe(info.process)}; removed)")
    return info


def index(settings: Any, request: dict[str, Any]) -> dict[str, Any]:
    """Hand an index run to the home's service (``POST /index``): its reply (``printed``, the report as the CLI
    prints it, and a few figures). Raises ``ServiceUnavailable`` when no live service runs with the caller's
    settings, ``ServiceError`` when it refused or failed the run. No timeout: a run takes as long as its folder."""
    info = _usable(settings, index_mismatch)
    return call(info, "/index", request, timeout=None)
