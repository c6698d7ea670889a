"""The users' YAML format <-> the configuration model.

Reading checks the shape only (known keys, value types) and reports every problem with its location; what the
values mean (names, dialects, expressions) is ``subroute.config.validation``'s job. The format::

    apps:
      billing:
        inputs: [orders]                 # topic names, or ^regex
        dialect: bmq                     # or sql92
        format: json                     # or avro, none (default): where body properties are read from
        schema: order.avsc               # avro only: a schemaless writer schema file (relative to this file),
                                         # read here and kept inline; absent: Confluent's wire format
        properties:                      # a type (a header), or {type, path} (a JSON Pointer into the body)
          CustomerId: {type: int, path: /customer/id}
          Price: {path: /price}          # with a schema: the type may be left out, taken from it
          OrderType: string
        filter: ['OrderType == "EXPRESS"']   # OR'ed; omitted = every message
        group_by: CustomerId
        default_group: unknown-customer  # group of messages without CustomerId (default subroute.no-group)
        fairness: round-robin            # or proportional, fast
        spillover: false
        presence: required               # or ignored: route to groups whether their consumers are attached
        partitions: 3                    # default: the largest input's partition count
        expiration: 30s                  # ms, s, m, h, d, or an integer number of milliseconds
        on_expire: dead-letter           # or drop: expired messages are counted and removed (AMPS's default)
        priority: 'Amount / 100'         # integer expression
        default_publish: orders
        max_cancels: 3                   # 0 or absent: no maximum (AMPS), for the consumer client
        max_deliveries: 10
        groups:
          vip:
            subscriptions:
              - {expression: 'CustomerId == 0', priority: 10, max_unconfirmed: 1000}
          audit: {}                      # no subscription: any message, priority 0

Groups take their position in the file as their ``order``.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from subroute.config.avro_schema import WriterSchema, parse_schema_text, schema_property_type
from subroute.config.body_paths import parse_pointer
from subroute.config.codec import ConfigValue, key_of
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.config.validation import ConfigError, app_location, group_location
from subroute.durations import format_duration_ms
from subroute.durations import parse_duration_ms as parse_duration_ms_text

APP_KEYS = (
    "inputs",
    "dialect",
    "format",
    "schema",
    "properties",
    "filter",
    "group_by",
    "default_group",
    "fairness",
    "spillover",
    "presence",
    "partitions",
    "expiration",
    "on_expire",
    "priority",
    "default_publish",
    "max_cancels",
    "max_deliveries",
    "groups",
)
GROUP_KEYS = ("subscriptions", "max_leased_per_member")
SUBSCRIPTION_KEYS = ("expression", "priority", "max_unconfirmed")
PROPERTY_KEYS = ("type", "path")


@dataclass
class ParsedConfig:
    """A desired state, keyed by config key (``app/<app>``, ``group/<app>/<group>``), and the shape errors.

    An app or group with a shape error is left out of ``values``; the rest is kept so that validation can
    still report everything else in the same run.
    """

    values: dict[str, ConfigValue] = field(default_factory=dict)
    errors: list[ConfigError] = field(default_factory=list)


def parse_duration_ms(value: object) -> int:
    """``250ms``, ``30s``, ``5m``, ``1h``, ``2d`` or an integer number of milliseconds."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    parsed = parse_duration_ms_text(value, default_unit=None) if isinstance(value, str) else None
    if parsed is None:
        raise ValueError(f"{str(value)[:40]!r} is not a duration: write e.g. 250ms, 30s, 5m, 1h, 2d")
    return parsed


MAX_ERROR_TEXT = 500  # characters of a YAML error shown: its position and cause, not the document


