"""The ``subroute`` command line: one thin argparse module per command group; the work happens in the rooms."""

from subroute.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
