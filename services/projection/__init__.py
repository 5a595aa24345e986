"""The projections: SQLite copies of timelines, the agent catalog, specs and API keys.
Derived, idempotent and rebuildable; the projector is their only writer."""