MAX_YAML_DEPTH = 64  # nested collections; a subscriptions file needs 6 (apps, app, groups, group, list, item)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys instead of silently keeping the last one, aliases, and nesting
    deeper than ``MAX_YAML_DEPTH``.

    An alias (``*name``) repeats a node; nested, a few hundred bytes of aliases expand to gigabytes (and so
    would every error message that shows the value). A subscriptions file has no need for them. PyYAML builds
    nested collections by recursion: 400 bytes of ``[`` raised RecursionError out of ``parse_yaml``.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def fetch_flow_collection_start(self, TokenClass: type[yaml.Token]) -> None:
        # The scanner reads up to 1,024 characters ahead of a `[` or `{` (it may start a key) and goes over
        # every open one at each token: refused only by compose_node, a few hundred levels of `[` took seconds.
        # Open block collections count too, as in compose_node, so both refuse at the same place.
        if self.flow_level + len(self.indents) >= MAX_YAML_DEPTH:
            raise yaml.scanner.ScannerError(
                None, None, f"nested deeper than {MAX_YAML_DEPTH} levels", self.get_mark()
            )
        super().fetch_flow_collection_start(TokenClass)

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None,
                None,
                f"aliases (*{event.anchor}) are not accepted: write the value out",
                event.start_mark,
            )
        nested = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
        if nested and self._depth >= MAX_YAML_DEPTH:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"nested deeper than {MAX_YAML_DEPTH} levels",
                self.peek_event().start_mark,  # type: ignore[no-untyped-call]
            )
        self._depth += nested
        try:
            node: yaml.Node | None = super().compose_node(parent, index)
        finally:
            self._depth -= nested
        return node


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:
            continue  # unhashable keys are reported by the shape checks
        if duplicate:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, source: str = "<yaml>") -> ParsedConfig:
    """YAML text -> desired state with shape errors. A ``schema:`` file is read relative to ``source``'s folder
    (the working directory when ``source`` is not a file, such as ``<stdin>``)."""
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        return ParsedConfig(errors=[ConfigError(source, f"not valid YAML: {str(exc)[:MAX_ERROR_TEXT]}")])
    return parse_document(document, source)


def load_yaml_file(path: str | Path) -> ParsedConfig:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return ParsedConfig(errors=[ConfigError(str(path), f"cannot read the file: {exc}")])
    return parse_yaml(text, str(path))


STDIN = "-"
YAML_SUFFIXES = (".yaml", ".yml")


def yaml_files(directory: Path) -> list[Path]:
    """The YAML files directly in ``directory`` (not below it; hidden files skipped), by name."""
    return sorted(
        p
        for p in directory.iterdir()
        if p.suffix in YAML_SUFFIXES and p.is_file() and not p.name.startswith(".")
    )


def load_yaml_source(source: str, stdin: TextIO | None = None) -> ParsedConfig:
    """What ``-f`` names: a file, ``-`` (standard input), or a directory whose YAML files are one configuration
    together (each names its own apps; an app named in two files is an error, as two definitions would be)."""
    if source == STDIN:
        try:
            return parse_yaml((stdin or sys.stdin).read(), "<stdin>")
        except UnicodeDecodeError as exc:
            return ParsedConfig(errors=[ConfigError("<stdin>", f"cannot read standard input: {exc}")])
    path = Path(source)
    if not path.is_dir():
        return load_yaml_file(path)
    files = yaml_files(path)
    if not files:
        return ParsedConfig(errors=[ConfigError(source, "no .yaml or .yml file in this directory")])
    merged = ParsedConfig()
    owner: dict[str, Path] = {}
    for file in files:
        parsed = load_yaml_file(file)
        merged.errors.extend(parsed.errors)
        for key, value in parsed.values.items():
            if key in owner:
                merged.errors.append(ConfigError(key, f"defined in both {owner[key]} and {file}"))
                continue
            owner[key] = file
            merged.values[key] = value
    return merged


