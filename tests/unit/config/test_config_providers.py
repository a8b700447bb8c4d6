"""One real-looking config file per tool: each is found at its usual place, normalised
(transport, command, url, headers, timeouts in ms, tool filters) with its own dialect."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.unit.config.config_helpers import WriteFile, discover, entry

from mcpfleet import paths
from mcpfleet.config.approval import ApprovalStore


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_TOKEN", "tok-123")
    monkeypatch.delenv("UNSET_VAR", raising=False)


def test_mcpfleet_own_files_with_posix_substitution(project: Path, write: WriteFile) -> None:
    write(
        paths.project_config_file(project),
        {
            "mcpServers": {
                "own": {
                    "command": "node",
                    "args": ["${API_TOKEN}", "${UNSET_VAR:-fallback}"],
                    "timeout": 5000,
                    "toolTimeout": 60000,
                    "includeTools": ["a"],
                    "excludeTools": ["b"],
                }
            }
        },
    )
    write(paths.user_config_file(), {"mcpServers": {"mine": {"type": "sse", "url": "https://x/sse"}}})
    result = discover(project, trust_project=True)
    own = result.configs["own"]
    assert own.args == ("tok-123", "fallback")
    assert (own.timeout_ms, own.tool_timeout_ms, own.include_tools, own.exclude_tools) == (
        5000,
        60000,
        ("a",),
        ("b",),
    )
    assert result.sources["own"].level == "project"
    assert result.sources["mine"].provider == "mcpfleet"
    assert result.configs["mine"].transport == "sse"


def test_claude_code_project_user_and_local_scopes(project: Path, home: Path, write: WriteFile) -> None:
    write(
        project / ".mcp.json",
        {
            "mcpServers": {
                "db": {
                    "command": "npx",
                    "args": ["--dsn", "${DB_DSN:-sqlite://x}"],
                    "env": {"LOG_LEVEL": "${LOG_LEVEL:-info}"},
                }
            }
        },
    )
    write(
        home / ".claude.json",
        {
            "numStartups": 3,
            "mcpServers": {
                "api": {
                    "type": "http",
                    "url": "https://api.example.com/mcp",
                    "headers": {"Authorization": "Bearer ${API_TOKEN}"},
                },
                "legacy": {"type": "sse", "url": "https://mcp.asana.com/sse"},
            },
            "projects": {
                str(project): {"mcpServers": {"private": {"command": "uvx", "args": ["private-mcp"]}}},
                "/elsewhere": {"mcpServers": {"other": {"command": "nope"}}},
            },
        },
    )
    result = discover(project, trust_project=True)
    assert result.configs["db"].args == ("--dsn", "sqlite://x")
    assert result.configs["db"].env == {"LOG_LEVEL": "info"}
    assert result.configs["api"].headers == {"Authorization": "Bearer tok-123"}
    assert result.configs["legacy"].transport == "sse"
    assert result.sources["private"].level == "local"
    assert (
        result.sources["private"].location
        == f"/projects/{str(project).replace('/', '~1')}/mcpServers/private"
    )
    assert "other" not in {item.name for item in result.entries}


def test_claude_config_dir_moves_the_user_file(
    project: Path, tmp_path: Path, write: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    write(tmp_path / "claude" / ".claude.json", {"mcpServers": {"c": {"command": "c"}}})
    assert discover(project).sources["c"].path == str(tmp_path / "claude" / ".claude.json")


def test_claude_desktop(project: Path, home: Path, write: WriteFile) -> None:
    write(
        home / ".config" / "Claude" / "claude_desktop_config.json",
        {
            "mcpServers": {
                "filesystem": {"command": "npx", "args": ["-y", "fs", "${NOT_EXPANDED}"], "env": {"LOG": "1"}}
            },
            "preferences": {},
        },
    )
    config = discover(project).configs["filesystem"]
    assert config.args == ("-y", "fs", "${NOT_EXPANDED}")  # Claude Desktop has no substitution
    assert discover(project).sources["filesystem"].provider_name == "Claude Desktop"


def test_cursor_editor_variables(project: Path, home: Path, write: WriteFile) -> None:
    write(
        project / ".cursor" / "mcp.json",
        {
            "mcpServers": {
                "local-server": {
                    "type": "stdio",
                    "command": "python",
                    "args": [
                        "${workspaceFolder}/tools/server.py",
                        "${workspaceFolderBasename}",
                        "${userHome}",
                    ],
                    "env": {"API_KEY": "${env:API_TOKEN}", "MISSING": "${env:UNSET_VAR}"},
                }
            }
        },
    )
    write(
        home / ".cursor" / "mcp.json",
        {
            "mcpServers": {
                "remote-server": {
                    "url": "https://api.example.com/mcp",
                    "headers": {"Authorization": "Bearer ${env:API_TOKEN}"},
                }
            }
        },
    )
    result = discover(project, trust_project=True)
    local = result.configs["local-server"]
    assert local.args == (f"{project}/tools/server.py", project.name, str(home))
    assert local.env == {"API_KEY": "tok-123", "MISSING": "${env:UNSET_VAR}"}
    remote = result.configs["remote-server"]
    assert (remote.transport, remote.headers["Authorization"]) == ("http", "Bearer tok-123")


def test_vscode_servers_key_inputs_and_user_profile(project: Path, home: Path, write: WriteFile) -> None:
    write(
        project / ".vscode" / "mcp.json",
        """{
      // VS Code writes JSONC
      "inputs": [{"type": "promptString", "id": "perplexity-key", "password": true}],
      "servers": {
        "perplexity": {"type": "stdio", "command": "npx", "env": {"KEY": "${input:perplexity-key}"}},
        "context7": {"type": "http", "url": "https://mcp.context7.com/mcp"},
      },
    }""",
    )
    write(
        home / ".config" / "Code" / "User" / "mcp.json",
        {"servers": {"gh": {"type": "sse", "url": "https://gh.example/sse"}}},
    )
    result = discover(project, trust_project=True)
    assert result.configs["context7"].url == "https://mcp.context7.com/mcp"
    perplexity = entry(result, "perplexity")
    assert perplexity.state == "filtered" and "perplexity-key" in perplexity.reason
    assert result.sources["gh"].level == "user"


def test_windsurf_server_url(project: Path, home: Path, write: WriteFile) -> None:
    write(
        home / ".codeium" / "windsurf" / "mcp_config.json",
        {
            "mcpServers": {
                "github": {"command": "npx", "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${env:API_TOKEN}"}},
                "remote-http-mcp": {"serverUrl": "https://w.example/mcp", "headers": {"API_KEY": "Bearer x"}},
            }
        },
    )
    result = discover(project)
    assert result.configs["github"].env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "tok-123"}
    remote = result.configs["remote-http-mcp"]
    assert (remote.transport, remote.url) == ("http", "https://w.example/mcp")


CODEX_TOML = """
[mcp_servers.docs]
command = "bin/docs-server"
args = ["-y", "@upstash/context7-mcp"]
env = { LOG_LEVEL = "info" }
env_vars = ["CONTEXT7_API_KEY"]
cwd = "tools"
startup_timeout_sec = 20
tool_timeout_sec = 60
enabled_tools = ["resolve-library-id", "get-library-docs"]
disabled_tools = ["debug"]

