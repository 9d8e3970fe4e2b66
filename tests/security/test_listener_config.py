"""No listener pretends: a name outside ``listener.security.protocol.map``, or a protocol that
is not served as it says, is refused at start with an error naming the listener.

Before issue 14, ``--listeners SSL://127.0.0.1:0`` started and served *plaintext* on the
"SSL" port; these tests fail there.
"""

from __future__ import annotations

import pytest

from trikafka import BrokerConfig, ConfigError, cli
from trikafka.security.config import DEFAULT_PROTOCOL_MAP, SecurityConfig, security_key


def _refused(**items: str) -> str:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_mapping(items)
    return str(info.value)


def test_kafkas_default_protocol_map():
    config = BrokerConfig()
    assert config.security.protocol_map == {
        "PLAINTEXT": "PLAINTEXT",
        "SSL": "SSL",
        "SASL_PLAINTEXT": "SASL_PLAINTEXT",
        "SASL_SSL": "SASL_SSL",
    }
    assert config.as_properties()["listener.security.protocol.map"] == DEFAULT_PROTOCOL_MAP


@pytest.mark.parametrize("name", ["FOO", "INTERNAL", "CONTROLLER"])
def test_a_listener_name_outside_the_map_is_refused(name):
    message = _refused(listeners=f"PLAINTEXT://127.0.0.1:0,{name}://127.0.0.1:0")
    assert f"listener {name} is not in listener.security.protocol.map" in message
    assert "PLAINTEXT (PLAINTEXT)" in message and "SASL_SSL (SASL_SSL)" in message


def test_a_mapped_name_is_served_with_its_protocol():
    config = BrokerConfig.from_mapping(
        {
            "listeners": "INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT",
        }
    )
    assert config.security.protocol("INTERNAL") == "PLAINTEXT"


def test_the_map_names_only_kafkas_protocols():
    message = _refused(**{"listener.security.protocol.map": "A:PLAINTEXT,B:TLS"})
    assert "B maps to 'TLS'" in message
    assert "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL" in message


@pytest.mark.parametrize("listener", ["SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def test_the_cli_refuses_a_secure_listener_it_cannot_serve(listener, capsys):
    """``--listeners SSL://…`` alone: never a plaintext port under a secure name.

    The config is built the way ``main`` builds it (old main then served; this must not hang
    there), then ``main`` itself exits 2 with one line naming the listener."""
    argv = ["--in-memory", "--listeners", f"{listener}://127.0.0.1:0"]
    with pytest.raises(ConfigError) as info:
        cli.build_config(cli.parse_args(argv))
    assert f"listener {listener} " in str(info.value)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"listener {listener} " in err
    assert "Traceback" not in err


def test_an_authorizer_other_than_kafkas_is_refused():
    message = _refused(**{"authorizer.class.name": "com.example.LdapAuthorizer"})
    assert "com.example.LdapAuthorizer" in message
    assert "org.apache.kafka.metadata.authorizer.StandardAuthorizer" in message


def test_listener_prefixed_keys_keep_the_listener_name():
    assert security_key("listener.name.SASL_SSL.ssl.client.auth") == "listener.name.sasl_ssl.ssl.client.auth"
    assert (
        security_key("listener.name.sasl_plaintext.PLAIN.sasl.jaas.config")
        == "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    )
    assert security_key("ssl_client_auth") == "ssl.client.auth"
    assert security_key("listener.name.x.num.io.threads") is None
    config = SecurityConfig.from_properties(
        {"ssl.client.auth": "requested", "listener.name.internal.ssl.client.auth": "required"}
    )
    assert config.get("ssl.client.auth", "INTERNAL") == "required"
    assert config.get("ssl.client.auth", "EXTERNAL") == "requested"
    assert config.get("ssl.enabled.protocols", "EXTERNAL") == "TLSv1.2,TLSv1.3"


def test_secrets_are_never_shown():
    config = BrokerConfig.from_mapping(
        {
            "ssl.key.password": "hunter2",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="hunter2";'
            ),
        }
    )
    properties = config.as_properties()
    assert "hunter2" not in repr(config)
    assert "hunter2" not in str(properties)
    assert properties["ssl.key.password"] == "[hidden]"


def test_a_bad_jaas_value_is_named_but_not_echoed():
    message = _refused(
        **{"listener.name.sasl_plaintext.plain.sasl.jaas.config": 'PlainLoginModule required user_a="s3cret"'}
    )
    assert "listener.name.sasl_plaintext.plain.sasl.jaas.config" in message
    assert "ends with ';'" in message
    assert "s3cret" not in message
