"""What a server asks of the client and tells it: roots, elicitation, sampling, notifications.

A legacy server sends ``roots/list``, ``elicitation/create`` and ``sampling/createMessage`` as
requests; a 2026-07-28 server puts them inside an ``input_required`` result, which the SDK
answers round by round through the same callbacks. All three go to one
``ServerRequestHandler``, told which server asks: a host's plain hooks are adapted to it by
``HostHooks`` (roots are then the working folder), and the gateway's relay implements it to
send each request to the client that caused it. A failing handler still produces an answer
(the server waits for one). Notifications go to the host's callback, except the progress of
the connection's own calls, which the call itself consumes.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import mcp_types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from mcpfleet.client._sdk import PrivateApiMovedError, pending_request_ids
from mcpfleet.contract import notifications

if TYPE_CHECKING:
    from mcp.client.session import ClientRequestContext, ClientSession

logger = logging.getLogger(__name__)

NotificationCallback = Callable[[str, dict[str, Any] | None], Awaitable[None] | None]
ElicitationHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Answers a server's ``elicitation/create``: receives its params as JSON (``message``,
``requestedSchema`` or ``url``, ``mode``) and returns the result as JSON
(``{"action": "accept", "content": {...}}``, or ``"decline"`` / ``"cancel"``)."""
SamplingHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Answers a server's ``sampling/createMessage``: receives its params as JSON (``messages``,
``maxTokens``, ``systemPrompt``, ``tools``…) and returns the result as JSON (``{"role":
"assistant", "content": {"type": "text", "text": ...}, "model": ..., "stopReason": ...}``)."""

_Model = TypeVar("_Model", bound=BaseModel)

WORKING_FOLDER: Literal["working-folder"] = "working-folder"
RootsOffer = Sequence[str | Path] | Literal["working-folder"] | None
"""The roots a fleet offers its servers: the working folder (``WORKING_FOLDER``, the default),
these folders, or none (``None``: ``roots/list`` is answered with an empty list, so a server
that follows roots, like the reference filesystem server, keeps the folders its own config
names; the capability stays declared, so servers list the same tools to every fleet)."""


def listed_roots(roots: RootsOffer) -> list[dict[str, Any]] | None:
    """``roots`` as a ``roots/list`` answer; ``None`` for the working folder (see ``RootsOffer``)."""
    if roots == WORKING_FOLDER:
        return None
    folders = [Path(root).expanduser().resolve() for root in roots or ()]
    return [{"uri": folder.as_uri(), "name": folder.name or str(folder)} for folder in folders]


class ServerRequestHandler(Protocol):
    """Answers what servers ask of the client, told which server asks.

    Every method takes and returns JSON (the params and the result of the request, as on the
    wire). Raising ``mcp.shared.exceptions.MCPError`` answers the server with that JSON-RPC
    error, code and message unchanged (how a refusal, or the error of a client the request
    was relayed to, reaches the server); any other exception answers with an internal error.
    """

    @property
    def sampling_capability(self) -> dict[str, Any] | None:
        """The ``sampling`` capability declared to servers (``{}``, or with ``tools`` /
        ``context``); ``None``: sampling is not offered and ``create_message`` is never called."""
        ...

    @property
    def offers_elicitation(self) -> bool:
        """Whether servers are told they may send ``elicitation/create``."""
        ...

    async def create_message(self, server: str, params: dict[str, Any]) -> dict[str, Any]:
        """Answer ``server``'s ``sampling/createMessage``."""
        ...

    async def elicit(self, server: str, params: dict[str, Any]) -> dict[str, Any]:
        """Answer ``server``'s ``elicitation/create``."""
        ...

    async def list_roots(self, server: str) -> list[dict[str, Any]] | None:
        """The roots ``server`` sees (``[{"uri": "file:///…", "name": …}]``); ``None`` for the
        working folder, the roots a connection offers when nothing else is known."""
        ...


