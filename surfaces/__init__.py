"""The surfaces a person or a program uses, assembled from the domain apps below: the tabs'
navigation, the terminal's `brain memory` and `brain mcp`, the MCP server, the API's root and
the export of a whole memory. The top layer: it imports every app, and none imports it."""
