"""How the CLI reaches agents: through the gateway, with the typed client.

The CLI is the operator's tool on a machine that reaches Restate ingress, so the first
time it talks to a tenant it makes itself an admin key for it (as `keys create` does)
and keeps it in `$TEASPILL_HOME/cli-keys.json`, readable by the user only. A key that
stopped working (revoked) is replaced.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

from schemas.address import parse_address
from schemas.spec import AgentSpec
from services.cli.errors import explain
from services.cli.home import write_private
from services.client import ApiError, Client
from services.contracts import ADD_KEY
from services.ingress import Ingress, IngressError
from services.keys import new_key
from services.settings import Settings
from services.specs import Offer, check_spec, load_spec
from services.stack import StackError
from services.stack.gateway import local_url

KEYS_FILE = "cli-keys.json"
CLI_KEY_NAME = "cli"
"""The name of the key the CLI makes itself: what its approvals are signed with."""
KEY_WAIT = 30.0
RETRY_FOR = 5.0
"""Seconds the CLI's requests are sent again after no answer or a 503 (the client's own
default is longer): enough for a Restate node's failover, short enough that a stack that
is down is said soon."""


def tenant_of(address: str) -> str:
    return parse_address(address).tenant


def connect(settings: Settings, ingress: Ingress, tenant: str) -> Client:
    """A client of the local gateway with the CLI's key for `tenant`."""
    url = local_url(settings)
    kept = _kept(settings).get(tenant)
    if kept is not None:
        client = Client(url, kept, timeout=600, retry_for=RETRY_FOR)
        try:
            client.me()
        except ApiError as error:
            client.close()
            if error.status != 401:
                raise
        else:
            return client
    return _fresh(settings, ingress, tenant, url)


def _fresh(settings: Settings, ingress: Ingress, tenant: str, url: str) -> Client:
    plaintext, key = new_key(tenant, "admin", datetime.now(UTC), CLI_KEY_NAME)
    ingress.call(ADD_KEY, key, tenant)
    _keep(settings, tenant, plaintext)
    client = Client(url, plaintext, timeout=600, retry_for=RETRY_FOR)
    deadline = time.monotonic() + KEY_WAIT
    while True:
        try:
            client.me()
            return client
        except ApiError as error:
            # 401 until the projection has the new key; 0 or 503 while the gateway starts.
            if error.status not in (0, 401, 503) or time.monotonic() > deadline:
                client.close()
                raise
            time.sleep(0.2)


def _path(settings: Settings) -> Path:
    return settings.home / KEYS_FILE


def _kept(settings: Settings) -> dict[str, str]:
    try:
        found = json.loads(_path(settings).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def _keep(settings: Settings, tenant: str, key: str) -> None:
    keys = {**_kept(settings), tenant: key}
    write_private(_path(settings), json.dumps(keys))


def spec_file(path: Path, doors: Doors, tenant: str) -> AgentSpec:
    """A spec file, checked first on its own (a wrong file is the user's to fix before
    anything is reached), then against the models and tools the running deployment says
    it offers: the names its publish is checked against."""
    spec = load_spec(path)
    check_spec(spec, f"The spec file {path}", offer_of(doors, tenant))
    return spec


def offer_of(doors: Doors, tenant: str) -> Offer | None:
    """What the running deployment says a spec of `tenant` may name; None when it checks no
    names. A deployment that cannot be asked is said so, and nothing is sent."""
    try:
        offered = doors.tenant(tenant).deployment()
    except (ApiError, IngressError, httpx.HTTPError) as error:
        why = explain(error)
        raise StackError(
            "Could not ask the deployment which models and tools a spec may name, so nothing "
            f"was sent: {why[0] if why else 'it did not answer'}"
        ) from error
    return Offer(offered.models, offered.tools, offered.problem) if offered.checked else None


class Doors:
    """What a command talks through: Restate ingress, and a gateway client per tenant
    (made on first use). `close` closes them all."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.ingress = Ingress(settings.ingress_url)
        self._clients: dict[str, Client] = {}

    def tenant(self, tenant: str) -> Client:
        if tenant not in self._clients:
            self._clients[tenant] = connect(self.settings, self.ingress, tenant)
        return self._clients[tenant]

    def agent(self, address: str) -> Client:
        return self.tenant(tenant_of(address))

    def key(self, tenant: str) -> str:
        """The CLI's key for `tenant` (made first if need be), for a client of its own."""
        self.tenant(tenant)
        return _kept(self.settings)[tenant]

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self.ingress.close()
