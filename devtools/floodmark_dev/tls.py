"""A certificate authority and a server certificate for 127.0.0.1, made with the JDK's ``keytool`` (nothing fetched).

:func:`make_certificates` writes, into a folder:

* ``ca.p12``: the authority's key pair (self-signed, ``BasicConstraints: CA``);
* ``server.p12``: the server's key pair, its certificate signed by the authority, valid for ``IP:127.0.0.1``
  and ``DNS:localhost`` (so Kafka's clients, which check the host name by default, accept it), with the
  authority's certificate in its chain: what a broker's ``ssl.keystore.location`` takes;
* ``truststore.p12``: the authority's certificate alone: what a client's ``ssl.truststore.location`` takes;
* ``ca.pem``: the same certificate in PEM (librdkafka's ``ssl.ca.location``).

Every store is PKCS12 with the one password :attr:`Certificates.password`. Two calls make two unrelated
authorities: a client trusting one refuses a server of the other (the wrong-certificate case).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from floodmark.jvm import java_executable

PASSWORD = "floodmark-tls"
VALID_DAYS = "2"


@dataclass(frozen=True)
class Certificates:
    """The files :func:`make_certificates` wrote (see the module docstring)."""

    keystore: Path
    truststore: Path
    ca_pem: Path
    password: str = PASSWORD

    def client_options(self) -> dict[str, str]:
        """The ``kafka.*`` options with which Spark's Kafka clients trust the authority (TLS, no client
        certificate); add ``kafka.security.protocol`` (``SSL`` or ``SASL_SSL``)."""
        return {
            "kafka.ssl.truststore.location": str(self.truststore),
            "kafka.ssl.truststore.password": self.password,
            "kafka.ssl.truststore.type": "PKCS12",
        }


def make_certificates(folder: Path, name: str = "floodmark test") -> Certificates:
    """A new authority named ``name`` and a server certificate for 127.0.0.1 it signs, written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    keytool = str(Path(java_executable()).with_name("keytool"))
    ca, server, trust = folder / "ca.p12", folder / "server.p12", folder / "truststore.p12"
    ca_cert, request, signed, pem = folder / "ca.crt", folder / "server.csr", folder / "server.crt", folder / "ca.pem"
    for stale in (ca, server, trust):
        stale.unlink(missing_ok=True)
    store = ["-storetype", "PKCS12", "-storepass", PASSWORD, "-keypass", PASSWORD]
    key = ["-keyalg", "RSA", "-keysize", "2048", "-validity", VALID_DAYS]

    def run(*args: str) -> None:
        done = subprocess.run([keytool, "-noprompt", *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"keytool {args[0]} failed: {(done.stderr or done.stdout).strip()}")

    run("-genkeypair", "-alias", "ca", "-dname", f"CN={name} CA", "-ext", "bc:c", *key, "-keystore", str(ca), *store)
    run("-exportcert", "-alias", "ca", "-keystore", str(ca), *store, "-rfc", "-file", str(ca_cert))
    run("-genkeypair", "-alias", "server", "-dname", "CN=127.0.0.1", *key, "-keystore", str(server), *store)
    run("-certreq", "-alias", "server", "-keystore", str(server), *store, "-file", str(request))
    run(
        "-gencert",
        "-alias",
        "ca",
        "-keystore",
        str(ca),
        *store,
        "-infile",
        str(request),
        "-outfile",
        str(signed),
        "-rfc",
        "-validity",
        VALID_DAYS,
        "-ext",
        "SAN=ip:127.0.0.1,dns:localhost",
    )
    run("-importcert", "-alias", "ca", "-file", str(ca_cert), "-keystore", str(server), *store)
    run("-importcert", "-alias", "server", "-file", str(signed), "-keystore", str(server), *store)
    run("-importcert", "-alias", "ca", "-file", str(ca_cert), "-keystore", str(trust), *store)
    pem.write_text(ca_cert.read_text())
    return Certificates(keystore=server, truststore=trust, ca_pem=pem)
