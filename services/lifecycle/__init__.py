"""Lifecycle: erasing agents and tenants, and backups of a whole installation."""