class _Shape:
    """Collects shape errors while walking the document."""

    def __init__(self, base: Path) -> None:
        self.errors: list[ConfigError] = []
        self.base = base  # where a relative ``schema:`` file is

    def fail(self, location: str, message: str) -> None:
        self.errors.append(ConfigError(location, message))

    def mapping(self, location: str, value: object, allowed: tuple[str, ...] | None) -> dict[str, Any] | None:
        """The mapping's text-keyed entries (unknown keys reported and dropped), or None if it is not one."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(location, f"expected a mapping, got {_describe(value)}")
            return None
        known: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                self.fail(location, f"keys must be text, got {_describe(key)} {key!r}")
            elif allowed is not None and key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(allowed)})"
                self.fail(f"{location}.{key}", f"unknown key {key!r}{hint}")
            else:
                known[key] = item
        return known

    def text(self, location: str, value: object) -> str | None:
        if isinstance(value, str):
            return value
        self.fail(location, f"expected text, got {_describe(value)} {value!r} (quote it)")
        return None

    def integer(self, location: str, value: object) -> int | None:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        self.fail(location, f"expected an integer, got {_describe(value)} {value!r}")
        return None

    def boolean(self, location: str, value: object) -> bool | None:
        if isinstance(value, bool):
            return value
        self.fail(location, f"expected true or false, got {_describe(value)} {value!r}")
        return None

    def text_list(self, location: str, value: object, single_ok: bool) -> tuple[str, ...] | None:
        if single_ok and isinstance(value, str):
            return (value,)
        if not isinstance(value, list):
            self.fail(location, f"expected a list of text, got {_describe(value)}")
            return None
        items: list[str] = []
        for index, item in enumerate(value):
            checked = self.text(f"{location}[{index}]", item)
            if checked is not None:
                items.append(checked)
        return tuple(items) if len(items) == len(value) else None


def _describe(value: object) -> str:
    names = {
        dict: "a mapping",
        list: "a list",
        str: "text",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
    }
    return "nothing" if value is None else names.get(type(value), type(value).__name__)


def parse_document(document: object, source: str = "<yaml>") -> ParsedConfig:
    """A loaded YAML document (plain dicts and lists) -> desired state with shape errors."""
    shape = _Shape(Path.cwd() if source.startswith("<") else Path(source).parent)
    result = ParsedConfig(errors=shape.errors)
    if document is None:
        shape.fail(source, "the file is empty: expected a mapping with an 'apps' key")
        return result
    top = shape.mapping(source, document, ("apps",))
    if top is None:
        return result
    if "apps" not in top:
        shape.fail(source, "no 'apps' key: nothing to configure")
        return result
    apps = shape.mapping("apps", top["apps"], None)
    for app_name, body in (apps or {}).items():
        _parse_app(shape, result, app_name, body)
    return result


def _parse_app(shape: _Shape, result: ParsedConfig, name: str, body: object) -> None:
    where = app_location(name)
    before = len(shape.errors)
    spec = shape.mapping(where, body, APP_KEYS)
    if spec is None:
        return
    fields: dict[str, Any] = {"name": name}
    if "inputs" not in spec:
        shape.fail(f"{where}.inputs", "missing: list the input topics (names or ^regex)")
    else:
        fields["inputs"] = shape.text_list(f"{where}.inputs", spec["inputs"], single_ok=True)
    for key in (
        "dialect",
        "fairness",
        "presence",
        "on_expire",
        "group_by",
        "default_group",
        "priority",
        "default_publish",
    ):
        if key in spec:
            fields[key] = shape.text(f"{where}.{key}", spec[key])
    if "filter" in spec:
        fields["filter"] = shape.text_list(f"{where}.filter", spec["filter"], single_ok=True)
    if spec.get("format") is not None:
        fields["format"] = shape.text(f"{where}.format", spec["format"])
    writer: WriterSchema | None = None
    if spec.get("schema") is not None:
        given = shape.text(f"{where}.schema", spec["schema"])
        fields["schema"] = given if given is None else _schema_text(shape, f"{where}.schema", given)
        if fields["schema"] is not None:
            try:
                writer = parse_schema_text(fields["schema"])
            except ValueError as exc:
                shape.fail(f"{where}.schema", str(exc)[:MAX_ERROR_TEXT])
    if "properties" in spec:
        props = shape.mapping(f"{where}.properties", spec["properties"], None)
        if props is not None:
            types, paths = _parse_properties(shape, where, props, writer, "schema" in fields)
            fields["properties"] = types
            if paths:
                fields["paths"] = paths
    if "spillover" in spec:
        fields["spillover"] = shape.boolean(f"{where}.spillover", spec["spillover"])
    for key in ("partitions", "max_cancels", "max_deliveries"):
        if key in spec and spec[key] is not None:
            fields[key] = shape.integer(f"{where}.{key}", spec[key])
    if spec.get("expiration") is not None:
        try:
            fields["expiration_ms"] = parse_duration_ms(spec["expiration"])
        except ValueError as exc:
            shape.fail(f"{where}.expiration", str(exc))
    groups = shape.mapping(f"{where}.groups", spec.get("groups"), None)
    app_ok = len(shape.errors) == before
    if app_ok:
        result.values[key_of(AppConfig(**fields))] = AppConfig(**fields)
    for order, (group_name, group_body) in enumerate((groups or {}).items()):
        group = _parse_group(shape, name, group_name, group_body, order)
        if group is not None and app_ok:
            result.values[key_of(group)] = group


def _schema_text(shape: _Shape, at: str, given: str) -> str | None:
    """An app's Avro schema: inline JSON as given (what ``config get`` writes back), else the text of the file
    it names, relative to the YAML file."""
    if given.lstrip()[:1] in ("{", "[", '"'):
        return given
    path = shape.base / given
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        shape.fail(at, f"cannot read the schema file {str(path)!r}: {exc}")
        return None


def _parse_properties(
    shape: _Shape,
    where: str,
    props: Mapping[str, object],
    writer: WriterSchema | None = None,
    schema_given: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each property's type, and the JSON Pointer of those read from the body (the long form ``{type, path}``;
    ``{type}`` alone is a header). With the app's Avro schema (``writer``), a body property's type may be left
    out: the schema's is taken (validation checks a declared one against it)."""
    types: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for prop, kind in props.items():
        at = f"{where}.properties.{prop}"
        if not isinstance(kind, dict):
            shape.text(at, kind)
            types[prop] = kind
            continue
        long = shape.mapping(at, kind, PROPERTY_KEYS)
        if long is None:
            continue
        if long.get("type") is None and writer is not None and isinstance(long.get("path"), str):
            try:
                types[prop] = schema_property_type(writer, long["path"], parse_pointer(long["path"]), None)
            except ValueError as exc:  # AvroPathError, PointerError
                shape.fail(f"{at}.path", str(exc))
        elif long.get("type") is None and schema_given and isinstance(long.get("path"), str):
            pass  # the app's schema could not be read: that one error says it
        elif long.get("type") is None:
            shape.fail(
                f"{at}.type",
                "missing: give the property's type (int, string, bool, float), or with format avro an app "
                "schema: to take it from",
            )
        else:
            types[prop] = shape.text(f"{at}.type", long["type"])
        if long.get("path") is not None:
            paths[prop] = shape.text(f"{at}.path", long["path"])
    return types, paths


