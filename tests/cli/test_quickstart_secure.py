"""``ledgermq quickstart --secure`` (issue 17): one command still, with the ACL, TLS on every
port and peer authentication on, and printed instructions that work as printed."""

from __future__ import annotations

import os
import re
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import child_env, ledgermq_command
from ledgermq.security.certs import openssl_available
from tests.test_cli import _free_port_offset

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_secure_quickstart_serves_only_those_it_told_how(tmp_path: Path) -> None:
    if not openssl_available():
        pytest.skip("the openssl command is needed to make the quickstart's certificates")
    offset = _free_port_offset()
    log = tmp_path / "quickstart.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            ledgermq_command("quickstart", "--dir", str(tmp_path / "data"), "--secure",
                             "--no-console", "--port-offset", str(offset), "--run-for", "60"),
            env=child_env(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "Serving for" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        text = log.read_text()
        assert "(plain HTTP on loopback: /metrics has no TLS or sign-in)" in text  # issue 28
        exports = re.search(r"export (LEDGERMQ_CREDENTIALS_FILE=\S+) (LEDGERMQ_TLS_CA=\S+)", text)
        assert exports is not None, text
        namesrv = re.search(r"NameServer\s+(\S+)", text)
        assert namesrv is not None
        told = dict(pair.split("=", 1) for pair in exports.groups())
        env = {**child_env(), **told}

        def ledgermq(*args: str, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
            return subprocess.run(ledgermq_command(*args), env=environ, capture_output=True,
                                  text=True, timeout=60, check=False)  # fmt: skip

        sent = ledgermq("produce", "-n", namesrv.group(1), "-t", "Demo", "hello", environ=env)
        assert sent.returncode == 0, sent.stderr
        plain_env = {k: v for k, v in env.items() if k != "LEDGERMQ_TLS_CA"}
        plain = ledgermq("produce", "-n", namesrv.group(1), "-t", "Demo", "x", environ=plain_env)
        assert plain.returncode != 0
        assert "Traceback" not in plain.stderr
        anonymous_env = {k: v for k, v in env.items() if k != "LEDGERMQ_CREDENTIALS_FILE"}
        anonymous = ledgermq("produce", "-n", namesrv.group(1), "-t", "Demo", "x",
                             environ=anonymous_env)  # fmt: skip
        assert anonymous.returncode != 0
        assert "not signed" in anonymous.stderr, anonymous.stderr
        secrets_dir = tmp_path / "data" / "secure"
        assert oct(os.stat(secrets_dir / "plain_acl.yml").st_mode & 0o777) == "0o600"
    finally:
        proc.terminate()
        proc.wait(30)
