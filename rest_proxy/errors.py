"""Confluent REST Proxy's error answers: an HTTP status plus `{"error_code", "message"}`.

Why a module of its own: REST clients branch on `error_code` (Confluent's
`io.confluent.kafkarest.Errors`: 404xx not found, 406xx format mismatch, 409xx conflicts,
422xx unprocessable entities, 500xx Kafka failures), so every refusal the proxy makes is one
of these named constructors with the code Confluent's REST Proxy gives for the same case.
"""

from __future__ import annotations

from http_common.confluent import ConfluentError


class RestError(ConfluentError):
    """A refusal with Confluent's HTTP status and error code (http_common/confluent.py)."""


def topic_not_found(topic: str = "") -> RestError:
    return RestError(404, 40401, "Topic not found." if not topic else f"Topic '{topic}' not found.")


def partition_not_found(topic: str = "", partition: object = None) -> RestError:
    where = f" ({topic}-{partition})" if topic else ""
    return RestError(404, 40402, f"Partition not found.{where}")


def consumer_instance_not_found() -> RestError:
    return RestError(404, 40403, "Consumer instance not found.")


def cluster_not_found(cluster_id: str) -> RestError:
    return RestError(404, 404, f"Cluster {cluster_id} cannot be found.")


def not_found(message: str) -> RestError:
    return RestError(404, 404, message)


def unknown_topic_or_partition() -> RestError:
    """v3: Kafka's UNKNOWN_TOPIC_OR_PARTITION as Confluent's v3 exception mapper answers it."""
    return RestError(404, 40403, "This server does not host this topic-partition.")


def format_mismatch() -> RestError:
    return RestError(406, 40601, "The requested embedded data format does not match the deserializer for this "
                                 "consumer instance")


def not_acceptable() -> RestError:
    return RestError(406, 406, "HTTP 406 Not Acceptable")


def unsupported_media_type() -> RestError:
    return RestError(415, 415, "HTTP 415 Unsupported Media Type")


def consumer_already_exists() -> RestError:
    return RestError(409, 40902, "Consumer with specified consumer ID already exists in the specified consumer "
                                 "group.")


def too_many_consumer_instances(limit: int) -> RestError:
    """Each instance holds a librdkafka consumer and its threads: a bound keeps a flood of
    creations from exhausting the broker's process (trafka.rest.proxy.max.consumer.instances)."""
    return RestError(429, 429, f"Too many consumer instances: {limit} exist (trafka.rest.proxy.max.consumer.instances); "
                               "delete some or let idle ones expire")


def illegal_state(message: str) -> RestError:
    return RestError(409, 40903, f"Illegal state: {message}")


def key_schema_missing() -> RestError:
    return RestError(422, 42201, "Request includes keys and uses a format that requires schemas, but does not "
                                 "include the key_schema or key_schema_id fields")


def value_schema_missing() -> RestError:
    return RestError(422, 42202, "Request includes values and uses a format that requires schemas, but does not "
                                 "include the value_schema or value_schema_id fields")


def conversion(message: str) -> RestError:
    return RestError(422, 42203, f"Conversion of JSON to Object failed: {message}")


def invalid_consumer_config(message: str) -> RestError:
    return RestError(422, 42204, f"Invalid consumer configuration: {message}")


def invalid_schema(message: str) -> RestError:
    return RestError(422, 42205, f"Invalid schema: {message}")


def unprocessable(message: str) -> RestError:
    """A request body that is JSON but not the entity the endpoint takes (Confluent: 422)."""
    return RestError(422, 422, message)


def bad_request(message: str) -> RestError:
    return RestError(400, 400, message)


def unauthorized(message: str = "Unauthorized") -> RestError:
    return RestError(401, 401, message)


def forbidden(message: str) -> RestError:
    return RestError(403, 40301, message)


def record_unreadable(part: str, topic: str, partition: int, offset: int, cause: str) -> RestError:
    """A record the consumer's format cannot read: Confluent's REST Proxy answers Kafka's
    SerializationException (the Java consumer's RecordDeserializationException) with 408
    40801; the message is the Java consumer's, naming the record's partition and offset."""
    return RestError(408, 40801, f"Error deserializing {part} for partition {topic}-{partition} at offset "
                                 f"{offset}. If needed, please seek past the record to continue consumption. "
                                 f"({cause})")


def schema_registry_unavailable(message: str) -> RestError:
    return RestError(500, 50001, f"Schema Registry: {message}")


def kafka_error(message: str, retriable: bool = False) -> RestError:
    return RestError(500, 50003 if retriable else 50002, message)
