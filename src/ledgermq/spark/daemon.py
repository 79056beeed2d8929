"""Spark's Python worker daemon, with reused workers that end quietly when Spark stops.

``spark.stop()`` printed ``PySpark daemon failed to flush the output to the worker process``
and a ``BrokenPipeError`` traceback per idle worker. Not from the connector's sockets: Spark
reuses Python workers (``spark.python.worker.reuse``), and an idle one waits for its next task
in ``pyspark.daemon.worker``. At stop the JVM first closes the idle workers' connections, then
sends the daemon SIGTERM (which sends the workers SIGHUP). A worker that wakes up between the
two reads end-of-file where a task should begin, pyspark's worker loop turns it into an error
report it writes to the closed connection, and the daemon prints the failed flush. How many
appear depends on that race: none on a busy machine, one per core on an idle one.

This module runs pyspark's daemon with one change: before a reused worker starts on a task, it
waits for the task's first bytes (``MSG_PEEK``, so nothing is consumed). A connection that
ends there was closed by the JVM with no task to run (a stop, or the idle-worker timeout), and
the worker exits quietly, as the daemon does after a worker's last task. Anything else runs as
before. Spark runs it with ``spark.python.daemon.module=ledgermq.spark.daemon`` (set by
``ledgermq.spark.local.local_session`` and the examples; see docs/guides/spark.md).
"""

from __future__ import annotations

import socket
from typing import Final

import pyspark.daemon as _daemon

__all__ = ["DAEMON_MODULE", "main", "worker"]

DAEMON_MODULE: Final = "ledgermq.spark.daemon"
"""The value of ``spark.python.daemon.module`` that runs this daemon."""

_WORKER_ENDED: Final = 1
"""What ``worker`` returns for a connection closed before a task: non-zero, so the daemon's
child stops reusing the connection and exits (``os._exit(0)``, nothing printed)."""

_pyspark_worker = _daemon.worker


def _task_follows(sock: socket.socket) -> bool:
    """Wait until the next task's first bytes arrive (True) or the JVM closes the connection
    (False); nothing is read off the socket."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except OSError:  # reset by the JVM: closed as well
        return False


def worker(sock: socket.socket, authenticated: bool) -> int:
    """``pyspark.daemon.worker`` for one task, or ``_WORKER_ENDED`` when no task comes."""
    if not _task_follows(sock):
        return _WORKER_ENDED
    code: int = _pyspark_worker(sock, authenticated)
    return code


def main() -> None:
    """Run pyspark's daemon (``manager``) with ``worker`` in place of its own."""
    _daemon.worker = worker
    _daemon.manager()


if __name__ == "__main__":
    main()
