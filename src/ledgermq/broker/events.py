"""What happens in a replica that others wait for: commits, arrivals and its fail-stop.

Why a module of its own: the replica used to be the event bus itself (``BrokerServer``'s
``_on_arrival`` called every waiting service by name, and the dispatcher called back into the
remoting door before each pass to write its answers). Here the events are explicit: whoever
waits for one subscribes a listener with one small interface, the replica announces, and no
room below a door (storage, state, service) ever imports a door to be told.

- ``CommitListener.on_commit``: the ledger committed up to an index. A door subscribes to write
  the answers of the sends that commit completed before the dispatcher's pass runs (the
  listeners run in the order they subscribed, and the replica subscribes its dispatcher last).
- ``ArrivalListener.on_arrival``: messages reached a queue (after the dispatcher's pass): held
  pulls, waiting POP receives, the delay scheduler and the timer wheel look again.
- ``FailureListener.on_failure``: the replica stops for good (fail-stop): its assembly closes
  the doors and exits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ArrivalListener", "CommitListener", "FailureListener", "ReplicaEvents"]


class CommitListener(Protocol):
    def on_commit(self, committed_index: int) -> None:
        """The ledger committed every entry up to ``committed_index``; proposals it completed
        have their callbacks scheduled (they run after this, in the same loop pass)."""


class ArrivalListener(Protocol):
    def on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        """Messages reached queue ``queue_id`` of ``topic``; its max offset is now
        ``max_offset``."""


class FailureListener(Protocol):
    def on_failure(self, failure: BaseException) -> None:
        """The replica stopped for good because of ``failure``: its queues no longer follow the
        log; called once."""


class ReplicaEvents:
    """The subscribers of one replica's events, called in the order they subscribed."""

    def __init__(self) -> None:
        self._commits: list[Callable[[int], None]] = []
        self._arrivals: list[Callable[[str, int, int], None]] = []
        self._failures: list[Callable[[BaseException], None]] = []

    def subscribe_commits(self, listener: CommitListener) -> None:
        self._commits.append(listener.on_commit)

    def subscribe_arrivals(self, listener: ArrivalListener) -> None:
        self._arrivals.append(listener.on_arrival)

    def subscribe_failures(self, listener: FailureListener) -> None:
        self._failures.append(listener.on_failure)

    def committed(self, committed_index: int) -> None:
        for listener in self._commits:
            listener(committed_index)

    def arrived(self, topic: str, queue_id: int, max_offset: int) -> None:
        for listener in self._arrivals:
            listener(topic, queue_id, max_offset)

    def failed(self, failure: BaseException) -> None:
        for listener in self._failures:
            listener(failure)
