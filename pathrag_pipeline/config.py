"""Settings: the one place where the pipeline reads its configuration.

Every setting comes from an environment variable with a documented default, so the CLI, the Dagster
code location and the tests all see the same values. Secrets (API keys) are held here but never
rendered: ``Settings.public()`` is what goes into logs, tables and run metadata.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from pathrag_pipeline.errors import PipelineError

# The checkout's data/ folder: default home for the stores and the bundled sample documents.
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DOCS = PACKAGE_ROOT / "data" / "sample"
# Public benchmark data lives beside the checkout (../shared/bench); PATHRAG_BENCH_DIR overrides.
BENCH_DIR = Path(os.environ.get("PATHRAG_BENCH_DIR") or PACKAGE_ROOT.parent / "shared" / "bench")

# Names reserved for the LLM and embedding endpoints (issue 2 reserves them; issue 3 uses them).
ENV_NAMES = {
    "home": "PATHRAG_HOME",
    "docs": "PATHRAG_DOCS",
    "llm_base_url": "PATHRAG_LLM_BASE_URL",
    "llm_model": "PATHRAG_LLM_MODEL",
    "llm_api_key": "PATHRAG_LLM_API_KEY",
    "embed_base_url": "PATHRAG_EMBED_BASE_URL",
    "embed_model": "PATHRAG_EMBED_MODEL",
    "chunk_tokens": "PATHRAG_CHUNK_TOKENS",
    "chunk_overlap": "PATHRAG_CHUNK_OVERLAP",
    "max_file_bytes": "PATHRAG_MAX_FILE_BYTES",
    "max_text_bytes": "PATHRAG_MAX_TEXT_BYTES",
    "duckdb_memory_limit": "PATHRAG_DUCKDB_MEMORY_LIMIT",
    "llm_mode": "PATHRAG_LLM_MODE",
    "llm_timeout": "PATHRAG_LLM_TIMEOUT",
    "llm_max_concurrency": "PATHRAG_LLM_MAX_CONCURRENCY",
    "extract_processes": "PATHRAG_EXTRACT_PROCESSES",
    "llm_max_tokens": "PATHRAG_LLM_MAX_TOKENS",
    "llm_answer_max_tokens": "PATHRAG_LLM_ANSWER_MAX_TOKENS",
    "embed_timeout": "PATHRAG_EMBED_TIMEOUT",
    "gleaning": "PATHRAG_GLEANING",
    "sql_timeout": "PATHRAG_SQL_TIMEOUT",
    "sql_max_temp": "PATHRAG_SQL_MAX_TEMP",
    "lancedb_uri": "PATHRAG_LANCEDB_URI",
    "lancedb_storage_options": "PATHRAG_LANCEDB_STORAGE_OPTIONS",
    "shard_storage": "PATHRAG_SHARD_STORAGE",
    "auto_serve": "PATHRAG_AUTO_SERVE",
}

LLM_MODES = ("json", "json_schema", "tools", "md_json")
# When `pathrag index`/`pathrag ask` start the home's query service in the background (cli/background_service.py)
AUTO_SERVE = ("terminal", "always", "never")
_AUTO_SERVE_ALIASES = {"1": "always", "on": "always", "yes": "always", "true": "always",
                       "0": "never", "off": "never", "no": "never", "false": "never"}

SECRET_FIELDS = {"llm_api_key", "embed_api_key"}
REDACTED_FIELDS = {"lancedb_storage_options"}   # shown with credential values masked (redacted_options)


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class ConfigError(PipelineError, ValueError):
    """A setting has a value the pipeline cannot use; the message names the variable and the fix."""


def _auto_serve_env(env: dict[str, str]) -> str:
    raw = (env.get(ENV_NAMES["auto_serve"]) or "").strip().lower()
    value = _AUTO_SERVE_ALIASES.get(raw, raw or "terminal")
    if value not in AUTO_SERVE:
        raise ConfigError(f"{ENV_NAMES['auto_serve']}={raw!r} is not one of {', '.join(AUTO_SERVE)} (or 1/0); "
                          "never keeps `pathrag index` and `pathrag ask` from starting a query service in the background")
    return value


def _default_home() -> Path:
    return PACKAGE_ROOT / "data"


def _int_env(env: dict[str, str], key: str, default: int, minimum: int = 0) -> int:
    raw = env.get(ENV_NAMES[key])
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{ENV_NAMES[key]}={raw!r} is not a whole number; unset it or give e.g. {default}") from None
    if value < minimum:
        raise ConfigError(f"{ENV_NAMES[key]}={value} must be at least {minimum}")
    return value


def _float_env(env: dict[str, str], name: str) -> float | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number; unset it or give e.g. 0.95") from None
    if not -1.0 <= value <= 1.0:
        raise ConfigError(f"{name}={value} must be a cosine similarity between -1 and 1 (e.g. 0.95)")
    return value


DEFAULT_MAX_TEXT_BYTES = 50 * 1024 * 1024
"""Extracted text allowed per file (UTF-8 bytes), checked while extracting: a small DOCX can inflate to GBs."""
DEFAULT_DUCKDB_MEMORY_LIMIT = "2GB"
"""DuckDB's memory_limit for the pipeline's connections (its own default is 80% of RAM); it spills past it."""
_MEMORY = re.compile(r"\s*\d+(\.\d+)?\s*(B|KB|KiB|MB|MiB|GB|GiB|TB|TiB)\s*", re.IGNORECASE)


DEFAULT_SQL_TIMEOUT = 300
"""Seconds one `pathrag sql` statement may run before it is stopped (PATHRAG_SQL_TIMEOUT; 0: no limit)."""
DEFAULT_SQL_MAX_TEMP = "4GB"
"""Disk a `pathrag sql` statement may spill to past the memory limit (PATHRAG_SQL_MAX_TEMP); removed at the end."""


def _memory_env(env: dict[str, str], key: str = "duckdb_memory_limit",
                default: str = DEFAULT_DUCKDB_MEMORY_LIMIT) -> str:
    name = ENV_NAMES[key]
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    if not _MEMORY.fullmatch(raw):
        raise ConfigError(f"{name}={raw!r} is not a memory size; give e.g. {default} or 512MB")
    return raw.strip()


# ---- where the vector tables live (PATHRAG_LANCEDB_URI, PATHRAG_LANCEDB_STORAGE_OPTIONS) ----------------------
OBJECT_STORE_SCHEMES = ("s3", "gs", "az")
"""URI schemes LanceDB opens as object stores (Amazon S3 and compatible servers, Google Cloud Storage, Azure)."""
_MASK = "***"
_SECRET_OPTION = re.compile(r"secret|key|token|password|credential|sas|signature|session", re.IGNORECASE)
_URI_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://(.*)$")


def is_secret_option(key: str) -> bool:
    """Whether a storage option's value is a credential (never printed)."""
    return bool(_SECRET_OPTION.search(key))


