"""The issuer's keys as a team gateway fetches them: discovery, the cache, rotation, a flood of
unknown ``kid`` values, an issuer that is down or lies. Against a small issuer served over real
HTTP on loopback (standard library), whose documents the tests change and whose requests they count."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import jwt
import pytest
from tests.integration.team.identity_provider import new_signing_key, public_jwk

from mcpfleet.team.jwks import IssuerKeys, IssuerUnavailable, check_issuer_url
from mcpfleet.team.model import IdentitySettings
from mcpfleet.team.tokens import JwtVerifier, TokenRejected

pytestmark = pytest.mark.anyio

AUDIENCE = "https://mcp.example.com/mcp"


class FakeIssuerState:
    def __init__(self) -> None:
        self.documents: dict[str, tuple[int, bytes]] = {}
        self.hits: Counter[str] = Counter()
        self.lock = threading.Lock()

    def serve_json(self, path: str, document: Any, status: int = 200) -> None:
        with self.lock:
            self.documents[path] = (status, json.dumps(document).encode())


@contextmanager
def local_issuer() -> Iterator[tuple[str, FakeIssuerState]]:
    """An issuer at ``http://127.0.0.1:PORT/realm`` serving whatever ``state`` holds."""
    state = FakeIssuerState()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with state.lock:
                state.hits[self.path] += 1
                status, body = state.documents.get(self.path, (404, b"{}"))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/realm", state
    finally:
        server.shutdown()
        server.server_close()


def publish(state: FakeIssuerState, issuer: str, keys: list[dict[str, Any]]) -> None:
    state.serve_json(
        "/realm/.well-known/openid-configuration", {"issuer": issuer, "jwks_uri": f"{issuer}/keys"}
    )
    state.serve_json("/realm/keys", {"keys": keys})


def token(issuer: str, key: Any, kid: str) -> str:
    now = int(time.time())
    claims = {"iss": issuer, "sub": "alice", "aud": AUDIENCE, "iat": now, "exp": now + 300}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


def verifier(issuer: str, *, refresh_interval_s: float = 60.0) -> JwtVerifier:
    keys = IssuerKeys(issuer, refresh_interval_s=refresh_interval_s)
    return JwtVerifier(IdentitySettings(issuer=issuer, audience=AUDIENCE), keys)


async def test_a_rotated_in_key_is_fetched_on_its_first_token() -> None:
    old, new = new_signing_key(), new_signing_key()
    with local_issuer() as (issuer, state):
        publish(state, issuer, [public_jwk(old, "old")])
        check = verifier(issuer, refresh_interval_s=0)
        assert (await check.principal_for(token(issuer, old, "old"))).subject == "alice"
        publish(state, issuer, [public_jwk(old, "old"), public_jwk(new, "new")])
        assert (await check.principal_for(token(issuer, new, "new"))).subject == "alice"
        assert (await check.principal_for(token(issuer, old, "old"))).subject == "alice"
    assert state.hits["/realm/keys"] == 2  # the first token, then the new kid; the cache otherwise
    assert state.hits["/realm/.well-known/openid-configuration"] == 1


async def test_a_flood_of_unknown_kids_fetches_the_keys_once_per_interval() -> None:
    key = new_signing_key()
    with local_issuer() as (issuer, state):
        publish(state, issuer, [public_jwk(key, "real")])
        check = verifier(issuer, refresh_interval_s=3600)
        forger = new_signing_key()
        for attempt in range(50):
            with pytest.raises(TokenRejected, match="not among the issuer's published keys"):
                await check.principal_for(token(issuer, forger, f"random-{attempt}"))
        assert (await check.principal_for(token(issuer, key, "real"))).subject == "alice"
    assert state.hits["/realm/keys"] == 1


async def test_the_keys_held_are_kept_while_the_issuer_is_down() -> None:
    key = new_signing_key()
    with local_issuer() as (issuer, state):
        publish(state, issuer, [public_jwk(key, "k")])
        keys = IssuerKeys(issuer, refresh_interval_s=0, max_age_s=0)  # every token would fetch again
        check = JwtVerifier(IdentitySettings(issuer=issuer, audience=AUDIENCE), keys)
        await check.principal_for(token(issuer, key, "k"))
        state.serve_json("/realm/keys", {"error": "down"}, status=503)
        assert (await check.principal_for(token(issuer, key, "k"))).subject == "alice"
    assert state.hits["/realm/keys"] == 2 and keys.fetches == 1


