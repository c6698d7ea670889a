"""Validation of configuration model objects: pure, and it reports every error, never only the first.

The CLI runs it before writing anything; the config store runs it on every record it reads, so a record that
slipped past the CLI (written by hand, by an older or newer tool) is refused instead of breaking the plan.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from subroute import expressions, wire
from subroute.config.avro_schema import AvroPathError, WriterSchema, parse_schema_text, schema_property_type
from subroute.config.body_paths import BODY_FORMATS, FORMATS, PointerError, parse_pointer
from subroute.config.limits import Limits, LimitsError, current_limits
from subroute.config.model import (
    DIALECTS,
    FAIRNESS_MODELS,
    ON_EXPIRE_ACTIONS,
    PRESENCE_MODES,
    PROPERTY_TYPES,
    AppConfig,
    GroupConfig,
)
from subroute.expressions import ast as expr_ast
from subroute.topic_patterns import PatternError, compile_pattern, input_matches
from subroute.wire import NAME_PATTERN, RESERVED_GROUP_NAMES

log = logging.getLogger(__name__)

# Properties are referenced by name inside expressions, so they must be identifiers of both dialects.
PROPERTY_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# Kafka's legal topic characters and length.
TOPIC_NAME_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_INT32 = (-(2**31), 2**31 - 1)
_INT64_MAX = 2**63 - 1
# A message-group id becomes the key of every routed record of its group: bounded like a property value would be
# in practice, so a typo cannot make every key of an app kilobytes long.
MAX_GROUP_ID = 249


@dataclass(frozen=True)
class ConfigError:
    """One problem: where it is (``apps.billing.groups.vip.subscriptions[0].expression``) and what it is.

    Expression errors keep the expressions package's rendering: the text with a caret under the fault.
    """

    location: str
    message: str
    # True for a rule newer than some configurations already applied (an undeclared property used as a number):
    # the CLI refuses it, a worker only warns, so that upgrading workers never refuses a version that was in force.
    newer_rule: bool = False

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


def app_location(app: str) -> str:
    return f"apps.{app}"


def group_location(app: str, group: str) -> str:
    return f"apps.{app}.groups.{group}"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_name(errors: list[ConfigError], location: str, what: str, name: object) -> None:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        errors.append(
            ConfigError(location, f"{what} {name!r} is not valid: use 1 to 100 letters, digits, '_' or '-'")
        )


def _check_int(
    errors: list[ConfigError], location: str, value: object, low: int, high: int, what: str = "a number"
) -> None:
    if not _is_int(value):
        errors.append(ConfigError(location, f"expected an integer, got {value!r}"))
    elif not low <= value <= high:  # type: ignore[operator]
        errors.append(ConfigError(location, f"{value} is out of range: {what} from {low} to {high}"))


def _limits(errors: list[ConfigError], limits: Limits | None) -> Limits:
    """The limits to apply: the caller's, else the defaults overridden by ``SUBROUTE_MAX_*``."""
    if limits is not None:
        return limits
    try:
        return current_limits()
    except LimitsError as exc:  # a bad variable must not make every config record invalid
        log.warning("%s; the default limits apply", exc)
        return Limits()


