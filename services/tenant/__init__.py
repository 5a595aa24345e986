"""Tenants: the source of truth for published specs and API keys (`object.py`), and for
what the tenant's agents used of the quotas they share (`usage.py`)."""