async def test_an_issuer_that_cannot_be_reached_or_read_is_a_clear_refusal() -> None:
    with local_issuer() as (issuer, state):
        check = verifier(issuer)
        with pytest.raises(TokenRejected, match=r"cannot be fetched.*openid-configuration.*HTTP 404"):
            await check.principal_for(token(issuer, new_signing_key(), "k"))
        # The same issuer once it answers, but with a document that names another issuer.
        state.serve_json(
            "/realm/.well-known/openid-configuration", {"issuer": "http://127.0.0.1:1/x", "jwks_uri": "x"}
        )
        liar = IssuerKeys(issuer)
        with pytest.raises(IssuerUnavailable, match=r"names issuer 'http://127\.0\.0\.1:1/x'"):
            await liar.check()
        state.serve_json(
            "/realm/.well-known/openid-configuration", {"issuer": issuer, "jwks_uri": f"{issuer}/keys"}
        )
        state.serve_json("/realm/keys", {"keys": [{"kty": "oct", "k": "c2VjcmV0"}]})
        with pytest.raises(IssuerUnavailable, match="no signature key"):
            await IssuerKeys(issuer).check()


async def test_rfc8414_metadata_serves_when_there_is_no_openid_configuration() -> None:
    key = new_signing_key()
    with local_issuer() as (issuer, state):
        state.serve_json(
            "/.well-known/oauth-authorization-server/realm", {"issuer": issuer, "jwks_uri": f"{issuer}/k"}
        )
        state.serve_json("/realm/k", {"keys": [public_jwk(key, "k")]})
        assert (await verifier(issuer).principal_for(token(issuer, key, "k"))).subject == "alice"


async def test_a_key_set_in_clear_text_off_loopback_is_refused_before_any_fetch() -> None:
    with local_issuer() as (issuer, state):
        state.serve_json(
            "/realm/.well-known/openid-configuration", {"issuer": issuer, "jwks_uri": "http://10.0.0.1/k"}
        )
        with pytest.raises(IssuerUnavailable, match="https:// URL"):
            await IssuerKeys(issuer).check()


async def test_an_issuer_that_never_answers_is_given_up_on_at_the_deadline() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts connections, never answers
        issuer = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(IssuerUnavailable, match=r"did not arrive within 0.5 s|timed out"):
            await IssuerKeys(issuer, fetch_timeout_s=0.5).check()


def test_an_http_issuer_is_accepted_on_loopback_only() -> None:
    assert check_issuer_url("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
    assert check_issuer_url("http://localhost/realms/x") == "http://localhost/realms/x"
    assert check_issuer_url("https://login.example.com/") == "https://login.example.com/"
    for refused in ("http://idp.example.com", "http://10.0.0.1", "ftp://127.0.0.1", "idp.example.com"):
        with pytest.raises(IssuerUnavailable, match="http:// is accepted for"):
            check_issuer_url(refused)


async def test_requests_arriving_together_before_any_key_is_held_share_one_fetch() -> None:
    key = new_signing_key()
    with local_issuer() as (issuer, state):
        publish(state, issuer, [public_jwk(key, "k")])
        check = verifier(issuer, refresh_interval_s=0)
        tokens = [token(issuer, key, "k") for _ in range(20)]
        subjects: list[str] = []

        async def one(credential: str) -> None:
            subjects.append((await check.principal_for(credential)).subject)

        async with anyio.create_task_group() as task_group:
            for credential in tokens:
                task_group.start_soon(one, credential)
    assert subjects == ["alice"] * 20
    assert state.hits["/realm/keys"] == 1


async def test_a_token_without_kid_is_checked_only_against_a_single_published_key() -> None:
    signing, other = new_signing_key(), new_signing_key()
    encryption = {**public_jwk(other, "enc"), "use": "enc"}  # never a signature key
    with local_issuer() as (issuer, state):
        publish(state, issuer, [public_jwk(signing, "only"), encryption])
        now = int(time.time())
        claims = {"iss": issuer, "sub": "alice", "aud": AUDIENCE, "iat": now, "exp": now + 300}
        unnamed = jwt.encode(claims, signing, algorithm="RS256")
        assert (await verifier(issuer).principal_for(unnamed)).subject == "alice"
        with pytest.raises(TokenRejected, match="not among the issuer's published keys"):
            await verifier(issuer).principal_for(token(issuer, other, "enc"))  # an encryption key's kid
        publish(state, issuer, [public_jwk(signing, "only"), public_jwk(other, "second")])
        with pytest.raises(
            TokenRejected, match=r"names no signing key \(kid\) and the issuer publishes more"
        ):
            await verifier(issuer).principal_for(unnamed)
