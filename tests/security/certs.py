"""Test certificates made on the spot with `cryptography`: a CA, a broker certificate for
127.0.0.1/localhost, client certificates; written as PEM files and PKCS12 stores.
Nothing here is committed: every test run makes its own."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Issued:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    cert_pem: Path
    key_pem: Path

    @property
    def cert_text(self) -> str:
        return self.cert_pem.read_text()

    @property
    def key_text(self) -> str:
        return self.key_pem.read_text()


def _name(**parts: str) -> x509.Name:
    oids = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME,
            "C": NameOID.COUNTRY_NAME}
    # cert order is most general first (C, O, OU, CN); the DN string reads the other way
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in reversed(list(parts.items()))])


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "Trafka Test CA") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        subject = _name(CN=name, O="Trafka Tests")
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.cert_pem = self.directory / "ca.pem"
        self.cert_pem.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, file_stem: str, *, server: bool = False, **subject: str) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (x509.CertificateBuilder().subject_name(_name(**subject)).issuer_name(self.cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1)))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            # a broker is also a client of the other brokers (mTLS between brokers)
            usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        else:
            usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_pem = self.directory / f"{file_stem}.crt.pem"
        key_pem = self.directory / f"{file_stem}.key.pem"
        cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
        return Issued(key, cert, cert_pem, key_pem)

    def pem_keystore(self, issued: Issued, path: Path, password: str | None = None) -> Path:
        """Kafka's PEM keystore: the private key (encrypted with `password`) then the chain."""
        encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                      else serialization.NoEncryption())
        key = issued.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        path.write_bytes(key + issued.cert.public_bytes(serialization.Encoding.PEM)
                         + self.cert.public_bytes(serialization.Encoding.PEM))
        return path

    def pkcs12_keystore(self, issued: Issued, path: Path, password: str) -> Path:
        path.write_bytes(pkcs12.serialize_key_and_certificates(
            b"broker", issued.key, issued.cert, [self.cert], serialization.BestAvailableEncryption(password.encode())))
        return path

    def pkcs12_truststore(self, path: Path, password: str) -> Path:
        path.write_bytes(pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(self.cert, b"ca")], serialization.BestAvailableEncryption(password.encode())))
        return path
