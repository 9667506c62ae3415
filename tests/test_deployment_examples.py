"""The deployment examples (docs/deployment.md) cannot rot: the compose file and the Kubernetes
manifest parse, have the shape the guide describes (PostgreSQL, two service replicas and a proxy;
a Deployment of 2 with its database URLs and webhook secret from a Secret), and every `CPCI_*`
name in them, or in the guide, is a real setting of the service."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from cpci.server.core.config import Settings

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "examples" / "deploy"
GUIDE = ROOT / "docs" / "deployment.md"
SETTINGS = {f"CPCI_{name.upper()}" for name in Settings.model_fields}
SECRET_SETTINGS = {"CPCI_DATABASE_URL", "CPCI_DATABASE_READ_URL", "CPCI_GITHUB_WEBHOOK_SECRET"}


def _names(text: str) -> set[str]:
    return set(re.findall(r"\bCPCI_[A-Z0-9_]+\b", text))


def test_every_cpci_name_in_the_examples_and_the_guide_is_a_setting() -> None:
    files = [*DEPLOY.iterdir(), GUIDE]
    named = {path.name: _names(path.read_text()) for path in files}
    assert named["compose.yaml"], "the compose file sets no CPCI_* setting"
    assert named["kubernetes.yaml"], "the manifest sets no CPCI_* setting"
    unknown = {name: sorted(n - SETTINGS) for name, n in named.items() if n - SETTINGS}
    assert unknown == {}, "not settings of cpci.server.core.config.Settings"


def test_the_compose_file_runs_postgres_two_replicas_and_a_proxy() -> None:
    compose: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    replicas = [s for s in services.values() if s.get("image") == "cpci-service"]
    assert len(replicas) == 2
    assert services["postgres"]["image"].startswith("postgres:")
    for replica in replicas:
        env = replica["environment"]
        assert env["CPCI_DATABASE_URL"].startswith("postgresql://")
        assert env["CPCI_DATABASE_READ_URL"].startswith("postgresql://cpci_reader:")
        assert replica["depends_on"]["postgres"]["condition"] == "service_healthy"
    proxy = " ".join(services["proxy"]["command"])
    assert all(f"--to http://{name}:8000" in proxy for name in services if name.startswith("cpci"))
    mounted = [v.split(":")[0] for v in services["postgres"]["volumes"] if v.startswith("./")]
    assert all((DEPLOY / path).is_file() for path in mounted)


def test_the_kubernetes_manifest_runs_two_replicas_with_settings_from_a_secret() -> None:
    documents = list(yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()))
    kinds = {doc["kind"]: doc for doc in documents}
    assert set(kinds) == {"Deployment", "Service"}
    deployment = kinds["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    from_secret = {e["name"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})}
    assert from_secret >= SECRET_SETTINGS
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert kinds["Service"]["spec"]["selector"] == labels
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"


def test_the_readme_links_the_guide_and_the_guide_its_examples() -> None:
    assert "docs/deployment.md" in (ROOT / "README.md").read_text()
    guide = GUIDE.read_text()
    for path in ("compose.yaml", "kubernetes.yaml", "postgres-init.sh"):
        assert f"examples/deploy/{path}" in guide
