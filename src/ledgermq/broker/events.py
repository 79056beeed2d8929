"""What happens in a replica that others wait for: commits, arrivals and its fail-stop.

Why a module of its own: the replica used to be the event bus itself (``BrokerServer``'s
``_on_arrival`` called every waiting service by name, and the dispatcher called back into the
remoting door before each pass to write its answers). Here the events are explicit: whoever
waits for one subscribes a listener with one small interface, the replica announces, and no
room below a door (storage, state, service) ever imports a door to be told.

- ``CommitListener.on_commit``: the ledger committed up to an index. A door subscribes to write
  the answers of the sends that commit completed before the dispatcher's pass runs: the
  replica hands the listeners to the ledger when it opens, in the order they subscribed, and
  its dispatcher's after them; so they subscribe before it opens (later is refused).
- ``ArrivalListener.on_arrival``: messages reached a queue (after the dispatcher's pass): held
  pulls, waiting POP receives, the delay scheduler and the timer wheel look again. A listener
  that waits for one topic only (the delay levels', the timers') says so and is not called for
  the others.
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
        self._commits_taken = False
        self._arrivals: list[Callable[[str, int, int], None]] = []
        self._topic_arrivals: dict[str, list[Callable[[str, int, int], None]]] = {}
        self._failures: list[Callable[[BaseException], None]] = []

    def subscribe_commits(self, listener: CommitListener) -> None:
        """Before the replica opens: its ledger calls the commit listeners directly (no
        dispatch in between: a commit is the hot path), ahead of the dispatcher."""
        if self._commits_taken:
            raise RuntimeError(
                "subscribe to a replica's commits before it opens: the listeners must run "
                "before its dispatcher"
            )
        self._commits.append(listener.on_commit)

    def take_commit_listeners(self) -> list[Callable[[int], None]]:
        """The commit listeners, for the replica to hand to its ledger as it opens."""
        self._commits_taken = True
        return list(self._commits)

    def subscribe_arrivals(self, listener: ArrivalListener, *, topic: str | None = None) -> None:
        """``topic``: called for arrivals in that topic only; None: in every topic."""
        if topic is None:
            self._arrivals.append(listener.on_arrival)
        else:
            self._topic_arrivals.setdefault(topic, []).append(listener.on_arrival)

    def subscribe_failures(self, listener: FailureListener) -> None:
        self._failures.append(listener.on_failure)

    def arrived(self, topic: str, queue_id: int, max_offset: int) -> None:
        for listener in self._arrivals:
            listener(topic, queue_id, max_offset)
        if topic in self._topic_arrivals:
            for listener in self._topic_arrivals[topic]:
                listener(topic, queue_id, max_offset)

    def failed(self, failure: BaseException) -> None:
        for listener in self._failures:
            listener(failure)
