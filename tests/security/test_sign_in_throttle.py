"""Failed sign-ins back off per source and per access key; refusals that repeat are logged and
audited once per window with a count; the audit log rotates by size and is private (issue 25,
items 10 and 21). At the gate, with a clock driven by hand."""

from __future__ import annotations

import datetime
import json
import logging
import os
import stat
from typing import TYPE_CHECKING

import pytest

import ledgermq.security.acl.validator
import ledgermq.security.gate
import ledgermq.security.strong_check
from ledgermq.errors import ConfigError
from ledgermq.security.acl import Needs, sign_request
from ledgermq.security.acl.grpc_auth import grpc_signature
from ledgermq.security.acl_files import AclFiles
from ledgermq.security.audit import AuditLog
from ledgermq.security.gate import AclGate
from ledgermq.security.throttle import ThrottleSettings
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ledgermq.security.acl.validator import Decision

ACL = """
accounts:
  - accessKey: ops-admin
    secretKey: ops-admin-secret
    admin: true
"""
ATTACKER = "203.0.113.9:50000"
ADMIN_HOST = "192.0.2.10:40000"
NEWCOMER = "198.51.100.7:40000"


class StepClock:
    def __init__(self) -> None:
        self.now_ms = 1_000_000

    def monotonic_ms(self) -> int:
        return self.now_ms

    def wall_time_s(self) -> float:
        return 1_800_000_000 + self.now_ms / 1000

    def advance(self, seconds: float) -> None:
        self.now_ms += int(seconds * 1000)


def _gate(tmp_path: Path, clock: StepClock, audit: AuditLog | None = None) -> AclGate:
    (tmp_path / "plain_acl.yml").write_text(ACL)
    files = AclFiles([str(tmp_path / "plain_acl.yml")], clock)
    return AclGate(files, "broker", audit, clock=clock)


def _request(secret: str, code: int = MQRequestCode.GET_BROKER_RUNTIME_INFO) -> RemotingCommand:
    fields = sign_request({}, None, "ops-admin", secret)
    return RemotingCommand(code=code, opaque=1, ext_fields=fields)


