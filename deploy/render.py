"""Render deploy/k8s kustomizations without the kustomize binary: the subset of kustomize that subroute uses.

    python deploy/render.py deploy/k8s/overlays/example > rendered.yaml

``kubectl kustomize DIR`` (or ``kustomize build DIR``) is the reference and gives the same resources where it
is installed (tests/deploy compares the two when kubectl is on PATH). This renderer exists so that the tests
can render and validate every manifest on machines without those binaries.

Supported (anything else in a kustomization is an error, never silently ignored):

* ``resources`` (files with one or more documents, and directories holding a kustomization), ``components``;
* ``namespace`` (with RoleBinding subjects that name a ServiceAccount of the build, as kustomize does);
* ``labels`` with ``includeTemplates`` (``includeSelectors: true`` and ``commonLabels`` are refused);
* ``commonAnnotations``;
* ``images`` (``newName``, ``newTag``, ``digest``), on pod templates and on ``configurations`` image paths;
* ``configMapGenerator`` (``literals``, ``files``, ``envs``; ``behavior`` create/merge/replace;
  ``options.disableNameSuffixHash``) and ``generatorOptions.disableNameSuffixHash``, with kustomize's
  content-hash name suffix and the references to the renamed ConfigMaps updated (pod templates and
  ``configurations`` nameReference paths);
* ``patches`` (``path`` or inline ``patch``; strategic merge or JSON 6902; ``target`` by group, version, kind,
  name, namespace, labelSelector; ``$patch: delete``);
* ``configurations`` (``images`` and ConfigMap ``nameReference`` field specs).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SUPPORTED_KEYS = frozenset(
    {
        "apiVersion",
        "kind",
        "metadata",
        "resources",
        "components",
        "namespace",
        "labels",
        "commonAnnotations",
        "images",
        "configMapGenerator",
        "generatorOptions",
        "patches",
        "configurations",
    }
)

# Kinds kustomize's namespace transformer leaves alone.
CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "PersistentVolume",
        "StorageClass",
        "PriorityClass",
        "APIService",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "IngressClass",
        "RuntimeClass",
        "CSIDriver",
        "VolumeAttachment",
    }
)

# Where a kind keeps its pod spec.
POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
# `labels: includeTemplates: true` adds the labels here too (kustomize's templateLabels field specs).
TEMPLATE_LABEL_PATHS = {
    "Deployment": ["spec/template/metadata/labels"],
    "ReplicaSet": ["spec/template/metadata/labels"],
    "StatefulSet": ["spec/template/metadata/labels"],
    "DaemonSet": ["spec/template/metadata/labels"],
    "Job": ["spec/template/metadata/labels"],
    "ReplicationController": ["spec/template/metadata/labels"],
    "CronJob": ["spec/jobTemplate/metadata/labels", "spec/jobTemplate/spec/template/metadata/labels"],
}
# ConfigMap references inside a pod spec.
POD_CONFIGMAP_REFS = (
    "volumes/configMap/name",
    "volumes/projected/sources/configMap/name",
    "containers/env/valueFrom/configMapKeyRef/name",
    "containers/envFrom/configMapRef/name",
    "initContainers/env/valueFrom/configMapKeyRef/name",
    "initContainers/envFrom/configMapRef/name",
)

# Strategic merge: list fields of core kinds and the key their items merge on (absent: the list is replaced).
CORE_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "ports": "containerPort",  # container ports; Service ports are handled below
}
# For kinds without a schema kustomize (kyaml) merges a list of maps on the first key all items have.
ASSOCIATIVE_KEYS = ("mountPath", "devicePath", "ip", "type", "topologyKey", "name", "containerPort")
CORE_GROUPS = frozenset(
    {"", "apps", "batch", "policy", "autoscaling", "networking.k8s.io", "rbac.authorization.k8s.io"}
)

LEGACY_ORDER = (
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "CustomResourceDefinition",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
)
LEGACY_LAST = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


class RenderError(ValueError):
    """The kustomization uses something this renderer does not do, or is wrong."""


@dataclass
class Resource:
    obj: dict[str, Any]
    hashed: bool = False  # a generated ConfigMap whose name gets kustomize's content-hash suffix
    original_name: str | None = None

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def name(self) -> str:
        return str(self.obj.get("metadata", {}).get("name", ""))

    @property
    def group_version(self) -> tuple[str, str]:
        api_version = str(self.obj.get("apiVersion", ""))
        group, _, version = api_version.rpartition("/")
        return group, version


@dataclass
class Config:
    """Field specs from ``configurations`` files, merged over every level of the build."""

    image_paths: list[tuple[str, str]] = field(default_factory=list)  # (kind, path)
    configmap_refs: list[tuple[str, str]] = field(default_factory=list)  # (kind, path)


# --- entry points ---------------------------------------------------------------------------------------------


def build(directory: str | Path) -> list[dict[str, Any]]:
    """The resources ``kustomize build DIRECTORY`` would print, in kustomize's legacy order."""
    config = Config()
    resources = _run(Path(directory), config, [], expect_component=False)
    _add_hash_suffixes(resources, config)
    return [r.obj for r in sorted(resources, key=_order_key)]


