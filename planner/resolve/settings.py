"""Settings for model resolution: `KVPLAN_HUB_*` plus the Hugging Face client's own variables.

The Hugging Face variables (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, HF_HOME, HF_HUB_CACHE) are
read here, when the settings object is built, and passed to the client explicitly: the client
itself reads them once at import, so a process that changes them later would otherwise keep
the old values.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_ENDPOINT = "https://huggingface.co"


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
        default=10.0, description="Per Hub request (connect and read)."
    )
    cache_entries: Annotated[int, Field(ge=0, le=100_000)] = Field(
        default=512, description="Resolved models kept in process (least recently used go)."
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
