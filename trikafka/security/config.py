"""Kafka's security keys: the protocol map, ``ssl.*``, ``sasl.*`` and their per-listener forms.

Why a module of its own: these keys do not fit ``BrokerConfig``'s one-field-per-key table.
Most of them may be given for one listener with Kafka's prefix
``listener.name.<listener name, lower case>.<key>`` (KIP-103), and the JAAS keys carry the
SASL mechanism in their name (``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config``). So
``BrokerConfig`` keeps all of them in one frozen :class:`SecurityConfig` value, and a lookup
for a listener tries the prefixed key first, then the plain key, then Kafka's default —
exactly Kafka's precedence.

Nothing listens without a protocol that is really there: :meth:`SecurityConfig.check_listeners`
refuses a listener whose name is not in ``listener.security.protocol.map`` or whose protocol is
not implemented, and the settings each protocol needs (a keystore for SSL, mechanisms and
credentials for SASL) are checked at start, never discovered by the first client.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from trikafka.errors import ConfigError
from trikafka.security.authorizer import ACCEPTED_CLASS_NAMES
from trikafka.security.jaas import JaasEntry, parse_jaas_config

__all__ = [
    "DEFAULT_PROTOCOL_MAP",
    "HTTP_PORTS",
    "IMPLEMENTED_PROTOCOLS",
    "IMPLEMENTED_MECHANISMS",
    "SECURITY_KEYS",
    "SecurityConfig",
    "security_key",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: What this broker really serves; any other protocol is refused at start.
IMPLEMENTED_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
IMPLEMENTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
KAFKA_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
SENSITIVE = frozenset(
    {"ssl.keystore.password", "ssl.key.password", "ssl.keystore.key", "ssl.truststore.password",
     "sasl.jaas.config"}
)

#: key → (Kafka's default, whether it may carry a listener prefix, doc).
SECURITY_KEYS: dict[str, tuple[str, bool, str]] = {
    "listener.security.protocol.map": (
        DEFAULT_PROTOCOL_MAP, False, "Listener name → security protocol, NAME:PROTOCOL,…"),
    "security.inter.broker.protocol": (
        "PLAINTEXT", False, "Accepted for compatibility: one broker has no inter-broker traffic."),
    "inter.broker.listener.name": (
        "", False, "Accepted for compatibility: one broker has no inter-broker traffic."),
    "sasl.mechanism.inter.broker.protocol": (
        "GSSAPI", False, "Accepted for compatibility: one broker has no inter-broker traffic."),
    "super.users": ("", False, "Principals (User:name;User:other) that ACLs will never deny."),
    "authorizer.class.name": (
        "", False, "Empty (no ACLs: everyone may do everything), or "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer / "
        "kafka.security.authorizer.AclAuthorizer (ACLs, Kafka's StandardAuthorizer rules)."),
    "allow.everyone.if.no.acl.found": (
        "false", False, "With an authorizer: whether a resource with no ACL at all is open to everyone."),
    "connection.failed.authentication.delay.ms": (
        "100", False, "A failed authentication's answer waits this long before the close "
        "(without blocking anyone else)."),
    "connections.max.reauth.ms": (
        "0", True, "KIP-368: a SASL session lasts this long, then the client must re-authenticate "
        "on its connection or have it closed; 0 (Kafka's default): sessions never expire."),
    "sasl.enabled.mechanisms": (
        "GSSAPI", True, "SASL mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER."),
    "ssl.keystore.type": ("JKS", True, "PEM or PKCS12 (JKS is refused)."),
    "ssl.keystore.location": ("", True, "The broker's key and certificate chain."),
    "ssl.keystore.password": ("", True, "Password of a PKCS12 keystore."),
    "ssl.key.password": ("", True, "Password of the private key (PEM)."),
    "ssl.keystore.certificate.chain": ("", True, "PEM certificate chain, inline (type PEM)."),
    "ssl.keystore.key": ("", True, "PEM private key, inline (type PEM)."),
    "ssl.truststore.type": ("JKS", True, "PEM or PKCS12 (JKS is refused)."),
    "ssl.truststore.location": ("", True, "CA certificates that client certificates must chain to."),
    "ssl.truststore.password": ("", True, "Password of a PKCS12 truststore."),
    "ssl.truststore.certificates": ("", True, "PEM CA certificates, inline (type PEM)."),
    "ssl.client.auth": ("none", True, "none, requested or required (mutual TLS)."),
    "ssl.enabled.protocols": ("TLSv1.2,TLSv1.3", True, "TLS versions a client may use."),
    "ssl.protocol": ("TLSv1.3", True, "Accepted for compatibility; ssl.enabled.protocols decides."),
    "ssl.cipher.suites": ("", True, "TLS 1.2 cipher suites (IANA or OpenSSL names); empty: OpenSSL's."),
    "ssl.endpoint.identification.algorithm": (
        "https", True, "Accepted for compatibility: a broker-side client setting."),
    "ssl.principal.mapping.rules": ("DEFAULT", True, "Only DEFAULT: the certificate's full subject."),
    "http.authentication.method": (
        "", False, "trikafka: HTTP Basic on the schema registry, HTTP proxy and console ports: BASIC, "
        "NONE, or empty (BASIC when any listener uses SASL_PLAINTEXT or SASL_SSL)."),
}
#: The pseudo listener whose ``ssl.*`` keys are ``http.ssl.*``: TLS on the HTTP ports
#: (schema registry, HTTP proxy, console). An ``http.ssl.*`` key not given falls back to the
#: broker's ``ssl.*``; HTTPS is on when ``http.ssl.keystore.location`` (or
#: ``http.ssl.keystore.certificate.chain``) is set.
HTTP_PORTS = "(http)"
_LISTENER_PREFIX = re.compile(r"^listener\.name\.([A-Za-z0-9_-]+)\.(.+)$", re.I)
_JAAS_KEY = re.compile(r"^([a-z0-9-]+)\.sasl\.jaas\.config$", re.I)
_PROTOCOL_VALUES = {
    "ssl.keystore.type": ("JKS", "PEM", "PKCS12"),
    "ssl.truststore.type": ("JKS", "PEM", "PKCS12"),
    "ssl.client.auth": ("none", "requested", "required"),
    "ssl.principal.mapping.rules": ("DEFAULT",),
    "allow.everyone.if.no.acl.found": ("true", "false"),
    "http.authentication.method": ("BASIC", "NONE"),
}
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")


def security_key(raw_key: str) -> str | None:
    """The normalised key if ``raw_key`` is a security key, else None.

    Keys with dots are taken as written (listener names keep their underscores,
    ``listener.name.sasl_ssl.…``); a Python spelling without dots (``ssl_client_auth``) has
    its underscores turned into dots, as ``BrokerConfig`` does for its own keys.
    """
    key = raw_key if "." in raw_key else raw_key.replace("_", ".")
    if key in SECURITY_KEYS:
        return key
    if key.startswith("http.ssl.") and key[len("http."):] in SECURITY_KEYS:
        return key
    match = _LISTENER_PREFIX.match(key)
    if match is None:
        return None
    name, rest = match.groups()
    if rest in SECURITY_KEYS and SECURITY_KEYS[rest][1]:
        return f"listener.name.{name.lower()}.{rest}"
    jaas = _JAAS_KEY.match(rest)
    if jaas is not None:
        return f"listener.name.{name.lower()}.{jaas.group(1).lower()}.sasl.jaas.config"
    return None


def _parse_protocol_map(value: str) -> dict[str, str]:
    key = "listener.security.protocol.map"
    result: dict[str, str] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ConfigError(key, value, "entries must look like LISTENER_NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                key, value, f"{name} maps to {protocol!r}; allowed: {', '.join(SECURITY_PROTOCOLS)}"
            )
        if name in result:
            raise ConfigError(key, value, f"{name} appears twice")
        result[name] = protocol
    return result


@attrs.frozen
class SecurityConfig:
    """Every security key given (normalised), and the protocol map parsed from them."""

    values: Mapping[str, str] = attrs.field(factory=dict, repr=False)  # holds secrets
    protocol_map: Mapping[str, str] = attrs.field(init=False)

    @protocol_map.default
    def _protocol_map(self) -> Mapping[str, str]:
        return _parse_protocol_map(self.get("listener.security.protocol.map"))

    def __attrs_post_init__(self) -> None:
        for key in self.values:
            base = self.base_key(key)
            allowed = _PROTOCOL_VALUES.get(base)
            value = self.values[key]
            if allowed and value not in allowed and value.lower() not in allowed and value.upper() not in allowed:
                raise ConfigError(key, value, f"allowed values are {', '.join(allowed)}")
            if base == "authorizer.class.name" and value and value not in ACCEPTED_CLASS_NAMES:
                raise ConfigError(
                    key, value, "the authorizer is Kafka's StandardAuthorizer; allowed: empty (no "
                    f"ACLs), {', '.join(ACCEPTED_CLASS_NAMES)}"
                )
            if base == "sasl.enabled.mechanisms":
                for mechanism in self.list_value(value):
                    if mechanism.upper() not in KAFKA_MECHANISMS:
                        raise ConfigError(
                            key, value, f"unknown SASL mechanism {mechanism}; Kafka's are "
                            f"{', '.join(KAFKA_MECHANISMS)}")
            if base == "ssl.enabled.protocols":
                for version in self.list_value(value):
                    if version not in TLS_VERSIONS:
                        raise ConfigError(key, value, f"allowed protocols are {', '.join(TLS_VERSIONS)}")
            if base == "sasl.jaas.config":
                parse_jaas_config(value, key)
            if base == "connection.failed.authentication.delay.ms" and not (
                value.isdigit() and int(value) < 2**31
            ):
                raise ConfigError(key, value, f"an integer in [0, {2**31 - 1}] is required")
            if base == "connections.max.reauth.ms" and not (value.isdigit() and int(value) < 2**63):
                raise ConfigError(key, value, f"an integer in [0, {2**63 - 1}] is required")

    @classmethod
    def from_properties(cls, items: Mapping[str, Any]) -> SecurityConfig:
        values: dict[str, str] = {}
        for raw_key, value in items.items():
            key = security_key(raw_key)
            if key is None:
                raise ConfigError(raw_key, value, "not a security key")
            values[key] = str(value).strip()
            if key in SECURITY_KEYS and values[key] == SECURITY_KEYS[key][0]:
                del values[key]  # a default given explicitly is the default: equal configs
        return cls(values)

    def merged(self, items: Mapping[str, Any]) -> SecurityConfig:
        return SecurityConfig.from_properties({**self.values, **items})

    @staticmethod
    def base_key(key: str) -> str:
        if key.startswith("http.ssl."):
            return key[len("http."):]
        match = _LISTENER_PREFIX.match(key)
        if match is None:
            return key
        rest = match.group(2)
        return "sasl.jaas.config" if _JAAS_KEY.match(rest) else rest

    @staticmethod
    def list_value(value: str) -> list[str]:
        return [part.strip() for part in value.split(",") if part.strip()]

    @staticmethod
    def mechanisms_from(key: str, value: str) -> tuple[str, ...]:
        mechanisms = tuple(m.upper() for m in SecurityConfig.list_value(value))
        for mechanism in mechanisms:
            if mechanism not in IMPLEMENTED_MECHANISMS:
                known = "is not implemented yet" if mechanism in KAFKA_MECHANISMS else "is unknown"
                raise ConfigError(
                    key, value,
                    f"SASL mechanism {mechanism} {known}; allowed: {', '.join(IMPLEMENTED_MECHANISMS)}",
                )
        return mechanisms

    # -- lookups --------------------------------------------------------------------------

    def get(self, key: str, listener: str | None = None) -> str:
        """``listener.name.<listener>.<key>``, else ``<key>``, else Kafka's default."""
        if listener is not None:
            prefixed = self._prefixed(key, listener)
            if prefixed in self.values:
                return self.values[prefixed]
        if key in self.values:
            return self.values[key]
        return SECURITY_KEYS[key][0]

    def key_for(self, key: str, listener: str) -> str:
        """The key a listener's value came from (for error messages)."""
        prefixed = self._prefixed(key, listener)
        return prefixed if prefixed in self.values else key

    @staticmethod
    def _prefixed(key: str, listener: str) -> str:
        return f"http.{key}" if listener == HTTP_PORTS else f"listener.name.{listener.lower()}.{key}"

    def http_authentication(self, listeners: Iterable[str]) -> bool:
        """Whether the HTTP ports ask for HTTP Basic: ``http.authentication.method`` if given,
        else whenever a listener uses SASL (the broker has users, so HTTP has them too)."""
        method = self.get("http.authentication.method").upper()
        if method:
            return method == "BASIC"
        return any(self.protocol(name) in ("SASL_PLAINTEXT", "SASL_SSL") for name in listeners)

    def http_tls(self) -> bool:
        """Whether the HTTP ports serve HTTPS (an ``http.ssl`` keystore is given)."""
        return bool(
            self.values.get("http.ssl.keystore.location") or self.values.get("http.ssl.keystore.certificate.chain")
        )

    def protocol(self, listener: str) -> str:
        return self.protocol_map[listener.upper()]

    def mechanisms(self, listener: str) -> tuple[str, ...]:
        key = self.key_for("sasl.enabled.mechanisms", listener)
        return self.mechanisms_from(key, self.get("sasl.enabled.mechanisms", listener))

    def jaas(self, listener: str, mechanism: str) -> JaasEntry | None:
        """Kafka reads only the listener- and mechanism-prefixed key on a broker."""
        key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        text = self.values.get(key)
        return None if text is None else parse_jaas_config(text, key)

    def check_listeners(self, listeners: Iterable[Any]) -> None:
        """Refuse, at start, a listener that would pretend to a protocol it does not speak."""
        allowed = ", ".join(f"{n} ({p})" for n, p in self.protocol_map.items())
        for spec in listeners:
            protocol = self.protocol_map.get(spec.name.upper())
            if protocol is None:
                raise ConfigError(
                    "listeners",
                    str(spec),
                    f"listener {spec.name} is not in listener.security.protocol.map; "
                    f"allowed listener names: {allowed}",
                )
            if protocol not in IMPLEMENTED_PROTOCOLS:
                raise ConfigError(
                    "listeners",
                    str(spec),
                    f"listener {spec.name} uses security protocol {protocol}, which is not "
                    f"implemented; allowed: {', '.join(sorted(IMPLEMENTED_PROTOCOLS))}",
                )
            if protocol in ("SSL", "SASL_SSL"):
                self._check_ssl(spec.name)
            if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
                self._check_sasl(spec.name)

    def _check_ssl(self, listener: str) -> None:
        """What can be known without reading files; the files are read when the broker starts."""
        if not self.get("ssl.keystore.location", listener) and not self.get(
            "ssl.keystore.certificate.chain", listener
        ):
            raise ConfigError(
                self.key_for("ssl.keystore.location", listener), "",
                f"listener {listener} uses TLS and needs a keystore: ssl.keystore.location, or "
                "ssl.keystore.certificate.chain with ssl.keystore.key (type PEM)",
            )
        for kind in ("keystore", "truststore"):
            key = f"ssl.{kind}.type"
            if self.get(key, listener).upper() == "JKS" and self.get(f"ssl.{kind}.location", listener):
                raise ConfigError(
                    self.key_for(key, listener), "JKS",
                    f"listener {listener}: JKS {kind}s are not supported: use PEM or PKCS12 "
                    "(ssl.keystore.type=PEM)",
                )

    def _check_sasl(self, listener: str) -> None:
        try:
            mechanisms = self.mechanisms(listener)
        except ConfigError as exc:
            raise ConfigError(exc.key, exc.value, f"listener {listener} uses SASL: {exc.allowed}") from None
        if not mechanisms:
            key = self.key_for("sasl.enabled.mechanisms", listener)
            raise ConfigError(key, "", f"listener {listener} needs at least one SASL mechanism")
        if "PLAIN" in mechanisms:
            entry = self.jaas(listener, "PLAIN")
            key = f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
            if entry is None or not entry.users():
                raise ConfigError(
                    key, "[unset]" if entry is None else "[hidden]",
                    f"listener {listener} enables PLAIN: give its users as "
                    'PlainLoginModule required user_<name>="<password>" ...;',
                )

    def as_properties(self) -> dict[str, str]:
        """Every key set or defaulted; secrets shown as ``[hidden]``."""
        out = {key: default for key, (default, _, _) in SECURITY_KEYS.items()}
        for key, value in self.values.items():
            out[key] = "[hidden]" if self.base_key(key) in SENSITIVE and value else value
        return out


# -- BrokerConfig's side: one field holds every security key ------------------------------


def split_security_keys(items: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the other keys, the security keys) of ``items``."""
    other: dict[str, Any] = {}
    security: dict[str, Any] = {}
    for raw_key, value in items.items():
        (other if security_key(raw_key) is None else security)[raw_key] = value
    return other, security


def security_field() -> Any:
    """``BrokerConfig.security``; validated against the config's listeners (defined before)."""
    return attrs.field(
        factory=SecurityConfig,
        converter=lambda v: v if isinstance(v, SecurityConfig) else SecurityConfig.from_properties(v),
        validator=lambda config, _attribute, value: value.check_listeners(config.listeners),
        metadata={"key": "security", "parse": None, "doc": "trikafka/security/config.py"},
    )


def security_config_keys() -> Iterable[tuple[str, str, str]]:
    """(key, default, doc) of every security key, for ``config_keys``."""
    for key, (default, _, doc) in SECURITY_KEYS.items():
        yield key, default, doc