def dump(resources: Iterable[dict[str, Any]]) -> str:
    return "---\n".join(yaml.safe_dump(r, sort_keys=True, default_flow_style=False) for r in resources)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python deploy/render.py KUSTOMIZATION_DIR", file=sys.stderr)
        return 2
    try:
        sys.stdout.write(dump(build(args[0])))
    except RenderError as exc:
        print(f"render.py: {exc}", file=sys.stderr)
        return 1
    return 0


# --- one kustomization (or component) ---------------------------------------------------------------------------


def _load_kustomization(directory: Path) -> dict[str, Any]:
    for name in KUSTOMIZATION_FILES:
        path = directory / name
        if path.is_file():
            document = yaml.safe_load(path.read_text()) or {}
            if not isinstance(document, dict):
                raise RenderError(f"{path}: not a mapping")
            unknown = set(document) - SUPPORTED_KEYS
            if unknown:
                raise RenderError(f"{path}: unsupported kustomization fields {sorted(unknown)}")
            return document
    raise RenderError(f"{directory}: no kustomization file")


def _run(
    directory: Path, config: Config, accumulated: list[Resource], expect_component: bool
) -> list[Resource]:
    kust = _load_kustomization(directory)
    is_component = kust.get("kind") == "Component"
    if is_component != expect_component:
        raise RenderError(
            f"{directory}: kind {kust.get('kind')!r} used as a {'component' if expect_component else 'resource'}"
        )
    for entry in kust.get("configurations", []) or []:
        _load_configuration(directory / entry, config)
    resources = list(accumulated)
    for entry in kust.get("resources", []) or []:
        path = directory / entry
        if path.is_dir():
            resources.extend(_run(path, config, [], expect_component=False))
        elif path.is_file():
            resources.extend(Resource(doc) for doc in _documents(path))
        else:
            raise RenderError(
                f"{directory}: resource {entry!r} not found (remote resources are not supported)"
            )
    for entry in kust.get("components", []) or []:
        resources = _run(directory / entry, config, resources, expect_component=True)
    resources = _generate_configmaps(directory, kust, resources)
    _check_unique(resources, directory)
    # Transformers, in kustomize's built-in order.
    resources = _apply_patches(directory, kust.get("patches", []) or [], resources)
    if kust.get("namespace"):
        _set_namespace(resources, str(kust["namespace"]))
    for entry in kust.get("labels", []) or []:
        _add_labels(resources, entry)
    if kust.get("commonAnnotations"):
        for resource in resources:
            meta = resource.obj.setdefault("metadata", {})
            meta.setdefault("annotations", {}).update(
                {k: str(v) for k, v in kust["commonAnnotations"].items()}
            )
    for entry in kust.get("images", []) or []:
        _set_images(resources, entry, config)
    return resources


