"""The gateway: the public HTTP API (FastAPI, served by hypercorn). See README.md."""