class HostHooks:
    """A host's plain hooks as a ``ServerRequestHandler``: every server gets the same answers,
    and ``roots`` (see ``RootsOffer``) as its roots. Without a hook its capability is not
    declared (roots excepted: always declared)."""

    def __init__(
        self,
        elicitation_handler: ElicitationHandler | None,
        sampling_handler: SamplingHandler | None,
        roots: RootsOffer = WORKING_FOLDER,
    ) -> None:
        self._elicitation_handler = elicitation_handler
        self._sampling_handler = sampling_handler
        # Resolved once, here: answering roots/list then touches no file system.
        self._listed_roots = listed_roots(roots)

    @property
    def sampling_capability(self) -> dict[str, Any] | None:
        return {} if self._sampling_handler is not None else None

    @property
    def offers_elicitation(self) -> bool:
        return self._elicitation_handler is not None

    async def create_message(self, server: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self._sampling_handler is not None
        return await self._sampling_handler(params)

    async def elicit(self, server: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self._elicitation_handler is not None
        return await self._elicitation_handler(params)

    async def list_roots(self, server: str) -> list[dict[str, Any]] | None:
        return None if self._listed_roots is None else list(self._listed_roots)


def server_request_handler(
    server_requests: ServerRequestHandler | None,
    elicitation_handler: ElicitationHandler | None,
    sampling_handler: SamplingHandler | None,
    roots: RootsOffer = WORKING_FOLDER,
) -> ServerRequestHandler:
    """The one handler a connection uses: ``server_requests``, else the host's hooks (with
    ``roots``).

    Both at once would leave it unclear who answers, so that is refused.
    """
    if server_requests is None:
        return HostHooks(elicitation_handler, sampling_handler, roots)
    if elicitation_handler is not None or sampling_handler is not None or roots != WORKING_FOLDER:
        raise ValueError(
            "pass either server_requests or elicitation_handler/sampling_handler/roots, not both: "
            "server_requests answers every request a server makes of the client"
        )
    return server_requests


class InboundHandlers:
    """The ``Client`` callbacks of one connection.

    ``session_of`` gives the live session (``None`` before the handshake and after the end),
    whose in-flight requests tell a call's progress from a notification for the host.
    """

    def __init__(
        self,
        server: str,
        *,
        cwd: Path,
        on_notification: NotificationCallback | None,
        requests: ServerRequestHandler,
        session_of: Callable[[], ClientSession | None],
    ) -> None:
        self.server = server
        self.transport_error: BaseException | None = None
        """The last error the transport reported on the read stream (an HTTP stream that failed)."""
        self._cwd = cwd
        self._on_notification = on_notification
        self._requests = requests
        self._session_of = session_of

    def client_options(self) -> dict[str, Any]:
        """The callbacks to build the SDK ``Client`` with."""
        sampling = self._requests.sampling_capability
        # Without a handler the client must not advertise the capability.
        return {
            "list_roots_callback": self._list_roots,
            "message_handler": self._on_message,
            "elicitation_callback": self._elicit if self._requests.offers_elicitation else None,
            "sampling_callback": self._sample if sampling is not None else None,
            "sampling_capabilities": (
                mcp_types.SamplingCapability.model_validate(sampling) if sampling is not None else None
            ),
        }

    async def _list_roots(
        self, context: ClientRequestContext
    ) -> mcp_types.ListRootsResult | mcp_types.ErrorData:
        try:
            roots = await self._requests.list_roots(self.server)
        except MCPError as error:
            return error.error
        except Exception:
            # Roots only inform the server: the working folder is a better answer than none.
            logger.exception("%s: the roots provider raised; answering with the working folder", self.server)
            roots = None
        if roots is None:
            folder = self._cwd.resolve()
            roots = [{"uri": folder.as_uri(), "name": folder.name or str(folder)}]
        try:
            return mcp_types.ListRootsResult.model_validate({"roots": roots})
        except ValidationError as error:
            logger.warning("%s: the roots provider returned invalid roots: %s", self.server, error)
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message="invalid roots")

    async def _elicit(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        return await self._ask_host("elicitation", self._requests.elicit, params, mcp_types.ElicitResult)

    async def _sample(
        self, context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools | mcp_types.ErrorData:
        # A request that offers tools may be answered with tool use, which only the wider type holds.
        result_type = (
            mcp_types.CreateMessageResultWithTools if params.tools else mcp_types.CreateMessageResult
        )
        return await self._ask_host("sampling", self._requests.create_message, params, result_type)

    async def _ask_host(
        self,
        what: str,
        handler: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]],
        params: BaseModel,
        result_type: type[_Model],
    ) -> _Model | mcp_types.ErrorData:
        request = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            answer = await handler(self.server, request)
            return result_type.model_validate(answer)
        except ValidationError as error:
            logger.warning("%s: the %s handler returned an invalid result: %s", self.server, what, error)
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=f"invalid {what} result")
        except MCPError as error:
            return error.error
        except Exception as error:
            # The server waits for an answer: a failing host hook must still produce one.
            logger.exception("%s: the %s handler raised", self.server, what)
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=f"{what} failed: {error}")

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            logger.debug("%s: transport reported %r", self.server, message)
            self.transport_error = message
            return
        data = message.model_dump(by_alias=True, mode="json", exclude_none=True)
        method = data.get("method")
        if not isinstance(method, str):
            return
        params = data.get("params")
        if method == notifications.PROGRESS and self._progress_belongs_to_call(params):
            return
        await self.deliver(method, params if isinstance(params, dict) else None)

    async def deliver(self, method: str, params: dict[str, Any] | None) -> None:
        """Hand one notification to the host's callback; a failing callback is logged, not raised."""
        if self._on_notification is None:
            return
        try:
            outcome = self._on_notification(method, params)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            logger.exception("%s: on_notification raised for %s", self.server, method)

    def _progress_belongs_to_call(self, params: Any) -> bool:
        """Whether a progress token is the id of one of our in-flight requests (the SDK uses
        the id as the token)."""
        token = params.get("progressToken") if isinstance(params, dict) else None
        session = self._session_of()
        if token is None or session is None:
            return False
        try:
            pending = pending_request_ids(session)
        except PrivateApiMovedError as error:
            logger.debug("%s: %s; progress is passed on to the host", self.server, error)
            return False
        return token in pending or str(token) in pending


__all__ = [
    "WORKING_FOLDER",
    "ElicitationHandler",
    "HostHooks",
    "InboundHandlers",
    "NotificationCallback",
    "RootsOffer",
    "SamplingHandler",
    "ServerRequestHandler",
    "listed_roots",
    "server_request_handler",
]
