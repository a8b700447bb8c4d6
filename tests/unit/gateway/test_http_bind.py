"""What ``--http [HOST:]PORT`` and ``--auth-token`` accept, and which Host/Origin values a bind allows."""

from __future__ import annotations

import pytest

from mcpfleet.errors import ServeAddressError
from mcpfleet.gateway.http import HttpBind, check_token_shape, parse_bind, transport_security_for


@pytest.mark.parametrize(
    ("text", "bind"),
    [
        ("8080", HttpBind("127.0.0.1", 8080)),
        ("0", HttpBind("127.0.0.1", 0)),
        ("0.0.0.0:9000", HttpBind("0.0.0.0", 9000)),
        ("localhost:0", HttpBind("localhost", 0)),
        ("[::1]:8080", HttpBind("::1", 8080)),
        ("[::]:0", HttpBind("::", 0)),
    ],
)
def test_a_bind_is_host_and_port_with_loopback_by_default(text: str, bind: HttpBind) -> None:
    assert parse_bind(text) == bind


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("http", "the port must be a number"),
        ("127.0.0.1:", "the port must be a number"),
        ("127.0.0.1:70000", "the port must be from 0 to 65535"),
        ("-1", "the port must be from 0 to 65535"),
        (":8080", "the host before ':' is empty"),
        ("::1:8080", "write an IPv6 address in brackets"),
    ],
)
def test_a_malformed_bind_is_one_line_that_says_what_to_write(text: str, complaint: str) -> None:
    with pytest.raises(ServeAddressError, match=complaint) as raised:
        parse_bind(text)
    assert "\n" not in str(raised.value)
    assert str(raised.value).startswith(f"--http {text!r}")


@pytest.mark.parametrize("token", ["", "with space", "tab\there", "naïve", "line\nbreak"])
def test_a_token_that_cannot_travel_in_a_header_is_refused(token: str) -> None:
    with pytest.raises(ServeAddressError, match="visible ASCII"):
        check_token_shape(token)


def test_a_loopback_bind_allows_the_loopback_names_at_its_own_port_only() -> None:
    settings = transport_security_for(HttpBind("127.0.0.1", 0), "127.0.0.1", 4321)
    assert settings.enable_dns_rebinding_protection
    assert set(settings.allowed_hosts) == {"127.0.0.1:4321", "localhost:4321", "[::1]:4321"}
    assert set(settings.allowed_origins) == {
        "http://127.0.0.1:4321",
        "http://localhost:4321",
        "http://[::1]:4321",
    }


def test_a_wildcard_bind_allows_loopback_and_this_machines_names_never_the_wildcard() -> None:
    import socket

    settings = transport_security_for(HttpBind("0.0.0.0", 0), "0.0.0.0", 4321)
    assert {"127.0.0.1:4321", "localhost:4321", f"{socket.gethostname()}:4321"} <= set(settings.allowed_hosts)
    assert "0.0.0.0:4321" not in settings.allowed_hosts
    assert all(":*" not in host for host in settings.allowed_hosts)


def test_the_default_port_is_also_allowed_without_it() -> None:
    settings = transport_security_for(HttpBind("127.0.0.1", 80), "127.0.0.1", 80)
    assert {"localhost", "localhost:80"} <= set(settings.allowed_hosts)
    assert "http://localhost" in settings.allowed_origins
