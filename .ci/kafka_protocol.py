"""Put Kafka 3.9.2's JSON message schemas under .cache/ for the schema cross-check tests.

The tests compare wire/ with Apache Kafka's message definitions. In the workspace they sit
beside the checkout (../shared/kafka-protocol/messages); a CI machine has only the clone.
The same files ship inside the kafka-clients 3.9.2 jar (`common/message/*.json`), which
the PyPI wheel atoti-server-kafka carries in its plugin jar. This script downloads that
wheel into .cache/ (never committed), extracts the JSON files and prints the folder, for
.ci/run to export as $KAFKA_PROTOCOL_MESSAGES.

    python .ci/kafka_protocol.py [DEST]      default DEST: .cache/kafka-protocol/messages

Exit status 1 (with the reason on stderr) when the wheel cannot be had: the tests then
skip with that folder named, as they do anywhere the schemas are missing.
"""

from __future__ import annotations

import glob
import io
import pathlib
import subprocess
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
WHEEL = "atoti-server-kafka==0.9.16"
PLUGIN_JAR = "_atoti_server_kafka/__resources__/plugin.jar"
PREFIX = "common/message/"
EXPECTED_FILES = 186  # what Kafka 3.9.2's clients/src/main/resources/common/message holds


def main(argv: list[str]) -> int:
    dest = pathlib.Path(argv[0]) if argv else ROOT / ".cache" / "kafka-protocol" / "messages"
    if len(list(dest.glob("*.json"))) >= EXPECTED_FILES:
        print(dest)
        return 0
    wheel_dir = ROOT / ".cache" / "atoti"
    wheels = sorted(glob.glob(str(wheel_dir / "atoti_server_kafka-*.whl")))
    if not wheels:
        result = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                                 "--only-binary=:all:", "-d", str(wheel_dir), WHEEL],
                                capture_output=True, text=True)
        wheels = sorted(glob.glob(str(wheel_dir / "atoti_server_kafka-*.whl")))
        if result.returncode != 0 or not wheels:
            print(f"cannot download {WHEEL}: {result.stderr.strip()[-500:]}", file=sys.stderr)
            return 1
    with zipfile.ZipFile(wheels[-1]) as wheel:
        jar = zipfile.ZipFile(io.BytesIO(wheel.read(PLUGIN_JAR)))
    names = [n for n in jar.namelist() if n.startswith(PREFIX) and n.endswith(".json")]
    if len(names) < EXPECTED_FILES:
        print(f"{wheels[-1]}: only {len(names)} schemas under {PREFIX}", file=sys.stderr)
        return 1
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        (dest / name[len(PREFIX):]).write_bytes(jar.read(name))
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
