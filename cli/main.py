"""`trafka` command line: parsing every command and running the chosen one.

`trafka serve` runs the broker with its HTTP sides (cli/serve.py); `trafka dev cluster` a
ZooKeeper and N brokers on loopback for a try-out, `trafka dev zookeeper` only the
ZooKeeper (cli/dev.py); `trafka topic|group|acl|user|cluster ...` are the operator's
commands, Kafka clients of their own (cli/tools/).

Each command's module is imported when that command runs: an operator's command never
loads the broker, and `trafka serve` never loads confluent-kafka.
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trafka", description="Trafka: a Kafka-compatible broker on trio.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the broker")
    serve.add_argument("--listen", metavar="HOST:PORT", help="listen address (default 0.0.0.0:9092)")
    serve.add_argument("--advertised", metavar="HOST:PORT", help="address clients are told to connect to")
    serve.add_argument("--data-dir", metavar="PATH", help="data directory (default ./data)")
    serve.add_argument("--node-id", type=int, help="broker id (default 1)")
    serve.add_argument("--cluster-id", help="cluster id (default: generated, kept in the data dir)")
    serve.add_argument("--config", metavar="FILE", help="Kafka-style server.properties file")
    serve.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                       help="any broker setting, e.g. --set num.partitions=3 (repeatable)")
    serve.add_argument("--default", metavar="KEY=VALUE", action="append", default=[],
                       help="replace a setting's built-in default, keeping its standing as a default (what "
                            "`trafka dev cluster` gives each broker's HTTP ports: a default port that is taken "
                            "is left off with a warning, a port set with --set stops the start) (repeatable)")
    serve.add_argument("--log-level", default=None, help="DEBUG, INFO, WARNING, ERROR (default INFO; env TRAFKA_LOG_LEVEL)")
    from cli import dev

    commands = {"serve": serve, "dev": dev.add_parser(sub)}
    from cli import tools

    tools.add_parsers(sub)
    parser.set_defaults(command_parsers=commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        from cli import tools

        if args.command in tools.NOUNS:  # the operator's commands answer a bad argument in one line
            print(f"trafka {args.command} {args.verb}: error: unrecognized arguments: {' '.join(extra)} "
                  f"(see trafka {args.command} {args.verb} --help)", file=sys.stderr)
            return 2
        # argparse would print the top-level usage: the command's own is what helps
        command_parser = args.command_parsers.get(args.command, parser)
        if args.command == "dev":
            command_parser = command_parser.get(args.dev_command, parser)
        command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "serve":
        from cli.serve import serve

        return serve(args)
    if args.command == "dev":
        from cli import dev

        return dev.run(args)
    from cli import tools

    if args.command in tools.NOUNS:
        return tools.run(args)
    return 2  # pragma: no cover - argparse enforces the subcommand


if __name__ == "__main__":  # `python -m cli.main ...`, as `python -m cli ...` and `python -m server ...`
    sys.exit(main())