def redacted_options(options: dict[str, str] | tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Storage options safe to print, log or store: every credential-like key's value replaced by ``***``."""
    items = options.items() if isinstance(options, dict) else options
    return {k: (_MASK if is_secret_option(k) else v) for k, v in items}


def parse_storage_options(raw: str | None) -> tuple[tuple[str, str], ...]:
    """PATHRAG_LANCEDB_STORAGE_OPTIONS (a JSON object) as sorted (key, value) string pairs, as LanceDB takes them.
    An error never quotes the value: it may hold a key."""
    name = ENV_NAMES["lancedb_storage_options"]
    if raw is None or not raw.strip():
        return ()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(
            f"{name} is not valid JSON ({exc.msg} at character {exc.pos}); give a JSON object such as "
            '{"aws_endpoint": "http://127.0.0.1:9000", "allow_http": "true"} or unset it') from None
    if not isinstance(data, dict):
        raise ConfigError(f"{name} must be a JSON object of option names to values, not a {type(data).__name__}")
    out: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, (dict, list)) or value is None:
            raise ConfigError(f"{name}: option {key!r} must be a string, number or boolean")
        out[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
    return tuple(sorted(out.items()))


def parse_storage_uri(key: str, raw: str | None, schemes: tuple[str, ...] = OBJECT_STORE_SCHEMES) -> str | None:
    """A folder-or-object-store setting (``ENV_NAMES[key]``): None when unset, an absolute folder, or a URI of one
    of ``schemes`` naming a bucket, without credentials or a trailing slash."""
    name = ENV_NAMES[key]
    if raw is None or not raw.strip():
        return None
    raw = raw.strip()
    match = _URI_SCHEME.match(raw)
    if match is None:
        return str(Path(raw).expanduser().resolve())
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == "file":
        return str(Path(rest).expanduser().resolve())
    if scheme not in schemes:
        raise ConfigError(
            f"{name}: scheme {scheme!r} is not supported; give a folder or an "
            f"{', '.join(s + '://' for s in schemes)} URI (e.g. {schemes[0]}://bucket/pathrag)")
    bucket = rest.split("/", 1)[0]
    if not bucket or "@" in bucket or "?" in rest:
        raise ConfigError(
            f"{name} must name a bucket and carry no credentials (e.g. {scheme}://bucket/pathrag); give keys in "
            "the AWS_* variables" + (f" or {ENV_NAMES['lancedb_storage_options']}" if key == "lancedb_uri" else ""))
    return f"{scheme}://{rest.rstrip('/')}"


def parse_lancedb_uri(raw: str | None) -> str | None:
    """PATHRAG_LANCEDB_URI as LanceDB opens it: None (the home's folder), an absolute folder, or an object-store
    URI (s3://, gs://, az://)."""
    return parse_storage_uri("lancedb_uri", raw)


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=_default_home)
    docs: Path = SAMPLE_DOCS
    chunk_tokens: int = 1200
    chunk_overlap: int = 100
    max_file_bytes: int = 50 * 1024 * 1024
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
    duckdb_memory_limit: str = DEFAULT_DUCKDB_MEMORY_LIMIT
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    embed_base_url: str | None = None
    embed_model: str | None = None
    embed_api_key: str | None = field(default=None, repr=False)
    llm_mode: str = "json"
    llm_timeout: int = 120
    llm_max_concurrency: int = 4
    extract_processes: int = 0          # offline extraction (and embedding, parsing) worker processes; 0: one per usable core
    llm_max_tokens: int = 4096          # output cap of extraction calls (first pass and gleaning)
    llm_answer_max_tokens: int = 1024   # output cap of answers, summaries, keywords, judgements
    embed_timeout: int = 120            # per-request timeout of the embeddings endpoint
    gleaning: int = 1
    alias_embedding_threshold: float | None = None
    sql_timeout: int = DEFAULT_SQL_TIMEOUT          # seconds per `pathrag sql` statement (0: no limit)
    sql_max_temp: str = DEFAULT_SQL_MAX_TEMP        # spill cap of `pathrag sql` (DuckDB max_temp_directory_size)
    lancedb_uri: str | None = None                  # None: the home's lancedb/ folder; else a folder or s3:// URI
    lancedb_storage_options: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may hold keys
    shard_storage: str | None = None    # extract_fanout's step data: None = the Dagster home; a shared folder or s3://
    auto_serve: str = "terminal"        # start `pathrag serve` in the background: at a terminal, always or never

    # ---- derived locations -------------------------------------------------------------------
    @property
    def duckdb_path(self) -> Path:
        return self.home / "pathrag.duckdb"

    @property
    def lancedb_path(self) -> Path:
        """The home's vector folder: where the tables live unless PATHRAG_LANCEDB_URI names another place
        (``storage.vector_location.VectorLocation.for_settings`` is what opens them)."""
        return self.home / "lancedb"

    @property
    def lancedb_location(self) -> str:
        """Where the vector tables are, for messages: PATHRAG_LANCEDB_URI or the home's folder (no secret)."""
        return self.lancedb_uri or str(self.lancedb_path)

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides) -> "Settings":
        env = dict(os.environ if env is None else env)
        home = Path(env.get("PATHRAG_HOME") or _default_home()).expanduser().resolve()
        docs = Path(env.get("PATHRAG_DOCS") or SAMPLE_DOCS).expanduser().resolve()
        llm_key = env.get("PATHRAG_LLM_API_KEY") or env.get("OPENAI_API_KEY") or None
        settings = cls(
            home=home,
            docs=docs,
            chunk_tokens=_int_env(env, "chunk_tokens", 1200, minimum=16),
            chunk_overlap=_int_env(env, "chunk_overlap", 100, minimum=0),
            max_file_bytes=_int_env(env, "max_file_bytes", 50 * 1024 * 1024, minimum=1),
            max_text_bytes=_int_env(env, "max_text_bytes", DEFAULT_MAX_TEXT_BYTES, minimum=1),
            duckdb_memory_limit=_memory_env(env),
            llm_base_url=env.get("PATHRAG_LLM_BASE_URL") or None,
            llm_model=env.get("PATHRAG_LLM_MODEL") or None,
            llm_api_key=llm_key,
            embed_base_url=env.get("PATHRAG_EMBED_BASE_URL") or None,
            embed_model=env.get("PATHRAG_EMBED_MODEL") or None,
            embed_api_key=env.get("PATHRAG_EMBED_API_KEY") or llm_key,
            llm_mode=(env.get("PATHRAG_LLM_MODE") or "json").strip().lower(),
            llm_timeout=_int_env(env, "llm_timeout", 120, minimum=1),
            llm_max_concurrency=_int_env(env, "llm_max_concurrency", 4, minimum=1),
            extract_processes=_int_env(env, "extract_processes", 0, minimum=0),
            llm_max_tokens=_int_env(env, "llm_max_tokens", 4096, minimum=16),
            llm_answer_max_tokens=_int_env(env, "llm_answer_max_tokens", 1024, minimum=16),
            embed_timeout=_int_env(env, "embed_timeout", _int_env(env, "llm_timeout", 120, minimum=1), minimum=1),
            gleaning=_int_env(env, "gleaning", 1, minimum=0),
            alias_embedding_threshold=_float_env(env, "PATHRAG_ALIAS_EMBEDDING_THRESHOLD"),
            sql_timeout=_int_env(env, "sql_timeout", DEFAULT_SQL_TIMEOUT, minimum=0),
            sql_max_temp=_memory_env(env, "sql_max_temp", DEFAULT_SQL_MAX_TEMP),
            lancedb_uri=parse_lancedb_uri(env.get(ENV_NAMES["lancedb_uri"])),
            lancedb_storage_options=parse_storage_options(env.get(ENV_NAMES["lancedb_storage_options"])),
            shard_storage=parse_storage_uri("shard_storage", env.get(ENV_NAMES["shard_storage"]), ("s3",)),
            auto_serve=_auto_serve_env(env),
        )
        if overrides:
            settings = replace(settings, **overrides)
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.llm_mode not in LLM_MODES:
            raise ConfigError(f"PATHRAG_LLM_MODE={self.llm_mode!r} is not one of {', '.join(LLM_MODES)}")
        if self.chunk_overlap >= self.chunk_tokens:
            raise ConfigError(
                f"PATHRAG_CHUNK_OVERLAP={self.chunk_overlap} must be smaller than "
                f"PATHRAG_CHUNK_TOKENS={self.chunk_tokens}"
            )
        if self.home.exists() and not self.home.is_dir():
            raise ConfigError(f"PATHRAG_HOME={self.home} is a file, not a folder; point PATHRAG_HOME at a folder "
                              "(it is created if missing) where the index can live")

    def secrets_digest(self, key: str) -> str:
        """A keyed digest of the secrets (API keys, credential storage options), for telling whether two processes
        hold the same ones without either showing them: ``public()`` reduces them to set/unset, so a key changed
        since a query service started would otherwise go unnoticed. ``key`` is random per use (the service's
        token), so the digest says nothing outside that pairing."""
        import hashlib
        import hmac

        held = [self.llm_api_key or "", self.embed_api_key or "", json.dumps(self.lancedb_storage_options)]
        return hmac.new(key.encode(), json.dumps(held).encode(), hashlib.sha256).hexdigest()

    def public(self) -> dict[str, object]:
        """Settings safe to print, log or store: secrets are reduced to whether they are set."""
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in SECRET_FIELDS:
                out[f.name] = "set" if value else "unset"
            elif f.name in REDACTED_FIELDS:
                out[f.name] = redacted_options(value)
            else:
                out[f.name] = str(value) if isinstance(value, Path) else value
        return out