def _parse_group(shape: _Shape, app: str, name: str, body: object, order: int) -> GroupConfig | None:
    where = group_location(app, name)
    before = len(shape.errors)
    spec = shape.mapping(where, body, GROUP_KEYS)
    if spec is None:
        return None
    subscriptions: list[SubscriptionConfig] = []
    raw = spec.get("subscriptions")
    if raw is not None and not isinstance(raw, list):
        shape.fail(f"{where}.subscriptions", f"expected a list of subscriptions, got {_describe(raw)}")
        raw = None
    for index, item in enumerate(raw or []):
        at = f"{where}.subscriptions[{index}]"
        if isinstance(item, str):  # a bare expression: priority 0, unbounded
            subscriptions.append(SubscriptionConfig(item))
            continue
        sub = shape.mapping(at, item, SUBSCRIPTION_KEYS)
        if sub is None:
            continue
        expression = (
            None if sub.get("expression") is None else shape.text(f"{at}.expression", sub["expression"])
        )
        priority = 0 if sub.get("priority") is None else shape.integer(f"{at}.priority", sub["priority"])
        limit = sub.get("max_unconfirmed")
        max_unconfirmed = None if limit is None else shape.integer(f"{at}.max_unconfirmed", limit)
        subscriptions.append(SubscriptionConfig(expression, priority or 0, max_unconfirmed))
    leased = spec.get("max_leased_per_member")
    max_leased = None if leased is None else shape.integer(f"{where}.max_leased_per_member", leased)
    if len(shape.errors) != before:
        return None
    return GroupConfig(
        app=app, name=name, subscriptions=tuple(subscriptions), order=order, max_leased_per_member=max_leased
    )


