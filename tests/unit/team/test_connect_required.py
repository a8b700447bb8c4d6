"""What a call to a per-user server answers when its user has not connected it: the link, in
the error's text for any client, and as a URL-mode elicitation for a client that declared one."""

from __future__ import annotations

from mcp_types import URL_ELICITATION_REQUIRED

from mcpfleet.errors import AuthRequiredError
from mcpfleet.team.connect_flow import ConnectRequiredError, connect_elicitation

URL = "https://mcp.example.com/connect/github"


def test_the_error_names_the_server_and_carries_the_link() -> None:
    error = ConnectRequiredError("github", URL)
    assert isinstance(error, AuthRequiredError) and error.server == "github" and error.url == URL
    assert (
        str(error) == f'MCP server "github" uses your own account: open {URL} to connect it, then call again'
    )


def test_the_elicitation_is_the_connect_page_in_url_mode() -> None:
    answer = connect_elicitation(ConnectRequiredError("github", URL))
    assert answer.error.code == URL_ELICITATION_REQUIRED
    [elicitation] = answer.elicitations
    assert elicitation.mode == "url" and elicitation.url == URL
    assert elicitation.message == str(ConnectRequiredError("github", URL))
    other = connect_elicitation(ConnectRequiredError("github", URL)).elicitations[0]
    assert other.elicitation_id != elicitation.elicitation_id, "each answer is an elicitation of its own"
    assert answer.error.data == {"elicitations": [elicitation.model_dump(by_alias=True, exclude_none=True)]}
