"""Tools: a name, a description, a JSON Schema and a call."""
