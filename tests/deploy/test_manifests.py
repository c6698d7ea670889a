"""Every rendered manifest is valid offline: core kinds against the Kubernetes JSON schemas (kubernetes-validate,
strict: unknown fields are errors), CRD kinds by the fields their operators require, checked here by hand. Then
what the deployment promises: probes, resources, hardening, secrets by reference, names that match the code."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from subroute import wire
from subroute.ops.settings import ENV_BOOTSTRAP, ENV_PREFIX, kafka_config_from_env

from .conftest import DEPLOYABLE, K8S, ROOT, TARGETS, find, one

KUBERNETES_VERSION = "1.30"  # the oldest Kubernetes the manifests target
CORE_GROUPS = {"", "apps", "batch", "policy", "autoscaling", "networking.k8s.io", "rbac.authorization.k8s.io"}
# Not in the base, only referenced: documented in the base kustomization and in deploy/README.md.
EXTERNAL_SECRETS = {"subroute-kafka-credentials", "subroute-kafka-ca"}
EXTERNAL_CONFIGMAPS_OF_BASE = {"subroute-subscriptions"}
STRIMZI_SECRETS = {"subroute", "my-cluster-cluster-ca-cert"}
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
REQUIRED_ALERTS = {
    "SubrouteInputLagHigh",
    "SubroutePendingGrowing",
    "SubrouteDeadLettering",
    "SubrouteConfigRefused",
    "SubrouteWorkerNotReady",
    "SubrouteGroupOverCapacity",
    "SubrouteConfigVersionSkew",
}
KNOWN_LIBRDKAFKA = {
    "security.protocol",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "client.id",
}


def _group(obj: dict[str, Any]) -> str:
    return obj["apiVersion"].rpartition("/")[0]


# --- schema and structure -------------------------------------------------------------------------------------


def _check_service_monitor(obj: dict[str, Any], resources: list[dict[str, Any]]) -> None:
    spec = obj["spec"]
    labels = spec["selector"]["matchLabels"]
    services = [s for s in find(resources, "Service") if labels.items() <= s["metadata"]["labels"].items()]
    assert services, "ServiceMonitor selects no Service"
    ports = {p["name"] for s in services for p in s["spec"]["ports"]}
    assert spec["endpoints"], "ServiceMonitor without endpoints"
    for endpoint in spec["endpoints"]:
        assert endpoint["port"] in ports
        assert endpoint.get("path", "/metrics") == "/metrics"
        assert DURATION.match(endpoint["interval"]) and DURATION.match(endpoint["scrapeTimeout"])


def _check_prometheus_rule(obj: dict[str, Any], resources: list[dict[str, Any]]) -> None:
    groups = obj["spec"]["groups"]
    assert groups
    for group in groups:
        assert group["name"] and group["rules"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "record", "expr", "for", "labels", "annotations"}, rule
            assert ("alert" in rule) != ("record" in rule)
            assert isinstance(rule["expr"], str) and rule["expr"].strip()
            if "for" in rule:
                assert DURATION.match(rule["for"]), rule["for"]
            if "alert" in rule:
                assert rule["labels"]["severity"] in {"warning", "critical"}
                assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def _check_scaled_object(obj: dict[str, Any], resources: list[dict[str, Any]]) -> None:
    spec = obj["spec"]
    target = spec["scaleTargetRef"]
    assert target.get("kind", "Deployment") == "Deployment"
    one(resources, "Deployment", target["name"])
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
    assert spec["triggers"]
    for trigger in spec["triggers"]:
        assert trigger["type"] == "kafka"
        meta = trigger["metadata"]
        assert all(isinstance(v, str) for v in meta.values()), "KEDA trigger metadata values are strings"
        assert {"bootstrapServers", "consumerGroup", "lagThreshold"} <= set(meta)
        assert int(meta["lagThreshold"]) > 0
        # parked pending records (uncommitted on purpose) must not scale the workers up
        assert meta.get("excludePersistentLag") == "true"
        assert meta["sasl"] in {"plaintext", "scram_sha256", "scram_sha512", "oauthbearer", "gssapi", "none"}
        assert meta["tls"] in {"enable", "disable"}
        one(resources, "TriggerAuthentication", trigger["authenticationRef"]["name"])


def _check_trigger_authentication(obj: dict[str, Any], resources: list[dict[str, Any]]) -> None:
    spec = obj["spec"]
    params = {ref["parameter"] for ref in spec.get("secretTargetRef", [])}
    params |= {ref["parameter"] for ref in spec.get("env", [])}
    assert {"username", "password"} <= params
    for ref in spec.get("secretTargetRef", []):
        assert set(ref) == {"parameter", "name", "key"}
    for ref in spec.get("env", []):
        assert set(ref) <= {"parameter", "name", "containerName"}


def _check_spark_application(obj: dict[str, Any], resources: list[dict[str, Any]]) -> None:
    spec = obj["spec"]
    assert spec["type"] == "Python" and spec["mode"] == "cluster"
    assert spec["mainApplicationFile"] == "local:///app/spark/job.py"
    assert spec["sparkVersion"] and spec["image"] and spec["imagePullPolicy"]
    assert spec["restartPolicy"]["type"] in {"Never", "OnFailure", "Always"}
    volumes = {v["name"] for v in spec.get("volumes", [])}
    for role in ("driver", "executor"):
        pod = spec[role]
        assert pod["cores"] >= 1 and re.match(r"^[0-9]+[kmg]$", pod["memory"])
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["allowPrivilegeEscalation"] is False
        for mount in pod.get("volumeMounts", []):
            assert mount["name"] in volumes
    one(resources, "ServiceAccount", spec["driver"]["serviceAccount"])
    assert spec["executor"]["instances"] >= 1


def _check_kafka_user(obj: dict[str, Any], resources: list[dict[str, Any]]) -> None:
    assert obj["metadata"]["labels"]["strimzi.io/cluster"]
    spec = obj["spec"]
    assert spec["authentication"]["type"] in {"scram-sha-512", "tls", "tls-external"}
    assert spec["authorization"]["type"] == "simple"
    for acl in spec["authorization"]["acls"]:
        assert acl["resource"]["type"] in {"topic", "group", "cluster", "transactionalId"}
        assert acl["resource"].get("patternType", "literal") in {"literal", "prefix"}
        assert acl["operations"]


CRD_CHECKS = {
    ("monitoring.coreos.com", "ServiceMonitor"): _check_service_monitor,
    ("monitoring.coreos.com", "PrometheusRule"): _check_prometheus_rule,
    ("keda.sh", "ScaledObject"): _check_scaled_object,
    ("keda.sh", "TriggerAuthentication"): _check_trigger_authentication,
    ("sparkoperator.k8s.io", "SparkApplication"): _check_spark_application,
    ("kafka.strimzi.io", "KafkaUser"): _check_kafka_user,
}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_resource_is_validated(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for obj in rendered[target]:
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", obj["metadata"]["name"]), obj["metadata"][
            "name"
        ]
        group = _group(obj)
        if group in CORE_GROUPS:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        else:
            check = CRD_CHECKS.get((group, obj["kind"]))
            assert check is not None, f"no structural check for {obj['apiVersion']} {obj['kind']}"
            assert set(obj) <= {"apiVersion", "kind", "metadata", "spec"}, obj["kind"]
            check(obj, rendered[target])


def test_schema_validation_catches_mistakes(rendered: dict[str, list[dict[str, Any]]]) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    deployment = yaml.safe_load(yaml.safe_dump(one(rendered["base"], "Deployment")))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["pth"] = "/readyz"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


# --- what the deployment promises -------------------------------------------------------------------------------


def _pod_specs(resources: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    pods = []
    for obj in resources:
        if obj["kind"] in ("Deployment", "Job"):
            pods.append((obj["kind"], obj["spec"]["template"]["spec"]))
    return pods


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_worker_deployment(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    deployment = one(rendered[target], "Deployment", "subroute-worker")
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][0] == "worker"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    metrics_port = int(container["args"][container["args"].index("--metrics-port") + 1])
    assert ports == {"metrics": metrics_port}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0].endswith("sleep")
    # Grace: the preStop sleep, then a batch (well under 10 s), the commit and leaving the group.
    assert pod["terminationGracePeriodSeconds"] >= int(pre_stop[1]) + 10 + 10
    service = one(rendered[target], "Service", "subroute-worker")
    assert service["spec"]["ports"][0]["port"] == metrics_port
    pdb = one(rendered[target], "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_pods_are_hardened(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    pods = _pod_specs(rendered[target])
    assert {kind for kind, _ in pods} == {"Deployment", "Job"}
    for kind, pod in pods:
        assert pod["automountServiceAccountToken"] is False, kind
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        volumes = {v["name"]: v for v in pod["volumes"]}
        for container in pod["containers"]:
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["runAsNonRoot"] is True and sc["runAsUser"] >= 10000
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert sc["seccompProfile"]["type"] == "RuntimeDefault"
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            assert "emptyDir" in volumes[mounts["/tmp"]], "writable /tmp is an emptyDir"
            for key in ("requests", "limits"):
                assert set(container["resources"][key]) == {"cpu", "memory"}, (kind, key)
            image = container["image"]
            assert re.search(r":[\w][\w.-]*$", image) and not image.endswith(":latest"), image
            assert container["imagePullPolicy"] in {"Always", "IfNotPresent"}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_secrets_are_referenced_never_inlined(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    resources = rendered[target]
    assert not find(resources, "Secret"), "no Secret is shipped: they are referenced"
    expected_secrets = EXTERNAL_SECRETS if target == "base" else STRIMZI_SECRETS
    for _, pod in _pod_specs(resources):
        container = pod["containers"][0]
        env = {e["name"]: e for e in container["env"]}
        password = env["SUBROUTE_KAFKA_SASL_PASSWORD"]
        assert "value" not in password
        assert password["valueFrom"]["secretKeyRef"]["name"] in expected_secrets
        if target == "base":
            assert env["SUBROUTE_KAFKA_SASL_USERNAME"]["valueFrom"]["secretKeyRef"]["key"] == "username"
        secret_volumes = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
        assert secret_volumes <= expected_secrets
    configmaps = {c["metadata"]["name"] for c in find(resources, "ConfigMap")}
    external = EXTERNAL_CONFIGMAPS_OF_BASE if target == "base" else set()
    for _, pod in _pod_specs(resources):
        referenced = {e["configMapRef"]["name"] for c in pod["containers"] for e in c.get("envFrom", [])}
        referenced |= {v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
        assert referenced <= configmaps | external, referenced - configmaps


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_settings_are_subroute_variables(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    (settings,) = [
        c
        for c in find(rendered[target], "ConfigMap")
        if c["metadata"]["name"].startswith("subroute-settings")
    ]
    data = settings["data"]
    assert all(key.startswith("SUBROUTE_") for key in data)
    assert {ENV_BOOTSTRAP, ENV_PREFIX} <= set(data)
    deployment = one(rendered[target], "Deployment")
    env_names = set(data) | {
        e["name"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    kafka = kafka_config_from_env(dict.fromkeys(env_names, "x"))
    assert set(kafka) <= KNOWN_LIBRDKAFKA, set(kafka) - KNOWN_LIBRDKAFKA
    assert {
        "security.protocol",
        "sasl.mechanism",
        "sasl.username",
        "sasl.password",
        "ssl.ca.location",
    } <= set(kafka)
    # The CA file the settings name is where the CA secret is mounted.
    mounts = {m["mountPath"] for m in deployment["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert data["SUBROUTE_KAFKA_SSL_CA_LOCATION"].rpartition("/")[0] in mounts


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_autoscaling_follows_the_workers_consumer_group(
    rendered: dict[str, list[dict[str, Any]]], target: str
) -> None:
    resources = rendered[target]
    (settings,) = [
        c for c in find(resources, "ConfigMap") if c["metadata"]["name"].startswith("subroute-settings")
    ]
    if target == "example-hpa":
        assert not find(resources, "ScaledObject") and not find(resources, "TriggerAuthentication")
        hpa = one(resources, "HorizontalPodAutoscaler")
        assert hpa["spec"]["scaleTargetRef"]["name"] == "subroute-worker"
        assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "subroute_input_lag_messages"
        return
    assert not find(resources, "HorizontalPodAutoscaler")
    (trigger,) = one(resources, "ScaledObject")["spec"]["triggers"]
    assert trigger["metadata"]["consumerGroup"] == wire.worker_group_id(settings["data"][ENV_PREFIX])
    assert trigger["metadata"]["bootstrapServers"] == settings["data"][ENV_BOOTSTRAP]


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_config_apply_job(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    job = one(rendered[target], "Job", "subroute-config-apply")
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][:3] == ["config", "apply", "-f"]
    path = container["args"][3]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volume = next(v for v in pod["volumes"] if v["name"] == mounts[path.rpartition("/")[0]])
    assert volume["configMap"]["name"].startswith("subroute-subscriptions")
    assert pod["restartPolicy"] in {"Never", "OnFailure"}
    if target != "base":
        (configmap,) = [
            c
            for c in find(rendered[target], "ConfigMap")
            if c["metadata"]["name"] == volume["configMap"]["name"]
        ]
        assert path.rpartition("/")[2] in configmap["data"]
        # a schema file the subscriptions name is mounted beside them (`schema:` is read relative to the file)
        subscriptions = yaml.safe_load(configmap["data"][path.rpartition("/")[2]])
        for app in subscriptions["apps"].values():
            if "schema" in app:
                assert app["schema"] in configmap["data"], app["schema"]


def test_example_subscriptions_are_the_projects_example() -> None:
    overlay = yaml.safe_load((K8S / "overlays" / "example" / "subscriptions.yaml").read_text())
    assert overlay == yaml.safe_load((ROOT / "examples" / "subscriptions.yaml").read_text())
    config_yaml = pytest.importorskip("subroute.config.yaml")
    overlay_file = K8S / "overlays" / "example" / "subscriptions.yaml"
    # read as the config Job reads it: order.avsc (the same ConfigMap) beside it
    parsed = config_yaml.parse_yaml(overlay_file.read_text(), str(overlay_file))
    assert parsed.errors == []
    assert {key.partition("/")[0] for key in parsed.values} == {"app", "group"}


@pytest.mark.parametrize("target", DEPLOYABLE)
def test_alerts_cover_the_issue(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    rule = one(rendered[target], "PrometheusRule")
    alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert alerts >= REQUIRED_ALERTS
    monitors = find(rendered[target], "ServiceMonitor")
    assert monitors and all(m["metadata"]["labels"]["release"] for m in [*monitors, rule])


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_no_worker_alert_fires_when_no_worker_reports_at_all(
    rendered: dict[str, list[dict[str, Any]]], target: str
) -> None:
    # `max(subroute_ready) == 0` has no series to compare once every worker is gone: it needs `absent`.
    rule = one(rendered[target], "PrometheusRule")
    [expr] = [
        r["expr"]
        for g in rule["spec"]["groups"]
        for r in g["rules"]
        if r.get("alert") == "SubrouteNoWorkerReady"
    ]
    assert "absent(subroute_ready)" in expr.replace(" ", "")
