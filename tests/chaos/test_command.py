"""``ledgermq chaos run | cleanup``: arguments and what is printed, with the run faked."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledgermq.cli.main import build_parser, main
from ledgermq.testing.chaos import command
from ledgermq.testing.chaos.checker import Report
from ledgermq.testing.chaos.history import History
from ledgermq.testing.chaos.runner import RunOptions, RunResult, replay_command


def fake_result(valid: bool) -> RunResult:
    report = Report(acks=10, faults={"kill9": 2})
    if not valid:
        report.violate("acknowledged producer 0 seq 1 at queue 0 offset 0: n1 has nothing")
    options = RunOptions(seed=42, duration_s=30, faults=("kill9",), inject_bug="ack-before-commit")
    return RunResult(report, History(seed=42), Path("/tmp/x"), "network namespaces",
                     replay_command(options, ["kill9"]))  # fmt: skip


@pytest.mark.parametrize("valid", [True, False])
def test_run_prints_the_seed_the_table_and_on_failure_the_replay(
    valid: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[RunOptions] = []

    def fake_run(options: RunOptions, log: object) -> RunResult:
        seen.append(options)
        return fake_result(valid)

    monkeypatch.setattr(command, "run_chaos", fake_run)
    lines: list[str] = []
    args = build_parser().parse_args(
        ["chaos", "run", "--seed", "42", "--duration", "30", "--faults", "kill9,pause"]
    )
    assert command.cmd_run(args, lines.append) == (0 if valid else 1)
    text = "\n".join(lines)
    assert seen[0].seed == 42
    assert seen[0].overlap
    assert list(seen[0].faults) == ["kill9", "pause"]
    assert "seed 42 (network namespaces)" in text
    assert "kill9 2" in text
    assert ("replay: ledgermq chaos run --seed 42" in text) is not valid
    assert ("logs and history: /tmp/x" in text) is not valid
    if not valid:
        assert "--inject-bug ack-before-commit" in text


def test_unknown_fault_kinds_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["chaos", "run", "--seed", "1", "--faults", "kill9,meteor"])
    assert exit_info.value.code == 2
    assert "unknown fault kinds ['meteor']" in capsys.readouterr().err


def test_cleanup_says_what_it_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []

    def fake_cleanup(*, include_live: bool = False) -> list[str]:
        calls.append(include_live)
        return ["lmqc1-n0"] if include_live else []

    monkeypatch.setattr(command, "cleanup_leftovers", fake_cleanup)
    monkeypatch.setattr(command, "cleanup_leftover_disks", lambda include_live: [])
    lines: list[str] = []
    assert command.cmd_cleanup(build_parser().parse_args(["chaos", "cleanup"]), lines.append) == 0
    assert lines == ["nothing to remove"]
    args = build_parser().parse_args(["chaos", "cleanup", "--all"])
    assert command.cmd_cleanup(args, lines.append) == 0
    assert lines[-1] == "removed lmqc1-n0"
    assert calls == [False, True]


def test_a_run_that_cannot_go_on_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: a heal that failed (a link deleted from outside the run) ended the command with a
    traceback."""
    from ledgermq.testing.chaos.netns import NetnsError

    def broken_run(options: RunOptions, log: object) -> RunResult:
        raise NetnsError(
            'ip netns exec lmqc1-n1 ip link set eth0 up failed: Cannot find device "eth0"'
        )

    monkeypatch.setattr(command, "run_chaos", broken_run)
    lines: list[str] = []
    args = build_parser().parse_args(["chaos", "run", "--seed", "7", "--duration", "5"])
    assert command.cmd_run(args, lines.append) == 2
    assert len(lines) == 1
    assert lines[0].startswith("ledgermq chaos: error: seed 7: ")
    assert "Cannot find device" in lines[0]


def test_no_overlap_and_two_nameservers_are_passed_on_and_replayed() -> None:
    args = build_parser().parse_args(
        ["chaos", "run", "--seed", "1", "--no-overlap", "--namesrvs", "2"]
    )
    assert (args.overlap, args.namesrvs) == (False, 2)
    options = RunOptions(seed=1, overlap=False, namesrvs=2)
    assert replay_command(options, ["kill9"]).endswith("--no-overlap --namesrvs 2")
    plain = replay_command(RunOptions(seed=1), ["kill9"])
    assert "--no-overlap" not in plain
    assert "--namesrvs" not in plain
