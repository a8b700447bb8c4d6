"""The ranking behind ``find_tools``: identifiers split alike whatever their case style, the
server prefix is one more word, results are stable, and over the recorded tools of the MCP
project's reference servers the retrieval set's expected tool is in the top 5 at least 90%
of the time (the goal the benchmark reports, ``bench/tool_budget.py``)."""

from __future__ import annotations

from typing import Any

from bench.tool_budget import evaluate_retrieval, reference_index

from mcpfleet.gateway.search import ToolIndex, stem, words


def tool(name: str, description: str = "", **properties: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {key: {"type": "string", "description": text} for key, text in properties.items()},
        },
    }


def test_identifiers_split_alike_in_every_case_style() -> None:
    assert words("getFileInfo") == words("get_file_info") == words("get-file-info") == words("GET_FILE_INFO")
    assert words("HTTPServerURL") == ["http", "server", "url"]
    assert words("the file, please") == [stem("file")]


def test_stemming_meets_plural_and_verb_forms() -> None:
    assert stem("directories") == stem("directory")
    assert stem("files") == stem("file")
    assert stem("creating") == stem("create") == stem("created")
    assert stem("matches") == stem("match")
    assert stem("status") == "status"


def test_a_query_in_camel_case_or_with_the_server_prefix_finds_the_tool() -> None:
    index = ToolIndex(
        [
            tool("github_create_issue", "Open a new issue in a repository"),
            tool("github_list_pulls", "List pull requests"),
            tool("files_read_text_file", "Read a file as text", path="Where the file is"),
        ],
        {
            "github_create_issue": "create_issue",
            "github_list_pulls": "list_pulls",
            "files_read_text_file": "read_text_file",
        },
    )
    assert index.search("createIssue", 1)[0].name == "github_create_issue"
    assert index.search("github create-issue", 1)[0].name == "github_create_issue"
    assert index.search("readTextFile", 1)[0].name == "files_read_text_file"
    assert index.search("path", 1)[0].name == "files_read_text_file"  # a schema property name


def test_synonyms_find_a_tool_described_with_another_verb() -> None:
    index = ToolIndex([tool("fs_delete", "Delete a path"), tool("fs_list", "List a directory")])
    assert index.search("remove", 1)[0].name == "fs_delete"
    assert index.search("folder", 1)[0].name == "fs_list"


def test_results_are_stable_and_ties_are_broken_by_name() -> None:
    tools = [tool(f"server_tool_{n}", "does the same thing") for n in (3, 1, 2)]
    first = [hit.name for hit in ToolIndex(tools).search("same thing")]
    assert first == ["server_tool_1", "server_tool_2", "server_tool_3"]
    assert [hit.name for hit in ToolIndex(list(reversed(tools))).search("same thing")] == first


def test_a_query_sharing_no_word_finds_nothing_and_limit_bounds_the_answer() -> None:
    index = ToolIndex([tool("a_echo", "Echo a message"), tool("a_sum", "Sum two numbers")])
    assert index.search("kubernetes") == []
    assert index.search("") == []
    assert len(index.search("echo message sum numbers", 1)) == 1


def test_recall_over_the_reference_servers_meets_the_goal() -> None:
    index = reference_index()
    assert len(index) == 50
    recall = evaluate_retrieval(index)
    assert recall.queries >= 40
    assert recall.at_5 >= 0.9, recall.misses
    assert recall.at_1 >= 0.6, recall.misses
