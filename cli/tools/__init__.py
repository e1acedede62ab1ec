"""The operator's commands: `trafka topic|group|acl|user|cluster ...`, rpk-shaped, with
Kafka's vocabulary. They are Kafka clients (confluent-kafka's AdminClient, Producer and
Consumer), not part of the broker: nothing in the broker imports this package, and each
noun lives in a module of its own (common.py holds the connection options and output)."""

from __future__ import annotations

import argparse

NOUNS = ("topic", "group", "acl", "user", "cluster")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register every noun on the root parser's subcommands (as cli/dev.py does `dev`)."""
    from cli.tools import acl, cluster, group, topic, user
    from cli.tools.common import common_options

    parent = common_options()
    for module in (topic, group, acl, user, cluster):
        module.register(sub, parent)
    _one_line_errors(sub)


def _one_line_errors(action: argparse._SubParsersAction) -> None:
    """Every parser under the nouns reports a bad argument in one line (common.ToolParser)."""
    from cli.tools.common import ToolParser

    for name, parser in action.choices.items():
        if name in NOUNS:
            _retype(parser, ToolParser)


def _retype(parser: argparse.ArgumentParser, cls: type) -> None:
    parser.__class__ = cls
    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            for child in act.choices.values():
                _retype(child, cls)


def run(args: argparse.Namespace) -> int:
    """Run the chosen verb; Kafka errors become one line on stderr and a non-zero exit."""
    prog = f"trafka {args.command} {getattr(args, 'verb', '')}".rstrip()
    args.prog = prog
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        import sys

        print(f"{prog}: error: this command needs confluent-kafka: pip install 'trafka[cli]'", file=sys.stderr)
        return 1
    from cli.tools.common import run_guarded

    return run_guarded(prog, args.handler, args)
