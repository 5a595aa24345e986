"""Tenants: the source of truth for published specs and API keys."""
