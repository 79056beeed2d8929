"""``ledgermq proxy`` as a real process for tests: started on a free port, its address read
from the line it prints, stopped with SIGTERM (killed if it does not stop)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = ["ProxyProcess"]

_PREFIX = "proxy listening on "


class ProxyProcess:
    """``address`` once started; ``close()`` stops it; ``log()`` is its output so far."""

    def __init__(self, namesrv_addr: str, log_dir: Path, extra: Sequence[str] = ()) -> None:
        """``extra``: more arguments of ``ledgermq proxy`` (``--set tls.server.mode=...``)."""
        log_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = log_dir / "proxy.out"
        self._log = self._log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ledgermq", "--log-level", "INFO", "proxy", "-n", namesrv_addr,
             "--listen", "127.0.0.1:0", *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log,
            start_new_session=True,
        )  # fmt: skip
        found = threading.Event()
        self.address = ""

        def read() -> None:
            assert self.proc.stdout is not None
            for raw in self.proc.stdout:
                line = raw.decode(errors="replace").strip()
                if line.startswith(_PREFIX) and not self.address:
                    self.address = line[len(_PREFIX) :]
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(30):
            self.close()
            raise AssertionError(f"the proxy did not start in 30 s:\n{self.log()}")

    def log(self) -> str:
        return self._log_path.read_text(errors="replace")[-6000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        with contextlib.suppress(OSError):
            self._log.close()
        if self.proc.stdout is not None:
            with contextlib.suppress(OSError):
                self.proc.stdout.close()
