"""`KVPLAN_*` settings: parsed from the environment, bad values refused naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.settings import Settings, SettingsError, load_settings

TOKEN = "0123456789abcdef-real-token"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("KVPLAN_"):
            monkeypatch.delenv(name)


def test_defaults() -> None:
    settings = load_settings()
    assert (settings.host, settings.port, settings.log_level) == ("127.0.0.1", 8000, "info")
    assert settings.max_body_bytes == 1 << 20  # 1 MiB
    assert settings.admin_token is None and settings.database_url is None


def test_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KVPLAN_HOST", "0.0.0.0")
    monkeypatch.setenv("KVPLAN_PORT", "9000")
    monkeypatch.setenv("KVPLAN_LOG_LEVEL", "WARNING")
    monkeypatch.setenv("KVPLAN_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("KVPLAN_ADMIN_TOKEN", TOKEN)
    monkeypatch.setenv("KVPLAN_MAX_BODY_BYTES", "65536")
    settings = load_settings()
    assert (settings.host, settings.port, settings.log_level) == ("0.0.0.0", 9000, "warning")
    assert settings.data_dir == tmp_path and settings.max_body_bytes == 65536
    assert settings.admin_token is not None and settings.admin_token.get_secret_value() == TOKEN


def test_secrets_stay_out_of_repr_and_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVPLAN_ADMIN_TOKEN", TOKEN)
    monkeypatch.setenv("KVPLAN_DATABASE_URL", "postgresql://u:hunter2@db/kvplan")
    settings = load_settings()
    for text in (repr(settings), str(settings.public_summary())):
        assert TOKEN not in text and "hunter2" not in text
    assert settings.public_summary()["admin_routes"] == "enabled"


def test_empty_token_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVPLAN_ADMIN_TOKEN", "  ")
    assert load_settings().admin_token is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("KVPLAN_PORT", "eighty"),
        ("KVPLAN_PORT", "70000"),
        ("KVPLAN_LOG_LEVEL", "loud"),
        ("KVPLAN_MAX_BODY_BYTES", "-1"),
        ("KVPLAN_MAX_BODY_BYTES", str(1 << 40)),
        ("KVPLAN_ADMIN_TOKEN", "changeme"),
        ("KVPLAN_ADMIN_TOKEN", "short"),
    ],
)
def test_bad_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as excinfo:
        load_settings()
    message = str(excinfo.value)
    assert name in message
    if "TOKEN" in name:
        assert value not in message  # a rejected secret is not echoed


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(ValueError):
        settings.port = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("KVPLAN_HUB_TIMEOUT_SECONDS", "abc"),
        ("KVPLAN_HUB_TIMEOUT_SECONDS", "0"),
        ("KVPLAN_HUB_ENABLED", "maybe"),
        ("KVPLAN_HUB_CACHE_BYTES", "-5"),
        ("KVPLAN_HUB_BREAKER_FAILURES", "0"),
        ("HF_ENDPOINT", "ftp://mirror.internal"),
        ("HF_ENDPOINT", "http://mirror.internal:notaport"),
    ],
)
def test_bad_hub_values_stop_the_app_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, value: str
) -> None:
    """Issue 23, item 12: checked when the app is built (start-up), not at the first Hub id."""
    from planner.app import create_app

    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as excinfo:
        create_app(Settings(data_dir=tmp_path))
    assert name in str(excinfo.value)


def test_kvplan_serve_refuses_a_bad_hub_value_at_start(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("KVPLAN_")}
    env.update(KVPLAN_HUB_TIMEOUT_SECONDS="abc", KVPLAN_DATA_DIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "planner", "serve", "--port", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    problem = json.loads(done.stderr.strip().splitlines()[-1])
    assert "KVPLAN_HUB_TIMEOUT_SECONDS" in problem["detail"]