[mcp_servers.remote]
url = "https://mcp.example.com/mcp"
bearer_token_env_var = "API_TOKEN"
http_headers = { "X-Team" = "core" }
env_http_headers = { "X-Api-Key" = "REMOTE_API_KEY" }
"""


def test_codex_project_and_codex_home(
    project: Path, tmp_path: Path, write: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    write(tmp_path / "codex-home" / "config.toml", CODEX_TOML)
    write(project / ".codex" / "config.toml", '[mcp_servers.proj]\ncommand = "npx"\nenabled = false\n')
    result = discover(project)
    docs = result.configs["docs"]
    config_dir = tmp_path / "codex-home"
    assert docs.command == str(config_dir / "bin" / "docs-server")
    assert docs.cwd == str(config_dir / "tools")
    assert docs.env == {
        "LOG_LEVEL": "info",
        "CONTEXT7_API_KEY": "CONTEXT7_API_KEY",
    }  # resolved by name at connect
    assert (docs.timeout_ms, docs.tool_timeout_ms) == (20_000, 60_000)
    assert docs.include_tools == ("resolve-library-id", "get-library-docs") and docs.exclude_tools == (
        "debug",
    )
    remote = result.configs["remote"]
    assert remote.headers == {
        "X-Team": "core",
        "X-Api-Key": "REMOTE_API_KEY",
        "Authorization": "Bearer tok-123",
    }
    assert entry(result, "proj").state == "disabled"


def test_codex_bearer_header_dropped_when_variable_unset(
    project: Path, home: Path, write: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("API_TOKEN")
    write(home / ".codex" / "config.toml", CODEX_TOML)
    assert "Authorization" not in discover(project).configs["remote"].headers


def test_gemini_transports_filters_and_dollar_variables(project: Path, home: Path, write: WriteFile) -> None:
    write(
        project / ".gemini" / "settings.json",
        {
            "mcpServers": {
                "pythonTools": {
                    "command": "python",
                    "args": ["-m", "srv"],
                    "cwd": "./mcp-servers/python",
                    "env": {"DATABASE_URL": "$API_TOKEN", "API_KEY": "${API_TOKEN}"},
                    "timeout": 15000,
                    "trust": False,
                    "includeTools": ["safe"],
                    "excludeTools": ["bad"],
                },
                "httpServer": {"httpUrl": "http://localhost:3000/mcp"},
                "sseServer": {"url": "http://localhost:8080/sse", "type": "sse"},
                "plainUrl": {"url": "http://localhost:8081/mcp"},
            }
        },
    )
    result = discover(project, trust_project=True)
    tools = result.configs["pythonTools"]
    assert tools.env == {"DATABASE_URL": "tok-123", "API_KEY": "tok-123"}
    assert tools.cwd == str(project / ".gemini" / "mcp-servers" / "python")
    assert (tools.timeout_ms, tools.include_tools, tools.exclude_tools) == (15000, ("safe",), ("bad",))
    assert result.configs["httpServer"].transport == "http"
    assert result.configs["sseServer"].transport == "sse"
    assert result.configs["plainUrl"].transport == "http"


def test_opencode_local_remote_arrays_and_env(project: Path, home: Path, write: WriteFile) -> None:
    write(
        project / "opencode.jsonc",
        """{
      "$schema": "https://opencode.ai/config.json",
      // the mcp key
      "mcp": {
        "everything": {"type": "local", "command": ["npx", "-y", "server-everything"],
                       "environment": {"MY_ENV_VAR": "{env:API_TOKEN}", "GONE": "{env:UNSET_VAR}"},
                       "enabled": true, "timeout": 5000},
        "context7": {"type": "remote", "url": "https://mcp.context7.com/mcp",
                     "headers": {"K": "{env:API_TOKEN}"}, "oauth": false},
      }
    }""",
    )
    write(
        home / ".config" / "opencode" / "opencode.json",
        {"mcp": {"everything": {"type": "local", "command": ["user-version"]}}},
    )
    result = discover(project, trust_project=True)
    everything = result.configs["everything"]
    assert (everything.command, everything.args) == ("npx", ("-y", "server-everything"))
    assert everything.env == {"MY_ENV_VAR": "tok-123", "GONE": ""}
    assert everything.timeout_ms == 5000
    assert result.configs["context7"].headers == {"K": "tok-123"} and result.configs["context7"].oauth is None
    assert entry(result, "everything", "opencode").source.level == "project"
    assert [e.state for e in result.entries if e.name == "everything"] == ["active", "shadowed"]


def test_zed_context_servers_including_legacy_shape(project: Path, home: Path, write: WriteFile) -> None:
    write(
        home / ".config" / "zed" / "settings.json",
        """{
      "theme": "One Dark",
      "context_servers": {
        "local-mcp": {"command": "npx", "args": ["-y", "some-mcp"], "env": {"K": "v"}, "timeout": 60},
        "remote-mcp": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer t"}},
        "old-style": {"source": "custom", "command": {"path": "/usr/bin/old", "args": ["--x"], "env": {}}},
        "ext-server": {"settings": {"api_key": "k"}}
      }
    }""",
    )
    result = discover(project)
    assert result.configs["local-mcp"].timeout_ms == 60_000
    assert result.configs["remote-mcp"].transport == "http"
    assert (result.configs["old-style"].command, result.configs["old-style"].args) == (
        "/usr/bin/old",
        ("--x",),
    )
    assert entry(result, "ext-server").state == "filtered"


def test_cline_and_roo(project: Path, home: Path, write: WriteFile) -> None:
    storage = home / ".config" / "Code" / "User" / "globalStorage"
    write(
        storage / "saoudrizwan.claude-dev" / "settings" / "cline_mcp_settings.json",
        {
            "mcpServers": {
                "github": {
                    "command": "npx",
                    "disabled": False,
                    "autoApprove": ["list_issues"],
                    "timeout": 60,
                },
                "bare": {"url": "http://localhost:4244/sse"},
                "streamy": {"type": "streamableHttp", "url": "http://localhost:4244/mcp"},
                "off": {"command": "x", "disabled": True},
            }
        },
    )
    write(
        project / ".roo" / "mcp.json",
        {
            "mcpServers": {
                "roo-srv": {
                    "command": "node",
                    "env": {"T": "${env:API_TOKEN}"},
                    "disabledTools": ["rm"],
                    "timeout": 30,
                }
            }
        },
    )
    result = discover(project, trust_project=True)
    assert result.configs["github"].timeout_ms == 60_000
    assert result.configs["bare"].transport == "sse"  # Cline reads a bare url as SSE
    assert result.configs["streamy"].transport == "http"
    assert entry(result, "off").state == "disabled"
    roo = result.configs["roo-srv"]
    assert (roo.env, roo.exclude_tools, roo.timeout_ms) == ({"T": "tok-123"}, ("rm",), 30_000)


def test_goose_extensions(project: Path, home: Path, write: WriteFile) -> None:
    write(
        home / ".config" / "goose" / "config.yaml",
        """
