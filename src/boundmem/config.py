"""Every setting boundmem takes from the environment, read in one place, once per entry point.

Why one object: a variable read deep inside a module is invisible to the caller, cannot be set per Memory, and is
easy to misspell in one of several places (the Azure API version was documented under one name and read under
another). The entry points (the CLI commands, `build_memory` when given no Settings) call `Settings.from_env()`;
everything below them receives the Settings (or the group it needs) as an argument. `Settings()` is the defaults
alone, with no environment: what tests and library callers start from.

This is the only module that reads `os.environ`; the docs' settings table is generated from these fields' descriptions,
which therefore start with the variable."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from .errors import ConfigError

DEFAULT_CACHE_DIR = Path.home() / ".cache" / "boundmem"


class _Group(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EmbedSettings(_Group):
    embedder: str = Field("minilm", description="BOUNDMEM_EMBEDDER: minilm, minilm-onnx, minilm-torch (the same "
                          "vectors), openai or hash (tests only); must match what the store was filled with")
    minilm_backend: Literal["auto", "onnx", "torch"] = Field("auto", description="BOUNDMEM_MINILM_BACKEND: auto (ONNX "
                                                                   "Runtime where it runs, else torch), onnx or torch")
    minilm_onnx: Optional[Path] = Field(None, description="BOUNDMEM_MINILM_ONNX: your own ONNX export of MiniLM")
    minilm_precision: Literal["int8", "fp32"] = Field(
        "int8", description="BOUNDMEM_MINILM_PRECISION: which ONNX weights (fp32: exported once from the torch weights)")
    cache_dir: Path = Field(DEFAULT_CACHE_DIR, description="BOUNDMEM_CACHE_DIR: where the fp32 ONNX export is written "
                                                    "once (else $XDG_CACHE_HOME/boundmem)")
    ort_threads: int = Field(1, ge=0, description="BOUNDMEM_ORT_THREADS: ONNX Runtime threads per run (0: ORT's default)")
    openai_model: str = Field("text-embedding-3-small", description="BOUNDMEM_EMBED_MODEL: model of --embedder openai")
    query_cache: int = Field(1024, ge=0, description="BOUNDMEM_QUERY_CACHE: query vectors a Memory keeps for recall "
                                                     "(least recently used go first; 0: none)")


class LLMSettings(_Group):
    """The OpenAI-compatible endpoint of the LLM stages (and of `--embedder openai`)."""

    client: str = Field("openai", description="the LLM client's registry name (only one so far)")
    model: str = Field("gpt-4o-2024-08-06", description="BOUNDMEM_LLM_MODEL: the model name (Azure: the deployment)")
    base_url: Optional[str] = Field(None, description="BOUNDMEM_LLM_BASE_URL: the endpoint, e.g. http://127.0.0.1:11434/v1 "
                                                          "for Ollama (else OPENAI_BASE_URL; unset: OpenAI)")
    api_key: Optional[SecretStr] = Field(None, description="BOUNDMEM_LLM_API_KEY: the key (else OPENAI_API_KEY, else "
                                                          "AZURE_OPENAI_API_KEY; a local server given by the base URL gets a dummy one)")
    azure_endpoint: Optional[str] = Field(None, description="BOUNDMEM_LLM_AZURE_ENDPOINT: an Azure OpenAI endpoint, "
                                                                "instead of the base URL")
    azure_api_version: Optional[str] = Field(None, description="BOUNDMEM_LLM_AZURE_API_VERSION: the Azure API version (or "
                                                               "BOUNDMEM_LLM_API_VERSION, OPENAI_API_VERSION; unset: 2024-10-21)")
    timeout: float = Field(30.0, gt=0, description="BOUNDMEM_LLM_TIMEOUT: seconds per request")
    max_retries: int = Field(3, ge=0, description="BOUNDMEM_LLM_MAX_RETRIES: extra attempts after a timeout, "
                                                   "408/409/429 or 5xx")
    backoff: float = Field(0.5, ge=0, description="BOUNDMEM_LLM_BACKOFF: seconds before the first retry (doubling, "
                                                   "at most 8)")
    temperature: Optional[float] = Field(0.0, description="BOUNDMEM_LLM_TEMPERATURE: the sampling temperature ('none': "
                                                              "left out of the request)")
    max_tokens: Optional[int] = Field(None, ge=1, description="BOUNDMEM_LLM_MAX_TOKENS: a bound on every answer (unset: left "
                                                           "out of the request)")
    usage_log: Optional[str] = Field(None, description="BOUNDMEM_LLM_USAGE_LOG: a JSONL file, one line per request")
    tool_shape: Literal["flat", "nested"] = Field("flat", description="BOUNDMEM_LLM_TOOL_SHAPE: flat (one list of the "
                                                      "allowed categories) or nested (the paper's main > sub > detail object)")
    profile: Literal["paper", "small"] = Field(
        "paper", description="BOUNDMEM_LLM_PROFILE: paper (forced tool call, a worked example) or small (no example, "
                             "output constrained to the JSON schema where the server can, the shortest schema)")
    cascade_ask: Literal["flip", "attitude"] = Field(
        "flip", description="BOUNDMEM_LLM_CASCADE_ASK: what `local+llm` asks of each proposal: keep / reject / flip "
                            "its shown polarity, or keep / reject and the user's attitude (polarity not shown)")


class LocalLLMSettings(_Group):
    """`boundmem llm local`: where the server and models live, and how the server is built."""

    home: Path = Field(Path.home() / ".cache" / "boundmem" / "llm", description="BOUNDMEM_LLM_HOME: "
                         "where `boundmem llm local` keeps the server's venv and the models (--home)")
    cmake_args: Optional[str] = Field(None, description="CMAKE_ARGS: how llama-cpp-python is built (yours win over "
                                                       "-DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DGGML_BLAS=OFF)")


class ServiceSettings(_Group):
    keys: Optional[Path] = Field(None, description="BOUNDMEM_KEYS: the keys file of serve and proxy, API key -> "
                                                          "tenant (--keys)")
    token_secret_file: Optional[Path] = Field(None, description="BOUNDMEM_TOKEN_SECRET_FILE: the secret that signs user "
                                                      "tokens (unset: random per process)")
    token_state: Optional[Path] = Field(None, description="BOUNDMEM_TOKEN_STATE: the SQLite file of token "
                                                "revocations; give every process the same one")
    mcp_token: Optional[SecretStr] = Field(None, description="BOUNDMEM_MCP_TOKEN: the user token of `serve mcp --token`")
    upstream_url: Optional[str] = Field(None, description="BOUNDMEM_UPSTREAM_URL: the proxy's model server")
    memory_template: Optional[Path] = Field(None, description="BOUNDMEM_MEMORY_TEMPLATE: the operator's wording around "
                                            "the memory block (JSON: preamble, episodes_preamble)")


class EpisodicSettings(_Group):
    """Episodic memory (CAIM's dated thoughts beside the preferences, `episodes.py`): opt-in, bounded by the
    operator's ontology."""

    enabled: bool = Field(False, description="BOUNDMEM_EPISODIC: learn and recall episodes (1/on, 0/off; off by default)")
    tenants: Optional[tuple[str, ...]] = Field(None, description="BOUNDMEM_EPISODIC_TENANTS: only the users of these "
                                               "tenants (comma-separated); unset: every user")
    ontology: Optional[Path] = Field(None, description="BOUNDMEM_EPISODIC_ONTOLOGY: the operator's tag ontology (JSON, "
                                     "CAIM's format); unset: the built-in one")
    allow: tuple[str, ...] = Field((), description="BOUNDMEM_EPISODIC_ALLOW: the tags kept (tags, subcategories or "
                                   "categories, comma-separated); unset: every tag of the ontology")


class Settings(_Group):
    db: str = Field("boundmem.db", description="BOUNDMEM_DB: the store: a SQLite file, a postgresql:// URL "
                    "or a libpq 'host=... dbname=...' string (--db)")
    caim_db: str = Field("boundmem-caim.db", description="BOUNDMEM_CAIM_DB: `boundmem caim`'s SQLite file (--db)")
    pg_vacuum: Literal["plain", "full", "off"] = Field("plain", description="BOUNDMEM_PG_VACUUM: PostgreSQL after an erasure: plain, full (no erased "
                                                           "byte in live data files, an exclusive lock) or off")
    jobs_nice: int = Field(10, description="BOUNDMEM_JOBS_NICE: nice value of the job worker thread (<= 0: unchanged)")
    promote_after: int = Field(3, ge=1, description="BOUNDMEM_PROMOTE_AFTER: distinct conversations observing the same "
                               "value that promote it to a preference")
    observation_days: float = Field(90.0, gt=0, description="BOUNDMEM_OBSERVATION_DAYS: days an unconfirmed "
                                    "observation is kept")
    max_ingest_seconds: Optional[float] = Field(10.0, gt=0, description="BOUNDMEM_MAX_INGEST_SECONDS: CPU seconds one "
                                                "ingest may take before it is refused (413 max_ingest_seconds), "
                                                "nothing stored")
    embed: EmbedSettings = EmbedSettings()
    llm: LLMSettings = LLMSettings()
    llm_local: LocalLLMSettings = LocalLLMSettings()
    service: ServiceSettings = ServiceSettings()
    episodic: EpisodicSettings = EpisodicSettings()

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "Settings":
        """The settings of this process (or of `environ`). An empty variable counts as unset; an invalid one raises
        ConfigError naming it. A variable that is not set leaves the field's default (declared once, above)."""
        r = _Reader(os.environ if environ is None else environ)
        cache, xdg = r.path("BOUNDMEM_CACHE_DIR"), r.path("XDG_CACHE_HOME")
        if cache is UNSET and xdg is not UNSET:
            cache = xdg / "boundmem"
        return cls(**_given(
            db=r.text("BOUNDMEM_DB"),
            caim_db=r.text("BOUNDMEM_CAIM_DB"),
            pg_vacuum=r.choice("BOUNDMEM_PG_VACUUM", ("plain", "full", "off")),
            jobs_nice=r.number(int, "BOUNDMEM_JOBS_NICE"),
            promote_after=r.number(int, "BOUNDMEM_PROMOTE_AFTER", minimum=1),
            observation_days=r.number(float, "BOUNDMEM_OBSERVATION_DAYS", minimum=0, strict=True),
            max_ingest_seconds=r.number(float, "BOUNDMEM_MAX_INGEST_SECONDS", minimum=0, strict=True),
            embed=EmbedSettings(**_given(
                embedder=r.text("BOUNDMEM_EMBEDDER"),
                minilm_backend=r.choice("BOUNDMEM_MINILM_BACKEND", ("auto", "onnx", "torch")),
                minilm_onnx=r.path("BOUNDMEM_MINILM_ONNX"),
                minilm_precision=r.choice("BOUNDMEM_MINILM_PRECISION", ("int8", "fp32")),
                cache_dir=cache,
                ort_threads=r.number(int, "BOUNDMEM_ORT_THREADS", minimum=0),
                openai_model=r.text("BOUNDMEM_EMBED_MODEL"),
                query_cache=r.number(int, "BOUNDMEM_QUERY_CACHE", minimum=0))),
            llm=LLMSettings(**_given(
                model=r.text("BOUNDMEM_LLM_MODEL"),
                base_url=r.text("BOUNDMEM_LLM_BASE_URL", "OPENAI_BASE_URL"),
                api_key=r.text("BOUNDMEM_LLM_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY"),
                azure_endpoint=r.text("BOUNDMEM_LLM_AZURE_ENDPOINT"),
                azure_api_version=r.text("BOUNDMEM_LLM_AZURE_API_VERSION", "BOUNDMEM_LLM_API_VERSION", "OPENAI_API_VERSION"),
                timeout=r.number(float, "BOUNDMEM_LLM_TIMEOUT", minimum=0, strict=True),
                max_retries=r.number(int, "BOUNDMEM_LLM_MAX_RETRIES", minimum=0),
                backoff=r.number(float, "BOUNDMEM_LLM_BACKOFF", minimum=0),
                temperature=r.temperature("BOUNDMEM_LLM_TEMPERATURE"),
                max_tokens=r.number(int, "BOUNDMEM_LLM_MAX_TOKENS", minimum=1),
                usage_log=r.text("BOUNDMEM_LLM_USAGE_LOG"),
                tool_shape=r.choice("BOUNDMEM_LLM_TOOL_SHAPE", ("flat", "nested")),
                profile=r.choice("BOUNDMEM_LLM_PROFILE", ("paper", "small")),
                cascade_ask=r.choice("BOUNDMEM_LLM_CASCADE_ASK", ("flip", "attitude")))),
            llm_local=LocalLLMSettings(**_given(home=r.path("BOUNDMEM_LLM_HOME"), cmake_args=r.text("CMAKE_ARGS"))),
            service=ServiceSettings(**_given(
                keys=r.path("BOUNDMEM_KEYS"), token_secret_file=r.path("BOUNDMEM_TOKEN_SECRET_FILE"),
                token_state=r.path("BOUNDMEM_TOKEN_STATE"), mcp_token=r.text("BOUNDMEM_MCP_TOKEN"),
                upstream_url=r.text("BOUNDMEM_UPSTREAM_URL"), memory_template=r.path("BOUNDMEM_MEMORY_TEMPLATE"))),
            episodic=EpisodicSettings(**_given(
                enabled=r.flag("BOUNDMEM_EPISODIC"), tenants=r.items("BOUNDMEM_EPISODIC_TENANTS"),
                ontology=r.path("BOUNDMEM_EPISODIC_ONTOLOGY"), allow=r.items("BOUNDMEM_EPISODIC_ALLOW"))),
        ))


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()   # a variable that is not set (or empty): the field keeps its declared default


def _given(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not UNSET}


class _Reader:
    """Typed reads of an environment mapping; every failure names the variable, an unset variable reads as UNSET."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ = environ

    def get(self, *names: str) -> Optional[tuple[str, str]]:
        for n in names:
            v = self.environ.get(n)
            if v is not None and v.strip():
                return n, v.strip()
        return None

    def text(self, *names: str) -> Any:
        """The first of `names` that is set (the later ones are older or foreign spellings)."""
        hit = self.get(*names)
        return hit[1] if hit else UNSET

    def path(self, name: str) -> Any:
        hit = self.get(name)
        return Path(hit[1]).expanduser() if hit else UNSET

    def flag(self, name: str) -> Any:
        hit = self.get(name)
        if hit is None:
            return UNSET
        value = hit[1].lower()
        if value not in ("1", "0", "on", "off", "true", "false", "yes", "no"):
            raise ConfigError(f"{name}={hit[1]!r} is not one of 1, 0, on, off, true, false, yes, no")
        return value in ("1", "on", "true", "yes")

    def items(self, name: str) -> Any:
        """A comma-separated list (blank items dropped)."""
        hit = self.get(name)
        return tuple(x.strip() for x in hit[1].split(",") if x.strip()) if hit else UNSET

    def choice(self, name: str, allowed: tuple[str, ...]) -> Any:
        hit = self.get(name)
        if hit is None:
            return UNSET
        value = hit[1].lower()
        if value not in allowed:
            raise ConfigError(f"{name}={hit[1]!r} is not one of {', '.join(allowed)}")
        return value

    def number(self, typ: Callable[[str], Any], name: str, minimum: Optional[float] = None, strict: bool = False) -> Any:
        hit = self.get(name)
        if hit is None:
            return UNSET
        try:
            value = typ(hit[1])
        except ValueError:
            raise ConfigError(f"{name}={hit[1]!r} is not a valid {'integer' if typ is int else 'number'}") from None
        if minimum is not None and (value <= minimum if strict else value < minimum):
            raise ConfigError(f"{name}={hit[1]!r} must be {'>' if strict else '>='} {minimum:g}")
        return value

    def temperature(self, name: str) -> Any:
        hit = self.get(name)
        if hit is None:
            return UNSET
        if hit[1].lower() in ("none", "default"):
            return None
        try:
            return float(hit[1])
        except ValueError:
            raise ConfigError(f"{name}={hit[1]!r} is not a number or 'none'") from None


def environment_with(**overrides: str) -> dict[str, str]:
    """This process's environment plus `overrides`: the environment of a child process (the llama.cpp build)."""
    return {**os.environ, **overrides}


def secret_from(variable: str) -> Optional[str]:
    """The value of a variable the user named on the command line (the proxy's `--upstream-key-env`), so a key is
    never an argument in the process list."""
    v = os.environ.get(variable)
    return v if v and v.strip() else None


def env_name(field: str) -> str:
    """The variable behind a field: every field's description starts with it."""
    group, _, name = field.rpartition(".")
    model: Any = Settings if not group else Settings.model_fields[group].annotation
    desc = model.model_fields[name].description or field
    return desc.split(":")[0].split(",")[0]
