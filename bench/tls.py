"""TLS vs plaintext: one Trafka with a PLAINTEXT and an SSL listener, the same
confluent-kafka throughput run (bench/produce_consume.py) over each, in one process run.

Certificates (an EC P-256 CA and broker certificate) are made for the run with
`cryptography` in a temporary directory and removed after. TLS is one-way (no client
certificates) unless --mtls. The broker serves Fetch over TLS through its copy path
(pread into one buffer per response, then one SSLStream.send_all) since sendfile cannot
encrypt; over plaintext it uses sendfile.

    python bench/tls.py [--messages N] [--size B] [--mtls] [--json]

Prints one line per (listener, phase) and, with --json, one JSON line with all results.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from brokers import create_topic, free_port, start_broker  # noqa: E402
import produce_consume  # noqa: E402
from tests.security.certs import CertificateAuthority  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--mtls", action="store_true", help="clients present a certificate (ssl.client.auth=required)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="trafka-tls-bench-"))
    results = []
    try:
        ca = CertificateAuthority(workdir / "certs")
        server = ca.issue("broker", server=True, CN="localhost")
        client = ca.issue("bench", CN="bench")
        keystore = ca.pem_keystore(server, workdir / "certs" / "broker.pem")
        plain_port, ssl_port = free_port(), free_port()
        settings = {"listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port}",
                    "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
                    "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.cert_pem),
                    "ssl.client.auth": "required" if args.mtls else "none"}
        broker = start_broker("trafka", port=plain_port, settings=settings, log_dir=str(workdir))
        try:
            tls = {"security.protocol": "ssl", "ssl.ca.location": str(ca.cert_pem)}
            if args.mtls:
                tls.update({"ssl.certificate.location": str(client.cert_pem), "ssl.key.location": str(client.key_pem)})
            for name, bootstrap, overrides in (("PLAINTEXT", f"127.0.0.1:{plain_port}", {}),
                                               ("SSL", f"127.0.0.1:{ssl_port}", tls)):
                run = produce_consume.build_parser().parse_args([
                    "--bootstrap", bootstrap, "--messages", str(args.messages), "--size", str(args.size),
                    "--partitions", str(args.partitions), "--broker-pid", str(broker.pid)])
                run.topic = f"tls-bench-{name.lower()}-{uuid.uuid4().hex[:6]}"
                run.client_overrides = overrides
                create_topic(f"127.0.0.1:{plain_port}", run.topic, args.partitions)
                result = produce_consume.run_throughput(run)
                result["listener"] = name
                results.append(result)
                print(f"{name:9} {args.size} B x {args.messages:,}: produce {result['produce_mbps']:.1f} MB/s "
                      f"({result['produce_broker_cpu_us_per_msg']:.2f} us broker CPU/msg), consume "
                      f"{result['consume_mbps']:.1f} MB/s ({result['consume_broker_cpu_us_per_msg']:.2f} us/msg), "
                      f"verified={result['verified']}", flush=True)
        finally:
            broker.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps(results))
    return 0 if all(r["verified"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
