"""``deploy/``: the Kubernetes manifests and the HAProxy example are product, so they are checked.

Every Kubernetes document validates against the schemas of Kubernetes 1.37 that
``kubernetes-validate`` ships (offline, strict: a misspelt key is an error, which a test below
shows the check catches). Then the parts must agree with each other and with mcpfleet: the
ConfigMap's team file loads with the real loader given the Secret's variables, the grace period
outlasts preStop plus ``drain_timeout``, the probes ask ``/healthz`` and ``/readyz`` on the port
served, with more time than a readiness check takes, and every selector finds the pods. The
HAProxy example balances round-robin, without stickiness, in rotation on ``/readyz``; it is
checked with ``haproxy -c`` where HAProxy is installed (``make test`` installs it), and that one
check is skipped otherwise.
"""

from __future__ import annotations

import copy
import datetime
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes_validate.utils import ValidationError, validate

from mcpfleet.team.health import CHECK_TIMEOUT_S, HEALTH_PATH, READY_PATH
from mcpfleet.team.loading import load_team_file

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
HAPROXY_CONFIG = DEPLOY / "haproxy" / "haproxy.cfg"
KUBERNETES_VERSION = "1.37.0"
KUSTOMIZATION = "kustomization.yaml"
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")


def manifest_files() -> list[Path]:
    return sorted(path for path in KUBERNETES.glob("*.yaml") if path.name != KUSTOMIZATION)


def documents() -> list[dict[str, Any]]:
    return [
        document
        for path in manifest_files()
        for document in yaml.safe_load_all(path.read_text())
        if document is not None
    ]


def the(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [doc for doc in documents() if doc["kind"] == kind and name in (None, doc["metadata"]["name"])]
    assert len(found) == 1, f"one {kind} {name or ''} in deploy/kubernetes, not {len(found)}"
    return found[0]


def gateway_container() -> dict[str, Any]:
    containers = the("Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


@pytest.mark.parametrize("document", documents(), ids=lambda doc: f"{doc['kind']}/{doc['metadata']['name']}")
def test_every_manifest_is_valid_against_the_kubernetes_schemas(document: dict[str, Any]) -> None:
    validate(document, KUBERNETES_VERSION, strict=True)


def test_the_schema_check_catches_a_misspelt_key() -> None:
    broken = copy.deepcopy(the("Deployment"))
    container = broken["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(ValidationError, match="readinesProbe"):
        validate(broken, KUBERNETES_VERSION, strict=True)


def test_every_kind_the_contract_names_is_there_and_kustomize_applies_them_all() -> None:
    kinds = {doc["kind"] for doc in documents()}
    assert {
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "ConfigMap",
        "Secret",
    } <= kinds
    kustomization = yaml.safe_load((KUBERNETES / KUSTOMIZATION).read_text())
    assert sorted(kustomization["resources"]) == [path.name for path in manifest_files()]


def test_the_configmaps_team_file_loads_with_the_secrets_variables(tmp_path: Path) -> None:
    team_yaml = the("ConfigMap", "mcpfleet-team")["data"]["team.yaml"]
    secret = the("Secret", "mcpfleet-team")["stringData"]
    assert set(_VARIABLE.findall(team_yaml)) <= set(secret), "a ${VAR} of team.yaml the Secret lacks"
    assert "MCPFLEET_TEAM_KEY" in secret
    path = tmp_path / "team.yaml"
    path.write_text(team_yaml)
    team = load_team_file(path, secret)
    assert team.state.postgres is not None and team.state.redis is not None  # replicas share both
    assert team.identity.api_keys == tmp_path / "api-keys.json"  # the key Secret, mounted beside it

    container = gateway_container()
    assert {"secretRef": {"name": "mcpfleet-team"}} in container["envFrom"]
    team_argument = Path(container["args"][container["args"].index("--team") + 1])
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    assert str(team_argument.parent) == mounts["team"]
    volumes = the("Deployment")["spec"]["template"]["spec"]["volumes"]
    sources = next(volume for volume in volumes if volume["name"] == "team")["projected"]["sources"]
    projected = {item["path"] for source in sources for item in next(iter(source.values()))["items"]}
    assert projected == {team_argument.name, "api-keys.json"}


def test_the_grace_period_outlasts_the_prestop_pause_and_the_drain(tmp_path: Path) -> None:
    pod = the("Deployment")["spec"]["template"]["spec"]
    path = tmp_path / "team.yaml"
    path.write_text(the("ConfigMap", "mcpfleet-team")["data"]["team.yaml"])
    drain_timeout = load_team_file(path, the("Secret", "mcpfleet-team")["stringData"]).drain_timeout_s
    pause = gateway_container()["lifecycle"]["preStop"]["sleep"]["seconds"]
    closing = 10  # the backends' shutdown deadline and the HTTP server's grace, with room
    assert pod["terminationGracePeriodSeconds"] >= pause + drain_timeout + closing


def test_the_probes_ask_the_health_routes_on_the_served_port() -> None:
    container = gateway_container()
    port = next(p for p in container["ports"] if p["name"] == "http")["containerPort"]
    assert container["args"][container["args"].index("--http") + 1].endswith(f":{port}")
    for probe, path in (
        ("startupProbe", HEALTH_PATH),
        ("livenessProbe", HEALTH_PATH),
        ("readinessProbe", READY_PATH),
    ):
        assert container[probe]["httpGet"] == {"path": path, "port": "http"}
        assert container[probe]["timeoutSeconds"] > CHECK_TIMEOUT_S


def test_every_selector_finds_the_gateways_pods() -> None:
    deployment = the("Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert the("Service")["spec"]["selector"].items() <= labels.items()
    assert the("Service")["spec"]["sessionAffinity"] == "None"
    assert the("PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    target = the("HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert the("HorizontalPodAutoscaler")["spec"]["minReplicas"] >= 2  # a drain always has a peer
    assert "cpu" in gateway_container()["resources"]["requests"]  # what the autoscaler divides by


def test_the_haproxy_example_balances_without_stickiness_on_readyz() -> None:
    text = HAPROXY_CONFIG.read_text()
    lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    assert "balance roundrobin" in lines
    assert f"http-check send meth GET uri {READY_PATH}" in lines
    assert "retry-on conn-failure 503" in lines
    assert not [line for line in lines if line.startswith(("cookie", "stick", "hash-type", "balance source"))]
    servers = [line for line in lines if line.startswith("server ")]
    assert len(servers) >= 2


NO_HAPROXY = "haproxy is not installed (make test installs it): its own check of the file is skipped"


@pytest.mark.skipif(shutil.which("haproxy") is None, reason=NO_HAPROXY)
def test_haproxy_accepts_the_example(tmp_path: Path) -> None:
    pem = tmp_path / "mcp.pem"
    pem.write_bytes(_self_signed_pem("mcp.example.com"))
    checked = subprocess.run(
        ["haproxy", "-c", "-f", str(HAPROXY_CONFIG)],
        env={"MCPFLEET_TLS_PEM": str(pem), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _self_signed_pem(host: str) -> bytes:
    """A certificate and its key in one PEM, as HAProxy's ``crt`` takes them."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return certificate.public_bytes(serialization.Encoding.PEM) + key_pem
