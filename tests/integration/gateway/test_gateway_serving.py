"""``mcpfleet serve`` on stdio, driven by the SDK's ``Client`` in both protocol eras: what is
served (names, exact tool JSON, resources, templates, prompts, completion) and how calls,
progress, cancellation and logs travel between the client and real backend processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from tests.integration.gateway.gateway_harness import ERAS, MODERN, fake, open_gateway, wait_until
from tests.servers.fake_server import NOTE_TEMPLATE, RICH_TOOL

pytestmark = pytest.mark.anyio

# Every server is waited for at start-up, so the first list is the whole fleet.
WAIT_FOR_ALL = ("--startup-timeout", "0")


def _dump(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


@pytest.mark.parametrize("mode", ERAS)
async def test_tools_of_every_server_are_served_and_called_under_prefixed_names(
    isolated_home: Path, mode: str
) -> None:
    servers = {"alpha": fake("alpha"), "beta": fake("beta", "--tool", "echo", "--tool", "fail")}
    async with open_gateway(isolated_home, servers, mode=mode, global_args=WAIT_FOR_ALL) as run:
        client = run.client
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == sorted(names)
        assert {"alpha_echo", "alpha_add", "alpha_sleep", "beta_echo", "beta_fail"} <= set(names)
        assert not any(name.startswith("mcp_") for name in names)

        added = await client.call_tool("alpha_add", {"a": 2, "b": 3})
        assert added.structured_content == {"sum": 5}
        assert added.content[0].text == "5"  # type: ignore[union-attr]
        echoed = await client.call_tool("beta_echo", {"message": "through the gateway"})
        assert echoed.structured_content == {"message": "through the gateway"}
        failed = await client.call_tool("beta_fail", {"message": "as designed"})
        assert failed.is_error and failed.content[0].text == "as designed"  # type: ignore[union-attr]

        with pytest.raises(MCPError) as unknown:
            await client.call_tool("gamma_echo", {"message": "nobody"})
        assert unknown.value.error.code == mcp_types.INVALID_PARAMS
        assert "gamma_echo" in unknown.value.error.message

        if mode == "legacy":  # the 2026-07-28 revision has no ping
            await client.send_ping()


async def test_instructions_name_the_served_servers(isolated_home: Path) -> None:
    async with open_gateway(isolated_home, {"alpha": fake("alpha")}, global_args=WAIT_FOR_ALL) as run:
        instructions = run.client.instructions or ""
    assert "alpha (" in instructions and "tools)" in instructions


@pytest.mark.parametrize("mode", ERAS)
async def test_a_tool_is_served_exactly_as_its_backend_listed_it(isolated_home: Path, mode: str) -> None:
    servers = {"rich": fake("rich", "--tool", "echo", "--rich-tools")}
    async with open_gateway(isolated_home, servers, mode=mode, global_args=WAIT_FOR_ALL) as run:
        listed = {tool.name: _dump(tool) for tool in (await run.client.list_tools()).tools}
        result = await run.client.call_tool("rich_fancy", {"level": 2})
    served = listed["rich_fancy"]
    expected = {**RICH_TOOL, "name": "rich_fancy"}
    if mode == MODERN:
        # The 2026-07-28 revision removed ``execution``; the SDK's wire sieve drops it for that era.
        expected.pop("execution")
    assert served == expected
    assert result.structured_content == {"ok": True}


@pytest.mark.parametrize("mode", ERAS)
async def test_resources_templates_prompts_and_completion_reach_their_backend(
    isolated_home: Path, mode: str
) -> None:
    servers = {"alpha": fake("alpha", "--tool", "echo"), "beta": fake("beta", "--tool", "echo")}
    async with open_gateway(isolated_home, servers, mode=mode, global_args=WAIT_FOR_ALL) as run:
        client = run.client

        async def everything_listed() -> bool:
            return len((await client.list_resources()).resources) == 2

        await wait_until(everything_listed)
        uris = sorted(resource.uri for resource in (await client.list_resources()).resources)
        assert uris == ["mcpfleet://alpha/fake://readme", "mcpfleet://beta/fake://readme"]
        read = await client.read_resource("mcpfleet://beta/fake://readme")
        content = read.contents[0]
        assert content.text == "readme of beta"  # type: ignore[union-attr]
        assert content.uri == "mcpfleet://beta/fake://readme"

        templates = [
            template.uri_template for template in (await client.list_resource_templates()).resource_templates
        ]
        assert sorted(templates) == [
            f"mcpfleet://alpha/{NOTE_TEMPLATE['uriTemplate']}",
            f"mcpfleet://beta/{NOTE_TEMPLATE['uriTemplate']}",
        ]
        # A client fills the template's variable, then reads what it built.
        expanded = f"mcpfleet://alpha/{NOTE_TEMPLATE['uriTemplate']}".replace("{id}", "42")
        note = await client.read_resource(expanded)
        assert note.contents[0].text == "note 42 of alpha"  # type: ignore[union-attr]

        prompts = sorted(prompt.name for prompt in (await client.list_prompts()).prompts)
        assert prompts == ["alpha_greet", "beta_greet"]
        greeting = await client.get_prompt("beta_greet", {"who": "gateway"})
        assert greeting.messages[0].content.text == "Hello gateway"  # type: ignore[union-attr]

        by_prompt = await client.complete(
            mcp_types.PromptReference(name="beta_greet"), {"name": "who", "value": "b"}
        )
        assert by_prompt.completion.values == ["bob", "beta-friend"]
        by_template = await client.complete(
            mcp_types.ResourceTemplateReference(uri=f"mcpfleet://alpha/{NOTE_TEMPLATE['uriTemplate']}"),
            {"name": "id", "value": "1"},
        )
        assert by_template.completion.values == ["1", "10"]

        with pytest.raises(MCPError) as missing:
            await client.read_resource("mcpfleet://alpha/fake://nothing-here")
        assert missing.value.error.code == -32002  # the backend's own "Resource not found"
        assert "alpha" in missing.value.error.message
        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("gamma_greet")
        assert unknown.value.error.code == mcp_types.INVALID_PARAMS


@pytest.mark.parametrize("mode", ERAS)
async def test_progress_reaches_the_client_under_its_own_token(isolated_home: Path, mode: str) -> None:
    received: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        received.append((progress, message))

    servers = {"slow": fake("slow", "--tool", "sleep")}
    async with open_gateway(isolated_home, servers, mode=mode, global_args=WAIT_FOR_ALL) as run:
        result = await run.client.call_tool(
            "slow_sleep", {"seconds": 0.6, "progress_interval": 0.1}, progress_callback=on_progress
        )
    assert result.content[0].text == "slept 0.6"  # type: ignore[union-attr]
    assert received, "no progress reached the client"
    assert received[0] == (1.0, "step 1")
    assert [progress for progress, _ in received] == sorted(progress for progress, _ in received)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_cancelled_call_is_cancelled_on_the_backend(isolated_home: Path, mode: str) -> None:
    cancel_log = isolated_home / "cancelled.log"
    servers = {"slow": fake("slow", "--tool", "sleep", "--cancel-log", str(cancel_log))}
    async with open_gateway(isolated_home, servers, mode=mode, global_args=WAIT_FOR_ALL) as run:
        with anyio.move_on_after(1.0):
            await run.client.call_tool("slow_sleep", {"seconds": 30})
        await wait_until(lambda: cancel_log.exists() and "cancelled" in cancel_log.read_text())
        # The gateway answers the next request at once: the backend connection is still up.
        assert (await run.client.call_tool("slow_sleep", {"seconds": 0})).content[0].text == "slept 0.0"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ERAS)
async def test_backend_logs_reach_the_client_with_the_server_as_logger(
    isolated_home: Path, mode: str
) -> None:
    messages: list[mcp_types.LoggingMessageNotificationParams] = []

    async def on_log(params: mcp_types.LoggingMessageNotificationParams) -> None:
        messages.append(params)

    servers = {"chatty": fake("chatty", "--tool", "log")}
    # A 2026-07-28 client opts in per request (``log_level`` stamps every request); a handshake
    # client gets every level until it sets one.
    options: dict[str, Any] = {"log_level": "error"} if mode == MODERN else {}
    async with open_gateway(
        isolated_home, servers, mode=mode, global_args=WAIT_FOR_ALL, logging_callback=on_log, **options
    ) as run:
        if mode == "legacy":
            await run.client.call_tool("chatty_log", {"level": "warning", "message": "disk almost full"})
            await wait_until(lambda: bool(messages))
            await run.client.set_logging_level("error")
        await run.client.call_tool("chatty_log", {"level": "info", "message": "below the level"})
        await run.client.call_tool("chatty_log", {"level": "error", "message": "above the level"})
        await wait_until(lambda: any(m.data == "above the level" for m in messages))
    expected = [("error", "chatty", "above the level")]
    if mode == "legacy":
        expected.insert(0, ("warning", "chatty", "disk almost full"))
    assert [(m.level, m.logger, m.data) for m in messages] == expected


@pytest.mark.parametrize("mode", ERAS)
async def test_a_subscribed_resource_update_reaches_the_client_under_its_served_uri(
    isolated_home: Path, mode: str
) -> None:
    served = "mcpfleet://watched/fake://readme"
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ResourceUpdatedNotification):
            updates.append(message.params.uri)

    # The backend answers resources/subscribe, then announces an update of that URI 0.1 s later.
    servers = {"watched": fake("watched", "--tool", "echo", "--resource-updates")}
    async with open_gateway(
        isolated_home, servers, mode=mode, global_args=WAIT_FOR_ALL, message_handler=on_message
    ) as run:
        client = run.client
        await wait_until(lambda: _lists(client, served))
        if mode == MODERN:
            async with client.listen(resource_subscriptions=[served]) as subscription:
                with anyio.fail_after(20):
                    event = await subscription.__anext__()
            assert event == ResourceUpdated(uri=served)
        else:
            await client.subscribe_resource(served)
            await wait_until(lambda: bool(updates))
            assert updates == [served]


async def _lists(client: Any, uri: str) -> bool:
    return uri in {resource.uri for resource in (await client.list_resources()).resources}
