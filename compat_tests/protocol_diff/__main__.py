"""Run the protocol-level differential and write its report.

    python -m compat_tests.protocol_diff [--reference kafka|kafka-3.9] [--api 0,1,...]
                                         [--report PATH.md] [--workdir DIR]

Starts a fresh reference Kafka and a fresh Trafka, sends both the same requests and
compares the answers (see compat_tests/protocol_diff/__init__.py). Exit status 1 when a
difference is not on the allow-list. `--reference kafka-3.9` compares against Kafka 3.9
instead of 4.x: the request versions Kafka 4.0 removed, which Trafka still serves.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

from compat_tests.protocol_diff import report
from compat_tests.protocol_diff.brokers import REFERENCES
from compat_tests.protocol_diff.run import run_differential


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat_tests.protocol_diff", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", choices=REFERENCES, default="kafka")
    parser.add_argument("--api", help="comma-separated API keys to compare (default: all)")
    parser.add_argument("--report", type=Path, help="markdown report path (the .json beside it)")
    parser.add_argument("--workdir", type=Path, help="where the brokers keep their data (default: a temp dir)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(message)s")
    apis = {int(a) for a in args.api.split(",")} if args.api else None
    md = args.report or report.default_path(args.reference)
    with tempfile.TemporaryDirectory(prefix="protocol-diff-") as tmp:
        summary = run_differential(args.reference, args.workdir or Path(tmp), apis, md)
    print(f"{summary['pairs']} pairs compared; {summary['open_differences']} open differences in "
          f"{len(summary['differences'])} groups; {summary['allowed_differences']} allow-listed; "
          f"report: {md}")
    return 1 if summary["open_differences"] else 0


if __name__ == "__main__":
    sys.exit(main())
