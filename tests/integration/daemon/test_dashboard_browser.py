"""The dashboard in a real browser (Debian's Chromium under Playwright) against a real daemon.

A real ``mcpfleet daemon run`` serves a host session of a project: a user server that works
(``good``), one that exits before its handshake (``broken``), and a project server waiting for
approval (``pending``). ``mcpfleet ui --no-browser`` prints the login link the browser opens.
Every verdict waits for text to appear on the page (``WAIT_MS`` only guards against a hang);
each page is saved as a screenshot under the test's folder (docs/ui.md shows them).
"""

from __future__ import annotations

import http.server
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import fake, fleet_spec, project_config, session, user_config
from tests.integration.daemon.dashboard_browser import WAIT_MS, login_link, screenshot
from tests.integration.pinning_fleet import rug_pull_entry

from mcpfleet.paths import user_config_file


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    root.mkdir()
    user_config(
        {
            "good": fake(
                "good", "--tool", "echo", "--tool", "add", "--tool", "picture", "--stderr-lines", "2"
            ),
            "broken": fake("broken", "--exit-before-handshake", "--stderr-lines", "3", "--exit-code", "3"),
            "rug": rug_pull_entry(root / "turn-hostile"),
        }
    )
    project_config(root, {"pending": fake("pending", "--tool", "echo")})
    return root


def test_the_fleet_the_playground_and_an_approval_seen_in_the_browser(
    start_daemon: StartDaemon, project: Path, page: Page, tmp_path: Path
) -> None:
    shots = tmp_path / "screenshots"
    start_daemon()
    with session(fleet_spec(project)) as host:
        page.goto(login_link())

        # The fleet: the failing server's state and error, the working one ready.
        broken = page.locator("tr[data-server=broken]")
        expect(broken.locator(".state")).to_have_text("failed")
        expect(broken.locator(".error")).to_contain_text("exit")
        expect(page.locator("tr[data-server=good] .state")).to_have_text("connected")
        expect(page.locator("table.sessions")).to_contain_text(str(project.resolve()))
        # Once its tools are pinned (it is listed), the rug pull turns hostile: withheld.
        expect(page.locator("tr[data-server=rug] td").nth(6)).to_have_text("2")
        (project / "turn-hostile").touch()
        screenshot(page, shots, "fleet")

        # A server's page: why it failed (what it printed before it exited); another's log
        # tail (its stderr as it runs) and its tools with their schemas.
        broken.locator("a").click()
        expect(page.locator("#server .error")).to_contain_text("stderr line 2")
        page.goto(page.url.split("/servers/")[0] + "/")
        page.locator("tr[data-server=good] a").click()
        expect(page.locator("pre.log")).to_contain_text("stderr line 1")
        expect(page.locator("details.tool")).to_have_count(3)
        page.locator("details.tool summary").first.click()
        expect(page.locator("details.tool pre").first).to_contain_text('"required"')
        screenshot(page, shots, "server")
        # Restart: a new process, shown in place by the page's live part.
        first_pid = page.locator("#server dd").nth(3).inner_text()
        page.get_by_role("button", name="Restart").click()
        expect(page.locator(".said")).to_contain_text("good")
        expect(page.locator("#server dd").nth(3)).not_to_have_text(first_pid)
        expect(page.locator("#server .state")).to_have_text("connected")
        expect(page.locator("details.tool summary").first).to_contain_text("add")

        # The playground: a form from the tool's schema, a field per property, "Call".
        page.get_by_role("link", name="Try its tools").click()
        page.locator("select[name=tool]").select_option("echo")
        page.get_by_role("button", name="Show").click()
        page.locator("input[name=message]").fill("hello from the dashboard")
        page.get_by_role("button", name="Call").click()
        expect(page.locator("#result")).to_contain_text("hello from the dashboard")
        expect(page.locator("#result")).to_contain_text("Structured content")
        screenshot(page, shots, "playground")
        # An image block is shown as the image itself (a data: URL: nothing is fetched).
        page.locator("select[name=tool]").select_option("picture")
        page.get_by_role("button", name="Show").click()
        page.get_by_role("button", name="Call").click()
        expect(page.locator("#result")).to_contain_text("a 2x2 picture")
        loaded = page.locator("#result img").evaluate("image => image.complete && image.naturalWidth")
        assert loaded == 2

        # The fleet page stays open (a mark in its window shows it is never reloaded) while
        # another tab approves the pending project server: its row arrives, then connects.
        fleet = page.context.new_page()
        fleet.goto(page.url.split("/playground")[0] + "/")
        expect(fleet.locator("tr[data-server=good]")).to_be_visible()
        fleet.evaluate("window.notReloaded = true")
        page.goto(page.url.split("/playground")[0] + "/approvals")
        pending = page.locator("section.pending[data-pending=pending]")
        expect(pending).to_contain_text("fake_server.py")
        # The withheld tools, each with its diff and the poisoning warning of what it says now.
        changed = page.locator("section.withheld", has_text="rug/read_notes")
        expect(changed.locator("pre.diff .add").last).to_contain_text("id_rsa")
        expect(changed.locator(".warning").first).to_be_visible()
        expect(page.locator("section.withheld", has_text="rug/exfiltrate")).to_contain_text("added")
        screenshot(page, shots, "approvals")
        changed.get_by_role("button", name="Approve rug's withheld tools").click()
        expect(page.locator(".said")).to_contain_text("read_notes")
        expect(page.locator("section.withheld")).to_have_count(0)
        # The fleet follows the pin store's write (it watches it): the session gets the tools.
        deadline = time.monotonic() + WAIT_MS / 1000
        while "rug_read_notes" not in host.tool_names():
            assert time.monotonic() < deadline, "the approved tools never reached the session"
            time.sleep(0.05)
        pending.get_by_role("button", name="Approve pending").click()
        expect(page.locator(".said")).to_contain_text("approved pending")
        expect(fleet.locator("tr[data-server=pending] .state")).to_have_text("connected")
        assert fleet.evaluate("window.notReloaded") is True
        screenshot(fleet, shots, "fleet-live")

        # A call of the host's session reaches the plots too, beside the playground's.
        answer = host.call_tool("good_add", {"a": 2, "b": 3})
        assert answer["result"]["structuredContent"] == {"sum": 5}, answer
        page.goto(page.url.split("/approvals")[0] + "/plots")
        expect(page.locator("main p").first).to_contain_text("The last 3 calls")
        expect(page.locator("figure.chart svg")).to_have_count(2)
        screenshot(page, shots, "plots")


