"""net.run: uvloop when installed, asyncio otherwise."""

from __future__ import annotations

import asyncio
import builtins
from typing import Any

import pytest

from ledgermq.net import run, uvloop_available

pytestmark = pytest.mark.timeout(10)


async def loop_module() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__


def test_run_uses_uvloop_when_available() -> None:
    module = run(loop_module())
    if uvloop_available():
        assert module.startswith("uvloop")
    else:
        assert module.startswith("asyncio")


def test_run_falls_back_to_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_uvloop(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "uvloop":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_uvloop)
    assert run(loop_module()).startswith("asyncio")
