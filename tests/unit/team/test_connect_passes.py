"""``team.connect_passes``: the pass in a connect link signs a browser in to the connect pages,
once, for a while, and for nothing else (real sealing under real team keys; ASGI scopes as
uvicorn builds them)."""

from __future__ import annotations

import secrets
from collections.abc import MutableMapping
from typing import Any
from urllib.parse import urlsplit

import pytest

from mcpfleet.team.connect_passes import COOKIE_LIFETIME_S, COOKIE_NAME, PASS_LIFETIME_S, ConnectPasses
from mcpfleet.team.principal import PRINCIPAL_SCOPE_KEY, Principal
from mcpfleet.team.sealing import Sealer
from mcpfleet.team.shared import LocalShared

pytestmark = pytest.mark.anyio

ALICE = Principal(subject="alice-sub", email="alice@example.com", groups=frozenset({"eng"}))
PAGE = "https://mcp.example.com/connect/github"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Answer:
    """What an admission sent, when it answered a request itself."""

    def __init__(self) -> None:
        self.messages: list[MutableMapping[str, Any]] = []

    async def __call__(self, message: MutableMapping[str, Any]) -> None:
        self.messages.append(message)

    @property
    def status(self) -> int:
        return int(self.messages[0]["status"])

    def header(self, name: bytes) -> str:
        found: str = next(value.decode() for key, value in self.messages[0]["headers"] if key == name)
        return found


class Then:
    """The admission behind the passes (the identity check in the gateway): records what it got."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, send: Any) -> Any:
        self.scopes.append(scope)
        return scope


def scope_of(path: str, *headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": list(headers)}


def passes_of(public_url: str = "https://mcp.example.com/mcp") -> tuple[ConnectPasses, Clock]:
    clock = Clock()
    return ConnectPasses(Sealer([secrets.token_bytes(32)]), public_url, LocalShared(), clock=clock), clock


async def trade(passes: ConnectPasses, link: str, then: Then | None = None) -> Answer:
    answer = Answer()
    admitted = await passes.admission(then or Then())(scope_of(urlsplit(link).path), answer)
    assert admitted is None, "a pass is answered, never passed on"
    return answer


def cookie_of(answer: Answer) -> tuple[bytes, bytes]:
    value = answer.header(b"set-cookie").split(";")[0]
    return (b"cookie", f"other=1; {value}".encode())


async def test_a_pass_is_traded_once_for_a_cookie_and_the_page_without_it() -> None:
    passes, _ = passes_of()
    link = passes.link(PAGE, ALICE)
    assert link.startswith(f"{PAGE}/signin/")

    first = await trade(passes, link)
    assert first.status == 303 and first.header(b"location") == "/connect/github"
    attributes = [part.strip() for part in first.header(b"set-cookie").split(";")]
    assert attributes[0].startswith(f"{COOKIE_NAME}=")
    assert set(attributes[1:]) == {
        "Path=/connect",
        f"Max-Age={COOKIE_LIFETIME_S}",
        "HttpOnly",
        "SameSite=Lax",
        "Secure",
    }
    assert first.header(b"cache-control") == "no-store"

    again = await trade(passes, link)
    assert again.status == 401 and b"already used" in again.messages[1]["body"]


async def test_over_plain_http_on_loopback_the_cookie_is_not_secure_only() -> None:
    passes, _ = passes_of("http://127.0.0.1:8080/mcp")
    answer = await trade(passes, passes.link("http://127.0.0.1:8080/connect/github", ALICE))
    assert "Secure" not in answer.header(b"set-cookie")


async def test_the_cookie_signs_in_to_the_connect_pages_and_to_nothing_else() -> None:
    passes, _ = passes_of()
    cookie = cookie_of(await trade(passes, passes.link(PAGE, ALICE)))
    then = Then()
    admission = passes.admission(then)

    for page in ("/connect", "/connect/github", "/connect/github/callback"):
        admitted = await admission(scope_of(page, cookie), Answer())
        assert admitted is not None and admitted[PRINCIPAL_SCOPE_KEY] == Principal(
            subject="alice-sub", email="alice@example.com"
        )
    assert then.scopes == [], "the passes admitted those themselves"

    await admission(scope_of("/mcp", cookie), Answer())
    await admission(scope_of("/connect/github", cookie, (b"authorization", b"Bearer x")), Answer())
    assert [PRINCIPAL_SCOPE_KEY in scope for scope in then.scopes] == [False, False]


async def test_passes_and_cookies_expire() -> None:
    passes, clock = passes_of()
    link = passes.link(PAGE, ALICE)
    clock.now += PASS_LIFETIME_S + 1
    assert (await trade(passes, link)).status == 401

    cookie = cookie_of(await trade(passes, passes.link(PAGE, ALICE)))
    clock.now += COOKIE_LIFETIME_S + 1
    then = Then()
    await passes.admission(then)(scope_of("/connect", cookie), Answer())
    assert then.scopes and PRINCIPAL_SCOPE_KEY not in then.scopes[0], "an expired cookie signs in nobody"


async def test_nothing_but_a_pass_this_gateway_sealed_is_taken_for_one() -> None:
    passes, _ = passes_of()
    other_gateway, _ = passes_of()
    cookie = cookie_of(await trade(passes, passes.link(PAGE, ALICE)))
    cookie_value = cookie[1].decode().split(f"{COOKIE_NAME}=")[1]
    link = passes.link(PAGE, ALICE)
    tampered = link[:-3] + ("AAA" if not link.endswith("AAA") else "BBB")
    for forged in (
        f"{PAGE}/signin/{cookie_value}",  # a cookie is not a pass
        tampered,
        other_gateway.link(PAGE, ALICE),  # another team key
        f"{PAGE}/signin/{'A' * 5000}",
        f"{PAGE}/signin/not-base64!",
    ):
        assert (await trade(passes, forged)).status == 401, forged

    then = Then()
    pass_value = link.rsplit("/", 1)[1]
    await passes.admission(then)(
        scope_of("/connect", (b"cookie", f"{COOKIE_NAME}={pass_value}".encode())), Answer()
    )
    assert PRINCIPAL_SCOPE_KEY not in then.scopes[0], "a pass is not a cookie"