def _remark(answer: RemotingCommand | None) -> str:
    assert answer is not None, "allowed"
    assert answer.code == MQResponseCode.NO_PERMISSION
    return answer.remark or ""


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the secrets the gate checks (calls of the ACL's decision that reach a signature)."""
    seen: list[int] = []
    authorize = ledgermq.security.acl.validator.authorize

    def counting(*args: object, **kwargs: object) -> Decision:
        seen.append(1)
        return authorize(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ledgermq.security.acl.validator, "authorize", counting)
    monkeypatch.setattr(ledgermq.security.gate, "authorize", counting)  # gRPC's
    monkeypatch.setattr(ledgermq.security.strong_check, "authorize", counting)
    return seen


def _as(key: str, secret: str) -> RemotingCommand:
    fields = sign_request({}, None, key, secret)
    return RemotingCommand(code=MQRequestCode.GET_BROKER_RUNTIME_INFO, opaque=1, ext_fields=fields)


def test_wrong_secrets_lock_the_key_and_the_source_before_any_signature_is_checked(
    tmp_path: Path, checks: list[int]
) -> None:
    clock = StepClock()
    gate = _gate(tmp_path, clock)
    settings = gate.throttle.settings
    assert gate.check(ADMIN_HOST, _request("ops-admin-secret")) is None  # the admin, earlier
    for i in range(settings.key_failures):
        assert "do not match" in _remark(gate.check(ATTACKER, _request(f"guess-{i}")))
    checked = len(checks)
    for i in range(10_000):
        remark = _remark(gate.check(ATTACKER, _request(f"more-{i}")))
    assert len(checks) == checked  # locked: no signature was checked
    assert (
        remark == "too many failed sign-ins for access key ops-admin: wait 1 s before trying again"
    )
    # even the right secret waits: the lock is on the key, not on the guess
    assert "too many failed sign-ins" in _remark(gate.check(ATTACKER, _request("ops-admin-secret")))
    # the admin's own address keeps working, though its key is locked for anyone else
    assert gate.check(ADMIN_HOST, _request("ops-admin-secret")) is None
    assert "for access key ops-admin" in _remark(gate.check(NEWCOMER, _request("ops-admin-secret")))
    clock.advance(settings.first_lock_s + 0.001)
    assert gate.check(NEWCOMER, _request("ops-admin-secret")) is None
    # guessing many keys from one source locks the source
    clock.advance(settings.window_s + 1)  # the guesses above are out of the window
    for i in range(settings.source_failures):
        assert "do not match" in _remark(gate.check(ATTACKER, _as(f"key-{i}", "x")))
    checked = len(checks)
    remark = _remark(gate.check(ATTACKER, _as("another-key", "x")))
    assert remark == "too many failed sign-ins from 203.0.113.9: wait 1 s before trying again"
    assert len(checks) == checked


def test_a_misconfigured_client_does_not_lock_out_the_other_clients_of_its_host(
    tmp_path: Path,
) -> None:
    clock = StepClock()
    gate = _gate(tmp_path, clock)
    assert gate.check(ADMIN_HOST, _request("ops-admin-secret")) is None
    for i in range(50):  # clients of the same host, with keys since removed, retrying
        gate.check(ADMIN_HOST, _as(f"retired-key-{i % 5}", "old-secret"))
    locked = gate.check(ADMIN_HOST, _as("retired-key-0", "old-secret"))
    assert "too many failed sign-ins from 192.0.2.10" in _remark(locked)
    assert gate.check(ADMIN_HOST, _request("ops-admin-secret")) is None


def _lock_lengths(
    gate: AclGate, clock: StepClock, guess: Callable[[int], object], locked: Callable[[], bool]
) -> list[float]:
    """How long each lock lasts when an attacker guesses again whenever its lock ends."""
    lengths: list[float] = []
    for _ in range(12):
        for i in range(gate.throttle.settings.source_failures):
            guess(i)
        waited = 0.0
        while locked():
            clock.advance(1)
            waited += 1
        lengths.append(waited)
    return lengths


def test_locks_double_up_to_a_bound_so_a_key_is_never_locked_out_for_ever(tmp_path: Path) -> None:
    clock = StepClock()
    gate = _gate(tmp_path, clock)
    settings = gate.throttle.settings
    # one source guessing many keys
    source_locks = _lock_lengths(
        gate,
        clock,
        lambda i: gate.check(ATTACKER, _as(f"key-{i}", "x")),
        lambda: gate.throttle.refusal("203.0.113.9", None) is not None,
    )
    assert source_locks[:4] == [1.0, 2.0, 4.0, 8.0]  # exponentially growing
    assert max(source_locks) == settings.max_source_lock_s  # bounded
    # many sources guessing one key: a newcomer gets in at most max_key_lock_s after the
    # attack's last guess, however long it went on
    key_locks = _lock_lengths(
        gate,
        clock,
        lambda i: gate.check(f"198.18.0.{i}:1", _request(f"guess-{i}")),
        lambda: gate.throttle.refusal("198.51.100.7", "ops-admin") is not None,
    )
    assert key_locks[:4] == [1.0, 2.0, 4.0, 8.0]
    assert max(key_locks) == settings.max_key_lock_s
    assert gate.check(NEWCOMER, _request("ops-admin-secret")) is None


def test_memory_is_bounded() -> None:
    from ledgermq.security.throttle import SignInThrottle

    clock = StepClock()
    throttle = SignInThrottle(clock, ThrottleSettings(max_entries=100))
    for i in range(10_000):
        throttle.failed(f"10.0.{i // 256}.{i % 256}", f"key-{i}")
        throttle.succeeded(f"10.1.{i // 256}.{i % 256}", f"key-{i}")
    assert len(throttle._records) <= 100
    assert len(throttle._trusted) <= 100


def test_filling_the_table_with_guesses_at_other_keys_does_not_free_a_locked_key() -> None:
    """Found in review: records were forgotten oldest first, locked or not, so guesses at
    ``max_entries`` made-up keys (from many addresses) freed the lock on the key under attack."""
    from ledgermq.security.throttle import SignInThrottle

    clock = StepClock()
    throttle = SignInThrottle(clock, ThrottleSettings(max_entries=50, max_key_lock_s=60.0))
    for _ in range(5):
        throttle.failed("10.9.9.9", "victim")
    assert throttle.refusal("10.2.0.1", "victim") is not None
    for i in range(500):  # each from its own address, at a made-up key
        throttle.failed(f"10.3.{i // 256}.{i % 256}", f"made-up-{i}")
    assert len(throttle._records) <= 50
    assert throttle.refusal("10.2.0.1", "victim") is not None, "the guesses freed the lock"


def test_repeated_refusals_are_logged_and_audited_once_with_a_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = StepClock()
    audit = AuditLog(str(tmp_path / "audit.log"), clock=clock)
    gate = _gate(tmp_path, clock, audit)
    caplog.set_level(logging.INFO, "ledgermq.security")
    for second in range(10):  # the locks end and grow meanwhile: "wait 1 s", "wait 2 s" ...
        for i in range(1_000):
            gate.check(ATTACKER, _request(f"guess-{second}-{i}"))
        clock.advance(0.9)
    clock.advance(11)
    gate.check(ATTACKER, _request("one-more"))
    audit.close()
    size = (tmp_path / "audit.log").stat().st_size
    assert size < 2_000  # was 252 bytes a guess: 2.5 MB
    lines = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    assert len(lines) <= 5
    held = [line for line in lines if line.get("repeated")]
    assert sum(line["repeated"] for line in held) + len(lines) - len(held) == 10_001
    locked = [line for line in held if "too many failed sign-ins" in line["remark"]]
    assert locked
    assert locked[0]["remark"].endswith(
        f"(and {locked[0]['repeated']:,} more like it in the last 10 s)"
    )
    assert locked[0]["repeated"] > 9_000
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) < 10
    assert any("more like it in the last 10 s)" in text for text in refusals)


