"""The broker's typed refusals and the remoting door's one mapping of them to response codes."""

from __future__ import annotations

import pytest

from ledgermq.broker import errors
from ledgermq.broker.remoting.errors import _CODES, response_code
from ledgermq.errors import LedgerMQError
from ledgermq.wire import MQResponseCode

_ALL = [getattr(errors, name) for name in errors.__all__]


@pytest.mark.parametrize("cls", [c for c in _ALL if c != errors.ServiceError])
def test_every_refusal_has_a_code_of_its_own(cls: type[errors.ServiceError]) -> None:
    """A new refusal must be given its code, not fall back to SYSTEM_ERROR unnoticed."""
    assert issubclass(cls, errors.ServiceError)
    assert issubclass(cls, LedgerMQError)
    assert cls in _CODES or cls is errors.TransferRefusedError


def test_codes_are_rocketmqs() -> None:
    code = MQResponseCode
    assert response_code(errors.NotMasterError("x")) == code.SERVICE_NOT_AVAILABLE
    assert response_code(errors.BusyError("x")) == code.SYSTEM_BUSY
    assert response_code(errors.IllegalMessageError("x")) == code.MESSAGE_ILLEGAL
    assert response_code(errors.NoSuchTopicError("x")) == code.TOPIC_NOT_EXIST
    assert response_code(errors.InvalidFilterError("x")) == code.SUBSCRIPTION_PARSE_FAILED
    assert response_code(errors.ForbiddenError("x")) == code.NO_PERMISSION
    assert response_code(errors.ServiceError("x")) == code.SYSTEM_ERROR
    assert (
        response_code(errors.TransferRefusedError("x", retriable=True))
        == code.SERVICE_NOT_AVAILABLE
    )
    assert response_code(errors.TransferRefusedError("x", retriable=False)) == code.SYSTEM_ERROR


def test_retry_flags_say_what_to_do() -> None:
    assert errors.NotMasterError.retriable
    assert errors.NotMasterError.refresh_route
    assert errors.BusyError.retriable
    assert not errors.BusyError.refresh_route
    assert not errors.MaybeStoredError.retriable
    assert errors.TransferRefusedError("x", retriable=True).retriable
