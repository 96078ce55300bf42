"""Where ``ferret serve`` may listen: plain HTTP on loopback; anywhere else only over TLS (a certificate
and key), or when told that a TLS-terminating proxy sits in front."""

from __future__ import annotations

import ipaddress

from ferret.errors import InvalidRequest


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def check_exposure(host: str, tls_cert: str | None, tls_key: str | None, behind_tls_proxy: bool) -> None:
    if bool(tls_cert) != bool(tls_key):
        raise InvalidRequest("--tls-cert/--tls-key", "give both the certificate and its private key")
    if tls_cert or behind_tls_proxy or is_loopback(host):
        return
    raise InvalidRequest("--host", f"{host} is not a loopback address and no TLS was given: keys would cross the "
                                   "network in clear. Give --tls-cert and --tls-key, or --behind-tls-proxy when a "
                                   "proxy in front terminates TLS")
