"""``Refusal``: a request a door does not take, carrying the status to answer it with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.messaging.errors import Refused

if TYPE_CHECKING:
    from ledgermq.proxy.protocol import definition_pb2

__all__ = ["Refusal"]


class Refusal(Refused):
    """A message this door does not take: the status to answer its send with (the gRPC door's
    ``messaging.errors.Refused``)."""

    def __init__(self, answer: definition_pb2.Status) -> None:
        super().__init__(answer.message)
        self.status = answer
