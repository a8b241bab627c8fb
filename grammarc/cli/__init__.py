"""Command line (click). `main` is the `grammarc` group; each module of this package adds its
commands to it.

Exit codes: 0 success, 1 bad input or failed check (a one-line `error: ...` on stderr, no
traceback), 2 usage.
"""

from __future__ import annotations

import signal
import sys
import threading

import click

from .._version import __version__
from ..errors import GrammarcError

EXIT_CODES_HELP = "Exit codes: 0 success, 1 bad input or failed check, 2 usage error."


# signals that end the process; they unwind like Ctrl-C (SIGINT), so cleanups run and a
# half-written artifact's temporary file goes (SIGHUP: the terminal closed)
_ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                        if hasattr(signal, name))


class _ErrorsAsExitCodes(click.Group):
    """Turn `GrammarcError` into one line on stderr and exit code 1, and SIGTERM and SIGHUP
    into an exit that runs cleanups."""

    def invoke(self, ctx: click.Context):
        if threading.current_thread() is threading.main_thread():
            for signum in _ENDING_SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:  # as `nohup` leaves it
                    signal.signal(signum, _exit_on_signal)
        try:
            return super().invoke(ctx)
        except GrammarcError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)


def _exit_on_signal(signum: int, _frame) -> None:
    raise SystemExit(128 + signum)


@click.group(cls=_ErrorsAsExitCodes, epilog=EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="grammarc")
def main() -> None:
    """Compile regexes and grammars into exact token tables for constrained LLM decoding."""


# the commands register themselves on `main`
from . import artifact_commands, build, compile_command, dot, generate  # noqa: E402,F401
