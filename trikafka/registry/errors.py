"""The registry's errors, in Confluent Schema Registry's shape: an HTTP status and an
``error_code`` (``{"error_code": 40401, "message": "Subject 'x' not found."}``).

Every refusal of the registry is one :class:`RegistryError`; the HTTP edge turns it into the
response, so no request gets a 500 for a fault of its own. The codes are Confluent's
(``io.confluent.kafka.schemaregistry.rest.exceptions.Errors``): 404xx for what is not there,
422xx for what is malformed, 409 for an incompatible schema.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "RegistryError",
    "bad_request",
    "incompatible_schema",
    "invalid_compatibility_level",
    "invalid_mode",
    "invalid_schema",
    "invalid_version",
    "operation_not_permitted",
    "reference_exists",
    "schema_not_found",
    "subject_not_found",
    "subject_not_soft_deleted",
    "subject_soft_deleted",
    "version_not_found",
    "version_not_soft_deleted",
    "subject_config_not_found",
    "subject_mode_not_found",
]


class RegistryError(Exception):
    """A request the registry refuses: ``status`` (HTTP), ``error_code`` and ``message``."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(what: str = "") -> RegistryError:
    return RegistryError(404, 40403, f"Schema {what} not found".replace("  ", " ").strip())


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404, 40407, f"Subject '{subject}' Version {version} was not deleted first before being permanently deleted"
    )


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def incompatible_schema(subject: str, reasons: Iterable[str]) -> RegistryError:
    listed = list(reasons)
    return RegistryError(
        409,
        409,
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
        f"details: [{', '.join(listed)}]",
    )


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {detail}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are between "
        '[1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility_level(level: object) -> RegistryError:
    return RegistryError(
        422,
        42203,
        f"Invalid compatibility level {level!r}. Valid values are none, backward, forward, full, "
        "backward_transitive, forward_transitive, and full_transitive",
    )


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode {mode!r}. Valid values are READWRITE, READONLY and IMPORT")


def operation_not_permitted(detail: str) -> RegistryError:
    return RegistryError(422, 42205, detail)


def reference_exists(detail: str) -> RegistryError:
    return RegistryError(422, 42206, f"One or more references exist to the schema {detail}.")


def bad_request(detail: str) -> RegistryError:
    """A body or parameter the registry cannot use (Confluent's plain 422)."""
    return RegistryError(422, 422, detail)
