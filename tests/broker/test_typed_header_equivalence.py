"""The typed headers that replaced hand-written readers (issue 26 item 2) read what those readers
read: SEND_MESSAGE's general reader, END_TRANSACTION's and CONSUMER_SEND_MSG_BACK's. The
readers as they were are kept here as the reference (``_old_*``), and hypothesis compares them
on headers as clients send them and as they should not.

The differences are the fixes, each asserted as such: a topic or group that breaks the naming
rules is refused by the parse (INVALID_PARAMETER, the rule as the message; it was refused
later, by the service, with the same code and message), and a ``maxReconsumeTimes`` that is not
an int64 is a ``BadRequestError`` naming the field (a bare ``ValueError`` escaped before, or a
number out of Java's range was taken).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import given
from hypothesis import strategies as st

from ledgermq.broker.remoting.send import parse_send_request
from ledgermq.broker.remoting.transactions import parse_end_request
from ledgermq.broker.service.send import SendRequest
from ledgermq.broker.service.transactions import EndTransactionRequest
from ledgermq.errors import BadRequestError
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.ext_fields import ext_bool, ext_int, ext_str
from ledgermq.wire.headers import (
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    ViewMessageRequestHeader,
)
from ledgermq.wire.names import group_name_problem, topic_name_problem

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

_INT64 = (-(1 << 63), (1 << 63) - 1)
numbers = st.one_of(
    st.integers(-(1 << 64), 1 << 64).map(str),
    st.sampled_from(["", " 7 ", "1_000", "x", "-0", "+3", "9" * 25, "8", "12", "0"]),
)
names = st.sampled_from(["", "g", "TopicTest", "%RETRY%g", "orders.v1", "t" * 130, "a b"])
texts = st.sampled_from(["", "g", "\x01UNIQ_KEY\x02a\x02", "0A0B"])
booleans = st.sampled_from(["true", "false", "", "1", "0", "TRUE", " true", "yes"])


def _fields(kinds: Mapping[str, st.SearchStrategy[str]]) -> st.SearchStrategy[dict[str, str]]:
    return st.fixed_dictionaries({}, optional=dict(kinds))


def _outcome(read: Callable[[], object]) -> object:
    try:
        return read()
    except BadRequestError as exc:
        return (BadRequestError, exc.code, str(exc))
    except ValueError:
        return ValueError


def _in_int64(text: str | None) -> bool:
    if text is None or text == "":
        return True
    try:
        return _INT64[0] <= int(text) <= _INT64[1]
    except ValueError:
        return False


def _refused_as_fixed(new: object, old: object, bad_name: str | None, bad_number: bool) -> bool:
    """Whether ``new`` is what the fixed reader answers where the old one read ``old``: the
    refusal of a bad name where the name is read (it may come before a refusal of a later
    field), else the old reader's refusal, else the refusal of a bad number, else the same."""
    if bad_name is not None and new == (
        BadRequestError, MQResponseCode.INVALID_PARAMETER, bad_name
    ):  # fmt: skip
        return True
    if isinstance(old, tuple):  # the old reader's own refusal: kept as it was
        return new == old
    if bad_number:
        return isinstance(new, tuple) and "'maxReconsumeTimes'" in new[2]
    return new == old


# ---------------------------------------------------------------- SEND_MESSAGE (V1 names)
def _old_send(code: int, fields: Mapping[str, str]) -> SendRequest:
    """``parse_send_request``'s general reader before the typed header."""
    max_reconsume = fields.get("maxReconsumeTimes")
    return SendRequest(
        producer_group=fields.get("producerGroup", ""),
        topic=ext_str(fields, "topic"),
        default_topic=fields.get("defaultTopic") or None,
        default_topic_queue_nums=ext_int(fields, "defaultTopicQueueNums", 4),
        queue_id=ext_int(fields, "queueId", -1),
        sys_flag=ext_int(fields, "sysFlag", 0),
        born_timestamp=ext_int(fields, "bornTimestamp", 0),
        flag=ext_int(fields, "flag", 0),
        encoded=fields.get("properties", ""),
        reconsume_times=ext_int(fields, "reconsumeTimes", 0),
        max_reconsume_times=int(max_reconsume) if max_reconsume not in (None, "") else None,
        batch=code == MQRequestCode.SEND_BATCH_MESSAGE or ext_bool(fields, "batch"),
    )