def _documents(path: Path) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    for doc in docs:
        if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
            raise RenderError(f"{path}: every document needs apiVersion and kind")
        if doc["kind"].endswith("List") and "items" in doc:
            raise RenderError(f"{path}: List documents are not supported")
    return docs


def _load_configuration(path: Path, config: Config) -> None:
    document = yaml.safe_load(path.read_text()) or {}
    unknown = set(document) - {"images", "nameReference"}
    if unknown:
        raise RenderError(f"{path}: unsupported configuration fields {sorted(unknown)}")
    for spec in document.get("images", []) or []:
        config.image_paths.append((spec["kind"], spec["path"]))
    for ref in document.get("nameReference", []) or []:
        if ref.get("kind") != "ConfigMap":
            raise RenderError(f"{path}: nameReference is supported for ConfigMap only")
        for spec in ref.get("fieldSpecs", []) or []:
            config.configmap_refs.append((spec["kind"], spec["path"]))


def _check_unique(resources: list[Resource], directory: Path) -> None:
    seen: set[tuple[str, str, str, str]] = set()
    for r in resources:
        key = (r.group_version[0], r.kind, str(r.obj.get("metadata", {}).get("namespace", "")), r.name)
        if key in seen:
            raise RenderError(f"{directory}: {r.kind}/{r.name} is defined twice")
        seen.add(key)


# --- generators ------------------------------------------------------------------------------------------------


def _generate_configmaps(directory: Path, kust: dict[str, Any], resources: list[Resource]) -> list[Resource]:
    options = kust.get("generatorOptions", {}) or {}
    if set(options) - {"disableNameSuffixHash"}:
        raise RenderError(f"{directory}: generatorOptions supports disableNameSuffixHash only")
    for gen in kust.get("configMapGenerator", []) or []:
        unknown = set(gen) - {"name", "behavior", "literals", "files", "envs", "options"}
        if unknown:
            raise RenderError(f"{directory}: configMapGenerator fields {sorted(unknown)} not supported")
        gen_options = gen.get("options", {}) or {}
        if set(gen_options) - {"disableNameSuffixHash"}:
            raise RenderError(f"{directory}: configMapGenerator options support disableNameSuffixHash only")
        data = _generator_data(directory, gen)
        name = gen["name"]
        behavior = gen.get("behavior", "create")
        existing = [r for r in resources if r.kind == "ConfigMap" and (r.original_name or r.name) == name]
        if behavior == "create":
            if existing:
                raise RenderError(f"{directory}: ConfigMap {name} exists; use behavior merge or replace")
            hashed = not (gen_options.get("disableNameSuffixHash") or options.get("disableNameSuffixHash"))
            obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
            resources.append(Resource(obj, hashed=hashed, original_name=name))
        elif behavior in ("merge", "replace"):
            if len(existing) != 1:
                raise RenderError(f"{directory}: behavior {behavior} needs exactly one ConfigMap {name}")
            target = existing[0].obj
            if behavior == "merge":
                target.setdefault("data", {}).update(data)
            else:
                target["data"] = data
        else:
            raise RenderError(f"{directory}: unknown generator behavior {behavior!r}")
    return resources


def _generator_data(directory: Path, gen: dict[str, Any]) -> dict[str, str]:
    data: dict[str, str] = {}
    for env_file in gen.get("envs", []) or []:
        for line in (directory / env_file).read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                key, sep, value = line.partition("=")
                if not sep:
                    raise RenderError(f"{env_file}: {line!r} is not KEY=VALUE")
                data[key] = value
    for literal in gen.get("literals", []) or []:
        key, sep, value = str(literal).partition("=")
        if not sep:
            raise RenderError(f"literal {literal!r} is not KEY=VALUE")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        data[key] = value
    for entry in gen.get("files", []) or []:
        key, sep, rel = str(entry).partition("=")
        if not sep:
            key, rel = Path(entry).name, entry
        path = (directory / rel).resolve()
        if directory.resolve() not in path.parents:
            raise RenderError(f"{entry}: files outside the kustomization directory are not allowed")
        data[key] = path.read_text()
    return data