@pytest.fixture
def other_site() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """Another server on loopback (another local user's, say) whose page posts a form to the
    dashboard (its address is the page's ``?target=``): the request a hostile page would make.
    It keeps each path asked and the cookies the browser sent with it."""
    asked: list[tuple[str, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append((self.path, self.headers.get("cookie", "")))
            target = self.path.partition("?target=")[2]
            body = (
                f'<form id="f" method="post" action="{target}"><input name="csrf" value="guess"></form>'
                "<script>document.getElementById('f').submit()</script>"
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", asked
    finally:
        server.shutdown()
        server.server_close()


def _status(url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_without_the_link_nothing_is_served_and_the_link_works_once(
    start_daemon: StartDaemon, project: Path, page: Page, other_site: tuple[str, list[tuple[str, str]]]
) -> None:
    start_daemon()
    with session(fleet_spec(project)):
        link = login_link()
        base = link.split("/login")[0]  # the dashboard's secret root
        site_of_dashboard = base.rsplit("/", 1)[0]
        # Without a session: every page, stream and file is 401, every action too.
        for path in ("/", "/approvals", "/playground", "/plots", "/events/fleet", "/static/dashboard.js"):
            assert _status(base + path) == 401, path
        origin = {"origin": site_of_dashboard}
        for path in ("/servers/good/restart", "/approvals/server", "/approvals/tools", "/playground"):
            assert _status(base + path, data=b"csrf=x", headers=origin) == 401, path
        # Outside the link's secret root nothing is served at all, nor is the cookie sent there.
        assert _status(site_of_dashboard + "/") == 401 and _status(site_of_dashboard + "/plots") == 401
        # Another name for this address (DNS rebinding) is refused even with the link.
        assert _status(link, headers={"host": "attacker.example:80"}) == 403

        page.goto(link)
        expect(page.locator("tr[data-server=good] .state")).to_have_text("connected")
        good_page = page.locator("tr[data-server=good] a").get_attribute("href")
        assert good_page is not None
        pid_cell = page.locator("tr[data-server=good] td").nth(4)
        pid = pid_cell.inner_text()

        # The link is spent: opened again (in a fresh browser context) it signs nobody in.
        again = page.context.browser
        assert again is not None
        stranger = again.new_context()
        try:
            answer = stranger.new_page().goto(link)
            assert answer is not None and answer.status == 401
        finally:
            stranger.close()

        # A page of another origin posts the restart form at the dashboard, in the signed-in
        # browser. Another port of 127.0.0.1 is the same *site*, so even the Strict cookie goes
        # with it: the Origin check is what refuses it.
        site, asked = other_site
        with page.expect_response(lambda response: response.url.startswith(base)) as refused:
            page.goto(f"{site}?target={site_of_dashboard}{good_page}/restart")
        assert refused.value.status == 403
        assert asked, "the other site's page was served"
        # Nor did that server get the session cookie, at any address of its own: the cookie is
        # bound to the dashboard's secret root (a cookie of 127.0.0.1 goes to every port of it).
        page.goto(f"{site}plots")
        assert [cookies for path, cookies in asked if "favicon" not in path] == ["", ""]
        # The dashboard's own form with a forged CSRF token: 403 too; the server kept its process.
        cookie = {c["name"]: c["value"] for c in page.context.cookies()}
        assert cookie, "signed in: the session cookie is set"
        header = "; ".join(f"{name}={value}" for name, value in cookie.items())
        forged = _status(
            f"{site_of_dashboard}{good_page}/restart",
            data=b"csrf=forged",
            headers={"cookie": header, "origin": site_of_dashboard},
        )
        assert forged == 403
        page.goto(base + "/")
        expect(page.locator("tr[data-server=good] td").nth(4)).to_have_text(pid)

        # Disable, with the dashboard's own form: written as `mcpfleet disable` writes it, and
        # the server leaves the fleet.
        page.goto(site_of_dashboard + good_page)
        page.get_by_role("button", name="Disable").click()
        expect(page.locator(".said")).to_contain_text("disabled good")
        expect(page.locator("tr[data-server=good]")).to_have_count(0)
        assert '"good"' in user_config_file().read_text()
