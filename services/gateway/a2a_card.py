"""The A2A agent card of a published kind: where its JSON-RPC endpoint is, that it streams,
and that it takes the gateway's API keys (HTTP bearer), which is also how the card is read.
"""

from __future__ import annotations

from typing import Any

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import (
    AGENT_CARD_WELL_KNOWN_PATH,
    PROTOCOL_VERSION_0_3,
    PROTOCOL_VERSION_1_0,
    TransportProtocol,
)

from schemas.spec import AgentSpec
from services.gateway import service
from services.gateway.auth import A2A, Principal
from services.gateway.runtime import Runtime
from services.gateway.turns import published_kinds

SCHEME = "apiKey"
"""The security scheme's name, as the gateway's OpenAPI calls it."""


def agent_url(base: str, kind: str) -> str:
    return f"{base}{A2A}/{kind}"


def card_url(base: str, kind: str) -> str:
    return f"{agent_url(base, kind)}{AGENT_CARD_WELL_KNOWN_PATH}"


async def kinds(rt: Runtime, caller: Principal, base: str) -> list[dict[str, Any]]:
    """The caller's tenant's kinds as A2A agents: name, version, card and endpoint."""
    newest = await published_kinds(rt, caller.tenant)
    return [
        {
            "kind": kind,
            "version": spec.version,
            "card": card_url(base, kind),
            "url": agent_url(base, kind),
        }
        for kind, spec in newest.items()
    ]


async def card_of(rt: Runtime, caller: Principal, kind: str, base: str) -> AgentCard:
    """The card of the newest published version of `kind` (404 when there is none)."""
    return agent_card(kind, await service.require_published(rt, caller.tenant, kind), base)


def agent_card(kind: str, spec: AgentSpec, base: str) -> AgentCard:
    url = agent_url(base, kind)
    scheme = HTTPAuthSecurityScheme(
        scheme="bearer",
        bearer_format="tsk_<id>_<secret>",
        description="A teaspill API key of the agent's tenant: a read key reads tasks, "
        "a write key also sends messages and cancels tasks.",
    )
    return AgentCard(
        name=kind,
        description=f"teaspill agents of kind {kind}: each message starts a turn of an "
        "agent, which is the task; the agent's address is the context, so a message with "
        "that contextId continues its conversation.",
        version=str(spec.version),
        provider=AgentProvider(organization="teaspill", url=base),
        supported_interfaces=[
            AgentInterface(
                url=url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=version,
            )
            for version in (PROTOCOL_VERSION_1_0, PROTOCOL_VERSION_0_3)
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={SCHEME: SecurityScheme(http_auth_security_scheme=scheme)},
        security_requirements=[SecurityRequirement(schemes={SCHEME: StringList()})],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id=kind,
                name=kind,
                description=f"A turn of an agent of kind {kind} (version {spec.version}).",
                tags=["teaspill"],
            )
        ],
    )
