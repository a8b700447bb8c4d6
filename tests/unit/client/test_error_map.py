"""The one map from SDK and transport exceptions to mcpfleet errors (``client/_errors.py``).

Each case raises what the SDK or a transport raises and checks the one mcpfleet error that
comes out: its class, its one-line message naming the server (and the fix where there is
one), and its cause, which is the exception it maps.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp import InputRequiredRoundsExceededError
from mcp.client.auth.exceptions import OAuthFlowError
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from mcpfleet.client._errors import Asked, era_mismatch, raise_connect_error, request_errors
from mcpfleet.client.definitions import LEGACY_ERA
from mcpfleet.errors import (
    AuthRequiredError,
    ConnectError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EraMismatchError,
    RequestError,
    SecretResolutionError,
    ServerExitedError,
    ToolCallError,
)
from mcpfleet.transport.http import HttpTransport
from mcpfleet.transport.process import ServerProcess
from mcpfleet.transport.stdio import MESSAGE_TOO_LARGE

CALL = Asked("calc", "tools/call", "add")
LIST = Asked("calc", "tools/list")


def mapped(asked: Asked, error: BaseException, **options: Any) -> BaseException:
    """What ``request_errors`` raises for ``error``, its cause checked to be ``error``."""
    options.setdefault("close_reason", lambda: "process exited with code 5")
    with pytest.raises(BaseException) as raised, request_errors(asked, **options):
        raise error
    assert raised.value.__cause__ is error
    return raised.value


def unusable() -> ValidationError:
    class Shape(BaseModel):
        count: int

    try:
        Shape.model_validate({"count": "many"})
    except ValidationError as error:
        return error
    raise AssertionError("the model accepted a bad value")


@pytest.mark.parametrize(
    ("asked", "error", "kind", "message"),
    [
        (
            CALL,
            MCPError(mcp_types.CONNECTION_CLOSED, "Connection closed"),
            ConnectionClosedError,
            'MCP server "calc" is not connected: process exited with code 5',
        ),
        (
            CALL,
            MCPError(MESSAGE_TOO_LARGE, "over 1 MiB"),
            ToolCallError,
            "The answer to add was dropped: over 1 MiB",
        ),
        (
            LIST,
            MCPError(MESSAGE_TOO_LARGE, "over 1 MiB"),
            RequestError,
            "The answer to tools/list was dropped: over 1 MiB",
        ),
        (
            CALL,
            MCPError(mcp_types.METHOD_NOT_FOUND, "Unknown tool"),
            ToolCallError,
            'MCP server "calc" rejected the call to add: Unknown tool',
        ),
        (
            LIST,
            MCPError(mcp_types.INTERNAL_ERROR, "boom"),
            RequestError,
            'MCP server "calc" rejected tools/list: boom',
        ),
        (
            CALL,
            InputRequiredRoundsExceededError(10),
            ToolCallError,
            'MCP server "calc" still asked for input after 10 rounds of answers to add; '
            "the call was abandoned",
        ),
        (
            CALL,
            unusable(),
            ToolCallError,
            'MCP server "calc" returned an unusable result for add: 1 validation error for Shape',
        ),
        (
            LIST,
            RuntimeError("no result"),
            RequestError,
            'MCP server "calc" answered tools/list with an unusable result: no result',
        ),
    ],
)
def test_each_request_failure_becomes_one_mcpfleet_error(
    asked: Asked, error: BaseException, kind: type[Exception], message: str
) -> None:
    result = mapped(asked, error)
    assert type(result) is kind
    assert str(result) == message
    assert getattr(result, "server", None) == "calc"
    if isinstance(result, ToolCallError):
        assert result.tool == "add"
    if isinstance(result, RequestError):
        assert result.method == "tools/list"


def test_a_missed_request_deadline_names_the_bound() -> None:
    result = mapped(LIST, TimeoutError(), timeout_ms=1500)
    assert isinstance(result, RequestError)
    assert str(result) == 'MCP server "calc" did not answer tools/list within 1500ms'


def test_what_is_not_the_maps_passes_through_untouched() -> None:
    deadline = TimeoutError()
    with pytest.raises(TimeoutError) as raised, request_errors(CALL, close_reason=lambda: None):
        raise deadline
    assert raised.value is deadline
    with pytest.raises(KeyError), request_errors(CALL, close_reason=lambda: None):
        raise KeyError("a bug of ours")


def test_a_refused_remembered_era_becomes_an_era_mismatch() -> None:
    def check(error: BaseException) -> EraMismatchError | None:
        return era_mismatch(error, server="calc", remembered=LEGACY_ERA, http_status=None)

    result = mapped(LIST, MCPError(mcp_types.INVALID_REQUEST, "unsupported protocol"), era_check=check)
    assert isinstance(result, EraMismatchError)
    assert str(result) == (
        'MCP server "calc" refused the legacy (initialize) protocol remembered for it '
        "(unsupported protocol); connect again to probe its protocol anew"
    )


@pytest.mark.parametrize(
    ("error", "http_status"),
    [
        (MCPError(mcp_types.CONNECTION_CLOSED, "Connection closed"), None),
        (MCPError(mcp_types.INVALID_REQUEST, "Unauthorized"), 401),
        (MCPError(mcp_types.INVALID_REQUEST, "Forbidden"), 403),
        (OSError("connection refused"), None),
    ],
)
def test_only_an_answer_about_the_protocol_says_anything_about_the_era(
    error: BaseException, http_status: int | None
) -> None:
    assert (
        era_mismatch(error, server="calc", remembered={"supportedVersions": []}, http_status=http_status)
        is None
    )


def connect_failure(error: BaseException, **options: Any) -> BaseException:
    defaults: dict[str, Any] = {
        "server": "calc",
        "timeout_ms": 30000,
        "timed_out": False,
        "era_check": None,
        "http": None,
        "process": None,
    }
    with pytest.raises(BaseException) as raised:
        raise_connect_error(error, **{**defaults, **options})
    return raised.value


def grouped(*errors: BaseException) -> BaseExceptionGroup[BaseException]:
    return BaseExceptionGroup("unhandled errors in a TaskGroup", [anyio.get_cancelled_exc_class()(), *errors])


@pytest.mark.anyio
async def test_the_root_cause_is_found_inside_groups_and_cancellations() -> None:
    refusal = MCPError(mcp_types.INVALID_REQUEST, "unsupported protocol version")
    result = connect_failure(grouped(BaseExceptionGroup("inner", [refusal])))
    assert type(result) is ConnectError
    assert str(result) == 'MCP server "calc" rejected the handshake: unsupported protocol version'
    assert result.__cause__ is refusal


@pytest.mark.anyio
async def test_an_mcpfleet_error_comes_out_as_itself_with_its_own_cause() -> None:
    origin = OSError("exit status 7")
    secret = SecretResolutionError('MCP server "calc": the !command for TOKEN failed', server="calc")
    secret.__cause__ = origin
    assert connect_failure(grouped(secret)) is secret
    assert secret.__cause__ is origin
    assert connect_failure(secret) is secret


def test_a_timed_out_handshake_names_the_timeout() -> None:
    result = connect_failure(TimeoutError(), timed_out=True, timeout_ms=400)
    assert isinstance(result, ConnectTimeoutError)
    assert str(result) == 'Connection to MCP server "calc" timed out after 400ms'


def http_transport(error_status: int | None = None) -> HttpTransport:
    transport = HttpTransport("http://127.0.0.1:9/mcp", kind="http", headers={}, auth=None)
    transport.error_status = error_status
    return transport


@pytest.mark.parametrize(
    ("error", "status", "kind", "message"),
    [
        (
            OAuthFlowError("no authorization server"),
            404,
            AuthRequiredError,
            'MCP server "calc" (http://127.0.0.1:9/mcp): OAuth failed: no authorization server; '
            "run: mcpfleet login calc",
        ),
        (
            MCPError(mcp_types.INTERNAL_ERROR, "Unauthorized"),
            401,
            AuthRequiredError,
            'MCP server "calc" (http://127.0.0.1:9/mcp) requires authentication; run: mcpfleet login calc',
        ),
        (
            MCPError(mcp_types.INTERNAL_ERROR, "Not Found"),
            404,
            ConnectError,
            'MCP server "calc" answered HTTP 404 at http://127.0.0.1:9/mcp; check the "url" field',
        ),
        (
            httpx2.ConnectError("All connection attempts failed"),
            None,
            ConnectError,
            'MCP server "calc": cannot reach http://127.0.0.1:9/mcp (All connection attempts failed)',
        ),
    ],
)
def test_an_http_failure_names_the_url_and_the_fix(
    error: Exception, status: int | None, kind: type[Exception], message: str
) -> None:
    result = connect_failure(error, http=http_transport(status))
    assert type(result) is kind
    assert str(result) == message
    assert result.__cause__ is error


def exited_process(returncode: int, *, signalled: bool) -> ServerProcess:
    process = ServerProcess("calc", "calc-server", ["--flag"], env={}, cwd="/")
    process.pid = 4242
    process.returncode = returncode
    process.signalled = signalled
    for index in range(8):
        process.stderr.append(f"stderr line {index}")
    return process


def test_a_process_that_exited_before_the_handshake_names_command_code_and_stderr() -> None:
    closed = MCPError(mcp_types.CONNECTION_CLOSED, "Connection closed")
    result = connect_failure(closed, process=exited_process(3, signalled=False))
    assert isinstance(result, ServerExitedError)
    assert result.returncode == 3
    assert str(result) == (
        'MCP server "calc" (calc-server --flag) exited with code 3 before the handshake: '
        "stderr line 3 | stderr line 4 | stderr line 5 | stderr line 6 | stderr line 7"
    )


def test_a_process_we_had_to_signal_closed_the_connection() -> None:
    result = connect_failure(EOFError(), process=exited_process(-15, signalled=True))
    assert type(result) is ConnectError
    assert "(calc-server --flag) closed the connection before the handshake: stderr line 3" in str(result)


def test_anything_else_is_a_handshake_failure_naming_its_type() -> None:
    error = ValueError("bad frame\nsecond line")
    result = connect_failure(error)
    assert type(result) is ConnectError
    assert str(result) == 'MCP server "calc": handshake failed: ValueError: bad frame'
    assert result.__cause__ is error
