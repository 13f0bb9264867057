"""`brain mcp`'s server: one memory served to an agent as MCP tools over stdio, the memory app's
tools (``memory.mcp_server``: search, context, write, outcome, explain, status) then the agent
app's (``agent.mcp``: the backlog of episodes, distilling it, procedures)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from agent import mcp as agent_tools
from knowledge.models import Memory
from memory import mcp_server as memory_tools


def build_server(memory: Memory, user=None) -> MCPServer:
    """An MCPServer named "brain" whose tools read and teach ``memory``. ``user``, when given,
    is who the agent's writes are recorded under and whose read rules apply."""
    serving = memory_tools.Serving(memory, user)
    server = MCPServer("brain", instructions=memory_tools.INSTRUCTIONS)
    memory_tools.register(server, serving)
    agent_tools.register(server, serving)
    return server
