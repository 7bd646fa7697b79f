"""A small MCP server for the MCP client's tests, run as a stdio subprocess:

- ``meet(group, n)``: answers once ``n`` calls of one group are in the server together, and
  is an error after 10 s alone, so a batch that was not sent at once fails instead of passing
  slowly (no clock in the assertion);
- ``sleep(seconds)``: answers after a while (timeouts);
- ``get weather/now``: a name a tag cannot hold, and a nested, enumerated input schema.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

logging.getLogger("mcp.shared.tool_name_validation").setLevel(logging.ERROR)  # on purpose
server: MCPServer = MCPServer("test-tools", log_level="WARNING")
arrived: dict[str, int] = defaultdict(int)
met: dict[str, asyncio.Event] = defaultdict(asyncio.Event)


@server.tool(structured_output=False)
async def meet(group: str, n: int) -> str:
    """Waits for n calls of the same group. Then answers."""
    arrived[group] += 1
    if arrived[group] >= n:
        met[group].set()
    try:
        await asyncio.wait_for(met[group].wait(), 10)
    except asyncio.TimeoutError:
        raise ToolError(f"{arrived[group]} of {n} calls arrived together") from None
    return f"{n} together"


@server.tool(structured_output=False)
async def sleep(seconds: float) -> str:
    """Sleeps."""
    await asyncio.sleep(seconds)
    return "awake"


class Place(BaseModel):
    city: str
    country: str | None = None


@server.tool(name="get weather/now", structured_output=False)
def weather(place: Place, units: Literal["metric", "imperial"] = "metric") -> str:
    """Current weather for a place.

    A second paragraph the prompt does not show.
    """
    return f"sunny in {place.city} ({units})"


if __name__ == "__main__":
    server.run("stdio")
