"""Service settings: environment variables with the prefix `KVPLAN_`.

Read once at start-up and passed to `create_app`; nothing reads the environment later. A bad
value fails at start-up with the variable's name and what would work (`SettingsError`), so a
misconfigured container exits at once instead of serving wrong answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from planner.resolve.settings import HubSettings

LogLevel = Literal["debug", "info", "warning", "error", "critical"]

# Values people paste from examples; an admin token equal to one of these is no secret at all.
_PLACEHOLDER_TOKENS = frozenset({"changeme", "change-me", "secret", "token", "admin", "password"})
_MIN_TOKEN_CHARS = 16


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="KVPLAN_", extra="ignore", frozen=True, case_sensitive=False
    )

    host: Annotated[str, Field(min_length=1, max_length=255)] = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)] = 8000
    log_level: LogLevel = "info"
    admin_token: SecretStr | None = Field(
        default=None, description="Bearer token for admin routes; unset disables them."
    )
    data_dir: Path = Path("data")
    database_url: SecretStr | None = Field(
        default=None, description="PostgreSQL URL for replicas; unset means SQLite in DATA_DIR."
    )
    max_body_bytes: Annotated[int, Field(ge=1024, le=64 << 20)] = 1 << 20
    # Process-wide guards (planner/api/limits.py); each replica applies its own.
    max_concurrent_requests: Annotated[int, Field(ge=1, le=100_000)] = Field(
        default=64, description="Requests in the app at once; the next gets 503 + Retry-After."
    )
    request_timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=30.0, description="Per request (the probe has its own bound); 408/503."
    )
    admin_rate_per_minute: Annotated[int, Field(ge=1, le=100_000)] = Field(
        default=30, description="Admin requests per client per minute (refill rate); then 429."
    )
    admin_rate_burst: Annotated[int, Field(ge=1, le=100_000)] = Field(
        default=10, description="Admin requests a client may make at once before the rate applies."
    )
    max_concurrent_big_sweeps: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=2, description="Sweeps over 64 points running at once; the next gets 503."
    )

    # Cost admission and the worker pool (planner/cost.py, planner/api/workers.py).
    max_request_cost: Annotated[int, Field(ge=1_000, le=10**12)] = Field(
        default=2_000_000,
        description="Estimated work units (≈ µs of CPU) a request may cost; over it, 422.",
    )
    inline_cost: Annotated[int, Field(ge=0, le=10**9)] = Field(
        default=2_000,
        description="Requests estimated at or below this run on the event loop, not a worker.",
    )
    max_response_bytes: Annotated[int, Field(ge=64 << 10, le=1 << 30)] = Field(
        default=8 << 20, description="Largest answer (estimated before work, checked after)."
    )
    workers: Annotated[int, Field(ge=1, le=64)] = Field(
        default=2, description="Worker processes for plans, sweeps, recommend, reconcile, page."
    )
    work_queue: Annotated[int, Field(ge=0, le=10_000)] = Field(
        default=64, description="Jobs that may wait for a free worker; the next gets 503."
    )
    work_deadline_seconds: Annotated[float, Field(gt=0, le=600)] = Field(
        default=10.0, description="A job still running after this is killed; 503."
    )
    worker_max_rss_bytes: Annotated[int, Field(ge=32 << 20, le=1 << 40)] = Field(
        default=256 << 20, description="A worker above this RSS after a job is replaced."
    )
    worker_memory_bytes: Annotated[int, Field(ge=0, le=1 << 44)] = Field(
        default=2 << 30,
        description="Address-space cap of each worker (RLIMIT_AS); 0 = none. Over it, 503.",
    )
    plan_cache_bytes: Annotated[int, Field(ge=0, le=1 << 34)] = Field(
        default=32 << 20, description="Bytes (keys + answers) the plan memo may hold."
    )
    # Connection-level limits (planner/server.py, the uvicorn protocol kvplan serve runs).
    max_header_bytes: Annotated[int, Field(ge=1024, le=1 << 20)] = Field(
        default=64 << 10, description="Request line + headers; over it, 431 (414 for the URL)."
    )
    header_timeout_seconds: Annotated[float, Field(gt=0, le=600)] = Field(
        default=10.0, description="Time to send the request line and headers; then 408."
    )
    body_timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=10.0, description="Time to send the whole body once headers are in; then 408."
    )
    keep_alive_seconds: Annotated[int, Field(ge=1, le=600)] = Field(
        default=5, description="An idle keep-alive connection is closed after this."
    )
    max_connections: Annotated[int, Field(ge=0, le=1_000_000)] = Field(
        default=0,
        description="Open connections at once (0: 2048, or less to stay 64 below the fd limit).",
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_level(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("admin_token", "database_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("admin_token")
    @classmethod
    def _real_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        token = value.get_secret_value()
        if token.lower() in _PLACEHOLDER_TOKENS or len(token) < _MIN_TOKEN_CHARS:
            raise ValueError(
                f"must be a random secret of at least {_MIN_TOKEN_CHARS} characters "
                "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`), "
                "or unset to disable admin routes"
            )
        return value

    def public_summary(self) -> dict[str, object]:
        """The effective non-secret configuration, for the start-up log line."""
        return {
            "host": self.host,
            "port": self.port,
            "log_level": self.log_level,
            "data_dir": str(self.data_dir),
            "database": "postgresql" if self.database_url else "sqlite",
            "admin_routes": "enabled" if self.admin_token else "disabled",
            "max_body_bytes": self.max_body_bytes,
            "max_concurrent_requests": self.max_concurrent_requests,
            "request_timeout_seconds": self.request_timeout_seconds,
            "admin_rate_per_minute": self.admin_rate_per_minute,
            "admin_rate_burst": self.admin_rate_burst,
            "max_concurrent_big_sweeps": self.max_concurrent_big_sweeps,
            "max_request_cost": self.max_request_cost,
            "inline_cost": self.inline_cost,
            "max_response_bytes": self.max_response_bytes,
            "workers": self.workers,
            "work_queue": self.work_queue,
            "work_deadline_seconds": self.work_deadline_seconds,
            "worker_max_rss_bytes": self.worker_max_rss_bytes,
            "worker_memory_bytes": self.worker_memory_bytes,
            "plan_cache_bytes": self.plan_cache_bytes,
            "max_header_bytes": self.max_header_bytes,
            "header_timeout_seconds": self.header_timeout_seconds,
            "body_timeout_seconds": self.body_timeout_seconds,
            "keep_alive_seconds": self.keep_alive_seconds,
            "max_connections": self.effective_max_connections(),
        }

    def effective_max_connections(self) -> int:
        """`max_connections`, or 2048; never within 64 of this process's fd limit."""
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = self.max_connections or 2048
        if soft == resource.RLIM_INFINITY:
            return wanted
        return max(1, min(wanted, soft - 64))


class SettingsError(Exception):
    """The environment holds a bad `KVPLAN_*` value; the message names each one."""


def _env_name(loc: tuple[object, ...], prefix: str) -> str:
    first = str(loc[0]) if loc else ""
    if first.isupper():  # an alias: the variable's own name (HF_ENDPOINT, HF_TOKEN, ...)
        return first
    return prefix + "_".join(str(part) for part in loc).upper()


def load_hub_settings(**overrides: object) -> HubSettings:
    """The Hub's settings (KVPLAN_HUB_*, HF_*) from the environment, checked now: a bad value
    is a `SettingsError` naming the variable, at start-up rather than at the first Hub id."""
    from planner.resolve.settings import HubSettings

    try:
        return HubSettings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise SettingsError(_lines(exc, "KVPLAN_HUB_")) from None


def _lines(exc: ValidationError, prefix: str) -> str:
    lines = []
    for error in exc.errors(include_url=False, include_input=False):
        name = _env_name(tuple(error["loc"]), prefix)
        lines.append(f"{name}: {str(error['msg']).removeprefix('Value error, ')}")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment (overrides win); `SettingsError` names each bad variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise SettingsError(_lines(exc, "KVPLAN_")) from None
