"""What the Schema Registry needs beyond the base package: the ``registry`` extra.

The broker serves the registry's REST API on its base dependencies, but a schema is parsed by
fastavro (Avro), jsonschema (JSON Schema), proto-schema-parser and protobuf (Protobuf). A broker
asked to serve the registry (``schema.registry.port``) without them would start, then refuse
the first schema with a 422; it refuses to start instead, naming the key and the install line
(:func:`require_registry_extra`, called where the broker's parts are built). Whether a package
is installed is asked of the import system (``importlib.util.find_spec``), which finds it
without importing it: a broker still loads those libraries when a schema is first parsed.
"""

from __future__ import annotations

import importlib.util

from trikafka.errors import ConfigError

__all__ = ["INSTALL_REGISTRY", "REGISTRY_MODULES", "missing_registry_modules", "require_registry_extra"]

#: The modules the registry extra brings (pyproject.toml's ``registry``), as imported.
REGISTRY_MODULES = ("fastavro", "jsonschema", "proto_schema_parser", "google.protobuf")

INSTALL_REGISTRY = "pip install 'trikafka[registry]'"


def missing_registry_modules() -> list[str]:
    """Those of :data:`REGISTRY_MODULES` that cannot be imported here."""
    missing = []
    for name in REGISTRY_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # its parent package is missing (google), or broken
            found = False
        if not found:
            missing.append(name)
    return missing


def require_registry_extra(port: int) -> None:
    """Refuse ``schema.registry.port`` (a :class:`ConfigError`) when the extra is missing."""
    missing = missing_registry_modules()
    if missing:
        raise ConfigError(
            "schema.registry.port",
            port,
            f"the Schema Registry needs the registry extra ({', '.join(missing)} not installed): "
            f"{INSTALL_REGISTRY}, or leave schema.registry.port unset",
        )
