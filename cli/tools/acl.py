"""`trafka acl create|list|delete`: ACLs with kafka-acls.sh's options (--allow-principal,
--operation, --topic, --resource-pattern-type ...), through the AdminClient's
CreateAcls / DescribeAcls / DeleteAcls."""

from __future__ import annotations

import argparse
import re
from typing import Any

from cli.tools.common import CliError, add_output_format, admin_client, emit, result, table, timeout

CLUSTER_NAME = "kafka-cluster"
OPERATIONS = ("all", "read", "write", "create", "delete", "alter", "describe", "cluster-action",
              "describe-configs", "alter-configs", "idempotent-write")


def register(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `acl` and its verbs to the root parser."""
    acl = sub.add_parser("acl", help="create, list and delete ACLs")
    verbs = acl.add_subparsers(dest="verb", required=True, metavar="VERB")
    create = verbs.add_parser("create", parents=[parent],
                              help="grant (or deny) principals operations on resources")
    _options(create, creating=True)
    create.set_defaults(handler=create_acls)
    lister = verbs.add_parser("list", parents=[parent], help="list ACLs (the options filter; none: all ACLs)")
    _options(lister, creating=False)
    lister.set_defaults(handler=list_acls)
    delete = verbs.add_parser("delete", parents=[parent],
                              help="delete the ACLs matching the options (at least one is needed)")
    _options(delete, creating=False)
    delete.set_defaults(handler=delete_acls)


def _options(parser: argparse.ArgumentParser, creating: bool) -> None:
    parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="e.g. User:alice (repeatable; 'User:' is added when missing)")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="a DENY entry for this principal (repeatable)")
    if not creating:
        parser.add_argument("--principal", action="append", default=[], metavar="PRINCIPAL",
                            help="entries of this principal, ALLOW and DENY (repeatable)")
    parser.add_argument("--host", default="*" if creating else None,
                        help="client host the entry applies to (default " + ("*" if creating else "any") + ")")
    parser.add_argument("--operation", action="append", default=[], type=_operation_name, metavar="OP",
                        help="one of " + ", ".join(OPERATIONS) + " (repeatable; Kafka's names such as "
                             "DescribeConfigs work too)" + ("" if creating else "; default any"))
    parser.add_argument("--topic", action="append", default=[], help="topic name (or prefix) (repeatable)")
    parser.add_argument("--group", action="append", default=[], help="consumer group id (or prefix) (repeatable)")
    parser.add_argument("--transactional-id", action="append", default=[], help="transactional id (repeatable)")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    choices = ("literal", "prefixed") if creating else ("any", "match", "literal", "prefixed")
    parser.add_argument("--resource-pattern-type", choices=choices, default="literal" if creating else "any",
                        help="how resource names match (default " + ("literal" if creating else "any") + ")")
    add_output_format(parser)


def _operation_name(value: str) -> str:
    name = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", value).replace("-", "_").upper()
    valid = {op.replace("-", "_").upper() for op in OPERATIONS}
    if name not in valid:
        raise argparse.ArgumentTypeError(f"unknown operation {value!r} (one of {', '.join(OPERATIONS)})")
    return name


# ------------------------------------------------------------------ verbs

def create_acls(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType

    principals = _principals(args)
    if not principals:
        raise CliError("give --allow-principal and/or --deny-principal", 2)
    if not args.operation:
        raise CliError("give at least one --operation", 2)
    resources = _resources(args)
    if not resources:
        raise CliError("give a resource: --topic, --group, --transactional-id or --cluster", 2)
    pattern = ResourcePatternType[args.resource_pattern_type.upper()]
    bindings = [AclBinding(rtype, name, pattern, principal, args.host, AclOperation[op], AclPermissionType[perm])
                for principal, perm in principals for rtype, name in resources for op in args.operation]
    admin = admin_client(args)
    futures = admin.create_acls(bindings, request_timeout=timeout())
    for future in futures.values():
        result(future)
    rows = [_row(b) for b in bindings]
    emit(args, rows, lambda rows: "created:\n" + _table(rows))
    return 0


def list_acls(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    rows: list[dict[str, Any]] = []
    for flt in _filters(args):
        rows += [_row(b) for b in result(admin.describe_acls(flt, request_timeout=timeout()))]
    rows = _unique(rows)
    emit(args, rows, lambda rows: _table(rows) if rows else "(no ACLs)")
    return 0


def delete_acls(args: argparse.Namespace) -> int:
    if not (_principals(args) or _resources(args) or args.operation):
        raise CliError("refusing to delete every ACL: give a principal, an operation or a resource", 2)
    admin = admin_client(args)
    rows: list[dict[str, Any]] = []
    for future in admin.delete_acls(_filters(args), request_timeout=timeout()).values():
        rows += [_row(b) for b in result(future)]
    rows = _unique(rows)
    emit(args, rows, lambda rows: ("deleted:\n" + _table(rows)) if rows else "no ACL matched")
    return 0


# ------------------------------------------------------------------ helpers

def _principals(args: argparse.Namespace) -> list[tuple[str, str]]:
    def full(p: str) -> str:
        return p if ":" in p else f"User:{p}"

    return ([(full(p), "ALLOW") for p in args.allow_principal] + [(full(p), "DENY") for p in args.deny_principal]
            + [(full(p), "ANY") for p in getattr(args, "principal", [])])


def _resources(args: argparse.Namespace) -> list[tuple[Any, str]]:
    from confluent_kafka.admin import ResourceType

    out = [(ResourceType.TOPIC, t) for t in args.topic] + [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.BROKER, CLUSTER_NAME))
    return out


def _filters(args: argparse.Namespace) -> list:
    """AclBindingFilters for list/delete: each option given narrows; one not given matches any."""
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)

    principals: list[tuple[str | None, str]] = list(_principals(args)) or [(None, "ANY")]
    resources: list[tuple[Any, str | None]] = list(_resources(args)) or [(ResourceType.ANY, None)]
    operations = args.operation or ["ANY"]
    pattern = ResourcePatternType[args.resource_pattern_type.upper()]
    return [AclBindingFilter(rtype, name, pattern, principal, args.host, AclOperation[op], AclPermissionType[perm])
            for principal, perm in principals for rtype, name in resources for op in operations]


def _row(binding) -> dict[str, Any]:
    rtype = binding.restype.name
    return {"principal": binding.principal, "host": binding.host,
            "resource_type": "CLUSTER" if rtype == "BROKER" else rtype, "resource_name": binding.name,
            "pattern_type": binding.resource_pattern_type.name, "operation": binding.operation.name,
            "permission": binding.permission_type.name}


def _unique(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        seen.setdefault(tuple(row.values()), row)
    return sorted(seen.values(), key=lambda r: tuple(str(v) for v in r.values()))


def _table(rows: list[dict[str, Any]]) -> str:
    return table(["PRINCIPAL", "HOST", "RESOURCE-TYPE", "RESOURCE-NAME", "PATTERN", "OPERATION", "PERMISSION"],
                 [tuple(r.values()) for r in rows])