def _hash_suffix(data: dict[str, str]) -> str:
    # kustomize's hasher: JSON of {data, kind, name} with the name looked up as the single key "metadata/name",
    # which never exists, so it is always ""; Go's json escapes <, > and &; sha256; first 10 hex digits with
    # 0 1 3 a e swapped for g h k m t (no vowels, no confusable digits).
    encoded = json.dumps(
        {"data": data, "kind": "ConfigMap", "name": ""},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    encoded = encoded.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    encoded = encoded.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    digest = hashlib.sha256(encoded.encode()).hexdigest()[:10]
    return digest.translate(str.maketrans("013ae", "ghkmt"))


def _add_hash_suffixes(resources: list[Resource], config: Config) -> None:
    renamed: dict[str, str] = {}
    for r in resources:
        if r.hashed:
            data = {k: str(v) for k, v in (r.obj.get("data") or {}).items()}
            new_name = f"{r.name}-{_hash_suffix(data)}"
            renamed[r.original_name or r.name] = new_name
            r.obj["metadata"]["name"] = new_name
    if not renamed:
        return
    for r in resources:
        paths: list[str] = []
        pod_path = POD_SPEC_PATHS.get(r.kind)
        if pod_path:
            paths.extend("/".join((*pod_path, ref)) for ref in POD_CONFIGMAP_REFS)
        paths.extend(path for kind, path in config.configmap_refs if kind == r.kind)
        for path in paths:
            _update_strings(r.obj, path.split("/"), lambda name: renamed.get(name, name))


# --- transformers ----------------------------------------------------------------------------------------------


def _update_strings(node: Any, parts: list[str], update: Any) -> None:
    """Apply ``update`` to the string at PATH, walking through every item of the lists on the way."""
    if isinstance(node, list):
        for item in node:
            _update_strings(item, parts, update)
        return
    if not isinstance(node, dict) or not parts:
        return
    head = parts[0].removesuffix("[]")
    if head not in node:
        return
    if len(parts) == 1:
        if isinstance(node[head], str):
            node[head] = update(node[head])
        return
    _update_strings(node[head], parts[1:], update)


def _set_path(node: dict[str, Any], parts: list[str], values: dict[str, str]) -> None:
    for part in parts:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise RenderError(f"{'/'.join(parts)} is not a mapping")
    node.update(values)


def _set_namespace(resources: list[Resource], namespace: str) -> None:
    service_accounts = {r.name for r in resources if r.kind == "ServiceAccount"}
    for r in resources:
        if r.kind in CLUSTER_SCOPED:
            continue
        r.obj.setdefault("metadata", {})["namespace"] = namespace
    for r in resources:
        if r.kind in ("RoleBinding", "ClusterRoleBinding"):
            for subject in r.obj.get("subjects", []) or []:
                if subject.get("kind") == "ServiceAccount" and subject.get("name") in service_accounts:
                    subject["namespace"] = namespace


def _add_labels(resources: list[Resource], entry: dict[str, Any]) -> None:
    unknown = set(entry) - {"pairs", "includeSelectors", "includeTemplates"}
    if unknown:
        raise RenderError(f"labels: fields {sorted(unknown)} not supported")
    if entry.get("includeSelectors"):
        raise RenderError("labels: includeSelectors: true is not supported (write selectors explicitly)")
    pairs = {str(k): str(v) for k, v in (entry.get("pairs") or {}).items()}
    for r in resources:
        _set_path(r.obj, ["metadata", "labels"], pairs)
        if entry.get("includeTemplates"):
            for path in TEMPLATE_LABEL_PATHS.get(r.kind, []):
                _set_path(r.obj, path.split("/"), pairs)


_IMAGE = re.compile(r"^(?P<name>[^@]+?)(?::(?P<tag>[^:/@]+))?(?:@(?P<digest>.+))?$")


def _set_images(resources: list[Resource], entry: dict[str, Any], config: Config) -> None:
    unknown = set(entry) - {"name", "newName", "newTag", "digest"}
    if unknown:
        raise RenderError(f"images: fields {sorted(unknown)} not supported")

    def update(image: str) -> str:
        match = _IMAGE.match(image)
        if not match or match["name"] != entry["name"]:
            return image
        name = entry.get("newName", match["name"])
        if entry.get("digest"):
            return f"{name}@{entry['digest']}"
        tag = entry.get("newTag", match["tag"])
        if "newTag" not in entry and match["digest"]:
            return f"{name}@{match['digest']}"
        return f"{name}:{tag}" if tag else name

    for r in resources:
        paths: list[str] = []
        pod_path = POD_SPEC_PATHS.get(r.kind)
        if pod_path:
            paths.extend("/".join((*pod_path, c, "image")) for c in ("containers", "initContainers"))
        paths.extend(path for kind, path in config.image_paths if kind == r.kind)
        for path in paths:
            _update_strings(r.obj, path.split("/"), update)


# --- patches ---------------------------------------------------------------------------------------------------


def _apply_patches(
    directory: Path, entries: list[dict[str, Any]], resources: list[Resource]
) -> list[Resource]:
    for entry in entries:
        unknown = set(entry) - {"path", "patch", "target"}
        if unknown:
            raise RenderError(f"{directory}: patch fields {sorted(unknown)} not supported")
        text = (directory / entry["path"]).read_text() if "path" in entry else entry.get("patch", "")
        document = yaml.safe_load(text)
        target = entry.get("target")
        if isinstance(document, list):
            if not target:
                raise RenderError(f"{directory}: a JSON 6902 patch needs a target")
            matched = [r for r in resources if _matches(r, target)]
            if not matched:
                raise RenderError(f"{directory}: patch target {target} matches nothing")
            for r in matched:
                r.obj = _json6902(r.obj, document)
        elif isinstance(document, dict):
            if target:
                matched = [r for r in resources if _matches(r, target)]
            else:
                group = Resource(document).group_version[0]
                matched = [
                    r
                    for r in resources
                    if r.kind == document.get("kind")
                    and r.name == document.get("metadata", {}).get("name")
                    and r.group_version[0] == group
                ]
            if not matched:
                raise RenderError(f"{directory}: patch {entry.get('path', '(inline)')} matches nothing")
            for r in matched:
                if document.get("$patch") == "delete":
                    resources = [x for x in resources if x is not r]
                    continue
                core = r.group_version[0] in CORE_GROUPS
                body = {k: v for k, v in document.items() if k not in ("apiVersion", "kind", "$patch")}
                if "metadata" in body:
                    body["metadata"] = {k: v for k, v in body["metadata"].items() if k != "name"}
                r.obj = _strategic_merge(r.obj, body, core, parent_key="", kind=r.kind)
        else:
            raise RenderError(f"{directory}: patch {entry.get('path', '(inline)')} is empty")
    return resources


def _matches(r: Resource, target: dict[str, Any]) -> bool:
    unknown = set(target) - {"group", "version", "kind", "name", "namespace", "labelSelector"}
    if unknown:
        raise RenderError(f"patch target fields {sorted(unknown)} not supported")
    group, version = r.group_version
    actual = {
        "group": group,
        "version": version,
        "kind": r.kind,
        "name": r.name,
        "namespace": str(r.obj.get("metadata", {}).get("namespace", "")),
    }
    for key, value in actual.items():
        if key in target and not re.fullmatch(str(target[key]), value):
            return False
    if "labelSelector" in target:
        labels = r.obj.get("metadata", {}).get("labels", {}) or {}
        for term in str(target["labelSelector"]).split(","):
            key, sep, value = term.strip().partition("=")
            if not sep:
                raise RenderError(f"labelSelector {target['labelSelector']!r}: only key=value terms")
            if labels.get(key.strip()) != value.strip():
                return False
    return True


def _merge_key(key: str, base: list[Any], patch: list[Any], core: bool, kind: str) -> str | None:
    items = [x for x in (*base, *patch) if isinstance(x, dict)]
    if len(items) != len(base) + len(patch) or not items:
        return None
    if core:
        if key == "ports" and kind == "Service":
            return "port"
        return CORE_MERGE_KEYS.get(key)
    for candidate in ASSOCIATIVE_KEYS:
        if all(candidate in x for x in items):
            return candidate
    return None


def _strategic_merge(base: Any, patch: Any, core: bool, parent_key: str, kind: str) -> Any:
    if not isinstance(patch, dict) or not isinstance(base, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(base)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _strategic_merge(result[key], value, core, key, kind)
        elif isinstance(value, list) and isinstance(result.get(key), list):
            merge_key = _merge_key(key, result[key], value, core, kind)
            if merge_key is None:
                result[key] = copy.deepcopy(value)
            else:
                result[key] = _merge_list(result[key], value, merge_key, core, key, kind)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_list(
    base: list[Any], patch: list[Any], merge_key: str, core: bool, key: str, kind: str
) -> list[Any]:
    merged = [copy.deepcopy(x) for x in base]
    touched: list[dict[str, Any]] = []
    for item in patch:
        position = next((i for i, x in enumerate(merged) if x.get(merge_key) == item.get(merge_key)), None)
        if item.get("$patch") == "delete":
            if position is not None:
                del merged[position]
            continue
        if position is None:
            new = {k: copy.deepcopy(v) for k, v in item.items() if v is not None}
            merged.append(new)
        else:
            new = _strategic_merge(merged[position], item, core, key, kind)
            merged[position] = new
        touched.append(new)
    if core:
        # Kubernetes' strategic merge puts the patch's items first (in patch order), then the others.
        merged = touched + [x for x in merged if not any(x is t for t in touched)]
    return merged


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise RenderError(f"JSON pointer {path!r} must start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _json6902(obj: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    doc = copy.deepcopy(obj)
    for op in operations:
        kind = op.get("op")
        parts = _pointer(op["path"])
        if kind in ("move", "copy"):
            value = _resolve(doc, _pointer(op["from"]))
            if kind == "move":
                _remove(doc, _pointer(op["from"]))
            _add(doc, parts, copy.deepcopy(value))
        elif kind == "add":
            _add(doc, parts, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            _resolve(doc, parts)  # must exist
            _remove(doc, parts)
            _add(doc, parts, copy.deepcopy(op["value"]))
        elif kind == "test":
            if _resolve(doc, parts) != op["value"]:
                raise RenderError(f"JSON patch test failed at {op['path']}")
        else:
            raise RenderError(f"JSON patch op {kind!r} unknown")
    return doc


def _resolve(doc: Any, parts: list[str]) -> Any:
    node = doc
    for part in parts:
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError) as exc:
            raise RenderError(f"JSON pointer /{'/'.join(parts)}: {part!r} not found") from exc
    return node


def _add(doc: Any, parts: list[str], value: Any) -> None:
    if not parts:
        raise RenderError("JSON patch cannot replace the whole document")
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            parent.insert(int(last), value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise RenderError(f"JSON pointer /{'/'.join(parts)}: parent is not a container")


def _remove(doc: Any, parts: list[str]) -> None:
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    try:
        if isinstance(parent, list):
            del parent[int(last)]
        else:
            del parent[last]
    except (KeyError, IndexError, ValueError) as exc:
        raise RenderError(f"JSON pointer /{'/'.join(parts)} not found") from exc


def _order_key(r: Resource) -> tuple[int, str, str, str, str, str]:
    # kustomize's legacy order: known kinds first and last, the rest between, then by group_version_kind
    # (no group sorts as "~G"), namespace and name.
    if r.kind in LEGACY_ORDER:
        rank = LEGACY_ORDER.index(r.kind)
    elif r.kind in LEGACY_LAST:
        rank = len(LEGACY_ORDER) + 1 + LEGACY_LAST.index(r.kind)
    else:
        rank = len(LEGACY_ORDER)
    group, version = r.group_version
    namespace = str(r.obj.get("metadata", {}).get("namespace", ""))
    return rank, group or "~G", version or "~V", r.kind, namespace, r.name


if __name__ == "__main__":
    raise SystemExit(main())