def to_document(values: Iterable[ConfigValue]) -> dict[str, Any]:
    """The model as plain dicts and lists in the YAML format (for ``config get``); defaults are left out."""
    items = list(values)
    groups: dict[str, list[GroupConfig]] = {}
    for value in items:
        if isinstance(value, GroupConfig):
            groups.setdefault(value.app, []).append(value)
    apps: dict[str, Any] = {}
    for app in sorted((v for v in items if isinstance(v, AppConfig)), key=lambda a: a.name):
        apps[app.name] = _app_document(app, sorted(groups.get(app.name, []), key=lambda g: (g.order, g.name)))
    return {"apps": apps}


def config_to_document(config: Config) -> dict[str, Any]:
    return to_document([*config.apps.values(), *config.groups.values()])


def record_document(value: ConfigValue) -> dict[str, Any]:
    """One config record as the YAML file says it: an app's own fields (its groups are records of their own), or
    a group's."""
    if isinstance(value, GroupConfig):
        return _group_document(value)
    document = _app_document(value, [])
    del document["groups"]
    return document


def _app_document(app: AppConfig, groups: list[GroupConfig]) -> dict[str, Any]:
    default = AppConfig(name=app.name, inputs=())
    doc: dict[str, Any] = {"inputs": list(app.inputs), "dialect": app.dialect}
    if app.format != default.format:
        doc["format"] = app.format
    if app.schema is not None:
        doc["schema"] = app.schema
    if app.properties:
        doc["properties"] = {
            name: {"type": kind, "path": app.paths[name]} if name in app.paths else kind
            for name, kind in app.properties.items()
        }
    if app.filter:
        doc["filter"] = list(app.filter)
    optional: Mapping[str, object] = {
        "group_by": app.group_by,
        "default_group": app.default_group,
        "fairness": app.fairness,
        "spillover": app.spillover,
        "presence": app.presence,
        "partitions": app.partitions,
        "expiration": None if app.expiration_ms is None else format_duration_ms(app.expiration_ms),
        "on_expire": app.on_expire,
        "priority": app.priority,
        "default_publish": app.default_publish,
        "max_cancels": app.max_cancels,
        "max_deliveries": app.max_deliveries,
    }
    for key, value in optional.items():
        if value is not None and value != getattr(default, key, None):
            doc[key] = value
    doc["groups"] = {group.name: _group_document(group) for group in groups}
    return doc


def _group_document(group: GroupConfig) -> dict[str, Any]:
    document: dict[str, Any] = {}
    if group.max_leased_per_member is not None:
        document["max_leased_per_member"] = group.max_leased_per_member
    if not group.subscriptions:
        return document
    subscriptions: list[dict[str, Any]] = []
    for sub in group.subscriptions:
        item: dict[str, Any] = {}
        if sub.expression is not None:
            item["expression"] = sub.expression
        item["priority"] = sub.priority
        if sub.max_unconfirmed is not None:
            item["max_unconfirmed"] = sub.max_unconfirmed
        subscriptions.append(item)
    return {"subscriptions": subscriptions, **document}


def dump_yaml(document: Mapping[str, Any]) -> str:
    return yaml.safe_dump(
        dict(document), sort_keys=False, allow_unicode=True, default_flow_style=False, width=120
    )


def dump_yaml_documents(documents: Sequence[Mapping[str, Any]]) -> str:
    """Several YAML documents in one stream, ``---`` between them (Kubernetes resources)."""
    return yaml.safe_dump_all(
        [dict(d) for d in documents], sort_keys=False, allow_unicode=True, default_flow_style=False, width=120
    )
