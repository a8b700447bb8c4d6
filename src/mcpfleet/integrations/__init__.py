"""mcpfleet inside the agent frameworks people already use (B10).

One module per framework, each importing its framework only when it is imported itself, so
``import mcpfleet`` never loads one:

- ``mcpfleet.integrations.openai_agents.MCPFleetServer``: an OpenAI Agents SDK ``MCPServer``
- ``mcpfleet.integrations.pydantic_ai.MCPFleetToolset``: a Pydantic AI toolset
- ``mcpfleet.integrations.langchain.open_langchain_tools``: LangChain ``BaseTool``s
- ``mcpfleet.integrations.google_adk.MCPFleetToolset``: a Google ADK ``BaseToolset``

Each serves the tools of one ``AgentSession``: borrowed (``session=``), or opened from a
project folder (``cwd=``, with the keywords of ``open_agent_session``) and then owned.
"""