extensions:
  github:
    name: github
    type: stdio
    cmd: npx
    args: ["-y", "@modelcontextprotocol/server-github"]
    envs: {GITHUB_PERSONAL_ACCESS_TOKEN: "literal"}
    env_keys: ["EXTRA_TOKEN"]
    enabled: true
    timeout: 300
  musicwire:
    name: Musicwire
    type: streamable_http
    uri: https://musicwire.example.com/mcp
    headers: {Authorization: "Bearer x"}
    available_tools: [play]
    enabled: true
  developer: {type: builtin, name: developer, bundled: true, enabled: true, timeout: 300}
""",
    )
    result = discover(project)
    github = result.configs["github"]
    assert github.env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "literal", "EXTRA_TOKEN": "EXTRA_TOKEN"}
    assert github.timeout_ms == 300_000
    assert result.configs["musicwire"].include_tools == ("play",)
    assert entry(result, "developer").state == "filtered"


def test_continue_yaml_list_and_block_folder(project: Path, home: Path, write: WriteFile) -> None:
    write(
        home / ".continue" / "config.yaml",
        """
name: my config
mcpServers:
  - name: Supabase
    command: npx
    args: ["--access-token", "${{ secrets.SUPABASE_TOKEN }}"]
""",
    )
    write(
        project / ".continue" / "mcpServers" / "remote.yaml",
        """
