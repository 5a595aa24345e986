"""Workspaces: a sandboxed working directory per agent, on the execution plane."""
