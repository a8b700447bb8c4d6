"""What ``--http [HOST:]PORT`` and a bearer token accept, which Host/Origin values a bind allows, and
what the bearer gate lets through (driven as the ASGI app it is, without a socket)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpfleet.errors import ServeAddressError
from mcpfleet.gateway.http import BearerGate, HttpBind, check_token_shape, parse_bind, transport_security_for


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
    with pytest.raises(ServeAddressError, match=r"^MCPFLEET_GATEWAY_TOKEN: .*visible ASCII") as raised:
        check_token_shape(token, "MCPFLEET_GATEWAY_TOKEN")
    assert "\n" not in str(raised.value)


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


def test_an_ipv6_wildcard_bind_never_allows_the_wildcard_itself() -> None:
    settings = transport_security_for(HttpBind("::", 0), "::", 4321)
    assert "[::1]:4321" in settings.allowed_hosts
    assert "[::]:4321" not in settings.allowed_hosts


def test_the_default_port_is_also_allowed_without_it() -> None:
    settings = transport_security_for(HttpBind("127.0.0.1", 80), "127.0.0.1", 80)
    assert {"localhost", "localhost:80"} <= set(settings.allowed_hosts)
    assert "http://localhost" in settings.allowed_origins


async def _status_from(gate: BearerGate, headers: list[tuple[bytes, bytes]], scope_type: str = "http") -> int:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    await gate({"type": scope_type, "method": "POST", "headers": headers}, receive, send)
    return int(sent[0]["status"])


async def _inner_app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"served"})


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ([(b"authorization", b"Bearer right")], 200),
        ([(b"authorization", b"bearer  right ")], 200),
        ([], 401),
        ([(b"authorization", b"Bearer wrong")], 401),
        ([(b"authorization", b"Bearer righter")], 401),
        ([(b"authorization", b"Basic right")], 401),
        ([(b"authorization", b"Bearer right"), (b"authorization", b"Bearer right")], 401),
    ],
    ids=["right", "case-and-spaces", "missing", "wrong", "longer", "other-scheme", "twice"],
)
async def test_the_gate_lets_through_exactly_one_right_bearer_token(
    headers: list[tuple[bytes, bytes]], status: int
) -> None:
    assert await _status_from(BearerGate(_inner_app, "right"), headers) == status


@pytest.mark.anyio
async def test_the_gate_answers_503_once_stopping_even_with_the_right_token() -> None:
    gate = BearerGate(_inner_app, "right")
    gate.stopping = True
    assert await _status_from(gate, [(b"authorization", b"Bearer right")]) == 503
    assert await _status_from(BearerGate(_inner_app, None), []) == 200


def test_the_token_variable_has_one_name() -> None:
    from mcpfleet.cli import serve_commands
    from mcpfleet.gateway import http

    assert vars(serve_commands)["TOKEN_VARIABLE"] == vars(http)["TOKEN_VARIABLE"] == "MCPFLEET_GATEWAY_TOKEN"
