"""Make the example's certificates with trustme: ``python make_certs.py [directory]``.

Writes ``certs/ca.pem`` (the CA clients trust), ``certs/broker.pem`` (the broker's private
key and certificate chain: Kafka's PEM keystore, for 127.0.0.1 and localhost), and
``certs/client.pem`` / ``certs/client-key.pem`` (a client certificate, CN=alice, for mutual
TLS). For real deployments use your own CA; the OpenSSL equivalent is in the README.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trustme


def main(directory: str = "certs") -> None:
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="trikafka example")
    broker = ca.issue_cert("127.0.0.1", "localhost", common_name="broker")
    client = ca.issue_cert("alice@example.org", common_name="alice")
    ca.cert_pem.write_to_path(out / "ca.pem")
    broker.private_key_and_cert_chain_pem.write_to_path(out / "broker.pem")
    client.cert_chain_pems[0].write_to_path(out / "client.pem")
    client.private_key_pem.write_to_path(out / "client-key.pem")
    print(f"certificates in {out.resolve()}")


if __name__ == "__main__":
    main(*sys.argv[1:])
