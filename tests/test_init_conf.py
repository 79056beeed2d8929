"""``ledgermq init-conf DIR`` (issue 28 item 9): the samples the README points to, for an
installed package as for a clone, written where an operator edits them.

The README's paths (``conf/broker-n0.conf``, ``deploy/systemd/...``) used to exist only in a
clone: a wheel had none of them. ``init-conf`` writes them in the same layout, without the
marker that makes ``broker-config update`` refuse to rewrite a shipped sample, and every written
config is a valid one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledgermq.broker.config import BrokerConfig
from ledgermq.broker.live_config import SAMPLE_MARKER, is_sample_file
from ledgermq.cli.main import main
from ledgermq.ledger.config import load_properties
from ledgermq.namesrv import NameServerConfig

ROOT = Path(__file__).resolve().parents[1]

ONE_HOST = ["conf/namesrv.conf", *(f"conf/broker-n{i}.conf" for i in range(3))]
THREE_MACHINES = [
    "deploy/conf/namesrv.conf",
    *(f"deploy/conf/broker-{g}-n{i}.conf" for g in "ab" for i in range(3)),
]


def test_init_conf_writes_the_samples_for_one_host_and_three_machines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init-conf", str(tmp_path / "etc")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {len(_shipped())} files under {tmp_path / 'etc'}:")
    written = sorted(str(p.relative_to(tmp_path / "etc")) for p in (tmp_path / "etc").rglob("*"))
    written = [name for name in written if (tmp_path / "etc" / name).is_file()]
    assert written == _shipped()
    for name in [*ONE_HOST, *THREE_MACHINES, "deploy/systemd/ledgermq-broker@.service"]:
        assert name in written
    for name in written:
        copy = (tmp_path / "etc" / name).read_text()
        shipped = (ROOT / name).read_text()
        assert SAMPLE_MARKER not in copy
        assert copy == "".join(
            line for line in shipped.splitlines(keepends=True) if SAMPLE_MARKER not in line
        )
        assert not is_sample_file(str(tmp_path / "etc" / name))


def test_every_written_config_is_valid(tmp_path: Path) -> None:
    assert main(["init-conf", str(tmp_path)]) == 0
    for name in ONE_HOST + THREE_MACHINES:
        values = load_properties(str(tmp_path / name))
        if name.endswith("namesrv.conf"):
            NameServerConfig.from_properties(values)
        else:
            config = BrokerConfig.from_properties(values)
            assert len(config.dleger_peers) == 3


def test_init_conf_never_overwrites_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init-conf", str(tmp_path)]) == 0
    mine = tmp_path / "conf" / "broker-n0.conf"
    mine.write_text("# mine\n")
    (tmp_path / "deploy" / "conf" / "namesrv.conf").unlink()
    capsys.readouterr()
    assert main(["init-conf", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "not written: conf/broker-n0.conf" in err
    assert "(--force overwrites)" in err
    assert mine.read_text() == "# mine\n"
    assert not (tmp_path / "deploy" / "conf" / "namesrv.conf").exists()  # nothing written
    assert main(["init-conf", "--force", str(tmp_path)]) == 0
    assert "dLegerSelfId=n0" in mine.read_text()


def _shipped() -> list[str]:
    """The files of the repository's conf/ and deploy/, relative to it."""
    return sorted(
        str(path.relative_to(ROOT))
        for folder in ("conf", "deploy")
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )
