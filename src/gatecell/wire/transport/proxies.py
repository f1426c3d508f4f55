"""Which proxy, if any, a request goes through: the environment read the way httpx reads it.

Corporate and university networks hand their users ``HTTPS_PROXY``, ``HTTP_PROXY``,
``ALL_PROXY`` and ``NO_PROXY`` (lower case too), and every client of the ecosystem (httpx,
requests, the openai SDK, pip) honours them; so does gatecell, on every path, with httpx's
rules, so that a network where httpx works is a network where gatecell works:

- ``http_proxy`` beats ``HTTP_PROXY`` (``urllib.request.getproxies``' rule: a lower-case
  variable wins, an empty one unsets); a value without a scheme is an ``http://`` proxy.
- ``HTTPS_PROXY`` serves ``https://`` URLs, ``HTTP_PROXY`` ``http://`` ones, ``ALL_PROXY``
  both when the scheme's own is unset.
- ``NO_PROXY`` is a comma-separated list: ``*`` (no proxy at all), a host name (``example.com``
  matches it and its subdomains), a domain with a leading dot (``.example.com``: subdomains
  only), ``localhost``, an IP address, a CIDR range (``10.0.0.0/8``), any of them with a
  ``:port``, or a URL pattern (``http://example.com``). The most specific rule wins, as httpx
  orders its mounts (a port first, then the longest host, then the longest scheme).

Two places where httpx 0.28 does not do what its own rules say, and gatecell does: a CIDR
range matches every address in it (httpx compares the network address alone, and an IPv6
range makes its client fail to start), and a rule's port matches a URL that leaves the
scheme's default port implicit (httpx compares the explicit port only). The tests hold the
rest to httpx's own matcher, case by case.

An explicit proxy (``proxy=`` or ``GATECELL_PROXY``) wins over all of that and, as httpx's
``proxy=`` does, serves every URL; ``trust_env=False`` ignores the ecosystem's variables.
Whoever starts a gateway in this process (the embedded one) reaches it directly whatever the
settings say: `is_loopback` tells such an address from another.

Both drivers route by these rules (`Proxies.for_url`): httpx's transports
(`httpx_proxies`) and the lean HTTP/1.1 driver (`http11_driver`), which hands httpx the URLs
whose proxy it does not speak. `check_proxies` refuses, when a client is made, a proxy
neither can speak here (SOCKS needs the ``socksio`` package: ``gatecell[socks]``).

A proxy's credentials (``http://user:pass@host:3128``) are a secret like a key: `Proxy` shows
them masked in its repr, its str and every error that names it; only `Proxy.authorization`
(the ``Proxy-Authorization`` value) and `Proxy.reveal` hold them.
"""

from __future__ import annotations

import base64
import importlib
import ipaddress
import os
import re
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import quote, unquote, urlsplit

from gatecell.wire.transport.errors import ConfigError

__all__ = ["Proxy", "Proxies", "proxy_for", "is_loopback", "check_proxies", "ENV_PROXY"]

ENV_PROXY = "GATECELL_PROXY"
_SCHEMES = ("http", "https", "socks5", "socks5h")  # httpx's (the lean driver hands it the others)
_USERINFO = re.compile(r"(?<=//).*@")  # to the last @: a password may hold / or @ unescaped
_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _masked(url: str) -> str:
    """``url`` with whatever sits between ``//`` and ``@`` hidden (for text that failed to parse)."""
    return _USERINFO.sub("****@", url)


class Proxy:
    """A proxy server.

    **Parameters:**

    * **url** - ``scheme://[user:password@]host[:port]``, percent-encoded as in any URL; no
      scheme means ``http://``, no port the scheme's (80, 443; 1080 for socks5).

    Shows as ``http://user:****@host:3128``: the password never appears in a repr, a str or
    an error. ``authorization`` is the ``Proxy-Authorization`` header value (Basic, the
    percent-decoded user and password, as httpx sends them); ``reveal()`` is the URL with its
    credentials, for a library that takes one (``httpx.Proxy(proxy.reveal())``).
    """

    __slots__ = ("scheme", "host", "port", "username", "_password")

    def __init__(self, url: str) -> None:
        url = url.strip()
        if "://" not in url:
            url = "http://" + url
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            parts, port = None, None
        if parts is None or parts.scheme.lower() not in _SCHEMES or not parts.hostname:
            raise ConfigError(f"not a proxy URL ({'/'.join(_SCHEMES)}://host:port): {_masked(url)!r}")
        self.scheme = parts.scheme.lower()
        self.host = parts.hostname
        self.port = port or {"http": 80, "https": 443}.get(self.scheme, 1080)
        self.username = unquote(parts.username) if parts.username is not None else None
        self._password = unquote(parts.password or "") if parts.username is not None else None

    @property
    def url(self) -> str:
        """The proxy's address, without credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def authorization(self) -> str | None:
        """``Basic ...`` from the URL's credentials, or None without any."""
        if self.username is None:
            return None
        pair = f"{self.username}:{self._password}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")

    def reveal(self) -> str:
        """The URL with its credentials (percent-encoded): for handing to another client only."""
        if self.username is None:
            return self.url
        userinfo = f"{quote(self.username, safe='')}:{quote(self._password or '', safe='')}"
        return self.url.replace("://", f"://{userinfo}@", 1)

    def __str__(self) -> str:
        if self.username is None:
            return self.url
        return self.url.replace("://", f"://{quote(self.username, safe='')}:****@", 1)

    def __repr__(self) -> str:
        return f"Proxy({str(self)!r})"

    def _key(self) -> tuple[str, str | None, str | None]:
        return (self.url, self.username, self._password)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Proxy) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self):  # pickling would write the credentials to disk
        raise TypeError("a Proxy cannot be pickled; let each process read its own settings")


class _Rule(NamedTuple):
    """One of httpx's mount patterns (``scheme://host:port``) and where it sends a match."""

    scheme: str  # "" for all
    host: str  # "" for any; "*example.com" for it and its subdomains; "*.example.com" for subdomains
    port: int | None
    network: _Network | None  # a CIDR range (the host is its address then)
    proxy: Proxy | None  # None: direct

    @property
    def priority(self) -> tuple[int, int, int]:
        """httpx's order: a port first, then the longest host, then the longest scheme."""
        return (0 if self.port is not None else 1, -len(self.host), -len(self.scheme))

    def matches(self, scheme: str, host: str, port: int, address: _IPAddress | None) -> bool:
        if self.scheme and self.scheme != scheme:
            return False
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            return address is not None and address in self.network
        pattern = self.host
        if not pattern or pattern == "*":
            return True
        if pattern.startswith("*."):  # subdomains only
            return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
        if pattern.startswith("*"):  # the domain and its subdomains
            domain = pattern[1:]
            return host == domain or (host.endswith("." + domain) and len(host) > len(domain) + 1)
        return host == pattern


# A mount key: scheme://host, [v6] or an address with a /len, then :port; a path is ignored.
_KEY = re.compile(
    r"(?:\[(?P<v6>[^\]/]*)(?:/(?P<len6>\d+))?\]|(?P<host>[^/?#:\[\]]*))"
    r"(?::(?P<port>\d+))?(?:/(?P<len>\d+))?(?:[/?#].*)?"
)


def _pattern(key: str, proxy: Proxy | None) -> _Rule:
    """A rule from one of httpx's mount keys (``all://*example.com:8080``, ``http://``)."""
    scheme, _, rest = key.partition("://")
    m = _KEY.fullmatch(rest)
    if m is None:
        raise ConfigError(f"NO_PROXY: cannot read {key.partition('://')[2]!r}")
    host = (m["v6"] if m["v6"] is not None else m["host"]).lower()
    prefix = m["len6"] or m["len"]
    network = None
    if prefix is not None and _address(host) is not None:
        network = ipaddress.ip_network(f"{host}/{prefix}", strict=False)
    port = int(m["port"]) if m["port"] else None
    return _Rule("" if scheme == "all" else scheme.lower(), host, port, network, proxy)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("/")[0])
    except ValueError:
        return False
    return True


def _environment(env: Mapping[str, str]) -> dict[str, str]:
    """``{"http": ..., "https": ..., "all": ..., "no": ...}`` as `urllib.request.getproxies`
    reads the environment: any case first, then the lower-case names again, so that they win
    (an empty lower-case one unsets); HTTP_PROXY ignored under CGI (it can come from a client's
    ``Proxy:`` header there)."""
    found: dict[str, str] = {}
    for name, value in env.items():
        lower = name.lower()
        if value and lower.endswith("_proxy"):
            found[lower[:-6]] = value
    if "REQUEST_METHOD" in env:
        found.pop("http", None)
    for name, value in env.items():
        if name.endswith("_proxy"):
            if value:
                found[name[:-6].lower()] = value
            else:
                found.pop(name[:-6].lower(), None)
    return found


class Proxies:
    """The proxy settings in force: for each URL, the proxy it goes through, or None.

    **Parameters:**

    * **proxy** - a proxy for every URL (a URL or a `Proxy`); beats the environment.
    * **trust_env** - read ``HTTP(S)_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` (default True).
    * **env** - the environment to read (default: this process's). ``GATECELL_PROXY`` is
      read from it whatever ``trust_env`` says: it is gatecell's own setting, as explicit as
      ``proxy=``.

    A malformed proxy URL is a `ConfigError` (a `ValueError`) naming the variable (credentials masked), raised
    here, before any request.
    """

    __slots__ = ("rules",)

    def __init__(
        self, proxy: str | Proxy | None = None, *, trust_env: bool = True, env: Mapping[str, str] = os.environ
    ) -> None:
        self.rules: list[_Rule] = []
        if proxy is None and env.get(ENV_PROXY, "").strip():
            proxy = _read(env[ENV_PROXY], ENV_PROXY)
        if proxy is not None:
            self.rules = [_Rule("", "", None, None, proxy if isinstance(proxy, Proxy) else Proxy(proxy))]
        elif trust_env:
            self.rules = _environment_rules(env)

    def for_url(self, url: str) -> Proxy | None:
        """The proxy ``url`` goes through, or None to go direct."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        port = parts.port or {"http": 80, "https": 443}.get(scheme, 0)
        address = _address(host)
        for rule in self.rules:
            if rule.matches(scheme, host, port, address):
                return rule.proxy
        return None

    def named(self) -> list[Proxy]:
        """Every proxy the settings name (for a URL or another)."""
        return list(dict.fromkeys(rule.proxy for rule in self.rules if rule.proxy is not None))

    def __repr__(self) -> str:
        return f"Proxies({[(r.scheme or 'all', r.host, r.port, str(r.proxy)) for r in self.rules]!r})"


def _read(value: str, name: str) -> Proxy:
    try:
        return Proxy(value)
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc}") from None


def _address(host: str) -> _IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _environment_rules(env: Mapping[str, str]) -> list[_Rule]:
    """httpx's ``get_environment_proxies`` as rules, most specific first."""
    found = _environment(env)
    mounts: dict[str, Proxy | None] = {}
    for scheme in ("http", "https", "all"):
        if found.get(scheme):
            mounts[f"{scheme}://"] = _read(found[scheme], f"{scheme.upper()}_PROXY")
    for entry in (e.strip() for e in found.get("no", "").split(",")):
        if entry == "*":
            return []
        if not entry:
            continue
        if "://" in entry:
            mounts[entry] = None
        elif _is_ip(entry):
            mounts[f"all://[{entry}]" if ":" in entry else f"all://{entry}"] = None
        elif entry.lower() == "localhost":
            mounts[f"all://{entry}"] = None
        else:
            mounts[f"all://*{entry}"] = None
    rules = [_pattern(key, proxy) for key, proxy in mounts.items()]
    return sorted(rules, key=lambda rule: rule.priority)


def proxy_for(
    url: str, env: Mapping[str, str] = os.environ, *, proxy: str | Proxy | None = None, trust_env: bool = True
) -> Proxy | None:
    """The proxy a request to ``url`` goes through under these settings (see `Proxies`), or None."""
    return Proxies(proxy, trust_env=trust_env, env=env).for_url(url)


def is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine (``localhost``, 127.0.0.0/8, ``::1``): where the
    embedded gateway listens, reached directly whatever the proxy settings say."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    address = _address(host)
    return address is not None and address.is_loopback


def check_proxies(proxies: Proxies) -> None:
    """A `ConfigError` (one line) when a proxy of ``proxies`` can be spoken by no driver
    here: a SOCKS proxy needs httpx's ``socksio`` extra."""
    for proxy in proxies.named():
        if proxy.scheme.startswith("socks"):
            try:
                importlib.import_module("socksio")
            except ImportError:
                raise ConfigError(
                    f"proxy {proxy}: a SOCKS proxy needs the socksio package (pip install 'gatecell[socks]')"
                ) from None
