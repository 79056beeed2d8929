"""The Spark connector's security options: an ACL account and TLS, passed to every client."""

from __future__ import annotations

import pickle

import pytest

from ledgermq.errors import ConfigError
from ledgermq.spark.planning import ClientSecurity, parse_sink_options, parse_source_options

BASE = {"namesrvAddr": "127.0.0.1:9876", "topic": "T"}


def test_no_security_options_mean_plain_anonymous_clients() -> None:
    options = parse_source_options(BASE)
    assert options.security == ClientSecurity()
    assert options.security.client_options() == {"credentials": None, "tls": None}


def test_credentials_and_tls_reach_the_clients_and_survive_pickling() -> None:
    options = parse_sink_options(
        {
            **BASE,
            "accessKey": "spark-writer",
            "secretKey": "writer-secret",
            "tlsTrustCertPath": "/etc/ledgermq/ca.pem",
        }
    )
    kwargs = options.security.client_options()
    assert kwargs["credentials"].access_key == "spark-writer"
    assert kwargs["tls"].trust_cert_path == "/etc/ledgermq/ca.pem"
    assert "writer-secret" not in repr(options)  # plans and logs show options' reprs
    copy = pickle.loads(pickle.dumps(options))
    assert copy == options
    assert hash(copy.security) == hash(options.security)  # the shared consumers' key


def test_tls_alone_uses_the_system_cas() -> None:
    security = parse_source_options({**BASE, "tls": "true"}).security
    assert security.tls is not None
    assert security.tls.trust_cert_path is None


def test_half_a_pair_is_refused() -> None:
    with pytest.raises(ConfigError, match="accessKey and secretKey go together"):
        parse_source_options({**BASE, "accessKey": "spark-reader"})
