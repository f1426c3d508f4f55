"""What the proxy tests share: Debian's squid on loopback, a CA of the tests' own, and a TLS
gateway in front of any loopback server.

`Squid` runs ``/usr/sbin/squid -N`` (in the foreground, a child of the tests) with a config of
its own in a folder of its own: one port on 127.0.0.1, nothing cached, no DNS (a hosts file;
the tests name their servers by address), requests allowed from 127.0.0.1 only, and, with
``users``, basic authentication against an htpasswd file the fixture writes (``openssl passwd
-apr1``). Its access log has one line per request, with the client's port, so a test counts
what went through the proxy and on how many connections. Started as root, squid drops to the
``proxy`` user, which owns the folder.

`make_ca` writes a CA and a leaf certificate for 127.0.0.1 and localhost (``cryptography``);
`TLSFront` terminates TLS with that leaf on a loopback port and relays the plain bytes to a
server of the test's (the embedded gateway, a fault server...): an https:// gateway whose
certificate only ``SSL_CERT_FILE`` pointing at the CA makes trusted.

The test command installs squid (``make debian``); without it these tests are skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import os
import pwd
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

SQUID = Path("/usr/sbin/squid")
NCSA = Path("/usr/lib/squid/basic_ncsa_auth")

CONFIG = """\
http_port 127.0.0.1:{port}
pid_filename {folder}/squid.pid
cache_log {folder}/cache.log
logformat gatecell %>a:%>p %>Hs %rm %ru %un %Ss
access_log stdio:{folder}/access.log gatecell
cache deny all
cache_mem 8 MB
coredump_dir {folder}
hosts_file {folder}/hosts
pinger_enable off
netdb_filename none
shutdown_lifetime 0 seconds
acl CONNECT method CONNECT
acl here src 127.0.0.1/32
acl loopback dst 127.0.0.1/32
http_access deny CONNECT !loopback
{auth}http_access allow here{authed}
http_access deny all
"""
AUTH = """\
auth_param basic program {ncsa} {folder}/htpasswd
auth_param basic realm gatecell-tests
acl authed proxy_auth REQUIRED
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Entry(NamedTuple):
    """One line of squid's access log."""

    client: str  # address:port, one per connection from the client
    status: int  # what squid answered (0 for a tunnel that never answered)
    method: str
    url: str  # host:port for a CONNECT
    user: str  # "-" without credentials


