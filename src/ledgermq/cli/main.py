"""Entry point of the ``ledgermq`` command.

Every sub-command is a function that takes the parsed arguments and returns an exit code. A
``LedgerMQError`` becomes one line on stderr and exit code 1; bad usage is exit code 2 (argparse).
Users never see a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import logging
import logging.handlers
import os
import sys
from typing import TYPE_CHECKING, Any

from ledgermq import __version__
from ledgermq.cli import (
    bench_commands,
    broker_commands,
    chaos_commands,
    client_commands,
    console_commands,
    init_conf,
    ledger_commands,
    namesrv_commands,
    produce_consume,
    proxy_commands,
    quickstart,
    store_commands,
)
from ledgermq.errors import ConfigError, LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Sequence

EXIT_OK = 0
EXIT_ERROR = 1


class Parser(argparse.ArgumentParser):
    """``ArgumentParser`` that never takes an abbreviation of a long option for the option.

    With abbreviations on, ``quickstart --port 9000`` silently meant ``--port-offset 9000``,
    and adding an option could change what an old command line means. Sub-command parsers are
    made with the class of their parent (``add_subparsers``' default ``parser_class``), so every
    parser of the ``ledgermq`` command is one of these.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """An unknown command is refused naming the commands ``--help`` shows (not the hidden
        mqadmin aliases) and the closest one, aliases included (``topiclist``: topic-list)."""
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            shown = [choice.dest for choice in action._choices_actions]
            close = difflib.get_close_matches(str(value), list(action.choices), n=1)
            hint = ""
            if close:
                prog: str = action.choices[close[0]].prog
                hint = f"; did you mean {prog.removeprefix(self.prog + ' ')}?"
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}{hint} (choose from {', '.join(shown)})"
            )
        super()._check_value(action, value)


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Every option's default in ``--help``, as ``ArgumentDefaultsHelpFormatter`` does, but
    not twice where the help already says it, and not for options without a value to show
    (a flag, an option that is unset by default). A flag that takes no value (``store_true``,
    ``store_false``, ``store_const``) shows none either: ``--no-console`` said ``(default:
    True)``, its destination's value, which reads as if the flag were on by default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or action.nargs == 0
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or default == []
            or "default" in text.lower()
        ):
            return action.help
        return f"{text} (default: %(default)s)".lstrip()


_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_to_directory(directory: str, command: str, max_mb: int, backups: int) -> None:
    """Send INFO and above also to ``directory/<command>.log``, rotated at ``max_mb`` MiB with
    ``backups`` old files kept: a service's history survives the terminal, and the disk holds
    at most ``(backups + 1) * max_mb`` MiB of it. The root logger's level drops to INFO for
    the file; stderr keeps ``--log-level``.

    Raises:
        ConfigError: the directory cannot be made or written, or a size is not positive.
    """
    if max_mb < 1 or backups < 0:
        raise ConfigError("--log-max-mb must be at least 1 and --log-backups at least 0")
    try:
        os.makedirs(directory, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            os.path.join(directory, f"{command}.log"),
            maxBytes=max_mb << 20,
            backupCount=backups,
            encoding="utf-8",
        )
    except OSError as exc:
        raise ConfigError(f"cannot write logs to {directory}: {exc.strerror or exc}") from None
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter(_LOG_FORMAT))
    root = logging.getLogger()
    for existing in root.handlers:  # stderr keeps the level it was given
        existing.setLevel(root.level)
    root.addHandler(handler)
    root.setLevel(min(root.level, logging.INFO))


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = Parser(
        prog="ledgermq",
        description="LedgerMQ: a Raft-replicated message broker after RocketMQ's DLedger mode.",
    )
    parser.add_argument("--version", action="version", version=f"ledgermq {__version__}")
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level on stderr (default: WARNING)",
    )
    parser.add_argument(
        "--log-dir",
        metavar="DIR",
        help="also log to DIR/<command>.log at INFO and above, rotated by size (like "
        "RocketMQ's ~/logs/rocketmqlogs; one directory per process)",
    )
    parser.add_argument(
        "--log-max-mb",
        type=int,
        default=128,
        metavar="MB",
        help="rotate the log file at this size (default 128)",
    )
    parser.add_argument(
        "--log-backups",
        type=int,
        default=10,
        metavar="N",
        help="rotated files kept (default 10)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    quickstart.register(commands)
    store_commands.register(commands)
    ledger_commands.register(commands)
    broker_commands.register(commands)
    produce_consume.register(commands)
    client_commands.register(commands)
    console_commands.register(commands)
    bench_commands.register(commands)
    namesrv_commands.register(commands)
    proxy_commands.register(commands)
    chaos_commands.register(commands)
    init_conf.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format=_LOG_FORMAT)
    try:
        if args.log_dir:
            log_to_directory(args.log_dir, args.command, args.log_max_mb, args.log_backups)
        code: int = args.handler(args)
        sys.stdout.flush()  # here, where a reader gone away is caught, not at exit
    except LedgerMQError as exc:
        print(f"ledgermq: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except OSError as exc:
        print(f"ledgermq: error: {exc.strerror or exc}: {exc.filename or ''}", file=sys.stderr)
        return EXIT_ERROR
    return code


EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: what ``yes | head`` leaves ``yes`` with, so ``set -o pipefail`` still sees it."""


def _reader_gone() -> int:
    """stdout's reader went away (``ledgermq admin topic-list | head``): stop quietly. stdout
    is pointed at /dev/null first, or Python's flush at exit would print a traceback."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
