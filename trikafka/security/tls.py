"""TLS for SSL and SASL_SSL listeners: Kafka's ``ssl.*`` keys turned into an ``ssl.SSLContext``.

Kafka's keys describe Java keystores; here they mean:

* ``ssl.keystore.type=PEM`` — ``ssl.keystore.location`` is a PEM file holding the private key
  and its certificate chain (``ssl.key.password`` decrypts the key), or the key and chain are
  given inline in ``ssl.keystore.key`` / ``ssl.keystore.certificate.chain``;
* ``ssl.keystore.type=PKCS12`` — a ``.p12`` file opened with ``ssl.keystore.password``
  (needs the ``cryptography`` package); JKS is refused: convert it with ``keytool``;
* ``ssl.truststore.*`` likewise: the CAs a client certificate must chain to
  (``ssl.truststore.certificates`` inline). With none given, the system's CAs;
* ``ssl.client.auth`` none / requested / required (mutual TLS);
* ``ssl.enabled.protocols`` bounds the TLS versions; ``ssl.cipher.suites`` takes Java's
  (IANA) names or OpenSSL's. Python cannot restrict TLS 1.3 suites, so a list that would
  need that is refused rather than half applied.

Every problem is a ConfigError naming the key, found when the broker starts. The principal
of a client certificate is Kafka's default: ``User:`` and the subject's full X.500 name in
RFC 2253 order (``User:CN=alice,OU=eng,O=Example``), as ``DefaultKafkaPrincipalBuilder``.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trikafka.errors import ConfigError
from trikafka.security.config import SecurityConfig

__all__ = ["ANONYMOUS", "principal_from_certificate", "server_ssl_context"]

ANONYMOUS = "User:ANONYMOUS"
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_TLS13_SUITES = {"TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256"}


def server_ssl_context(config: SecurityConfig, listener: str) -> ssl.SSLContext:
    """The context a listener's connections handshake with (settings per listener)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions(ctx, config, listener)
    _load_keystore(ctx, config, listener)
    auth = config.get("ssl.client.auth", listener).lower()
    ctx.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none":
        _load_truststore(ctx, config, listener)
    _set_ciphers(ctx, config, listener)
    return ctx


def _set_versions(ctx: ssl.SSLContext, config: SecurityConfig, listener: str) -> None:
    versions = [_VERSIONS[v] for v in config.list_value(config.get("ssl.enabled.protocols", listener))]
    if not versions:
        key = config.key_for("ssl.enabled.protocols", listener)
        raise ConfigError(key, "", "at least one of TLSv1.2, TLSv1.3 is required")
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)


@contextmanager
def _pem_file(data: bytes) -> Iterator[str]:
    """A private (0600) temporary file for PEM data ``ssl`` can only load from a path."""
    with tempfile.TemporaryDirectory(prefix="trikafka-tls-") as directory:
        path = Path(directory, "material.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        yield str(path)


def _read(config: SecurityConfig, listener: str, key: str) -> bytes:
    location = config.get(key, listener)
    try:
        return Path(location).expanduser().read_bytes()
    except OSError as exc:
        raise ConfigError(config.key_for(key, listener), location, f"cannot read it: {exc.strerror}") from None


def _pkcs12(config: SecurityConfig, listener: str, kind: str) -> tuple[Any, Any, list[Any]]:
    key = f"ssl.{kind}.location"
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError(
            config.key_for(f"ssl.{kind}.type", listener), "PKCS12",
            "PKCS12 needs the 'cryptography' package; install it or use PEM",
        ) from None
    password = config.get(f"ssl.{kind}.password", listener)
    try:
        return pkcs12.load_key_and_certificates(
            _read(config, listener, key), password.encode() if password else None
        )
    except ValueError as exc:
        raise ConfigError(
            config.key_for(key, listener), config.get(key, listener), f"not a PKCS12 store or wrong password: {exc}"
        ) from None


def _load_keystore(ctx: ssl.SSLContext, config: SecurityConfig, listener: str) -> None:
    kind = config.get("ssl.keystore.type", listener).upper()
    type_key = config.key_for("ssl.keystore.type", listener)
    location = config.get("ssl.keystore.location", listener)
    chain = config.get("ssl.keystore.certificate.chain", listener)
    if not location and not chain:
        raise ConfigError(
            "ssl.keystore.location", "",
            f"listener {listener} uses TLS and needs a keystore: ssl.keystore.location, or "
            "ssl.keystore.certificate.chain with ssl.keystore.key (type PEM)",
        )
    if kind == "JKS":
        raise ConfigError(type_key, "JKS", "JKS keystores are not supported: use PEM or PKCS12")
    if kind == "PKCS12":
        from cryptography.hazmat.primitives import serialization as s

        private_key, cert, extra = _pkcs12(config, listener, "keystore")
        if private_key is None or cert is None:
            raise ConfigError(
                config.key_for("ssl.keystore.location", listener), location, "holds no key and certificate"
            )
        pem = private_key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption())
        pem += b"".join(c.public_bytes(s.Encoding.PEM) for c in [cert, *extra])
        with _pem_file(pem) as path:
            ctx.load_cert_chain(path)
        return
    password = config.get("ssl.key.password", listener) or None
    if chain:
        key = config.get("ssl.keystore.key", listener)
        if not key:
            raise ConfigError("ssl.keystore.key", "", "ssl.keystore.certificate.chain needs the key too")
        pem, what = (key.strip() + "\n" + chain.strip() + "\n").encode(), "ssl.keystore.key"
    else:
        pem, what = _read(config, listener, "ssl.keystore.location"), "ssl.keystore.location"
    try:
        with _pem_file(pem) as path:
            ctx.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        raise ConfigError(
            config.key_for(what, listener), "[hidden]" if what.endswith(".key") else location,
            f"no usable PEM key and certificate chain (or a wrong ssl.key.password): {exc.reason}",
        ) from None