class Squid:
    """A squid of the tests' own on a free loopback port; ``users`` turns on basic auth."""

    def __init__(self, users: dict[str, str] | None = None) -> None:
        if not SQUID.exists():
            pytest.skip("Debian's squid is not installed (`make debian` installs it)")
        self.users = users or {}
        self.folder = Path(tempfile.mkdtemp(prefix="gatecell-squid-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        auth = ""
        if users:
            auth = AUTH.format(ncsa=NCSA, folder=self.folder)
            lines = [f"{user}:{_apr1(password)}\n" for user, password in users.items()]
            (self.folder / "htpasswd").write_text("".join(lines))
        (self.folder / "hosts").write_text("127.0.0.1 localhost\n")
        (self.folder / "squid.conf").write_text(
            CONFIG.format(port=self.port, folder=self.folder, auth=auth, authed=" authed" if users else "")
        )
        if os.geteuid() == 0:  # squid drops to its own user, who must write here
            proxy = pwd.getpwnam("proxy")
            for path in [self.folder, *self.folder.iterdir()]:
                os.chown(path, proxy.pw_uid, proxy.pw_gid)
        self.proc = subprocess.Popen(
            [str(SQUID), "-N", "-f", str(self.folder / "squid.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while not self._listening():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"squid did not start: {self._cache_log()}")
            time.sleep(0.05)

    def _listening(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
            return True
        return False

    def _cache_log(self) -> str:
        path = self.folder / "cache.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def log(self) -> list[Entry]:
        """Every request squid has finished so far (a tunnel is logged when it closes); not the
        connections that closed before a request (the start-up probe's)."""
        path = self.folder / "access.log"
        entries = []
        for line in path.read_text().splitlines() if path.exists() else []:
            client, status, method, url, user, _ = line.split(" ")
            if method != "-":
                entries.append(Entry(client, int(status), method, url, user))
        return entries

    def wait_for(self, count: int, since: int = 0, timeout: float = 30.0) -> list[Entry]:
        """The log's requests after the first ``since``, once there are ``count`` of them (squid
        writes a line as each request ends, a tunnel's as it closes), or after ``timeout``."""
        deadline = time.monotonic() + timeout
        while len(entries := self.log()[since:]) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return entries

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.folder, ignore_errors=True)


def _apr1(password: str) -> str:
    done = subprocess.run(
        ["openssl", "passwd", "-apr1", "-stdin"], input=password, capture_output=True, text=True
    )
    done.check_returncode()
    return done.stdout.strip()


@contextlib.contextmanager
def squid(users: dict[str, str] | None = None) -> Iterator[Squid]:
    proxy = Squid(users)
    try:
        yield proxy
    finally:
        proxy.stop()


# -- TLS --------------------------------------------------------------------------------------


class CA(NamedTuple):
    """A CA's certificate (what ``SSL_CERT_FILE`` names) and a leaf it signed for 127.0.0.1."""

    ca: Path
    cert: Path
    key: Path


def make_ca(folder: Path) -> CA:
    """A CA and a leaf certificate for 127.0.0.1 and localhost, written under ``folder``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def build(subject: str, key, issuer: str, signer, *, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if ca:
            builder = builder.add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        else:
            names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
            ).add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = build("gatecell tests CA", ca_key, "gatecell tests CA", ca_key, ca=True)
    leaf = build("127.0.0.1", leaf_key, "gatecell tests CA", ca_key, ca=False)
    folder.mkdir(parents=True, exist_ok=True)
    paths = CA(folder / "ca.pem", folder / "leaf.pem", folder / "leaf.key")
    paths.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


class _LoopServer:
    """A server on a free loopback port, on an event loop in a thread of its own; counts
    connections. Subclasses say what a connection gets (``_serve``) and may wrap it in TLS."""

    _context: ssl.SSLContext | None = None

    def __init__(self) -> None:
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self._thread.start()
        started.wait(10)

    def _run(self, started: threading.Event) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        serving = asyncio.start_server(self._accept, "127.0.0.1", 0, ssl=self._context)
        server = loop.run_until_complete(serving)
        self.port = server.sockets[0].getsockname()[1]
        started.set()
        loop.run_forever()
        server.close()
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        await self._serve(reader, writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: tuple[str, int]) -> bool:
    """Relay bytes both ways between a client and ``target`` until both sides close; False
    (and the client's connection closed) when ``target`` cannot be reached."""
    try:
        up_reader, up_writer = await asyncio.open_connection(*target)
    except OSError:
        writer.close()
        return False

    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (OSError, ssl.SSLError):
            pass
        finally:
            dst.close()

    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
    return True


class TLSFront(_LoopServer):
    """TLS on a free loopback port, relayed as plain bytes to ``target`` (host, port): an
    https:// gateway for any loopback server, or, in front of squid, an https:// proxy."""

    def __init__(self, ca: CA, target: tuple[str, int]) -> None:
        self.target = target
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(ca.cert, ca.key)
        super().__init__()
        self.url = f"https://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _relay(reader, writer, self.target)


class Socks5(_LoopServer):
    """A SOCKS5 proxy (RFC 1928) on a free loopback port: no authentication, CONNECT only,
    to an IPv4, IPv6 or domain address (``socks5h://`` hands the proxy the name). Keeps the
    address of every CONNECT in ``targets`` as (address type: 1, 3 or 4; host; port)."""

    def __init__(self) -> None:
        self.targets: list[tuple[int, str, int]] = []
        super().__init__()
        self.url = f"socks5://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            version, count = await reader.readexactly(2)
            methods = await reader.readexactly(count)
            if version != 5 or 0 not in methods:
                writer.write(b"\x05\xff")  # no acceptable method
                writer.close()
                return
            writer.write(b"\x05\x00")
            _, command, _, kind = await reader.readexactly(4)
            if kind == 1:
                host = socket.inet_ntop(socket.AF_INET, await reader.readexactly(4))
            elif kind == 4:
                host = socket.inet_ntop(socket.AF_INET6, await reader.readexactly(16))
            else:
                host = (await reader.readexactly((await reader.readexactly(1))[0])).decode()
            port = int.from_bytes(await reader.readexactly(2), "big")
        except (OSError, asyncio.IncompleteReadError):
            writer.close()
            return
        self.targets.append((kind, host, port))
        if command != 1:
            writer.write(b"\x05\x07\x00\x01" + bytes(6))  # command not supported
            writer.close()
            return
        writer.write(b"\x05\x00\x00\x01" + bytes(6))  # succeeded (the bound address is not used)
        await _relay(reader, writer, (host, port))
