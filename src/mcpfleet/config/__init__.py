"""Config discovery and approval of project servers.

Light on purpose: importing it loads no SDK, no pydantic, no rich (PyYAML only when a
YAML file is actually read).
"""

from mcpfleet.config.approval import Approval, ApprovalStore, approve_project_servers
from mcpfleet.config.discovery import EntryFilter, LastGoodFiles, load_all_mcp_configs
from mcpfleet.config.model import (
    ConfigFileError,
    DiscoveredEntry,
    DiscoveryResult,
    EntryState,
    Level,
    ServerConfig,
    SourceInfo,
    Transport,
    canonical_json,
    fingerprint_of,
)

__all__ = [
    "Approval",
    "ApprovalStore",
    "ConfigFileError",
    "DiscoveredEntry",
    "DiscoveryResult",
    "EntryFilter",
    "EntryState",
    "LastGoodFiles",
    "Level",
    "ServerConfig",
    "SourceInfo",
    "Transport",
    "approve_project_servers",
    "canonical_json",
    "fingerprint_of",
    "load_all_mcp_configs",
]