name: Remote block
version: 0.0.1
schema: v1
mcpServers:
  - name: Remote
    type: streamable-http
    url: https://example.com/mcp
    requestOptions: {headers: {Authorization: "Bearer t"}}
    connectionTimeout: 30000
""",
    )
    write(project / ".continue" / "mcpServers" / "mcp.json", {"mcpServers": {"fromjson": {"command": "j"}}})
    result = discover(project, trust_project=True)
    assert result.configs["Supabase"].args == ("--access-token", "${{ secrets.SUPABASE_TOKEN }}")
    remote = result.configs["Remote"]
    assert (remote.headers, remote.timeout_ms) == ({"Authorization": "Bearer t"}, 30_000)
    assert entry(result, "Remote").source.location == "/mcpServers/0"
    assert result.sources["fromjson"].provider == "continue"
    assert str(project / ".continue" / "mcpServers" / "mcp.json") in result.config_paths


def test_generic_project_mcp_json(project: Path, write: WriteFile) -> None:
    write(project / "mcp.json", {"mcpServers": {"generic": {"command": "g", "args": ["${API_TOKEN}"]}}})
    result = discover(project, trust_project=True)
    assert result.configs["generic"].args == ("tok-123",)
    assert result.sources["generic"].provider == "mcp-json"


def test_config_paths_list_every_candidate_even_missing(project: Path) -> None:
    result = discover(project)
    assert result.entries == [] and result.errors == []
    assert str(project / ".mcp.json") in result.config_paths
    assert str(paths.user_config_file()) in result.config_paths
    assert any(path.endswith(os.path.join(".codex", "config.toml")) for path in result.config_paths)


def test_config_paths_hold_the_approvals_when_they_decide_what_runs(project: Path) -> None:
    approvals = str(ApprovalStore().path)
    assert approvals in discover(project).config_paths
    assert approvals not in discover(project, trust_project=True).config_paths
    assert approvals not in discover(project, enable_project_config=False).config_paths


def test_connect_time_secret_forms_are_left_for_the_client(
    project: Path, home: Path, write: WriteFile
) -> None:
    write(
        home / ".claude.json",
        {
            "mcpServers": {
                "s": {
                    "command": "c",
                    "env": {"A": "!pass show token ${API_TOKEN}", "B": "API_TOKEN", "C": "${API_TOKEN}"},
                }
            }
        },
    )
    assert discover(project).configs["s"].env == {
        "A": "!pass show token ${API_TOKEN}",
        "B": "API_TOKEN",
        "C": "tok-123",
    }
