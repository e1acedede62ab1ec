"""Kafka 3.9.2's JSON message definitions, the reference wire/ is generated from, into .cache/.

They are `common/message/*.json` inside the kafka-clients 3.9.2 jar, which the `kafka-3.9`
module of .ci/jvm/pom.xml resolves from Maven Central into .cache/jvm/kafka-3.9/ (never
committed). The schema cross-check (tests/wire/test_codec_schema.py) and
`python -m wire.generate` read them from .cache/kafka-protocol/messages (or
$KAFKA_PROTOCOL_MESSAGES).

    python .ci/kafka_protocol.py [DEST]        default DEST: .cache/kafka-protocol/messages

Exit status 1 (with the reason on stderr) when the jar cannot be had.
"""

from __future__ import annotations

import pathlib
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compat_tests import jvm  # noqa: E402  (after the path insert: run as a script)

PREFIX = "common/message/"
EXPECTED_FILES = 186  # what Kafka 3.9.2's clients/src/main/resources/common/message holds
CLIENTS_VERSION = "3.9.2"
DEFAULT_DEST = ROOT / ".cache" / "kafka-protocol" / "messages"


def schemas(dest: pathlib.Path = DEFAULT_DEST) -> pathlib.Path:
    if len(list(dest.glob("*.json"))) >= EXPECTED_FILES:
        return dest
    path = jvm.jar("kafka-3.9", f"kafka-clients-{CLIENTS_VERSION}")
    with zipfile.ZipFile(path) as jar:
        names = [n for n in jar.namelist() if n.startswith(PREFIX) and n.endswith(".json")]
        if len(names) < EXPECTED_FILES:
            raise jvm.JvmUnavailable(f"{path.name}: only {len(names)} schemas under {PREFIX}")
        dest.mkdir(parents=True, exist_ok=True)
        for name in names:
            (dest / name[len(PREFIX):]).write_bytes(jar.read(name))
    return dest


def main(argv: list[str]) -> int:
    try:
        print(schemas(pathlib.Path(argv[0]) if argv else DEFAULT_DEST))
    except jvm.JvmUnavailable as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
