"""A team gateway's dashboard at ``/ui`` in a real browser (Debian's Chromium under Playwright).

A real ``mcpfleet serve --team`` process, a real OpenID provider (``identity_provider``) where the
gateway is registered as a confidential client (dynamic registration, as an admin would register
it by hand), ``ui.admins`` naming the group ``oncall`` (alice's; bob is in ``sales``). Alice signs
in through the provider's authorization-code flow, sees the fleet, calls a tool in the
playground as herself, and reads the audit log filtered to her calls; a service account's call
is in the log too, and filtered out. Bob signs in and is refused. Without a session every page,
stream and action is 401, and a cross-site POST 403. Screenshots land under the test's folder
(docs/ui.md shows them).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from playwright.sync_api import Page, expect
from tests.integration.daemon.dashboard_browser import screenshot
from tests.integration.team.identity_provider import (
    IdentityProvider,
    free_port,
    running_team_gateway,
    write_team_file,
)
from tests.integration.team.team_gateway import add_key
from tests.integration.team.test_audit_gateway import client_of, text_of

UI_SECRET_VARIABLE = "TEAM_UI_CLIENT_SECRET"


def register_client(issuer: str, redirect_uri: str) -> tuple[str, str]:
    """The gateway's registration at the provider: its client id and secret."""
    metadata = {
        "client_name": "mcpfleet team dashboard",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_basic",
    }
    request = urllib.request.Request(
        f"{issuer}/reg", data=json.dumps(metadata).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        registered = json.loads(answer.read())
    return registered["client_id"], registered["client_secret"]


@pytest.fixture
def team_ui(
    identity_provider: IdentityProvider, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, str]]:
    """The gateway serving ``/ui``: its origin, and the service account ``robot``'s key."""
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    client_id, client_secret = register_client(identity_provider.issuer, f"{origin}/ui/callback")
    policies = [{"users": ["alice@example.com", "robot"], "allow": ["clock/*"]}]
    team = write_team_file(isolated_home, identity_provider.issuer, port, policies)
    document = json.loads(team.read_text())
    document["ui"] = {
        "client_id": client_id,
        "client_secret": f"${{{UI_SECRET_VARIABLE}}}",
        "admins": {"groups": ["oncall"]},
        "scopes": ["openid", "email", "groups"],
    }
    team.write_text(json.dumps(document))
    monkeypatch.setenv(UI_SECRET_VARIABLE, client_secret)
    monkeypatch.setenv("MCPFLEET_TEAM_KEY", base64.b64encode(secrets.token_bytes(32)).decode())
    robot = add_key(team, "robot", dict(os.environ))
    with running_team_gateway(team, port):
        yield origin, robot


def status_of(url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def robot_calls_echo(origin: str, key: str) -> None:
    """A call of the service account, from its own MCP client, in a thread of its own (the
    browser's event loop runs in this one)."""
    answers: list[Any] = []

    async def call() -> None:
        async with client_of(f"{origin}/mcp", key) as robot:
            with anyio.fail_after(60):
                answers.append(text_of(await robot.call_tool("clock_echo", {"message": "from the robot"})))

    thread = threading.Thread(target=anyio.run, args=(call,))
    thread.start()
    thread.join(timeout=90)
    assert answers == ["from the robot"]


def sign_in(page: Page, origin: str, user: str) -> None:
    """Through the provider's flow (its headless login page signs in ``login_hint``)."""
    page.goto(f"{origin}/ui/signin?login_hint={user}")


def test_an_admin_signs_in_sees_the_fleet_calls_a_tool_and_reads_the_audit_log(
    team_ui: tuple[str, str], page: Page, tmp_path: Path
) -> None:
    origin, robot = team_ui
    shots = tmp_path / "screenshots"
    robot_calls_echo(origin, robot)

    sign_in(page, origin, "alice")
    expect(page.locator("tr[data-server=clock] .state")).to_have_text("connected")
    expect(page.locator("nav .signed-in")).to_have_text("alice@example.com")
    assert page.url == f"{origin}/ui/"
    screenshot(page, shots, "team-fleet")

    # The playground calls as alice: the policy allows it, the audit log records it.
    page.goto(f"{origin}/ui/playground?server=clock&tool=echo")
    page.locator("input[name=message]").fill("hello from alice")
    page.get_by_role("button", name="Call").click()
    expect(page.locator("#result")).to_contain_text("hello from alice")

    page.goto(f"{origin}/ui/audit")
    expect(page.locator("table.audit tbody tr")).to_have_count(2)
    expect(page.locator("table.audit tbody tr").first).to_contain_text("mcpfleet ui")  # newest first
    page.locator("input[name=user]").fill("alice")
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("table.audit tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-user", "alice")
    expect(rows.first.locator(".outcome")).to_have_text("ok")
    screenshot(page, shots, "team-audit")
    page.locator("input[name=user]").fill("service:robot")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-user", "service:robot")

    # The plots show the calls this replica served, the robot's and the playground's.
    page.goto(f"{origin}/ui/plots")
    expect(page.locator("main p").first).to_contain_text("The last 2 calls this replica served")

    # The session cookie: HttpOnly, SameSite=Strict, bound to /ui/.
    [cookie] = [each for each in page.context.cookies() if each["name"] == "mcpfleet_ui"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui/"

    # Signing out forgets it: the fleet is 401 again.
    page.goto(f"{origin}/ui/")
    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("h1")).to_have_text("Signed out")
    answer = page.goto(f"{origin}/ui/")
    assert answer is not None and answer.status == 401


def test_a_non_admin_is_refused_and_nothing_is_served_without_a_session(
    team_ui: tuple[str, str],
    page: Page,
    other_site: tuple[str, list[tuple[str, str]]],
) -> None:
    origin, _ = team_ui
    for path in ("/ui/", "/ui/servers/clock", "/ui/approvals", "/ui/playground", "/ui/plots", "/ui/audit"):
        assert status_of(origin + path) == 401, path
    assert status_of(origin + "/ui/events/fleet") == 401
    for path in ("/ui/servers/clock/restart", "/ui/playground?server=clock&tool=echo", "/ui/signout"):
        assert status_of(origin + path, data=b"csrf=x", headers={"origin": origin}) == 401, path
    # Another name for this address (DNS rebinding) is refused.
    assert status_of(origin + "/ui/signin", headers={"host": "attacker.example"}) == 403

    # Bob signs in at the provider, and is told why he is not let in.
    with page.expect_response(lambda response: "/ui/callback" in response.url) as refused:
        sign_in(page, origin, "bob")
    assert refused.value.status == 403
    expect(page.locator("main")).to_contain_text("bob@example.com (groups: sales) is not an admin")
    assert not [each for each in page.context.cookies() if each["name"] == "mcpfleet_ui"]
    page.context.clear_cookies()

    # Alice, signed in, is posted a restart by another site's page: its Origin is refused.
    sign_in(page, origin, "alice")
    expect(page.locator("tr[data-server=clock] .state")).to_have_text("connected")
    site, asked = other_site
    with page.expect_response(lambda response: response.url.startswith(origin)) as cross_site:
        page.goto(f"{site}?target={origin}/ui/servers/clock/restart")
    assert cross_site.value.status == 403 and asked
    # The dashboard's own form with a forged CSRF token: 403 too.
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in page.context.cookies())
    forged = status_of(
        f"{origin}/ui/servers/clock/restart",
        data=b"csrf=forged",
        headers={"cookie": cookie, "origin": origin},
    )
    assert forged == 403
