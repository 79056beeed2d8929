"""Issue 28 item 1: the msgId ``produce`` prints can be looked up. ``produce`` prints both ids,
``admin message --id`` takes either (a UNIQ_KEY is searched in the key index of every topic when
no ``--topic`` is given), and an id that can be neither is refused with a sentence."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import pytest

from ledgermq.cli.main import main
from ledgermq.errors import MessageFormatError
from ledgermq.wire import MQRequestCode, read_message_id

if TYPE_CHECKING:
    from .conftest import TcpFakeCluster

pytestmark = pytest.mark.timeout(60)

LINE = re.compile(r"^SEND_OK msgId=([0-9A-F]+) offsetMsgId=([0-9A-F]+) broker-a:\d+@\d+$")


def _produce_one(cluster: TcpFakeCluster, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    assert main(["produce", "-n", cluster.addr, "-t", "Orders", "hello ids"]) == 0
    out, _ = capsys.readouterr()
    match = LINE.match(out.strip())
    assert match is not None, out
    return match.group(1), match.group(2)


def test_produce_prints_both_ids_and_admin_message_finds_it_by_either(
    capsys: pytest.CaptureFixture[str], tcp_fake_cluster: TcpFakeCluster
) -> None:
    tcp_fake_cluster.add_broker({"Orders": 2, "Other": 2})
    msg_id, offset_msg_id = _produce_one(tcp_fake_cluster, capsys)
    assert msg_id != offset_msg_id
    # The UNIQ_KEY read as an offset msgId gives a port out of range: what sent the lookup to
    # "192.0.2.2:494993520" before.
    offset_form = read_message_id(msg_id).offset
    assert offset_form is None or offset_form[1] < 65536
    for given in (msg_id, offset_msg_id, msg_id.lower()):
        code = main(["admin", "message", "--id", given, "-n", tcp_fake_cluster.addr, "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        (record,) = json.loads(out)
        assert record["msgId"] == msg_id
        assert record["offsetMsgId"] == offset_msg_id
        assert record["topic"] == "Orders"
        assert record["body"] == "hello ids"
    # --topic narrows the search; in a topic that does not hold it, nothing is found.
    assert (
        main(["admin", "-n", tcp_fake_cluster.addr, "message", "--id", msg_id, "-t", "Other"]) == 1
    )
    _, err = capsys.readouterr()
    assert f"no message of topic Other has the id {msg_id}" in err
    assert "Traceback" not in err


def test_an_id_that_is_neither_kind_is_refused_with_a_sentence_before_any_lookup(
    capsys: pytest.CaptureFixture[str], tcp_fake_cluster: TcpFakeCluster
) -> None:
    broker = tcp_fake_cluster.add_broker({"Orders": 2})
    for bad in ("hello", "0A" * 10, "Z" * 32):
        assert main(["admin", "-n", tcp_fake_cluster.addr, "message", "--id", bad]) == 1
        _, err = capsys.readouterr()
        assert f"{bad!r} is not a message id: a message id is 32 to 56 hexadecimal digits" in err
        assert err.count("\n") == 1
    assert broker.count(MQRequestCode.QUERY_MESSAGE) == 0
    assert broker.count(MQRequestCode.VIEW_MESSAGE_BY_ID) == 0
    with pytest.raises(MessageFormatError):
        read_message_id("not an id")


def test_a_well_formed_id_nobody_stored_is_not_found_not_unreachable(
    capsys: pytest.CaptureFixture[str], tcp_fake_cluster: TcpFakeCluster
) -> None:
    tcp_fake_cluster.add_broker({"Orders": 2})
    unknown = "C0000202" + "1D81" + "ABCD" + "0000000000000010"  # a UNIQ_KEY's layout
    assert main(["admin", "-n", tcp_fake_cluster.addr, "message", "--id", unknown]) == 1
    _, err = capsys.readouterr()
    assert f"no message of any topic has the id {unknown}" in err
    assert "cannot connect" not in err


def test_resend_dlq_takes_the_msgid_a_consumer_saw(
    capsys: pytest.CaptureFixture[str], tcp_fake_cluster: TcpFakeCluster
) -> None:
    """resend-dlq looks its message up with either id too."""
    broker = tcp_fake_cluster.add_broker({"%DLQ%g1": 1, "%RETRY%g1": 1})
    assert main(["produce", "-n", tcp_fake_cluster.addr, "-t", "%DLQ%g1", "dead"]) == 0
    out, _ = capsys.readouterr()
    msg_id = out.split()[1].removeprefix("msgId=")
    assert (
        main(["admin", "-n", tcp_fake_cluster.addr, "resend-dlq", "-g", "g1", "--id", msg_id]) == 0
    )
    assert broker.store.queue("%RETRY%g1", 0)
