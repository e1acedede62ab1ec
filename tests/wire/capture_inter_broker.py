"""Capture golden bodies of the inter-broker APIs from Kafka's own generated classes.

Usage: python tests/wire/capture_inter_broker.py [--jar kafka-clients-3.9.2.jar] [--jackson DIR]

How this works: every version of every request and response in
`wire.registry.INTER_BROKER_VERSIONS` gets its representative body from
tests/wire/inter_broker_bodies.py, turned into the JSON form of Kafka's generated
`*JsonConverter`s. A small Java program (compiled here against kafka-clients 3.9.2 and
Jackson, which that converter needs) reads each with `<Name>DataJsonConverter.read(json,
version)` and writes it with the message's own `write(accessor, cache, version)`: the bytes
a Kafka 3.9 controller or broker puts after the header. Those go, one per line, to
tests/wire/golden/inter_broker_kafka_3_9_2.bodies as `request|response <key> <version> <hex>`.
Run once; commit the file; test_codec_inter_broker.py compares our codec with it. Needs a
JDK; defaults: the jar in this checkout's .cache/java-compat, Jackson from ~/.m2.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.wire.inter_broker_bodies import body_at, kafka_json  # noqa: E402
from wire.definitions import MESSAGES  # noqa: E402
from wire.registry import CODEC_VERSIONS, INTER_BROKER_APIS  # noqa: E402

OUT = ROOT / "tests" / "wire" / "golden" / "inter_broker_kafka_3_9_2.bodies"
JACKSON_VERSION = "2.17.2"

JAVA = r"""
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;

public class InterBrokerGolden {
    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ", 4);  // class name, version, kind, json
            short version = Short.parseShort(parts[1]);
            Class<?> converter = Class.forName("org.apache.kafka.common.message." + parts[0] + "JsonConverter");
            JsonNode node = mapper.readTree(parts[3]);
            Message message = (Message) converter.getMethod("read", JsonNode.class, short.class)
                .invoke(null, node, version);
            ObjectSerializationCache cache = new ObjectSerializationCache();
            ByteBuffer buf = ByteBuffer.allocate(message.size(cache, version));
            message.write(new ByteBufferAccessor(buf), cache, version);
            StringBuilder hex = new StringBuilder();
            for (byte b : buf.array()) hex.append(String.format("%02x", b));
            System.out.println(hex);
        }
    }
}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jar", default=str(ROOT / ".cache" / "java-compat" / "kafka-clients-3.9.2.jar"))
    parser.add_argument("--jackson", default=str(pathlib.Path.home() / ".m2/repository/com/fasterxml/jackson/core"))
    args = parser.parse_args()
    jackson = pathlib.Path(args.jackson)
    classpath = [args.jar] + [
        str(jackson / name / JACKSON_VERSION / f"{name}-{JACKSON_VERSION}.jar")
        for name in ("jackson-databind", "jackson-core", "jackson-annotations")
    ]
    cases = []
    for key, (lo, hi) in sorted((k, CODEC_VERSIONS[k]) for k in INTER_BROKER_APIS):
        for kind in ("request", "response"):
            for version in range(lo, hi + 1):
                cases.append((kind, key, version, body_at(key, kind, version)))
    with tempfile.TemporaryDirectory() as tmp:
        source = pathlib.Path(tmp) / "InterBrokerGolden.java"
        source.write_text(JAVA)
        cp = ":".join(classpath)
        subprocess.run(["javac", "-cp", cp, "-d", tmp, str(source)], check=True)
        lines = "".join(
            f"{MESSAGES[(key, kind)]['name']}Data {version} {kind} {json.dumps(kafka_json(body))}\n"
            for kind, key, version, body in cases
        )
        result = subprocess.run(["java", "-cp", f"{tmp}:{cp}", "InterBrokerGolden"], input=lines,
                                capture_output=True, text=True, check=True)
    hexes = result.stdout.split()
    assert len(hexes) == len(cases), result.stderr
    header = ("# Bodies (no header) written by Kafka 3.9.2's generated message classes for the representative\n"
              "# bodies in tests/wire/inter_broker_bodies.py; made by tests/wire/capture_inter_broker.py.\n")
    OUT.write_text(header + "".join(f"{kind} {key} {version} {hexdata}\n"
                                    for (kind, key, version, _b), hexdata in zip(cases, hexes)))
    print(f"wrote {len(cases)} bodies to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
