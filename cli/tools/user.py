"""`trafka user create|delete|list`: SCRAM credentials (kafka-configs.sh --entity-type users
--alter --add-config 'SCRAM-SHA-256=[...]'), through AlterUserScramCredentials and
DescribeUserScramCredentials (KIP-554)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cli.tools.common import CliError, add_output_format, admin_client, emit, result, table, timeout

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def register(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `user` and its verbs to the root parser."""
    user = sub.add_parser("user", help="create, delete and list SCRAM users")
    verbs = user.add_subparsers(dest="verb", required=True, metavar="VERB")
    create = verbs.add_parser("create", parents=[parent], help="create a SCRAM user (or change its password)")
    create.add_argument("name", metavar="NAME")
    create.add_argument("--password", required=True, help="the password; '-' reads it from stdin's first line")
    create.add_argument("--mechanism", choices=MECHANISMS, default="SCRAM-SHA-256",
                        help="SCRAM mechanism (default SCRAM-SHA-256)")
    create.add_argument("--iterations", type=int, default=4096, help="PBKDF2 iterations (default 4096)")
    add_output_format(create)
    create.set_defaults(handler=create_user)
    delete = verbs.add_parser("delete", parents=[parent], help="delete a SCRAM user's credentials")
    delete.add_argument("name", metavar="NAME")
    delete.add_argument("--mechanism", choices=MECHANISMS,
                        help="only this mechanism's credential (default: all the user has)")
    add_output_format(delete)
    delete.set_defaults(handler=delete_user)
    lister = verbs.add_parser("list", parents=[parent], help="list SCRAM users and their mechanisms")
    add_output_format(lister)
    lister.set_defaults(handler=list_users)


def create_user(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    password = sys.stdin.readline().rstrip("\n") if args.password == "-" else args.password
    if not password:
        raise CliError("--password: an empty password", 2)
    mechanism = ScramMechanism[args.mechanism.replace("-", "_")]
    upsert = UserScramCredentialUpsertion(args.name, ScramCredentialInfo(mechanism, args.iterations),
                                          password.encode())
    admin = admin_client(args)
    result(admin.alter_user_scram_credentials([upsert], request_timeout=timeout())[args.name])
    emit(args, {"user": args.name, "mechanism": args.mechanism, "iterations": args.iterations},
         f"created user {args.name} ({args.mechanism})")
    return 0


def delete_user(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion

    admin = admin_client(args)
    if args.mechanism:
        mechanisms = [args.mechanism]
    else:
        mechanisms = [m for m in _describe(admin, [args.name]).get(args.name, {})]
    deletions = [UserScramCredentialDeletion(args.name, ScramMechanism[m.replace("-", "_")]) for m in mechanisms]
    result(admin.alter_user_scram_credentials(deletions, request_timeout=timeout())[args.name])
    emit(args, {"user": args.name, "mechanisms": mechanisms},
         f"deleted user {args.name} ({', '.join(mechanisms)})")
    return 0


def list_users(args: argparse.Namespace) -> int:
    users = _describe(admin_client(args), None)
    rows = [{"user": u, "mechanisms": [{"mechanism": m, "iterations": i} for m, i in sorted(mechs.items())]}
            for u, mechs in sorted(users.items())]
    emit(args, rows, lambda rows: table(["NAME", "MECHANISMS"],
                                        [(r["user"], ", ".join(f"{m['mechanism']}({m['iterations']})"
                                                               for m in r["mechanisms"])) for r in rows])
         if rows else "(no SCRAM users)")
    return 0


def _describe(admin, users: list[str] | None) -> dict[str, dict[str, int]]:
    """user → {mechanism: iterations}. A named user without credentials is RESOURCE_NOT_FOUND."""
    answer: Any = admin.describe_user_scram_credentials(users, request_timeout=timeout())
    if users is None:
        described = result(answer)
    else:
        described = {user: result(future) for user, future in answer.items()}
    return {user: {info.mechanism.name.replace("_", "-"): info.iterations for info in d.scram_credential_infos}
            for user, d in described.items()}
