"""Settings for model resolution: `KVPLAN_HUB_*` plus the Hugging Face client's own variables.

The Hugging Face variables (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, HF_HOME, HF_HUB_CACHE) are
read here, when the settings object is built, and passed to the client explicitly: the client
itself reads them once at import, so a process that changes them later would otherwise keep
the old values.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit, urlunsplit

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_ENDPOINT = "https://huggingface.co"


def redact_url(url: str) -> str:
    """`url` without its password (and user): what an error or a log line may show."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<the configured HF_ENDPOINT>"
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class HubSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="KVPLAN_HUB_",
        extra="ignore",
        frozen=True,
        case_sensitive=False,
        populate_by_name=True,
    )

    enabled: bool = Field(
        default=True,
        description="Look models up on the Hugging Face Hub; false for air-gapped clusters.",
    )
    allow_local_dirs: bool = Field(
        default=True,
        description="Accept a local directory (config.json + safetensors) as the model id.",
    )
    timeout_seconds: Annotated[float, Field(gt=0, le=120)] = Field(
        default=10.0,
        description="One model lookup, all its Hub requests together (connect, read, retry).",
    )
    cache_entries: Annotated[int, Field(ge=0, le=100_000)] = Field(
        default=512, description="Resolved models kept in process (least recently used go)."
    )
    memory_cache_bytes: Annotated[int, Field(ge=0, le=1 << 34)] = Field(
        default=64 << 20,
        description="Bytes of config JSON the in-process cache of resolved models may hold.",
    )
    cache_bytes: Annotated[int, Field(ge=1 << 20, le=1 << 44)] = Field(
        default=1 << 30,
        description="Bytes the Hugging Face cache (HF_HOME) may hold; oldest revisions go.",
    )
    negative_ttl_seconds: Annotated[float, Field(ge=0, le=86_400)] = Field(
        default=300.0,
        description="How long an id the Hub does not know (or refuses) is answered from memory.",
    )
    breaker_failures: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=3,
        description="Hub failures in a row (timeout, network, 429, 5xx) that open "
        "the circuit: lookups then fail at once.",
    )
    breaker_seconds: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=30.0,
        description="How long an open circuit stays open (longer when the Hub says Retry-After).",
    )
    token_repos: str = Field(
        default="*",
        description="Repos (comma-separated globs, e.g. `acme/*`) for which the server's "
        "HF_TOKEN is sent; empty: never. Anyone who can reach the service can plan with "
        "what the token can read.",
    )
    endpoint: str = Field(
        default=DEFAULT_ENDPOINT,
        validation_alias=AliasChoices("HF_ENDPOINT", "KVPLAN_HUB_ENDPOINT"),
        description="Hub URL (an internal mirror for air-gapped sites).",
    )
    token: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"),
        description="Token for gated or private repos.",
    )
    offline: bool = Field(
        default=False,
        validation_alias=AliasChoices("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"),
        description="Use only the local Hugging Face cache; make no requests.",
    )
    hf_home: Path | None = Field(default=None, validation_alias=AliasChoices("HF_HOME"))
    hf_hub_cache: Path | None = Field(default=None, validation_alias=AliasChoices("HF_HUB_CACHE"))

    @field_validator("offline", mode="before")
    @classmethod
    def _offline_flag(cls, value: object) -> object:
        # The client's own reading: 1/true/yes/on are offline; unset or empty is not.
        if isinstance(value, str):
            return value.strip().upper() in {"1", "ON", "YES", "TRUE"}
        return value

    @field_validator("token", "hf_home", "hf_hub_cache", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("endpoint", mode="before")
    @classmethod
    def _empty_endpoint(cls, value: object) -> object:
        return DEFAULT_ENDPOINT if isinstance(value, str) and not value.strip() else value

    @property
    def endpoint_url(self) -> str:
        return self.endpoint.rstrip("/") or DEFAULT_ENDPOINT

    @property
    def cache_dir(self) -> Path:
        """The Hub cache the client uses: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache."""
        if self.hf_hub_cache is not None:
            return self.hf_hub_cache.expanduser()
        if self.hf_home is not None:
            return self.hf_home.expanduser() / "hub"
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
        return base / "huggingface" / "hub"

    def token_value(self) -> str | None:
        return self.token.get_secret_value() if self.token is not None else None

    def token_for(self, repo_id: str) -> str | None:
        """The server's token, for a repo KVPLAN_HUB_TOKEN_REPOS allows it to be used for."""
        if self.token is None:
            return None
        patterns = [p.strip().lower() for p in self.token_repos.split(",") if p.strip()]
        if any(fnmatch.fnmatchcase(repo_id.lower(), p) for p in patterns):
            return self.token.get_secret_value()
        return None

    @field_validator("endpoint")
    @classmethod
    def _endpoint_is_http(cls, value: str) -> str:
        try:
            parts = urlsplit(value.strip())
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError:
            raise ValueError("must be an http(s) URL such as https://huggingface.co") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL such as https://huggingface.co")
        return value.strip()
