"""A connect flow's callback, whichever replica it lands on: ``ConnectHandoff``.

A connect flow (``team.connect_flow``) is a task on the replica where the user pressed
"Connect": it holds the PKCE verifier and the SDK's provider waiting for the code, and it does
the token exchange. The upstream sends the browser back to ``/connect/<server>/callback``
through the load balancer, so the callback may land on any replica. The flow stays where it
started, and its callback is handed to it:

1. once the flow's authorization URL is known, its replica records who runs it in the shared
   state (``team.shared``): under the digest of the flow's ``state``, the user, the server and
   the replica's id, for as long as the flow lives; a flow that cannot be recorded is not
   started (the browser is told why), as its callback could not be finished elsewhere;
2. a callback whose flow is not on its replica reads that record, checks that the same user
   brings it for the same server, and sends the upstream's answer (sealed with the team key) to
   the flow's replica alone; the shared state says whether that replica still listens, so one
   that stopped is known at once and the page says to start again;
3. the flow's replica finishes the flow as if the callback had landed there (once: a flow is
   forgotten when its code arrives) and sends the outcome back, which the callback's replica
   awaits for at most ``HANDOFF_WAIT_S``.

The tokens land in the durable state, where every replica reads them (``team.per_user`` tells
the replicas to drop connections opened with a user's older tokens).

Why the code travels to the flow rather than the flow to the code (its verifier sealed in
Redis, the exchange done where the callback lands): the exchange and its checks (``state``,
``iss``) are the SDK's, in one coroutine that keeps the verifier to itself; resuming elsewhere
would take a second implementation of that flow. The hand-off keeps one, costs a round trip
through Redis, and loses only the connects in progress on a replica that stops, which their users
start again.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from mcp.shared.auth import AuthorizationCodeResult
from pydantic import ValidationError

from mcpfleet.team.sealing import Sealer, UnsealError
from mcpfleet.team.shared import SharedMessage, TeamShared
from mcpfleet.team.state import TeamStateError

logger = logging.getLogger(__name__)

HANDOFF_WAIT_S = 45.0
"""How long a callback handed to another replica waits for its outcome: longer than that replica's
own wait for the token exchange and the proving handshake (``CALLBACK_RESULT_TIMEOUT_S``)."""
MAX_RECORD_BYTES = 4096
"""A flow's record longer than this is not one a replica wrote."""
_SEALED_AS = ("mcpfleet connect hand-off", "callback")
"""The sealer's (user, server) of a handed-over callback: it opens as nothing else."""


@dataclass(frozen=True)
class Callback:
    """The upstream's answer as the callback page read it, and whose browser brought it."""

    user: str
    """The ``credentials_key`` of the signed-in user who opened the callback."""
    server: str
    state: str
    code: AuthorizationCodeResult | None
    failure: str | None
    """The authorization server's refusal (one line), when it sent no code."""


@dataclass(frozen=True)
class CallbackOutcome:
    """What the callback page says: its HTTP status and, unless connected, why not."""

    status: int
    reason: str | None = None

    @property
    def connected(self) -> bool:
        return self.status == 200


CONNECTED = CallbackOutcome(200)
UNKNOWN = CallbackOutcome(400, "This sign-in link is unknown, used or expired; start again.")
NOT_YOURS = CallbackOutcome(403, "This sign-in was started by someone else.")
OWNER_GONE = CallbackOutcome(
    502,
    "The gateway replica that started this sign-in has stopped, so it cannot be finished; start again.",
)
OWNER_SILENT = CallbackOutcome(
    504, "The gateway replica that started this sign-in did not finish it in time; start again."
)
SHARED_STATE_LOST = CallbackOutcome(
    503,
    "The gateway cannot reach its shared state (Redis), so this sign-in cannot be finished here; "
    "start again once it is back.",
)

AnswerHere = Callable[[Callback], Awaitable[CallbackOutcome]]
"""Finishes a callback with a flow of this replica (``ConnectFlows.answer_here``)."""


@dataclass(eq=False)
class _Asked:
    answered: anyio.Event = field(default_factory=anyio.Event)
    outcome: CallbackOutcome | None = None


