"""Typed broker errors and the one place that maps exceptions to Kafka error codes.

Handlers raise (or catch) these and put `error_code_for(exc)` into the response; only
`ProtocolError`s from `wire` close a connection. Storage raises its own exceptions
(storage/errors.py) because it knows nothing of the protocol; they are mapped here too.
"""

from __future__ import annotations

import logging

from storage import errors as storage_errors
from wire.errors import ErrorCode


class KafkaError(Exception):
    """A failure the client is told about with `code`; the message goes to the log and,
    where the response has an error_message field, to the client."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", code: ErrorCode | None = None) -> None:
        super().__init__(message or (code or self.code).name)
        if code is not None:
            self.code = code


class InvalidTopic(KafkaError):
    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class InvalidRequest(KafkaError):
    code = ErrorCode.INVALID_REQUEST


class InvalidConfiguration(KafkaError):
    """A config name or value the resource cannot take (Kafka's InvalidConfigurationException)."""

    code = ErrorCode.INVALID_CONFIG


class PolicyViolation(KafkaError):
    code = ErrorCode.POLICY_VIOLATION


class InvalidReplicationFactor(KafkaError):
    code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidPartitions(KafkaError):
    code = ErrorCode.INVALID_PARTITIONS


class UnknownTopicOrPartition(KafkaError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class UnknownTopicId(KafkaError):
    code = ErrorCode.UNKNOWN_TOPIC_ID


class NotLeaderOrFollower(KafkaError):
    """This broker does not lead the partition (in a cluster: another broker does)."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class FencedLeaderEpoch(KafkaError):
    """The client's leader epoch is older than ours: its metadata is stale (KIP-320)."""

    code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpoch(KafkaError):
    """The client's leader epoch is newer than ours: we have not heard of it yet (KIP-320)."""

    code = ErrorCode.UNKNOWN_LEADER_EPOCH


class TopicAuthorizationFailed(KafkaError):
    """The authorizer refused the operation on the topic (server/security/authorizer.py)."""
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupAuthorizationFailed(KafkaError):
    code = ErrorCode.GROUP_AUTHORIZATION_FAILED


class GroupIdNotFound(KafkaError):
    """The group does not exist, or is of another type (a share request for a classic group)."""

    code = ErrorCode.GROUP_ID_NOT_FOUND


class UnknownMemberId(KafkaError):
    code = ErrorCode.UNKNOWN_MEMBER_ID


class FencedMemberEpoch(KafkaError):
    code = ErrorCode.FENCED_MEMBER_EPOCH


class GroupMaxSizeReached(KafkaError):
    code = ErrorCode.GROUP_MAX_SIZE_REACHED


class InvalidRecordState(KafkaError):
    """KIP-932: an acknowledgement for records this member does not hold acquired."""

    code = ErrorCode.INVALID_RECORD_STATE


class ShareSessionNotFound(KafkaError):
    code = ErrorCode.SHARE_SESSION_NOT_FOUND


class InvalidShareSessionEpoch(KafkaError):
    code = ErrorCode.INVALID_SHARE_SESSION_EPOCH


class NotController(KafkaError):
    """A request only the active controller serves reached another broker (a single broker
    has no controller); the client finds the controller through Metadata and retries."""

    code = ErrorCode.NOT_CONTROLLER


class ClusterAuthorizationFailed(KafkaError):
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class TransactionalIdAuthorizationFailed(KafkaError):
    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class InvalidRecord(KafkaError):
    """Some records of a batch broke a rule of the topic (KIP-467): `record_errors` holds
    (index of the record in its batch, message) for each, so a client fails exactly those
    records and retries or fails the rest as "a different record" of the batch."""

    code = ErrorCode.INVALID_RECORD

    def __init__(self, message: str, record_errors: list[tuple[int, str]], code: ErrorCode | None = None) -> None:
        super().__init__(message, code)
        self.record_errors = record_errors


class Unsupported(KafkaError):
    """A request for a feature this broker does not implement. Answered with the code Kafka
    uses for "not supported" — never with an authorization error, which would send a user
    looking for an ACL that does not exist."""

    code = ErrorCode.UNSUPPORTED_VERSION


_STORAGE_CODES: list[tuple[type[BaseException], ErrorCode]] = [
    (storage_errors.TopicExists, ErrorCode.TOPIC_ALREADY_EXISTS),
    (storage_errors.InvalidTopicName, ErrorCode.INVALID_TOPIC_EXCEPTION),
    (storage_errors.UnknownTopicOrPartition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (storage_errors.LogClosed, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (storage_errors.InvalidConfig, ErrorCode.INVALID_CONFIG),
    (storage_errors.InvalidPartitions, ErrorCode.INVALID_PARTITIONS),
    (storage_errors.OffsetOutOfRange, ErrorCode.OFFSET_OUT_OF_RANGE),
    (storage_errors.RecordTooLarge, ErrorCode.MESSAGE_TOO_LARGE),
    (storage_errors.LogDirFull, ErrorCode.KAFKA_STORAGE_ERROR),
    (storage_errors.StorageError, ErrorCode.KAFKA_STORAGE_ERROR),
]


def error_code_for(exc: BaseException) -> ErrorCode:
    """The Kafka error code a client should see for `exc`."""
    if isinstance(exc, KafkaError):
        return exc.code
    for cls, code in _STORAGE_CODES:
        if isinstance(exc, cls):
            return code
    if isinstance(exc, OSError):
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.UNKNOWN_SERVER_ERROR


def logged_error_code(exc: BaseException, logger: logging.Logger, what: str, client_id: str | None,
                      level: int = logging.INFO) -> ErrorCode:
    """`error_code_for(exc)`, logged: an unexpected failure (UNKNOWN_SERVER_ERROR) with its
    traceback, an expected one as one line naming the client. For handlers that answer a
    failure per partition or resource and go on with the rest."""
    code = error_code_for(exc)
    if code == ErrorCode.UNKNOWN_SERVER_ERROR:
        logger.error("%s failed", what, exc_info=exc)
    else:
        logger.log(level, "%s from %s: %s (%s)", what, client_id, code.name, exc)
    return code
