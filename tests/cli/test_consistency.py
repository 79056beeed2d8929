"""Issue 28 item 7: the CLI takes its options the same way everywhere. ``-n`` after a
subcommand's name, ``broker-config -b X get``, mqadmin's names as hidden aliases, one spelling of
``--listen`` and ``--namesrv-addr`` (the older kept working), and every default in ``--help``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import pytest

from ledgermq.cli.client_commands import MQADMIN_NAMES
from ledgermq.cli.main import build_parser, main
from ledgermq.cli.namesrv_commands import namesrv_settings

if TYPE_CHECKING:
    from .conftest import TcpFakeCluster

pytestmark = pytest.mark.timeout(60)


def _admin_commands(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    (admin,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    admin_parser = admin.choices["admin"]
    (sub,) = (a for a in admin_parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub


def _command(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = commands.choices[name]
    return found


def test_namesrv_addr_is_taken_before_or_after_the_subcommand() -> None:
    parser = build_parser()
    for path, command in _walk(parser, "ledgermq"):
        if path.startswith("ledgermq admin ") and path != "ledgermq admin broker-config":
            assert "-n" in command._option_string_actions, path
            assert "--namesrv-addr" in command._option_string_actions, path
    both = parser.parse_args(["admin", "-n", "a:1", "topic-list", "-n", "b:2"])
    assert both.namesrv_addr == "b:2"  # the later one wins, as for credentials
    before = parser.parse_args(["admin", "-n", "a:1", "topic-list"])
    assert before.namesrv_addr == "a:1"
    nested = parser.parse_args(["admin", "broker-config", "get", "-b", "g", "-n", "c:3"])
    assert nested.namesrv_addr == "c:3"


def test_broker_config_takes_the_group_before_or_after_get(
    capsys: pytest.CaptureFixture[str], tcp_fake_cluster: TcpFakeCluster
) -> None:
    parser = build_parser()
    for argv in (
        ["admin", "broker-config", "-b", "broker-a", "get"],
        ["admin", "broker-config", "get", "-b", "broker-a"],
        ["admin", "broker-config", "-b", "broker-a"],
    ):
        args = parser.parse_args(argv)
        assert args.handler.__name__ == "cmd_broker_config", argv
    update = parser.parse_args(
        ["admin", "broker-config", "-b", "g", "update", "-k", "a", "-v", "1"]
    )
    assert update.config_broker == "g"
    tcp_fake_cluster.add_broker({"T": 1})
    code = main(
        ["admin", "broker-config", "update", "-k", "a", "-v", "1", "-n", tcp_fake_cluster.addr]
    )
    assert code == 1
    assert "needs -b GROUP|HOST:PORT or -c CLUSTER" in capsys.readouterr().err


def test_mqadmin_names_are_hidden_aliases(
    capsys: pytest.CaptureFixture[str], tcp_fake_cluster: TcpFakeCluster
) -> None:
    parser = build_parser()
    sub = _admin_commands(parser)
    for alias, name in MQADMIN_NAMES.items():
        assert sub.choices[alias].prog == f"ledgermq admin {name}", alias
    update = parser.parse_args(["admin", "updateBrokerConfig", "-b", "g", "-k", "a", "-v", "1"])
    assert update.handler.__name__ == "cmd_broker_config_update"
    with pytest.raises(SystemExit):
        parser.parse_args(["admin", "--help"])
    listing = capsys.readouterr().out
    assert "topic-list" in listing
    assert "topicList" not in listing
    assert "updateTopic" not in listing
    tcp_fake_cluster.add_broker({"Orders": 2})
    assert main(["admin", "topicList", "-n", tcp_fake_cluster.addr]) == 0
    assert "Orders" in capsys.readouterr().out.split()


def test_listen_and_namesrv_addr_have_one_spelling_and_the_old_one_still_works() -> None:
    parser = build_parser()
    new = parser.parse_args(["namesrv", "--listen", "0.0.0.0:9877"])
    assert namesrv_settings(new) == {"listenPort": "9877", "listenHost": "0.0.0.0"}
    old = parser.parse_args(["namesrv", "--listen-port", "0", "--listen-host", "127.0.0.2"])
    assert namesrv_settings(old) == {"listenPort": "0", "listenHost": "127.0.0.2"}
    assert namesrv_settings(parser.parse_args(["namesrv", "--listen", ":0"])) == {"listenPort": "0"}
    with pytest.raises(SystemExit):
        parser.parse_args(["namesrv", "--listen", "h:99999"])
    for flag in ("-n", "--namesrv-addr", "--namesrv"):
        assert parser.parse_args(["proxy", flag, "x:1"]).namesrv_addr == "x:1"
    help_text = _command(parser, "proxy").format_help()
    assert "--namesrv-addr" in help_text
    assert "--namesrv " not in help_text
    namesrv_help = _command(parser, "namesrv").format_help()
    assert "--listen HOST:PORT" in namesrv_help
    assert "--listen-port" not in namesrv_help


def _walk(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                if child.prog.endswith(" " + name):  # not an alias
                    found.extend(_walk(child, f"{path} {name}"))
    return found


def test_every_help_shows_every_default() -> None:
    missing = []
    for path, parser in _walk(build_parser(), "ledgermq"):
        formatter = parser._get_formatter()
        for action in parser._actions:
            default = action.default
            if (
                not action.option_strings
                or action.nargs == 0  # a flag: no value to show (see the test below)
                or action.help == argparse.SUPPRESS
                or default in (None, False, argparse.SUPPRESS, [])
                or isinstance(action, argparse._HelpAction | argparse._VersionAction)
            ):
                continue
            shown = formatter._expand_help(action) if action.help else ""
            if "default" not in shown.lower():
                missing.append(f"{path} {action.option_strings[-1]}")
    assert not missing, missing


def test_an_unknown_command_lists_the_shown_names_and_suggests_the_closest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["admin", "topiclist"])
    err = capsys.readouterr().err
    assert "invalid choice: 'topiclist'; did you mean topic-list?" in err
    assert "'topic-list'" not in err  # names as --help shows them, not repr'd
    assert "updateTopic" not in err
    assert "topic-create, topic-list" in err


def test_a_flag_without_a_value_shows_no_default() -> None:
    """``quickstart --help`` said ``--no-console ... (default: True)``: the value of the
    destination a ``store_false`` flag sets, which reads as if the flag were on by default."""
    shown = []
    for path, parser in _walk(build_parser(), "ledgermq"):
        formatter = parser._get_formatter()
        for action in parser._actions:
            if action.option_strings and action.nargs == 0 and action.help:
                text = formatter._expand_help(action)
                if "(default: True)" in text or "(default: False)" in text:
                    shown.append(f"{path} {action.option_strings[-1]}")
    assert not shown, shown


def test_the_broker_flags_say_what_they_default_to() -> None:
    """``ledgermq broker --help`` showed no default at all: its flags are unset so that
    broker.conf's keys apply, and the generic rule skips unset options. Each now says which key
    it sets over the file and what applies when neither gives one."""
    parser = _command(build_parser(), "broker")
    formatter = parser._get_formatter()
    silent = [
        action.option_strings[-1]
        for action in parser._actions
        if action.option_strings
        and action.nargs != 0
        and "default" not in formatter._expand_help(action).lower()
    ]
    assert silent == []
    text = parser.format_help()
    for default in ("10911", "~/store", "broker-a", "n0"):
        assert default in text, default


def test_the_quickstart_says_how_long_it_serves() -> None:
    """``--run-for`` is unset by default (serve until Ctrl-C): its help says so."""
    text = _command(build_parser(), "quickstart").format_help()
    assert "(default: serve until Ctrl-C)" in " ".join(text.split())


def test_the_namesrv_takes_its_metrics_address_as_proxy_and_console_do() -> None:
    """``namesrv --metrics-port N`` (on namesrv.conf's metricsHost) beside ``proxy`` and
    ``console``'s ``--metrics-listen HOST:PORT``: one spelling now, the older kept working."""
    parser = build_parser()
    new = parser.parse_args(["namesrv", "--metrics-listen", "0.0.0.0:5556"])
    assert namesrv_settings(new) == {"metricsHost": "0.0.0.0", "metricsPort": "5556"}
    assert namesrv_settings(parser.parse_args(["namesrv", "--metrics-listen", ":0"])) == {
        "metricsPort": "0"
    }
    old = parser.parse_args(["namesrv", "--metrics-port", "5556"])
    assert namesrv_settings(old) == {"metricsPort": "5556"}
    help_text = _command(parser, "namesrv").format_help()
    assert "--metrics-listen HOST:PORT" in help_text
    assert "--metrics-port" not in help_text
    for command in ("proxy", "console"):
        assert "--metrics-listen HOST:PORT" in _command(parser, command).format_help()