def expression_depth(node: expr_ast.Node) -> int:
    """Levels of the expression's tree (a single property or literal is 1), without recursion."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in expr_ast.children(current))
    return deepest


def _compile(
    errors: list[ConfigError],
    location: str,
    text: object,
    app: AppConfig,
    *,
    integer: bool = False,
    limits: Limits | None = None,
) -> None:
    """Compile and type-check one expression under the app's dialect and declared property types, within the
    configured length and nesting limits (``subroute.config.limits``).

    ``integer``: the expression must yield a number (AMPS's Priority), not a condition.
    """
    if not isinstance(text, str):
        errors.append(ConfigError(location, f"expected an expression (text), got {text!r}"))
        return
    if app.dialect not in DIALECTS:
        return  # reported once at the app; compiling under an unknown dialect would only add noise
    bounds = _limits(errors, limits)
    if len(text) > bounds.max_expression_length:
        errors.append(
            ConfigError(
                location,
                f"expression is {len(text)} characters long; at most {bounds.max_expression_length} are "
                f"allowed (limit {Limits.variable('max_expression_length')})",
            )
        )
        return
    types = {
        name: kind
        for name, kind in app.properties.items()
        if kind in PROPERTY_TYPES and not (kind == "float" and app.dialect != "sql92")
    }
    # Undeclared headers are decoded as strings (routing/properties.py), so the check knows them as strings:
    # an undeclared property used as a number could never match (seed 003's "a BETWEEN 0 AND 3" on a=2).
    declared = tuple(app.properties)
    try:
        if integer:
            _compile_integer(text, app.dialect, types, declared)
        else:
            tree = expressions.compile(text, dialect=app.dialect, types=types, declared=declared).ast
            depth = expression_depth(tree)
            if depth > bounds.max_nesting_depth:
                errors.append(
                    ConfigError(
                        location,
                        f"expression nests {depth} levels deep; at most {bounds.max_nesting_depth} are allowed "
                        f"(limit {Limits.variable('max_nesting_depth')})",
                    )
                )
    except expressions.UndeclaredPropertyError as exc:
        fix = f"declare its type in the app's properties (properties: {{{exc.name}: {exc.wanted}}})"
        errors.append(ConfigError(location, str(exc.with_fix(fix)), newer_rule=True))
    except expressions.ExpressionError as exc:
        errors.append(ConfigError(location, str(exc)))
    except Exception as exc:  # an expression must never take the CLI or the config store down
        errors.append(ConfigError(location, f"could not compile {text!r}: {type(exc).__name__}: {exc}"))


_NOT_A_NUMBER = re.compile(r"cannot compare (an? \w+) with")


def _compile_integer(text: str, dialect: str, types: Mapping[str, str], declared: tuple[str, ...]) -> None:
    """Type-check ``text`` as a number. ``subroute.expressions.compile`` only accepts conditions, so the check compiles
    ``(text) == 0``: it passes exactly when ``text`` is a number (or of a type only known at run time)."""
    equals = "=" if dialect == "sql92" else "=="
    try:
        expressions.compile(f"({text}) {equals} 0", dialect=dialect, types=types, declared=declared)
        return
    except expressions.ExpressionError as exc:
        wrapped = exc
    # Syntax and length faults are reported on the text as written (the wrapper would shift or provoke them).
    try:
        expressions.compile(text, dialect=dialect, types=types)
    except (expressions.ExpressionSyntaxError, expressions.ExpressionLimitError):
        raise
    except expressions.ExpressionError:
        pass  # a type fault: the wrapped error says where
    if isinstance(wrapped, expressions.ExpressionLimitError):
        return  # only the wrapper's 7 extra characters went over the limit
    if 1 <= wrapped.position <= len(text):  # a type fault inside the parentheses: move the caret back
        if isinstance(wrapped, expressions.UndeclaredPropertyError):
            raise expressions.UndeclaredPropertyError(
                wrapped.name, wrapped.wanted, wrapped.need, text, wrapped.position - 1
            ) from None
        raise type(wrapped)(wrapped.message, text, wrapped.position - 1) from None
    found = _NOT_A_NUMBER.search(wrapped.message)
    what = f", not {found.group(1)}" if found else ""
    raise expressions.ExpressionTypeError(f"priority must be an integer expression{what}", text, 0) from None


def validate_app(app: AppConfig, limits: Limits | None = None) -> list[ConfigError]:
    """Every problem of one app record, expressions (filters, priority) included."""
    errors: list[ConfigError] = []
    bounds = _limits(errors, limits)
    where = app_location(app.name)
    _check_name(errors, where, "app name", app.name)
    if app.dialect not in DIALECTS:
        errors.append(
            ConfigError(f"{where}.dialect", f"unknown dialect {app.dialect!r}: use one of {DIALECTS}")
        )
    if app.fairness not in FAIRNESS_MODELS:
        errors.append(
            ConfigError(
                f"{where}.fairness", f"unknown fairness {app.fairness!r}: use one of {FAIRNESS_MODELS}"
            )
        )
    if app.presence not in PRESENCE_MODES:
        errors.append(
            ConfigError(
                f"{where}.presence", f"unknown presence {app.presence!r}: use one of {PRESENCE_MODES}"
            )
        )
    if app.on_expire not in ON_EXPIRE_ACTIONS:
        errors.append(
            ConfigError(
                f"{where}.on_expire",
                f"unknown on_expire {app.on_expire!r}: use one of {ON_EXPIRE_ACTIONS}",
            )
        )
    for prop, kind in app.properties.items():
        at = f"{where}.properties.{prop}"
        if not isinstance(prop, str) or not PROPERTY_NAME_PATTERN.match(prop):
            errors.append(
                ConfigError(
                    at,
                    f"property name {prop!r} is not an identifier (letters, digits, '_'; not first a digit)",
                )
            )
        if kind not in PROPERTY_TYPES:
            errors.append(ConfigError(at, f"unknown type {kind!r}: use one of {PROPERTY_TYPES}"))
        elif kind == "float" and app.dialect in DIALECTS and app.dialect != "sql92":
            errors.append(
                ConfigError(at, "type float needs dialect sql92 (bmq has no floating-point numbers)")
            )
    _check_body(errors, where, app)
    if not app.inputs:
        errors.append(ConfigError(f"{where}.inputs", "no input topics: list topic names or ^regexes"))
    seen: set[str] = set()
    for index, topic in enumerate(app.inputs):
        at = f"{where}.inputs[{index}]"
        if not isinstance(topic, str):
            errors.append(ConfigError(at, f"expected a topic name or ^regex, got {topic!r}"))
            continue
        if topic in seen:
            errors.append(ConfigError(at, f"{topic!r} is listed twice"))
        seen.add(topic)
        if topic.startswith("^"):
            try:
                compile_pattern(topic)
            except PatternError as exc:
                errors.append(ConfigError(at, f"invalid regex (RE2 syntax): {exc}\n  {topic[:200]}\n  ^"))
        elif not TOPIC_NAME_PATTERN.match(topic):
            errors.append(
                ConfigError(
                    at,
                    f"{topic!r} is not a Kafka topic name (letters, digits, '.', '_', '-'); "
                    "start a regex with ^",
                )
            )
    if app.group_by is not None and (
        not isinstance(app.group_by, str) or not PROPERTY_NAME_PATTERN.match(app.group_by)
    ):
        errors.append(ConfigError(f"{where}.group_by", f"{app.group_by!r} is not a property name"))
    if app.default_group is not None:
        at = f"{where}.default_group"
        if app.group_by is None:
            # Qpid's default-message-group belongs to a queue with message grouping; without group_by nothing
            # would use it, and a silently ignored setting hides the missing group_by.
            errors.append(
                ConfigError(at, "only meaningful with group_by: set group_by, or remove default_group")
            )
        if not isinstance(app.default_group, str) or not 1 <= len(app.default_group) <= MAX_GROUP_ID:
            errors.append(ConfigError(at, f"expected a message-group id of 1 to {MAX_GROUP_ID} characters"))
    if len(app.filter) > bounds.max_subscriptions_per_app:
        errors.append(_too_many(f"{where}.filter", len(app.filter), bounds, "per_app", f"app {app.name}"))
    else:
        for index, text in enumerate(app.filter):
            _compile(errors, f"{where}.filter[{index}]", text, app, limits=bounds)
    if app.priority is not None:
        _compile(errors, f"{where}.priority", app.priority, app, integer=True, limits=bounds)
        if app.group_by is not None:
            # A group keeps its order on one topic; priority bands would spread it over ten (seed 002, Qpid:
            # "Message grouping is not supported on LVQ or Priority queues").
            errors.append(
                ConfigError(
                    f"{where}.group_by",
                    "message groups and priority: cannot be combined (a group's messages would be spread over "
                    "the priority-band topics and lose their order); use one or the other",
                )
            )
    if app.partitions is not None:
        if _is_int(app.partitions) and app.partitions > bounds.max_partitions:
            errors.append(
                ConfigError(
                    f"{where}.partitions",
                    f"{app.partitions} partitions; at most {bounds.max_partitions} are allowed "
                    f"(limit {Limits.variable('max_partitions')})",
                )
            )
        else:
            _check_int(errors, f"{where}.partitions", app.partitions, 1, bounds.max_partitions, "partitions")
    if app.expiration_ms is not None:
        _check_int(errors, f"{where}.expiration", app.expiration_ms, 1, _INT64_MAX, "milliseconds")
    # AMPS (seed 001): MaxCancels and MaxDeliveries "Default: no maximum (0)": 0 means no maximum, as absent does.
    for field_name, count in (("max_cancels", app.max_cancels), ("max_deliveries", app.max_deliveries)):
        if count is not None:
            _check_int(errors, f"{where}.{field_name}", count, 0, _INT32[1], f"{field_name} (0: no maximum)")
    if app.default_publish is not None:
        at = f"{where}.default_publish"
        if not isinstance(app.default_publish, str) or not TOPIC_NAME_PATTERN.match(app.default_publish):
            errors.append(ConfigError(at, f"{app.default_publish!r} is not a Kafka topic name"))
        elif not any(isinstance(p, str) and _safe_matches(p, app.default_publish) for p in app.inputs):
            errors.append(
                ConfigError(
                    at,
                    f"{app.default_publish!r} is not one of the app's inputs, so what is published there would "
                    "never reach the app: add it to inputs (or make an input regex match it)",
                )
            )
    if not isinstance(app.spillover, bool):
        errors.append(ConfigError(f"{where}.spillover", f"expected true or false, got {app.spillover!r}"))
    return errors


def _check_body(errors: list[ConfigError], where: str, app: AppConfig) -> None:
    """The body format and each property's ``path`` (routing/body.py reads them)."""
    if app.format not in FORMATS:
        errors.append(ConfigError(f"{where}.format", f"unknown format {app.format!r}: use one of {FORMATS}"))
    writer: WriterSchema | None = None
    if app.schema is not None and app.format != "avro":
        errors.append(ConfigError(f"{where}.schema", "only meaningful with format: avro"))
    elif app.schema is not None:
        try:
            writer = parse_schema_text(app.schema)
        except ValueError as exc:
            errors.append(ConfigError(f"{where}.schema", str(exc)))
    for prop, path in app.paths.items():
        at = f"{where}.properties.{prop}.path"
        if prop not in app.properties:
            errors.append(ConfigError(at, "a path without a type: give the property's type"))
        if app.format not in BODY_FORMATS:
            errors.append(
                ConfigError(at, "a property read from the body needs the app's format: json (or avro)")
            )
        try:
            tokens = parse_pointer(path)
        except PointerError as exc:
            errors.append(ConfigError(at, str(exc)))
            continue
        if writer is not None and prop in app.properties:
            _check_path_in_schema(errors, at, writer, path, tokens, app.properties[prop])
    if app.group_by is not None and app.group_by in app.paths:
        errors.append(
            ConfigError(
                f"{where}.group_by", f"{app.group_by!r} is read from the body; group_by names a header"
            )
        )


def _check_path_in_schema(
    errors: list[ConfigError],
    at: str,
    writer: WriterSchema,
    path: str,
    tokens: tuple[str, ...],
    declared: str,
) -> None:
    """The schema is known: the path must be in it, with a type a property reads, the declared one."""
    try:
        schema_property_type(writer, path, tokens, declared)
    except AvroPathError as exc:
        errors.append(ConfigError(at, str(exc)))


def check_against_writer_schema(app: AppConfig, schema_text: str, source: str) -> list[ConfigError]:
    """``config validate --schema``: an app of Avro in Confluent's wire format (no ``schema:`` of its own)
    checked offline against a writer schema it will read, as an app's own schema is checked at apply."""
    where = app_location(app.name)
    if app.format != "avro" or app.schema is not None:
        return [
            ConfigError(
                where, f"--schema {source}: only for apps with format: avro and no schema: of their own"
            )
        ]
    try:
        writer = parse_schema_text(schema_text)
    except ValueError as exc:
        return [ConfigError(source, str(exc))]
    errors: list[ConfigError] = []
    for prop, path in app.paths.items():
        try:
            tokens = parse_pointer(path)
        except PointerError:
            continue  # reported by validate_state
        if prop in app.properties:
            _check_path_in_schema(
                errors, f"{where}.properties.{prop}.path", writer, path, tokens, app.properties[prop]
            )
    return errors


def check_body_sources(values: Iterable[AppConfig | GroupConfig]) -> list[ConfigError]:
    """A property name has one source across the config: a name read from the body is read from the same path,
    format and type by every app that declares it, and no app declares it as a header (routing decodes each
    name once per record, whichever apps read it)."""
    errors: list[ConfigError] = []
    apps = sorted((v for v in values if isinstance(v, AppConfig)), key=lambda a: a.name)
    first: dict[str, tuple[str, tuple[str, str, str] | None]] = {}
    for app in apps:
        for prop, kind in app.properties.items():
            path = app.paths.get(prop)
            source = (app.format, path, kind) if path is not None else None
            seen = first.setdefault(prop, (app.name, source))
            if seen[1] == source:
                continue
            (other, theirs) = seen
            if source is None or theirs is None:
                body_app = app.name if source is not None else other
                errors.append(
                    ConfigError(
                        f"{app_location(app.name)}.properties.{prop}",
                        f"{prop!r} is a header in one app and a body property in another (app {body_app}): a "
                        "body property and a header may not share a name; rename one",
                    )
                )
            else:
                errors.append(
                    ConfigError(
                        f"{app_location(app.name)}.properties.{prop}",
                        f"{prop!r} is read as {source[2]} from {source[1]} ({source[0]}) here and as {theirs[2]}"
                        f" from {theirs[1]} ({theirs[0]}) in app {other}: a body property is the same in every "
                        "app that declares it; rename one",
                    )
                )
    return errors


def _safe_matches(pattern: str, topic: str) -> bool:
    try:
        return input_matches(pattern, topic)
    except PatternError:
        return False  # the bad regex is reported under inputs


def _too_many(location: str, count: int, limits: Limits, scope: str, owner: str) -> ConfigError:
    limit = limits.max_subscriptions_per_app if scope == "per_app" else limits.max_subscriptions_total
    variable = Limits.variable(f"max_subscriptions_{scope}")
    return ConfigError(
        location, f"{owner} has {count} subscriptions; at most {limit} are allowed (limit {variable})"
    )


def validate_group(
    group: GroupConfig, app: AppConfig | None, limits: Limits | None = None
) -> list[ConfigError]:
    """Every problem of one group record. Without its app only what does not depend on it is checked.

    One group may not hold more subscriptions than an app may (``max_subscriptions_per_app``): the config
    store, which validates record by record, refuses such a record. Counting across records (per app with all
    its groups, and in total) is ``check_limits``'s job."""
    errors: list[ConfigError] = []
    bounds = _limits(errors, limits)
    where = group_location(group.app, group.name)
    if len(group.subscriptions) > bounds.max_subscriptions_per_app:
        errors.append(
            _too_many(
                f"{where}.subscriptions", len(group.subscriptions), bounds, "per_app", f"group {group.name}"
            )
        )
        return errors
    _check_name(errors, where, "group name", group.name)
    if group.name in RESERVED_GROUP_NAMES:
        errors.append(
            ConfigError(
                where,
                f"group name {group.name!r} is reserved (it would collide with the app's {group.name} topic); "
                "choose another",
            )
        )
    _check_int(errors, f"{where}.order", group.order, 0, _INT32[1], "order")
    if group.max_leased_per_member is not None:
        _check_int(
            errors, f"{where}.max_leased_per_member", group.max_leased_per_member, 1, _INT32[1], "messages"
        )
    for index, sub in enumerate(group.subscriptions):
        at = f"{where}.subscriptions[{index}]"
        _check_int(errors, f"{at}.priority", sub.priority, *_INT32, "priority")
        if sub.max_unconfirmed is not None:
            _check_int(errors, f"{at}.max_unconfirmed", sub.max_unconfirmed, 1, _INT64_MAX, "max_unconfirmed")
        if sub.expression is not None and app is not None:
            _compile(errors, f"{at}.expression", sub.expression, app, limits=bounds)
    return errors


def subscription_count(values: Iterable[AppConfig | GroupConfig]) -> dict[str, int]:
    """Expressions per app in the plan: its filter entries and all its groups' subscriptions."""
    counts: dict[str, int] = {}
    for value in values:
        if isinstance(value, AppConfig):
            counts[value.name] = counts.get(value.name, 0) + len(value.filter)
        else:
            counts[value.app] = counts.get(value.app, 0) + len(value.subscriptions)
    return counts


def check_limits(
    values: Iterable[AppConfig | GroupConfig], limits: Limits | None = None
) -> list[ConfigError]:
    """The limits that span records: subscriptions per app (over all its groups) and in total."""
    errors: list[ConfigError] = []
    bounds = _limits(errors, limits)
    counts = subscription_count(values)
    for app, count in sorted(counts.items()):
        if count > bounds.max_subscriptions_per_app:
            errors.append(_too_many(app_location(app), count, bounds, "per_app", f"app {app}"))
    total = sum(counts.values())
    if total > bounds.max_subscriptions_total:
        errors.append(_too_many("apps", total, bounds, "total", "the configuration"))
    return errors


def validate_state(
    values: Iterable[AppConfig | GroupConfig], limits: Limits | None = None, prefix: str | None = None
) -> list[ConfigError]:
    """Validate a whole desired state (apps and their groups), e.g. a parsed YAML file, limits included; with the
    topic ``prefix`` it is deployed under, also what depends on it (``check_topics``)."""
    return StateValidator(limits, prefix).validate(values)


# Kafka's longest topic name.
MAX_TOPIC_LENGTH = 249


def project_topics(values: Iterable[AppConfig | GroupConfig], prefix: str) -> list[str]:
    """Every topic subroute owns in this state: the config topic and each app's group (or band), pending and
    dead-letter topics."""
    items = list(values)
    apps = {v.name: v for v in items if isinstance(v, AppConfig)}
    owned = [wire.config_topic(prefix)]
    for app in apps.values():
        owned += [wire.pending_topic(prefix, app.name), wire.dlq_topic(prefix, app.name)]
    for group in items:
        if isinstance(group, GroupConfig) and group.app in apps:
            if apps[group.app].priority is None:
                owned.append(wire.group_topic(prefix, group.app, group.name))
            else:
                owned += wire.band_topics(prefix, group.app, group.name)
    return owned


def _shapes(prefix: str) -> list[str]:
    """One topic of each shape subroute creates, for apps and groups not configured yet: a pattern that matches
    one of them would read them as soon as they exist."""
    app, group = "any-app", "any-group"
    return [
        wire.group_topic(prefix, app, group),
        wire.band_topic(prefix, app, group, wire.HIGHEST_BAND),
        wire.pending_topic(prefix, app),
        wire.dlq_topic(prefix, app),
    ]


def check_topics(values: Iterable[AppConfig | GroupConfig], prefix: str) -> list[ConfigError]:
    """What the topic ``prefix`` decides: no app's input may select subroute's own topics (it would copy other
    apps' data, or loop on its own), and every topic name subroute derives stays within Kafka's length."""
    items = list(values)
    owned = project_topics(items, prefix)
    # The settle topic exists once an operator settles by filter (``queue ack``), whatever the config holds.
    candidates = [*owned, wire.settle_topic(prefix), *_shapes(prefix)]
    errors: list[ConfigError] = []
    for app in items:
        if not isinstance(app, AppConfig):
            continue
        for index, topic in enumerate(app.inputs):
            if not isinstance(topic, str):
                continue
            hit = next(
                (t for t in candidates if topic == t or (topic.startswith("^") and _safe_matches(topic, t))),
                None,
            )
            if hit is not None:
                errors.append(
                    ConfigError(
                        f"{app_location(app.name)}.inputs[{index}]",
                        f"selects subroute's own topic {hit!r}: an input may not be the config topic or any app's "
                        f"group, pending or dead-letter topic (topic prefix {prefix!r})\n  {topic[:200]}\n  ^",
                    )
                )
    too_long: dict[str, ConfigError] = {}  # one error per app or group: its longest topic
    for topic in sorted((t for t in owned if len(t) > MAX_TOPIC_LENGTH), key=len, reverse=True):
        error = _too_long(topic, prefix, items)
        too_long.setdefault(error.location, error)
    return errors + list(too_long.values())


def _too_long(topic: str, prefix: str, items: list[AppConfig | GroupConfig]) -> ConfigError:
    # Point at the longest name part: the group's when the topic has one, else the app's.
    for value in items:
        if isinstance(value, GroupConfig) and topic.startswith(
            wire.group_topic(prefix, value.app, value.name)
        ):
            where, name = group_location(value.app, value.name), value.name
            break
    else:
        app = topic[len(prefix) + 1 :].split(".")[0]
        where, name = app_location(app), app
    start = topic.index(name, len(prefix) + 1)
    return ConfigError(
        where,
        f"topic {topic[:60]}... would be {len(topic)} characters; Kafka allows {MAX_TOPIC_LENGTH}: shorten the "
        f"name (or the topic prefix)\n  {topic}\n  {' ' * start}{'^' * len(name)}",
    )


class StateValidator:
    """``validate_state`` for a reader that validates one state after another (the config store at every
    version): a record that is the same object as at the last call, checked against the same app, is not
    compiled again."""

    def __init__(
        self, limits: Limits | None = None, prefix: str | None = None, *, newer_rules: bool = True
    ) -> None:
        self._limits = limits
        self._prefix = prefix
        self._newer_rules = (
            newer_rules  # False (what readers of the config topic use): see ``ConfigError.newer_rule``
        )
        self.newer_rule_errors: list[ConfigError] = []  # with newer_rules=False: what the last call left out
        # id(record) -> (record, its app or None, errors); the record is kept so that its id is not reused
        self._checked: dict[int, tuple[AppConfig | GroupConfig, AppConfig | None, list[ConfigError]]] = {}

    def validate(self, values: Iterable[AppConfig | GroupConfig]) -> list[ConfigError]:
        items = list(values)
        errors: list[ConfigError] = []
        bounds = _limits(errors, self._limits)
        apps: Mapping[str, AppConfig] = {v.name: v for v in items if isinstance(v, AppConfig)}
        checked: dict[int, tuple[AppConfig | GroupConfig, AppConfig | None, list[ConfigError]]] = {}
        for value in items:
            app = value if isinstance(value, AppConfig) else apps.get(value.app)
            previous = self._checked.get(id(value))
            if previous is not None and previous[0] is value and previous[1] is app:
                found = previous[2]
            elif isinstance(value, AppConfig):
                found = validate_app(value, bounds)
            else:
                found = [] if app is not None else [_unknown_app(value)]
                found += validate_group(value, app, bounds)
            checked[id(value)] = (value, app, found)
            errors.extend(found)
        self._checked = checked
        errors.extend(check_limits(items, bounds))
        errors.extend(check_body_sources(items))
        if self._prefix is not None:
            errors.extend(check_topics(items, self._prefix))
        if not self._newer_rules:
            self.newer_rule_errors = [e for e in errors if e.newer_rule]
            return [e for e in errors if not e.newer_rule]
        return errors


def _unknown_app(group: GroupConfig) -> ConfigError:
    return ConfigError(group_location(group.app, group.name), f"group of an unknown app {group.app!r}")
