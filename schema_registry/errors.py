"""Confluent's error answers: an HTTP status plus `{"error_code": ..., "message": ...}`.

Why a module of its own: clients (confluent-kafka's SchemaRegistryClient, the Java client)
branch on `error_code`, not on the text, so every refusal the registry makes is one of these
named constructors, with the code Confluent's Schema Registry gives for the same case.
"""

from __future__ import annotations

from http_common.confluent import ConfluentError


class RegistryError(ConfluentError):
    """A refusal with Confluent's HTTP status and error code (http_common/confluent.py)."""


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(what: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, what)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true "
                                     "to delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted first before being "
                                     "permanently deleted")


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def incompatible(subject: str, messages: list[str]) -> RegistryError:
    return RegistryError(409, 409, f"Schema being registered is incompatible with an earlier schema for subject "
                                   f"\"{subject}\", details: {messages}")


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {message}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. Allowed values "
                                     "are between [1, 2^31-1] and the string \"latest\"")


def invalid_compatibility(level: object) -> RegistryError:
    return RegistryError(422, 42203, f"Invalid compatibility level. Valid values are none, backward, forward, full, "
                                     f"backward_transitive, forward_transitive, and full_transitive: {level}")


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode. Valid values are READWRITE, READONLY, IMPORT: {mode}")


def not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def references_exist(subject: str, version: int) -> RegistryError:
    return RegistryError(422, 42206, f"One or more references exist to the schema {{subject={subject},version={version}}}.")


def bad_request(message: str) -> RegistryError:
    return RegistryError(400, 400, message)


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store - {message}")
