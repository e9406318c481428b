"""The `mtvm` command line. Each subcommand lives in its own module of this
package exposing `add_parser(subparsers)`, which sets `func(args)` on its parser."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from ..errors import MtvmError

# Subcommand modules, in the order `mtvm --help` lists them.
COMMANDS = ["compile", "analyze", "project", "run", "validate", "tune", "boards", "targets", "ops"]

VERBOSE_HELP = "show tracebacks and debug logs (anywhere on the command line)"


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    p = argparse.ArgumentParser(prog="mtvm", description="Ahead-of-time deployment of ONNX "
                                "models to microcontrollers.")
    p.add_argument("--verbose", "-v", action="store_true", help=VERBOSE_HELP)
    p.add_argument("--version", action="version", version=f"mtvm {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"{__name__}.{name}_cmd")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{name}_cmd":
                continue   # that subcommand is not built yet
            raise
        mod.add_parser(sub)
    _verbose_everywhere(p)
    return p


def _verbose_everywhere(parser) -> None:
    """`--verbose` after the subcommand too (`mtvm compile m.onnx -v`): every
    subparser accepts it; SUPPRESS keeps a subparser from resetting the value
    given before the subcommand."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for sp in set(action.choices.values()):
            flags = [f for f in ("--verbose", "-v") if f not in sp._option_string_actions]
            if "--verbose" in flags:
                sp.add_argument(*flags, dest="verbose", action="store_true",
                                default=argparse.SUPPRESS, help=VERBOSE_HELP)
            _verbose_everywhere(sp)


def one_line(text: str) -> str:
    """An error message as one line of printable text: names from a model may hold
    newlines or control characters, which are shown as escapes instead."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _stdout_closed() -> bool:
    """True when the reader of stdout has gone (`mtvm ops | head -1`), as opposed
    to a broken pipe to a device process."""
    import select
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poll.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _quiet_stdout() -> None:
    # Python flushes stdout at exit; with the reader gone that flush would print
    # "Exception ignored ... BrokenPipeError", so stdout goes to /dev/null.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


class _Interrupts:
    """Whether a Ctrl-C came during this command. Python raises KeyboardInterrupt at it,
    but C code that catches the failure of an import can turn it into another error:
    numpy's, interrupted while its extension imports datetime, raises ImportError
    ("PyCapsule_Import could not import module datetime"), which printed a traceback."""
    seen = False

    @classmethod
    def handler(cls, signum, frame):
        cls.seen = True
        raise KeyboardInterrupt


def _watch_interrupts():
    """Installs _Interrupts.handler where Python's default one is in place (the main
    thread); returns the handler to restore, or None."""
    import signal
    import threading
    _Interrupts.seen = False
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None
    signal.signal(signal.SIGINT, _Interrupts.handler)
    return signal.default_int_handler


def main(argv=None) -> int:
    import signal
    # --verbose before the parser has read it too (a failure while building it)
    verbose = any(a in ("--verbose", "-v") for a in (sys.argv[1:] if argv is None else argv))
    args = None
    restore = _watch_interrupts()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        verbose = args.verbose
        import logging
        logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                            format="%(message)s")
        return args.func(args) or 0
    except MtvmError as e:
        if verbose:
            raise
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("mtvm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if verbose or not _stdout_closed():
            raise
        _quiet_stdout()
        return 141          # as if killed by SIGPIPE, like other commands in a pipeline
    except Exception as e:
        if verbose:
            raise
        if _Interrupts.seen:
            print("mtvm: interrupted", file=sys.stderr)   # (an error the interrupt became)
            return 130
        # a fault of mtvm's own (what it knows of bad input is an MtvmError): one line
        # still, and the traceback where its report needs it
        command = "mtvm" + (f" {args.command}" if getattr(args, "command", None) else "")
        print(f"error: {command} failed unexpectedly ({type(e).__name__}: "
              f"{one_line(str(e))[:300]}); this is a bug in mtvm: run the command again "
              "with --verbose for the traceback and report it", file=sys.stderr)
        return 2
    finally:
        if restore is not None:
            signal.signal(signal.SIGINT, restore)


if __name__ == "__main__":
    sys.exit(main())
