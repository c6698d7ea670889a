"""``subroute expr``: check and evaluate one expression from the command line."""

from __future__ import annotations

import argparse
import json
import sys

from subroute import expressions
from subroute.ops.settings import SettingsError, parse_key_values
from subroute.routing.properties import PropertyDecodeError, PropertyValue, decode_value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    expr = subparsers.add_parser("expr", help="check or evaluate a subscription expression")
    commands = expr.add_subparsers(dest="expr_command", required=True, metavar="EXPR_COMMAND")

    check = commands.add_parser(
        "check", help="compile an expression; exit 2 with the fault marked if it is bad"
    )
    _add_expression_arguments(check)
    check.set_defaults(func=_check)

    evaluate = commands.add_parser(
        "eval", help="evaluate an expression on properties; prints the outcome as JSON"
    )
    _add_expression_arguments(evaluate)
    evaluate.add_argument(
        "--prop",
        action="append",
        metavar="NAME=VALUE",
        help="a property as header text, decoded by its --type",
    )
    evaluate.set_defaults(func=_eval)


def _add_expression_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("expression")
    parser.add_argument("--dialect", choices=("bmq", "sql92"), default="bmq")
    parser.add_argument("--type", action="append", metavar="NAME=TYPE", help="declare a property type")


def _compile(args: argparse.Namespace) -> tuple[expressions.Expression, dict[str, str]] | None:
    types = parse_key_values(args.type, "--type")
    try:
        # eval decodes an undeclared --prop as text, as the router decodes an undeclared header: check knows it so.
        compiled = expressions.compile(
            args.expression, dialect=args.dialect, types=types or None, declared=types
        )
        return compiled, types
    except expressions.UndeclaredPropertyError as exc:
        print(exc.with_fix(f"declare its type with --type {exc.name}={exc.wanted}"), file=sys.stderr)
        return None
    except expressions.ExpressionError as exc:
        print(exc, file=sys.stderr)
        return None
    except ValueError as exc:  # a bad --type name
        raise SettingsError(str(exc)) from None


def _check(args: argparse.Namespace) -> int:
    compiled = _compile(args)
    if compiled is None:
        return 2
    expression, _ = compiled
    print(f"ok ({expression.dialect}): properties {sorted(expression.properties)}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    compiled = _compile(args)
    if compiled is None:
        return 2
    expression, types = compiled
    props: dict[str, PropertyValue] = {}
    for name, text in parse_key_values(args.prop, "--prop").items():
        try:
            props[name] = decode_value(text.encode(), types.get(name, "string"))
        except PropertyDecodeError as exc:
            raise SettingsError(f"--prop {name}: {exc}") from None
    outcome = expression.evaluate(props)
    print(json.dumps({"value": outcome.value, "error": outcome.error}))
    return 0
