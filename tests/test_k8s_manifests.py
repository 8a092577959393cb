"""deploy/k8s manifests: valid Kubernetes objects, and wired to what kvplan really does.

Schema: each document is deserialized into the official `kubernetes` client's model for its
kind (V1Deployment, V1Service, V1Job, ...), walking every key against the model's attribute
map, so an unknown or misspelt field fails here instead of being dropped silently (the client
ignores keys it does not know), and required fields are enforced by the models themselves.

Wiring: probes hit /healthz and /readyz on the named port, the pods run as non-root, secrets
feed the admin token and the PostgreSQL URL, the Service selects the Deployment's pods, every
KVPLAN_* variable is a real setting, and the container and Job arguments parse with the real CLI.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml
from kubernetes import client as k8s

from planner.cli import app as cli_app
from planner.settings import Settings

K8S_DIR = Path(__file__).resolve().parents[1] / "deploy" / "k8s"
MANIFESTS = sorted(p for p in K8S_DIR.glob("*.yaml") if p.name != "kustomization.yaml")
_PRIMITIVES = {"str", "int", "float", "bool", "object", "datetime", "date"}


def _model(api_version: str, kind: str) -> str:
    version = api_version.split("/")[-1]
    return f"{version.capitalize()}{kind}"


def strict(data: Any, type_name: str, path: str = "$") -> None:
    """Every key of `data` is a field of `type_name` (recursively); raise on the first not.

    Type names as the client spells them: `List[X]`, `Dict[str, X]`, `Optional[X]` (and the
    older `list[X]`, `dict(str, X)`)."""
    if type_name in _PRIMITIVES or data is None:
        return
    if m := re.fullmatch(r"Optional\[(.+)\]", type_name):
        strict(data, m.group(1), path)
        return
    if m := re.fullmatch(r"[Ll]ist\[(.+)\]", type_name):
        assert isinstance(data, list), f"{path}: expected a list"
        for i, item in enumerate(data):
            strict(item, m.group(1), f"{path}[{i}]")
        return
    if m := re.fullmatch(r"(?:Dict\[|dict\()[^,]+, (.+)[\])]", type_name):
        assert isinstance(data, dict), f"{path}: expected a map"
        for key, value in data.items():
            strict(value, m.group(1), f"{path}.{key}")
        return
    model = getattr(k8s, type_name)
    assert isinstance(data, dict), f"{path}: expected an object ({type_name})"
    by_json_key = {json_key: attr for attr, json_key in model.attribute_map.items()}
    for key, value in data.items():
        assert key in by_json_key, f"{path}.{key}: not a field of {type_name}"
        strict(value, model.openapi_types[by_json_key[key]], f"{path}.{key}")


def load(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def objects() -> dict[str, Any]:
    """Kind → deserialized model, for every manifest (one object per kind here)."""
    api = k8s.ApiClient()
    found: dict[str, Any] = {}
    for path in MANIFESTS:
        for doc in load(path):
            type_name = _model(doc["apiVersion"], doc["kind"])
            strict(doc, type_name)
            found[doc["kind"]] = api._ApiClient__deserialize(doc, type_name)  # type: ignore[attr-defined]
    return found


@pytest.fixture(scope="module")
def k8s_objects() -> dict[str, Any]:
    return objects()


def test_every_manifest_is_a_valid_object(k8s_objects: dict[str, Any]) -> None:
    assert set(k8s_objects) == {"Deployment", "Service", "Job", "PodDisruptionBudget", "Secret"}
    assert isinstance(k8s_objects["Deployment"], k8s.V1Deployment)
    assert isinstance(k8s_objects["Job"], k8s.V1Job)


def test_strict_walk_catches_a_misspelt_field() -> None:
    doc = load(K8S_DIR / "deployment.yaml")[0]
    doc["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}
    with pytest.raises(AssertionError, match="readinessprobe"):
        strict(doc, "V1Deployment")


def test_required_fields_are_enforced_by_the_models() -> None:
    doc = load(K8S_DIR / "deployment.yaml")[0]
    del doc["spec"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(ValueError, match="name"):
        k8s.ApiClient()._ApiClient__deserialize(doc, "V1Deployment")  # type: ignore[attr-defined]


def test_kustomization_lists_existing_files() -> None:
    kustomization = yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        assert (K8S_DIR / resource).is_file(), resource
    assert "secret.example.yaml" not in kustomization["resources"]


def _container(deployment: k8s.V1Deployment) -> k8s.V1Container:
    (container,) = deployment.spec.template.spec.containers
    return container


def test_deployment_probes_resources_and_security(k8s_objects: dict[str, Any]) -> None:
    deployment: k8s.V1Deployment = k8s_objects["Deployment"]
    container = _container(deployment)
    assert container.readiness_probe.http_get.path == "/readyz"
    assert container.liveness_probe.http_get.path == "/healthz"
    port_names = {p.name for p in container.ports}
    for probe in (container.readiness_probe, container.liveness_probe, container.startup_probe):
        assert probe.http_get.port in port_names
    assert container.resources.requests and container.resources.limits
    assert {"cpu", "memory"} <= set(container.resources.limits)
    pod = deployment.spec.template.spec
    assert pod.security_context.run_as_non_root is True
    assert pod.security_context.run_as_user == 10001  # the Dockerfile's USER
    assert container.security_context.allow_privilege_escalation is False
    assert container.security_context.read_only_root_filesystem is True
    assert container.security_context.capabilities.drop == ["ALL"]
    assert pod.automount_service_account_token is False
    assert deployment.spec.replicas >= 2  # replicas share the PostgreSQL store


def _env(container: k8s.V1Container) -> dict[str, k8s.V1EnvVar]:
    return {e.name: e for e in container.env}


def test_secrets_feed_the_token_and_the_database_url(k8s_objects: dict[str, Any]) -> None:
    secret: k8s.V1Secret = k8s_objects["Secret"]
    env = _env(_container(k8s_objects["Deployment"]))
    for name, key in (
        ("KVPLAN_ADMIN_TOKEN", "admin-token"),
        ("KVPLAN_DATABASE_URL", "database-url"),
    ):
        ref = env[name].value_from.secret_key_ref
        assert (ref.name, ref.key) == (secret.metadata.name, key)
        assert env[name].value is None  # never inline
    assert secret.string_data["database-url"].startswith("postgresql://")


def test_every_kvplan_variable_is_a_real_setting(k8s_objects: dict[str, Any]) -> None:
    from planner.resolve.settings import HubSettings

    fields = {f"KVPLAN_{name.upper()}" for name in Settings.model_fields}
    fields |= {f"KVPLAN_HUB_{name.upper()}" for name in HubSettings.model_fields}
    for kind in ("Deployment", "Job"):
        obj = k8s_objects[kind]
        for container in obj.spec.template.spec.containers:
            for name in _env(container):
                if name.startswith("KVPLAN_"):
                    assert name in fields, f"{kind}: {name} is not a kvplan setting"


def _quantity_bytes(text: str) -> int:
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * factor
    return int(text)


def test_the_hub_cache_is_a_writable_size_limited_volume(k8s_objects: dict[str, Any]) -> None:
    """Issue 23, item 6: with a read-only root and no HOME, the Hub needs its own volume; the
    cache's own cap (KVPLAN_HUB_CACHE_BYTES) sits below the volume's limit."""
    from planner.resolve.settings import HubSettings

    deployment: k8s.V1Deployment = k8s_objects["Deployment"]
    container = _container(deployment)
    env = _env(container)
    home = env["HF_HOME"].value
    mount = next(m for m in container.volume_mounts if m.mount_path == home)
    assert not mount.read_only
    volume = next(v for v in deployment.spec.template.spec.volumes if v.name == mount.name)
    limit = _quantity_bytes(volume.empty_dir.size_limit)
    hub = HubSettings.model_validate(
        {"cache_bytes": int(env["KVPLAN_HUB_CACHE_BYTES"].value), "hf_home": home}
    )
    assert hub.cache_dir.is_relative_to(home)
    assert hub.cache_bytes < limit


def test_service_selects_the_deployment_pods(k8s_objects: dict[str, Any]) -> None:
    service: k8s.V1Service = k8s_objects["Service"]
    deployment: k8s.V1Deployment = k8s_objects["Deployment"]
    labels = deployment.spec.template.metadata.labels
    assert service.spec.selector.items() <= labels.items()
    assert deployment.spec.selector.match_labels.items() <= labels.items()
    (port,) = service.spec.ports
    assert port.target_port in {p.name for p in _container(deployment).ports}
    pdb = k8s_objects["PodDisruptionBudget"]
    assert pdb.spec.selector.match_labels.items() <= labels.items()


def _parses(args: list[str]) -> None:
    """The real CLI accepts these arguments (parsed, not run)."""
    group = typer.main.get_command(cli_app)
    name, *rest = args
    command = group.commands[name]  # type: ignore[attr-defined]
    command.make_context(name, rest)


def test_probe_job_reports_to_the_service_on_a_gpu(k8s_objects: dict[str, Any]) -> None:
    job: k8s.V1Job = k8s_objects["Job"]
    service: k8s.V1Service = k8s_objects["Service"]
    (container,) = job.spec.template.spec.containers
    assert container.command == ["kvplan"]
    args = container.args
    assert args[0] == "probe"
    assert args[args.index("--device") + 1] == "cuda"
    report = args[args.index("--report") + 1]
    assert report == f"http://{service.metadata.name}:{service.spec.ports[0].port}"
    _parses(args)
    assert container.resources.limits["nvidia.com/gpu"] == "1"
    token = _env(container)["KVPLAN_ADMIN_TOKEN"].value_from.secret_key_ref
    assert (token.name, token.key) == (k8s_objects["Secret"].metadata.name, "admin-token")
    assert "--token" not in args  # read from the environment, kept out of the process list
    assert job.spec.template.spec.restart_policy == "Never"
    assert job.spec.active_deadline_seconds and job.spec.backoff_limit is not None
    assert job.spec.template.spec.security_context.run_as_non_root is True


def test_deployment_command_parses(k8s_objects: dict[str, Any]) -> None:
    container = _container(k8s_objects["Deployment"])
    assert container.command == ["kvplan"]
    _parses(container.args)


def test_kustomize_images_name_the_deployment_image(k8s_objects: dict[str, Any]) -> None:
    # issue 25: the manifests carry a logical image name that `images:` points at a registry
    # (README step 0: build, push, `kustomize edit set image`), not a placeholder registry.
    kustomization = yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text())
    images = {entry["name"]: entry for entry in kustomization["images"]}
    image = _container(k8s_objects["Deployment"]).image
    assert image in images and "/" not in image and ":" not in image
    assert images[image]["newName"] and images[image]["newTag"]
    readme = (K8S_DIR.parents[1] / "README.md").read_text()
    assert f'kustomize edit set image "{image}=' in readme


def test_readme_sets_the_probe_jobs_image_while_creating_it() -> None:
    # The Job (generateName, made by `kubectl create`) gets the pushed probe image from the
    # README's sed; applying that sed must change its one image and nothing else.
    readme = (K8S_DIR.parents[1] / "README.md").read_text()
    m = re.search(r'sed "s#(image: [^#]+)#(image: [^#]+)#" deploy/k8s/probe-job\.yaml', readme)
    assert m, "README's probe Job command"
    text = (K8S_DIR / "probe-job.yaml").read_text()
    pushed = m.group(2).replace("$REGISTRY", "reg.example").replace("$TAG", "1.2.3")
    changed = text.replace(m.group(1), pushed)
    assert changed.count(pushed) == 1 and len(changed.splitlines()) == len(text.splitlines())
    (doc,) = [d for d in yaml.safe_load_all(changed) if d]
    (container,) = doc["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "reg.example/kvplan-probe:1.2.3"