def test_the_audit_log_rotates_by_size_and_keeps_backup_count_files(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    audit = AuditLog(str(path), max_bytes=2_000, backup_count=2)
    for i in range(200):
        audit.record(
            server="broker", access_key="ops-admin", remote=f"10.0.0.1:{i}", code=17,
            request="UPDATE_AND_CREATE_TOPIC", fields={"topic": f"T{i}"}, allowed=True,
            remark="",
        )  # fmt: skip
    audit.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["audit.log", "audit.log.1", "audit.log.2"]
    for name in names:
        assert (tmp_path / name).stat().st_size <= 2_000
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
    last = json.loads(path.read_text().splitlines()[-1])
    assert last["about"] == {"topic": "T199"}


def test_the_audit_log_is_private(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old = os.umask(0o022)
    try:
        AuditLog(str(tmp_path / "new.log")).close()
        existing = tmp_path / "old.log"
        existing.write_text("")
        existing.chmod(0o644)
        AuditLog(str(existing)).close()
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.log").stat().st_mode) == 0o600
    assert stat.S_IMODE(existing.stat().st_mode) == 0o640  # others lose read; group is a choice
    assert "was readable by every user (mode 644); now 640" in caplog.text


def test_rotation_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="auditLogBackupCount"):
        AuditLog(str(tmp_path / "a.log"), max_bytes=1000, backup_count=0)
    from ledgermq.namesrv import NameServerConfig

    config = NameServerConfig.from_properties(
        {
            "auditLogMaxBytes": "5000",
            "auditLogBackupCount": "3",
            "aclRequireStrongSignature": "true",
        }
    )
    assert (config.audit_log_max_bytes, config.audit_log_backup_count) == (5000, 3)
    assert config.acl_require_strong_signature
    with pytest.raises(ConfigError, match="auditLogBackupCount"):
        NameServerConfig.from_properties({"auditLogBackupCount": "0"})


def test_grpc_sign_ins_are_throttled_alike(tmp_path: Path, checks: list[int]) -> None:
    clock = StepClock()
    gate = _gate(tmp_path, clock)
    date_time = datetime.datetime.fromtimestamp(clock.wall_time_s(), datetime.UTC).strftime(
        "%Y%m%dT%H%M%SZ"
    )

    def metadata(secret: str) -> dict[str, str]:
        signature = grpc_signature(secret, date_time)
        return {
            "x-mq-date-time": date_time,
            "authorization": f"MQv2-HMAC-SHA1 Credential=ops-admin, "
            f"SignedHeaders=x-mq-date-time, Signature={signature}",
        }

    def call(address: str, secret: str) -> Decision:
        return gate.check_grpc(
            address, metadata(secret), "SendMessage", Needs(), clock.wall_time_s()
        )

    assert call(ADMIN_HOST, "ops-admin-secret").allowed
    for i in range(gate.throttle.settings.key_failures):
        assert "do not match" in call(ATTACKER, f"guess-{i}").remark
    checked = len(checks)
    assert checked == 1 + gate.throttle.settings.key_failures
    for i in range(1_000):
        refused = call(ATTACKER, f"more-{i}")
    assert len(checks) == checked
    assert not refused.authenticated  # UNAUTHORIZED on the gRPC port
    assert refused.remark.startswith("too many failed sign-ins for access key ops-admin: wait")
    assert call(ADMIN_HOST, "ops-admin-secret").allowed
