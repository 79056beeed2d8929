"""What one remoting request may make the broker's event loop read before anything else runs.

The loop that serves a request also runs the replica's Raft: a request that holds it for long
delays every other client and can cost the group its leader (issue 25 item 6: one 16 MiB header
held it for seconds). The frame decoder bounds the header (``wire.frame.MAX_HEADER_BYTES``);
this module bounds the body by request code, from its length alone, before the ACL computes a
signature over it and before any parser looks at it:

- a send (``SEND_MESSAGE``, ``SEND_MESSAGE_V2``, ``SEND_BATCH_MESSAGE``) carries at most
  ``maxMessageSize`` bytes of body (RocketMQ's rule for a message and for a whole batch): the
  same answer, MESSAGE_ILLEGAL, the send path gives later;
- every other request at most ``MAX_REQUEST_BODY_BYTES`` (1 MiB): its body is JSON or text
  (heartbeats, queue locks, subscription groups, config), whose largest legitimate form, a
  heartbeat of 1,000 subscriptions, is about 240 KB. INVALID_PARAMETER names the bound.

JSON bodies under that size are also bounded in the values they hold before they are parsed
(``wire.json_fields.check_json_budget``). The connection stays open: the frame was read whole,
so the stream is still in step.
"""

from __future__ import annotations

from typing import Final

from ledgermq.broker.errors import IllegalMessageError, OverLimitError, ServiceError
from ledgermq.wire import MQRequestCode

__all__ = ["MAX_REQUEST_BODY_BYTES", "MESSAGE_CODES", "body_refusal"]

MAX_REQUEST_BODY_BYTES: Final = 1024 * 1024
"""The largest body of a request that carries no message."""
MESSAGE_CODES: Final = frozenset(
    {MQRequestCode.SEND_MESSAGE, MQRequestCode.SEND_MESSAGE_V2, MQRequestCode.SEND_BATCH_MESSAGE}
)
"""Requests whose body is a message (or a batch of them), bounded by ``maxMessageSize``."""


def body_refusal(code: int, body_length: int, max_message_size: int) -> ServiceError | None:
    """The refusal of a request of ``code`` whose body is ``body_length`` bytes, or None."""
    if code in MESSAGE_CODES:
        if body_length > max_message_size:
            return IllegalMessageError(
                f"the message body of {body_length} bytes exceeds maxMessageSize "
                f"({max_message_size})"
            )
        return None
    if body_length > MAX_REQUEST_BODY_BYTES:
        return OverLimitError(
            f"the request body of {body_length} bytes exceeds the limit of "
            f"{MAX_REQUEST_BODY_BYTES} bytes for request code {code} (only a message may be larger)"
        )
    return None