_SEND_KINDS = {
    "producerGroup": texts, "topic": names, "defaultTopic": names,
    "defaultTopicQueueNums": numbers, "queueId": numbers, "sysFlag": numbers,
    "bornTimestamp": numbers, "flag": numbers, "properties": texts, "reconsumeTimes": numbers,
    "maxReconsumeTimes": numbers, "batch": booleans,
}  # fmt: skip


@given(_fields(_SEND_KINDS))
def test_send_message_reads_as_its_hand_written_reader(fields: dict[str, str]) -> None:
    code = MQRequestCode.SEND_MESSAGE
    old = _outcome(lambda: _old_send(code, fields))
    new = _outcome(lambda: parse_send_request(RemotingCommand(code, 1, ext_fields=fields)))
    topic = fields.get("topic")
    bad_name = None if topic is None else topic_name_problem(topic)
    bad_number = not _in_int64(fields.get("maxReconsumeTimes"))
    assert _refused_as_fixed(new, old, bad_name, bad_number), (old, new)


# ---------------------------------------------------------------- END_TRANSACTION
def _old_end(fields: Mapping[str, str]) -> EndTransactionRequest:
    """``parse_end_request`` before the typed header (without its commitOrRollback check,
    which the handler still makes)."""
    from ledgermq.broker.service.transactions import Resolution

    ext_int(fields, "commitOrRollback")
    queue_offset = fields.get("tranStateTableOffset")
    return EndTransactionRequest(
        commit_log_offset=ext_int(fields, "commitLogOffset"),
        resolution=Resolution.COMMIT,
        producer_group=fields.get("producerGroup", ""),
        queue_offset=ext_int(fields, "tranStateTableOffset") if queue_offset else None,
        msg_id=fields.get("msgId") or None,
        from_check=ext_bool(fields, "fromTransactionCheck"),
        topic=fields.get("topic") or None,
    )


_END_KINDS = {
    "producerGroup": texts, "tranStateTableOffset": numbers, "commitLogOffset": numbers,
    "commitOrRollback": st.sampled_from(["8"]), "fromTransactionCheck": booleans,
    "msgId": texts, "transactionId": texts, "topic": names,
}  # fmt: skip


@given(_fields(_END_KINDS))
def test_end_transaction_reads_as_its_hand_written_reader(fields: dict[str, str]) -> None:
    old = _outcome(lambda: _old_end(fields))
    new = _outcome(lambda: parse_end_request(EndTransactionRequestHeader.from_ext_fields(fields)))
    topic = fields.get("topic")
    bad_name = topic_name_problem(topic) if topic else None
    assert _refused_as_fixed(new, old, bad_name, bad_number=False), (old, new)


# ---------------------------------------------------------------- CONSUMER_SEND_MSG_BACK
def _old_send_back(fields: Mapping[str, str]) -> tuple[int, str, int, int | None]:
    """What ``SendBackProcessor.process`` read before the typed header."""
    offset = ext_int(fields, "offset")
    group = ext_str(fields, "group")
    delay_level = ext_int(fields, "delayLevel", 0)
    max_times = fields.get("maxReconsumeTimes")
    return offset, group, delay_level, int(max_times) if max_times else None


_BACK_KINDS = {
    "offset": numbers, "group": names, "delayLevel": numbers, "maxReconsumeTimes": numbers,
    "originMsgId": texts, "originTopic": texts,
}  # fmt: skip


def _new_send_back(fields: Mapping[str, str]) -> tuple[int, str, int, int | None]:
    header = ConsumerSendMsgBackRequestHeader.from_ext_fields(fields)
    return header.offset, header.group, header.delay_level, header.max_reconsume_times


@given(_fields(_BACK_KINDS))
def test_send_back_reads_as_its_hand_written_reader(fields: dict[str, str]) -> None:
    old = _outcome(lambda: _old_send_back(fields))
    new = _outcome(lambda: _new_send_back(fields))
    group = fields.get("group")
    bad_name = None if group is None else group_name_problem(group)
    bad_number = not _in_int64(fields.get("maxReconsumeTimes"))
    assert _refused_as_fixed(new, old, bad_name, bad_number), (old, new)


# ---------------------------------------------------------------- VIEW_MESSAGE_BY_ID
@given(_fields({"offset": numbers}))
def test_view_message_reads_as_its_hand_written_reader(fields: dict[str, str]) -> None:
    old = _outcome(lambda: ext_int(fields, "offset"))
    new = _outcome(lambda: ViewMessageRequestHeader.from_ext_fields(fields).offset)
    assert new == old
