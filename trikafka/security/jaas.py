"""Kafka's ``sasl.jaas.config`` values: one JAAS login module entry, parsed.

The syntax (Kafka's ``JaasConfig``)::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

A login module class, a control flag (required, requisite, sufficient, optional), then
``key=value`` options whose values are double-quoted (``\\"`` escapes a quote) or bare words,
and a final ``;``. Exactly one entry is allowed per key, as in Kafka.

Errors name the key they came from but never echo the value: it holds passwords.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from trikafka.errors import ConfigError

__all__ = ["JaasEntry", "parse_jaas_config"]

FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=";]+)|(=)|(;))', re.S)


@attrs.frozen
class JaasEntry:
    login_module: str
    flag: str
    options: Mapping[str, str] = attrs.field(repr=False)  # holds secrets

    def users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>="<password>"`` options: name → password."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_")}


def _tokens(text: str, key: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ConfigError(key, "[hidden]", f"JAAS syntax error at character {pos}")
        quoted, word, equals, semi = match.groups()
        if quoted is not None:
            out.append(("value", re.sub(r"\\(.)", r"\1", quoted)))
        elif word is not None:
            out.append(("word", word))
        elif equals:
            out.append(("=", "="))
        elif semi:
            out.append((";", ";"))
        pos = match.end()
    return out


def parse_jaas_config(text: str, key: str) -> JaasEntry:
    """One login module entry; a ConfigError naming ``key`` (never the secrets) otherwise."""
    expected = 'LoginModuleClass required key="value" ... ;'
    tokens = _tokens(text, key)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ConfigError(key, "[hidden]", f"a JAAS entry is required: {expected}")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in FLAGS:
        raise ConfigError(key, "[hidden]", f"the control flag must be one of {', '.join(FLAGS)}")
    if tokens[-1][0] != ";":
        raise ConfigError(key, "[hidden]", f"a JAAS entry ends with ';': {expected}")
    body = tokens[2:-1]
    if any(kind == ";" for kind, _ in body):
        raise ConfigError(key, "[hidden]", "exactly one login module is allowed per key")
    if len(body) % 3:
        raise ConfigError(key, "[hidden]", f"options must look like key=\"value\": {expected}")
    options: dict[str, str] = {}
    for i in range(0, len(body), 3):
        (k_kind, name), (eq, _), (_v_kind, value) = body[i : i + 3]
        if k_kind != "word" or eq != "=":
            raise ConfigError(key, "[hidden]", f"options must look like key=\"value\": {expected}")
        options[name] = value
    return JaasEntry(module, flag, options)