def _load_truststore(ctx: ssl.SSLContext, config: SecurityConfig, listener: str) -> None:
    kind = config.get("ssl.truststore.type", listener).upper()
    location = config.get("ssl.truststore.location", listener)
    inline = config.get("ssl.truststore.certificates", listener)
    if not location and not inline:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return
    if kind == "JKS" and not inline:
        raise ConfigError(
            config.key_for("ssl.truststore.type", listener), "JKS",
            "JKS truststores are not supported: use PEM or PKCS12",
        )
    if kind == "PKCS12" and not inline:
        from cryptography.hazmat.primitives import serialization as s

        _, cert, extra = _pkcs12(config, listener, "truststore")
        certs = [c for c in [cert, *extra] if c is not None]
        data = "".join(c.public_bytes(s.Encoding.PEM).decode() for c in certs)
    else:
        data = inline or _read(config, listener, "ssl.truststore.location").decode("ascii", "replace")
    try:
        ctx.load_verify_locations(cadata=data)
    except (ssl.SSLError, ValueError) as exc:
        key = "ssl.truststore.certificates" if inline else "ssl.truststore.location"
        raise ConfigError(
            config.key_for(key, listener), location or "[inline]", f"no usable CA certificates: {exc}"
        ) from None


def openssl_cipher_name(name: str) -> str:
    """Java's (IANA) TLS 1.2 suite name as OpenSSL spells it; OpenSSL names pass through.

    ``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` → ``ECDHE-RSA-AES128-GCM-SHA256``.
    """
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, _, rest = name[4:].partition("_WITH_")
    parts = [] if kx == "RSA" else kx.split("_")
    tokens = rest.split("_")
    if tokens[0] in ("AES", "CAMELLIA", "ARIA") and len(tokens) > 1:
        tokens[:2] = [tokens[0] + tokens[1]]
    if tokens[:2] == ["CHACHA20", "POLY1305"]:
        tokens = ["CHACHA20", "POLY1305"]
    if len(tokens) > 1 and tokens[1] == "CBC":
        del tokens[1]
    return "-".join(parts + tokens)


def _set_ciphers(ctx: ssl.SSLContext, config: SecurityConfig, listener: str) -> None:
    value = config.get("ssl.cipher.suites", listener)
    suites = config.list_value(value)
    if not suites:
        return
    key = config.key_for("ssl.cipher.suites", listener)
    tls13 = {s for s in suites if s in _TLS13_SUITES}
    if ctx.maximum_version == ssl.TLSVersion.TLSv1_3 and tls13 != _TLS13_SUITES:
        raise ConfigError(
            key, value,
            "TLS 1.3 suites cannot be restricted here: with TLSv1.3 enabled, list all of "
            f"{', '.join(sorted(_TLS13_SUITES))}, or set ssl.enabled.protocols=TLSv1.2",
        )
    names = [openssl_cipher_name(s) for s in suites if s not in _TLS13_SUITES]
    if not names:
        return
    known = {c["name"] for c in ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).get_ciphers()}
    unknown = [s for s, n in zip([s for s in suites if s not in _TLS13_SUITES], names, strict=True) if n not in known]
    if unknown:
        raise ConfigError(key, value, f"unknown or unavailable cipher suites: {', '.join(unknown)}")
    ctx.set_ciphers(":".join(names))


# -- principals ---------------------------------------------------------------------------

_RDN_KEYWORDS = {
    "commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
    "localityName": "L", "stateOrProvinceName": "ST", "countryName": "C",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
}


def _escape(value: str) -> str:
    out = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def principal_from_certificate(cert: dict[str, Any] | None) -> str:
    """``User:<subject in RFC 2253 order>`` of a verified peer certificate, else ANONYMOUS.

    ``ssl`` gives the subject's RDNs in DER order (country first); RFC 2253 — Java's
    ``X500Principal.getName()``, which Kafka's default principal builder uses — writes them
    most specific first.
    """
    if not cert or not cert.get("subject"):
        return ANONYMOUS
    rdns = []
    for rdn in reversed(cert["subject"]):
        rdns.append("+".join(f"{_RDN_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return "User:" + ",".join(rdns)
