"""One differential run from start to report: fresh brokers, the comparison, the allow-list,
the report files. Used by the command line (__main__.py) and the pytest entry point
(compat_tests/test_protocol_diff.py)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from compat_tests.protocol_diff import allowlist, report
from compat_tests.protocol_diff.brokers import REFERENCE_SKIPS, reference_broker, trafka_broker
from compat_tests.protocol_diff.client import WireClient
from compat_tests.protocol_diff.model import Ctx
from compat_tests.protocol_diff.normalise import Normaliser
from compat_tests.protocol_diff.runner import Run, RunResult, Side

log = logging.getLogger(__name__)


def compare_brokers(kafka, trafka, apis: set[int] | None = None, skip: dict[str, str] | None = None) -> RunResult:
    """Run every case against two started brokers; differences classified by the allow-list."""
    started_ms = int(time.time() * 1000)

    def side(name: str, broker, extra_ports=()) -> Side:
        ctx = Ctx(name, broker.port, data_dir=str(broker.data_dir), extra_ports=tuple(extra_ports))
        return Side(ctx, WireClient(broker.host, broker.port), Normaliser(ctx, started_ms), alive=broker.alive,
                    log_tail=lambda: broker.log_tail(60))

    run = Run(side("kafka", kafka, [getattr(kafka, "controller_port", 0)]), side("trafka", trafka), apis, skip)
    started = time.monotonic()
    try:
        run.run()
    finally:
        for s in run.sides:
            s.client.close()
    for pair in run.pairs:
        allowlist.classify(pair)
    return RunResult(run.pairs, run.common, run.kafka.versions, run.trafka.versions, run.not_sent,
                     time.monotonic() - started,
                     run.kafka.normaliser.used | run.trafka.normaliser.used)


def run_differential(reference: str, workdir: Path, apis: set[int] | None = None,
                     markdown_path: Path | None = None) -> dict:
    """Start both brokers in `workdir`, compare, stop them, write the report; its summary."""
    kafka = reference_broker(reference, workdir / reference)
    trafka = trafka_broker(workdir / "trafka")
    try:
        kafka.start()
        trafka.start()
        result = compare_brokers(kafka, trafka, apis, REFERENCE_SKIPS.get(reference))
    finally:
        trafka.stop()
        kafka.stop()
    summary = report.summarise(result, reference)
    md = markdown_path or report.default_path(reference)
    report.write(summary, md, md.with_suffix(".json"))
    return summary
