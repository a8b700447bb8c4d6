"""The dashboard's login tokens, sessions and CSRF tokens, and the gate's refusals."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from mcpfleet.dashboard import access as access_module
from mcpfleet.dashboard.access import SESSION_COOKIE, Access, AccessGate, require_csrf

PORT = 8123


def test_a_login_token_works_once() -> None:
    access = Access()
    token = access.new_login_token()
    session = access.redeem(token)
    assert session is not None and session.id != token and session.csrf != session.id
    assert access.redeem(token) is None
    assert access.redeem("never-issued") is None


def test_a_login_token_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    access = Access()
    token = access.new_login_token()
    monkeypatch.setattr(access_module, "LOGIN_TOKEN_TTL_S", -1.0)
    spent = access.new_login_token()  # issued already past its time
    assert access.redeem(spent) is None
    assert access.redeem(token) is not None


def test_the_csrf_token_is_the_sessions_own() -> None:
    access = Access()
    first, second = access.redeem(access.new_login_token()), access.redeem(access.new_login_token())
    assert first is not None and second is not None
    assert require_csrf(first, first.csrf)
    assert not require_csrf(first, second.csrf)
    assert not require_csrf(first, None)


def _client(access: Access) -> TestClient:
    async def ok(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    routes = [Route("/{path:path}", ok, methods=["GET", "POST"])]
    return TestClient(AccessGate(Starlette(routes=routes), access, PORT), base_url=f"http://127.0.0.1:{PORT}")


@pytest.mark.parametrize(
    ("method", "headers", "signed_in", "status"),
    [
        ("GET", {}, False, 401),
        ("GET", {}, True, 200),
        ("GET", {"host": f"rebound.example:{PORT}"}, True, 403),
        ("GET", {"host": "127.0.0.1:9999"}, True, 403),
        ("GET", {"host": f"localhost:{PORT}"}, True, 200),
        ("POST", {"origin": f"http://127.0.0.1:{PORT}"}, True, 200),
        ("POST", {"origin": "http://127.0.0.1:9999"}, True, 403),
        ("POST", {"origin": "null"}, True, 403),
        ("POST", {}, True, 403),
        ("POST", {"referer": f"http://127.0.0.1:{PORT}/approvals"}, True, 200),
        ("POST", {"origin": f"http://127.0.0.1:{PORT}"}, False, 401),
    ],
)
def test_the_gate(method: str, headers: dict[str, str], signed_in: bool, status: int) -> None:
    access = Access()
    client = _client(access)
    cookies: dict[str, Any] = {}
    if signed_in:
        session = access.redeem(access.new_login_token())
        assert session is not None
        cookies = {SESSION_COOKIE: session.id}
    client.cookies.update(cookies)
    assert client.request(method, f"{access.root}/", headers=headers).status_code == status


def test_every_page_is_under_the_secret_root() -> None:
    access = Access()
    assert len(access.root) > 16 and Access().root != access.root
    client = _client(access)
    session = access.redeem(access.new_login_token())
    assert session is not None
    client.cookies.update({SESSION_COOKIE: session.id})
    assert client.get(f"{access.root}/plots").status_code == 200
    for outside in ("/", "/plots", "/login", f"{access.root}x/plots"):
        assert client.get(outside).status_code == 401, outside


def test_the_login_path_is_open_to_a_get_from_this_address_only() -> None:
    access = Access()
    client = _client(access)
    login = f"{access.root}/login"
    assert client.get(login).status_code == 200  # the route itself judges the token
    assert client.get(login, headers={"host": "elsewhere:80"}).status_code == 403
    assert client.post(login, headers={"origin": f"http://127.0.0.1:{PORT}"}).status_code == 401