class ConnectHandoff:
    """This replica's side of the hand-off (see the module): it records the flows started here,
    hands the callbacks of others' flows to them, and answers those handed to it."""

    def __init__(
        self, shared: TeamShared, sealer: Sealer, task_group: anyio.abc.TaskGroup, answer_here: AnswerHere
    ) -> None:
        self.shared = shared
        self.sealer = sealer
        self._task_group = task_group
        self._answer_here = answer_here
        self._asked: dict[str, _Asked] = {}
        shared.listen(self._on_message)

    async def announce(self, state: str, user: str, server: str, ttl_s: float) -> None:
        """Record that this replica runs the flow of ``state`` (``TeamStateError`` when the
        shared state cannot be reached: the flow must not start then)."""
        record = {"user": user, "server": server, "replica": self.shared.replica}
        await self.shared.put_record(_record_key(state), json.dumps(record).encode(), ttl_s)

    async def withdraw(self, state: str) -> None:
        """Forget the record of a flow that ended (best effort: it expires on its own, and a
        callback handed over for a flow that ended is refused by its replica)."""
        try:
            await self.shared.delete_record(_record_key(state))
        except TeamStateError:
            return

    async def hand_over(self, callback: Callback) -> CallbackOutcome:
        """Finish ``callback`` with its flow on another replica; the page's outcome."""
        try:
            raw = await self.shared.get_record(_record_key(callback.state))
        except TeamStateError:
            return SHARED_STATE_LOST
        record = _record_of(raw)
        if record is None or record["replica"] == self.shared.replica or record["server"] != callback.server:
            return UNKNOWN  # a flow of this replica's own would have been found here
        if record["user"] != callback.user:
            return NOT_YOURS  # left recorded: its own user may still come back with it
        ask = secrets.token_urlsafe(16)
        asked = self._asked[ask] = _Asked()
        try:
            message = {"kind": "connect_callback", "ask": ask, "sealed": self._sealed(callback)}
            try:
                listening = await self.shared.send(record["replica"], message)
            except TeamStateError:
                return SHARED_STATE_LOST
            if not listening:
                logger.info(
                    'The connect of user "%s" to "%s" was started by a replica that stopped',
                    callback.user,
                    callback.server,
                )
                return OWNER_GONE
            with anyio.move_on_after(HANDOFF_WAIT_S):
                await asked.answered.wait()
            return asked.outcome or OWNER_SILENT
        finally:
            del self._asked[ask]

    async def _on_message(self, message: SharedMessage) -> None:
        kind = message.get("kind")
        if kind == "connect_callback":
            # Finishing a flow takes seconds: not in the listener, which carries every message.
            self._task_group.start_soon(self._answer, message, name="mcpfleet connect hand-off")
        elif kind == "connect_result":
            asked = self._asked.get(str(message.get("ask")))
            outcome = _outcome_of(message)
            if asked is not None and outcome is not None and not asked.answered.is_set():
                asked.outcome = outcome
                asked.answered.set()

    async def _answer(self, message: SharedMessage) -> None:
        asker, ask = message.get("replica"), message.get("ask")
        callback = self._opened(message.get("sealed"))
        if not isinstance(asker, str) or not isinstance(ask, str) or callback is None:
            logger.warning(
                "mcpfleet serve --team: a connect callback from another replica does not open; ignored"
            )
            return
        try:
            outcome = await self._answer_here(callback)
        except Exception:
            logger.exception(
                "mcpfleet serve --team: finishing a connect handed over by another replica failed"
            )
            outcome = CallbackOutcome(502, "the connect did not finish")
        answer = {"kind": "connect_result", "ask": ask, "status": outcome.status, "reason": outcome.reason}
        try:
            await self.shared.send(asker, answer)
        except TeamStateError as error:
            logger.warning(
                "mcpfleet serve --team: the outcome of a connect could not be sent back: %s", error
            )

    def _sealed(self, callback: Callback) -> str:
        document = {
            "user": callback.user,
            "server": callback.server,
            "state": callback.state,
            "code": callback.code.model_dump() if callback.code is not None else None,
            "failure": callback.failure,
        }
        blob = self.sealer.seal(*_SEALED_AS, json.dumps(document).encode())
        return base64.b64encode(blob).decode()

    def _opened(self, sealed: object) -> Callback | None:
        if not isinstance(sealed, str):
            return None
        try:
            document: Any = json.loads(self.sealer.open(*_SEALED_AS, base64.b64decode(sealed)).plaintext)
            code = document["code"]
            callback = Callback(
                user=str(document["user"]),
                server=str(document["server"]),
                state=str(document["state"]),
                code=AuthorizationCodeResult.model_validate(code) if code is not None else None,
                failure=str(document["failure"]) if document["failure"] is not None else None,
            )
        except (binascii.Error, ValueError, UnsealError, ValidationError, KeyError, TypeError):
            return None
        return callback


def _record_key(state: str) -> str:
    # The digest: whoever lists the shared state's keys learns no state a callback would take.
    return f"connect:{hashlib.sha256(state.encode()).hexdigest()}"


def _record_of(raw: bytes | None) -> dict[str, str] | None:
    """A flow's record as a replica wrote it, or ``None`` (none, or not one of ours)."""
    if raw is None or len(raw) > MAX_RECORD_BYTES:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(record, dict) or not all(
        isinstance(record.get(name), str) for name in ("user", "server", "replica")
    ):
        return None
    return {name: record[name] for name in ("user", "server", "replica")}


def _outcome_of(message: SharedMessage) -> CallbackOutcome | None:
    status, reason = message.get("status"), message.get("reason")
    if not isinstance(status, int) or not (reason is None or isinstance(reason, str)):
        return None
    return CallbackOutcome(status, reason)


__all__ = [
    "CONNECTED",
    "HANDOFF_WAIT_S",
    "NOT_YOURS",
    "UNKNOWN",
    "Callback",
    "CallbackOutcome",
    "ConnectHandoff",
]
