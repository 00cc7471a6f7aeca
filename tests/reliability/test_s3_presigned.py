"""S3 reads as presigned GETs (zarrfs.store.objects.presigned) against a moto server: what they read,
and that every answer they do not take, and every store they would not serve as botocore
does, goes through botocore's GetObject (the operations a store calls are seen through
botocore's events). A certificate only botocore trusts is served by a TLS front
(tests.helpers.netproxy) with a certificate authority made by the test."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from fsspec.asyn import sync

from tests.helpers.http_server import answering
from tests.helpers.netproxy import proxied
from tests.helpers.s3_server import S3Server
from zarrfs.store import ByteRange, RetryPolicy, Store
from zarrfs.store.objects import obstore_gets, presigned

s3fs = pytest.importorskip("s3fs")
aiohttp = pytest.importorskip("aiohttp")

CONTENT = b"0123456789" * 100


@pytest.fixture(autouse=True)
def without_obstore(monkeypatch: pytest.MonkeyPatch) -> None:
    """The presigned path is the one tested here (obstore, tried before it: test_remote_reads)."""
    monkeypatch.setattr(obstore_gets, "usable", lambda fs: False)


def counted(server: S3Server, **options: Any) -> tuple[Store, list[str]]:
    """A store on the server holding CONTENT at "k", and the names of the botocore operations
    it calls from then on ("GetObject"), as botocore's events announce them."""
    fs = s3fs.S3FileSystem(**{**server.s3fs_options(), **options})
    fs.retries = 1
    store = Store(fs, f"{server.bucket}/p", retry=RetryPolicy(deadline_seconds=10.0, first_delay=0.05))
    store.put("k", CONTENT)
    calls: list[str] = []

    def seen(model: Any, **kwargs: Any) -> None:
        calls.append(model.name)

    client = sync(fs.loop, fs.set_session)
    client.meta.events.register("before-call.s3", seen)
    return store, calls


def test_reads_are_presigned_gets_with_the_objects_etag(s3_server: S3Server,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    store, calls = counted(s3_server)
    whole = store.read("k")
    assert whole is not None and whole.data == CONTENT
    assert store.read("k", ByteRange(5, 7)) == (CONTENT[5:12], whole.generation)
    assert store.read("absent") is None
    assert store.get("k", ByteRange(len(CONTENT) + 10, 5)) == b""  # a range past the end
    assert "GetObject" not in calls
    assert whole.generation == store.generation("k")  # the ETag a compare-and-swap expects


@pytest.mark.parametrize("setting", ["requester_pays", "https_proxy"])
def test_stores_it_would_not_serve_as_botocore_does_use_get_object(
        s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    options: dict[str, Any] = {}
    if setting == "requester_pays":
        options["requester_pays"] = True
    else:  # botocore would send HTTPS requests through it (this endpoint is plain HTTP)
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    store, calls = counted(s3_server, **options)
    found = store.read("k")
    assert found is not None and found.data == CONTENT
    assert calls == ["GetObject"]


@pytest.fixture
def unavailable() -> Iterator[str]:
    """An HTTP server answering every request with 503 Slow Down."""

    class SlowDown(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    with answering(SlowDown) as port:
        yield f"http://127.0.0.1:{port}/bucket/k"


def test_an_answer_it_does_not_take_is_asked_of_get_object(
        s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, unavailable: str) -> None:
    store, calls = counted(s3_server)
    client = sync(store.driver.fs.loop, store.driver.fs.set_session)

    async def elsewhere(*args: Any, **kwargs: Any) -> str:
        return unavailable

    monkeypatch.setattr(client, "generate_presigned_url", elsewhere)
    found = store.read("k")
    assert found is not None and found.data == CONTENT
    assert calls == ["GetObject"]


def _signed(subject: str, key: ec.EllipticCurvePrivateKey,
            issuer: str, issuer_key: ec.EllipticCurvePrivateKey,
            extensions: list[tuple[x509.ExtensionType, bool]]) -> x509.Certificate:
    """A certificate valid from an hour ago to tomorrow; `extensions` are (extension, critical)."""
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=1)))
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(issuer_key, hashes.SHA256())


def _certificate_authority(directory: Path) -> tuple[Path, ssl.SSLContext]:
    """A certificate authority of this test's own (its certificate written to ca.pem), and a
    server context with a certificate it signed for 127.0.0.1."""
    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    signs_certificates = x509.KeyUsage(digital_signature=False, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, key_cert_sign=True, crl_sign=True,
                                       encipher_only=False, decipher_only=False)
    ca = _signed("zarrfs test CA", ca_key, "zarrfs test CA", ca_key, [
        (x509.BasicConstraints(ca=True, path_length=None), True), (signs_certificates, True),
        (x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)])
    leaf = _signed("127.0.0.1", leaf_key, "zarrfs test CA", ca_key, [
        (x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
        (x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False)])
    ca_file, leaf_file, key_file = directory / "ca.pem", directory / "leaf.pem", directory / "leaf.key"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    leaf_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(leaf_file, key_file)
    return ca_file, server


@pytest.fixture
def behind_private_tls(s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The server's HTTPS endpoint, with a certificate from a CA that botocore trusts (the
    `ca_bundle` of the AWS config file) but the system does not."""
    ca_file, server_tls = _certificate_authority(tmp_path)
    config = tmp_path / "aws-config"
    config.write_text(f"[default]\nca_bundle = {ca_file}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    for name in ("AWS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    with proxied(s3_server.port, tls=server_tls) as front:
        yield front.url


async def _plain_aiohttp_get(url: str) -> None:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        await response.read()


def test_a_certificate_aiohttp_refuses_leaves_that_store_to_botocore(
        s3_server: S3Server, behind_private_tls: str) -> None:
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        asyncio.run(_plain_aiohttp_get(f"{behind_private_tls}/{s3_server.bucket}/p/k"))
    store, calls = counted(s3_server, client_kwargs={"endpoint_url": behind_private_tls,
                                                     "region_name": "us-east-1"})
    assert presigned.usable(store.driver.fs)
    found = store.read("k")
    assert found is not None and found.data == CONTENT
    assert not presigned.usable(store.driver.fs)  # aiohttp was refused: not asked again
    for start in (0, 5):
        assert store.read("k", ByteRange(start, 7)) == (CONTENT[start:start + 7], found.generation)
    assert calls == ["GetObject"] * 3


def test_a_ca_bundle_it_cannot_load_leaves_that_store_to_botocore(
        s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Not a missing object: the chunk must not read as the fill value."""
    store, calls = counted(s3_server)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(tmp_path / "no-such-bundle.pem"))
    found = store.read("k")
    assert found is not None and found.data == CONTENT
    assert calls == ["GetObject"]
