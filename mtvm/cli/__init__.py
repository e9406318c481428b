"""The `mtvm` command line. Each subcommand lives in its own module of this
package exposing `add_parser(subparsers)`, which sets `func(args)` on its parser."""
from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import MtvmError

# Subcommand modules, in the order `mtvm --help` lists them.
COMMANDS = ["compile", "analyze", "project", "run", "boards"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mtvm", description="Ahead-of-time deployment of ONNX "
                                "models to microcontrollers.")
    p.add_argument("--verbose", "-v", action="store_true", help="show tracebacks and debug logs")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"{__name__}.{name}_cmd")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{name}_cmd":
                continue   # that subcommand is not built yet
            raise
        mod.add_parser(sub)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    import logging
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(message)s")
    try:
        return args.func(args) or 0
    except MtvmError as e:
        if args.verbose:
            raise
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
