"""What a team gateway's identity check costs per request, measured in process.

The check is ``team.identity.IdentityCheck.admit``, which the gateway runs on each request's
headers before anything else reads it. Each figure is the p50 (and p90) over ``--requests``
requests of one call of it, so it is the check's own cost:

* **JWT, keys cached**: an RS256 access token (2048-bit key) and an ES256 one, checked against
  an issuer's JWKS that was fetched once, before the timing, from a real HTTP issuer on loopback
  (standard library): signature, ``iss``, ``aud``, ``exp``/``nbf``, the principal built;
* **API key**: a service account's key looked up in a key file of 1 and of 100 keys
  (SHA-256, then a constant-time comparison with every stored hash, and the file's ``stat`` that
  notices a revocation).

``python -m bench.team_identity [--requests N] [--json]`` prints the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from mcpfleet.team.api_keys import ApiKeyStore, add_key
from mcpfleet.team.identity import IdentityCheck
from mcpfleet.team.model import IdentitySettings
from mcpfleet.team.tokens import JwtVerifier

AUDIENCE = "https://mcp.example.com/mcp"
DEFAULT_REQUESTS = 2000
WARM_UP = 50


@contextmanager
def issuer_serving(keys: list[dict[str, Any]]) -> Iterator[str]:
    """An issuer on loopback publishing ``keys``: its discovery document and its JWKS."""
    documents: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = documents.get(self.path, b"{}")
            self.send_response(200 if self.path in documents else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    issuer = f"http://127.0.0.1:{server.server_address[1]}"
    documents["/.well-known/openid-configuration"] = json.dumps(
        {"issuer": issuer, "jwks_uri": f"{issuer}/jwks"}
    ).encode()
    documents["/jwks"] = json.dumps({"keys": keys}).encode()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        server.shutdown()
        server.server_close()


def _scope(authorization: str) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(b"content-type", b"application/json"), (b"authorization", authorization.encode())],
    }


async def _send(message: Any) -> None:
    raise AssertionError(f"the check refused a good credential: {message}")


async def _check_cost_us(check: IdentityCheck, authorization: str, requests: int) -> dict[str, float]:
    scope = _scope(authorization)
    for _ in range(WARM_UP):
        assert await check.admit(scope, _send) is not None
    timings: list[float] = []
    for _ in range(requests):
        start = time.perf_counter_ns()
        await check.admit(scope, _send)
        timings.append((time.perf_counter_ns() - start) / 1000)
    deciles = statistics.quantiles(timings, n=10)
    return {"p50_us": statistics.median(timings), "p90_us": deciles[8]}


def _jwk(key: Any, algorithm: Any, kid: str, alg: str) -> dict[str, Any]:
    published: dict[str, Any] = json.loads(algorithm.to_jwk(key.public_key()))
    return {**published, "kid": kid, "alg": alg, "use": "sig"}


async def measure(requests: int) -> dict[str, dict[str, float]]:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    keys = [_jwk(rsa_key, RSAAlgorithm, "rsa", "RS256"), _jwk(ec_key, ECAlgorithm, "ec", "ES256")]
    results: dict[str, dict[str, float]] = {}
    with issuer_serving(keys) as issuer, tempfile.TemporaryDirectory() as folder:
        key_file = Path(folder) / "api-keys.json"
        settings = IdentitySettings(issuer=issuer, audience=AUDIENCE, api_keys=key_file)
        check = IdentityCheck(
            public_url=AUDIENCE, tokens=JwtVerifier(settings), api_keys=ApiKeyStore(key_file)
        )
        now = int(time.time())
        claims = {"iss": issuer, "sub": "alice", "aud": AUDIENCE, "iat": now, "exp": now + 3600}
        claims |= {"email": "alice@example.com", "groups": ["eng", "oncall"]}
        for label, key, kid, alg in (
            ("JWT RS256", rsa_key, "rsa", "RS256"),
            ("JWT ES256", ec_key, "ec", "ES256"),
        ):
            token = jwt.encode(claims, key, algorithm=alg, headers={"kid": kid, "typ": "at+jwt"})
            results[f"{label}, keys cached"] = await _check_cost_us(check, f"Bearer {token}", requests)
        first = add_key(key_file, "account-0")
        results["API key, 1 in the file"] = await _check_cost_us(check, f"Bearer {first}", requests)
        for index in range(1, 100):
            add_key(key_file, f"account-{index}")
        results["API key, 100 in the file"] = await _check_cost_us(check, f"Bearer {first}", requests)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=DEFAULT_REQUESTS)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    results = anyio.run(measure, args.requests)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"identity check per request ({args.requests} requests each)")
    for label, figures in results.items():
        print(f"  {label:<26} p50 {figures['p50_us']:7.1f} µs   p90 {figures['p90_us']:7.1f} µs")


if __name__ == "__main__":
    main()
