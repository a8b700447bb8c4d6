"""``/metrics`` of the daemon's dashboard: what ``mcpfleet ui --metrics`` prints (its address and
a bearer token) reads the Prometheus text of the calls the daemon's host sessions made, parsed
back with ``prometheus_client``'s own parser; the token opens nothing else, and nothing reads the
metrics without it or the dashboard's session cookie."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import fake, fleet_spec, session, user_config
from tests.integration.daemon.dashboard_browser import MCPFLEET, login_link

TIMEOUT_S = 30


def _ui_metrics(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MCPFLEET), "ui", "--metrics", *flags],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
        check=False,
    )


def _get(url: str, headers: dict[str, str] | None = None, data: bytes | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


class _KeepRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # the login's 303 is the answer this test reads (its Set-Cookie)


def _session_cookie(link: str) -> str:
    opener = urllib.request.build_opener(_KeepRedirect)
    try:
        opener.open(link, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as error:
        assert error.code == 303, error.code
        return error.headers["set-cookie"].split(";", 1)[0]
    raise AssertionError("the login link did not redirect")


def _calls(text: str, server: str, tool: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "mcpfleet_calls_total" and sample.labels == {"server": server, "tool": tool}:
                return sample.value
    return None


def test_the_scrape_token_reads_the_calls_and_nothing_else(start_daemon: StartDaemon, tmp_path: Path) -> None:
    user_config({"good": fake("good", "--tool", "echo", "--tool", "add")})
    start_daemon()
    with session(fleet_spec(tmp_path)) as host:
        printed = _ui_metrics("--json")
        assert printed.returncode == 0, printed.stderr
        scrape = json.loads(printed.stdout)
        url, token = scrape["url"], scrape["token"]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics"), url
        text_form = _ui_metrics()
        assert text_form.stdout.splitlines() == [url, token], "the same address and token, one per line"

        for word in ("one", "two"):
            answer = host.call_tool("good_echo", {"message": word})
            assert answer["result"]["content"][0]["text"] == word, answer
        status, text = _get(url, {"Authorization": f"Bearer {token}"})
        assert status == 200, text
        assert _calls(text, "good", "echo") == 2
        assert _calls(text, "good", "add") is None

        # Without the token, or with another, nothing; the token opens no page, no action.
        root = url.removesuffix("/metrics")
        assert _get(url)[0] == 401
        another = token[:-1] + ("A" if token[-1] != "A" else "B")
        assert _get(url, {"Authorization": f"Bearer {another}"})[0] == 401
        assert _get(root + "/", {"Authorization": f"Bearer {token}"})[0] == 401
        origin = root.rsplit("/", 1)[0]
        posted = _get(url, {"Authorization": f"Bearer {token}", "origin": origin}, data=b"csrf=x")
        assert posted[0] == 401

        # A browser signed in with the login link reads it with its session cookie.
        cookie = _session_cookie(login_link())
        status, text = _get(url, {"cookie": cookie})
        assert status == 200 and _calls(text, "good", "echo") == 2
