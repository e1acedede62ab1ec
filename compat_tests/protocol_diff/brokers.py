"""The two brokers of a differential run, started fresh with the suite's settings.

The reference is Apache Kafka 4.x (`kafka`, compat_tests/kafka_brokers.KafkaBroker), or —
for the request versions Kafka 4.0 removed (KIP-896), which Trafka still serves — Kafka
3.9 (`kafka-3.9`), the last line that has them, as one KRaft node in combined mode too.
Trafka is started as the compatibility suite starts it (brokers.TRAFKA_SUITE_ARGS: the
same compat_tests.brokers.SUITE_SETTINGS Kafka gets).
"""

from __future__ import annotations

from pathlib import Path

from compat_tests.brokers import TRAFKA_SUITE_ARGS, TrafkaBroker
from compat_tests.kafka_brokers import LOG4J1, KafkaBroker

REFERENCES = ("kafka", "kafka-3.9")
# Hostile variants a reference cannot survive, each with the reason (reported as not sent).
REFERENCE_SKIPS: dict[str, dict[str, str]] = {
    "kafka-3.9": {
        r".*(count|num_partitions)=huge": "Kafka 3.9's KRaft controller runs out of heap creating 2^31-1 "
                                          "partitions (Kafka 4 refuses more than 10 000 per request)",
    },
}


class Kafka39Broker(KafkaBroker):
    """Apache Kafka 3.9, one KRaft node in combined mode (log4j 1 configuration)."""

    module = "kafka-3.9"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, name="kafka-3.9")
        # Kafka 3.9 has no share coordinator (KIP-932 came with 4.0's early access).
        for key in [k for k in self.settings if k.startswith("share.coordinator.")]:
            del self.settings[key]

    def logging_flags(self) -> list[str]:
        path = self.workdir / "log4j.properties"
        path.write_text(LOG4J1.format(level=self.log_level))
        return [f"-Dlog4j.configuration=file:{path}"]


def reference_broker(kind: str, workdir: Path) -> KafkaBroker:
    if kind == "kafka":
        return KafkaBroker(workdir)
    if kind == "kafka-3.9":
        return Kafka39Broker(workdir)
    raise ValueError(f"unknown reference {kind!r}; known: {', '.join(REFERENCES)}")


def trafka_broker(workdir: Path) -> TrafkaBroker:
    return TrafkaBroker(workdir, list(TRAFKA_SUITE_ARGS))
