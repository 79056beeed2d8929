"""``Refusal``: a request a door does not take, carrying the status to answer it with."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledgermq.proxy.protocol import definition_pb2

__all__ = ["Refusal"]


class Refusal(Exception):  # noqa: N818 - a status to answer with, not an error of ours
    """A message this door does not take: the status to answer its send with."""

    def __init__(self, answer: definition_pb2.Status) -> None:
        super().__init__(answer.message)
        self.status = answer
