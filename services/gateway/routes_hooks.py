"""Webhooks: an admin makes one (its URL and signing secret, shown once), reads or
removes it; other systems deliver to `POST /hooks/{id}`, signed as Standard Webhooks says.

A delivery is verified here with nothing but the gateway's signing key (the secret is
derived from it and the hook's id), capped and rate-limited per hook, and sent one-way to
the hook's `Hooks` object with the idempotency key `webhook {hook} {webhook-id}`: it is
answered 202 as soon as Restate holds it, even while the service endpoint is down (for a
hook this gateway made or saw before), and a `webhook-id` delivered again runs nothing
more. A hook of a kind alone makes an agent per delivery: it must leave the tenant room.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime
from typing import Annotated

import msgspec
from fastapi import APIRouter, Depends, Path, Request

from schemas.hook import Delivery, HookSpec
from services.gateway import hooks, service
from services.gateway.auth import Principal, own, require
from services.gateway.errors import ApiError, needs_kind
from services.gateway.models import DeliveryAccepted, HookCreated, HookIn, HookOut, HooksOut
from services.gateway.openapi import errors
from services.gateway.routes_schedules import IdempotencyKey
from services.gateway.runtime import Runtime, runtime
from services.gateway.upstream import IngressUnavailableError
from services.hooks.template import TemplateError, check

router = APIRouter(tags=["hooks"])
Rt = Annotated[Runtime, Depends(runtime)]
HookId = Annotated[
    str, Path(pattern=r"^[a-z0-9][a-z0-9_-]{0,47}\.[0-9a-f]{20}$", description="From creation.")
]


@router.post("/v1/hooks", status_code=201, responses=errors(400, 401, 403, 404, 413, 422, 429, 503))
async def create_hook(
    body: HookIn,
    request: Request,
    caller: Annotated[Principal, Depends(require("admin"))],
    rt: Rt,
    idempotency_key: IdempotencyKey = None,
) -> HookCreated:
    """Make a webhook; the answer holds its signing secret, this once."""
    await _check_target(rt, caller, body)
    try:
        check(body.template)
    except TemplateError as error:
        raise ApiError(422, f"field 'template': {error}") from error
    hook_id = _new_id(caller.tenant, idempotency_key)
    now = datetime.now(UTC)  # noqa: TID251 - the gateway is not durable code
    spec = HookSpec(caller.tenant, body.template, body.address, body.kind, body.while_busy, now)
    made = await rt.ingress.create_hook(hook_id, spec, idempotency_key)
    rt.hook_targets.add(hook_id, aimed=made.address is not None)
    secret = rt.hook_key.secret_for(hook_id)
    return HookCreated(**_out(request, hook_id, made).model_dump(), secret=secret)


@router.get("/v1/hooks", responses=errors(401, 403, 503))
async def list_hooks(
    request: Request, caller: Annotated[Principal, Depends(require("admin"))], rt: Rt
) -> HooksOut:
    """The tenant's hooks, without their secrets."""
    listed = await rt.ingress.hooks(caller.tenant)
    return HooksOut(hooks=[_out(request, entry.id, entry.hook) for entry in listed.hooks])


@router.get("/v1/hooks/{hook_id}", responses=errors(400, 401, 403, 404, 422, 503))
async def get_hook(
    hook_id: HookId,
    request: Request,
    caller: Annotated[Principal, Depends(require("admin"))],
    rt: Rt,
) -> HookOut:
    """The hook, without its secret."""
    found = await rt.ingress.hook(_owned(caller, hook_id))
    if found is None:
        raise _unknown(hook_id)
    return _out(request, hook_id, found)


@router.delete("/v1/hooks/{hook_id}", responses=errors(400, 401, 403, 404, 422, 503))
async def delete_hook(
    hook_id: HookId,
    request: Request,
    caller: Annotated[Principal, Depends(require("admin"))],
    rt: Rt,
) -> HookOut:
    """Remove the hook: deliveries still signed with its secret are answered 202 and do
    nothing (the secret is derived, not looked up, so the gateway cannot tell)."""
    return _out(request, hook_id, await rt.ingress.delete_hook(_owned(caller, hook_id)))


@router.post("/hooks/{hook_id}", status_code=202, responses=errors(400, 401, 413, 429, 503))
async def deliver(hook_id: HookId, request: Request, rt: Rt) -> DeliveryAccepted:
    """A delivery, signed with the hook's secret (`webhook-id`, `webhook-timestamp`,
    `webhook-signature`): 202 once Restate holds it; 401 when the signature or the
    timestamp is wrong; 429 when a hook of a kind would make an agent past the tenant's
    `TEASPILL_TENANT_AGENTS`."""
    body = await request.body()
    if len(body) > rt.settings.hook_max_bytes:
        raise ApiError(413, f"a delivery's body is at most {rt.settings.hook_max_bytes} bytes")
    secret = rt.hook_key.secret_for(hook_id)
    webhook_id = hooks.verify(secret, body, request.headers)
    rt.hook_rates.take(hook_id)
    tenant = hook_id.split(".", 1)[0]
    if not await _aimed(rt, hook_id):
        await rt.quotas.new_agent(tenant)
    await rt.quotas.tokens(tenant)
    try:
        msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError) as error:
        raise ApiError(
            400, "a delivery's body must be JSON, nested at most a few hundred deep"
        ) from error
    delivery = Delivery(webhook_id, body.decode())
    invocation = await rt.ingress.deliver(hook_id, delivery)
    return DeliveryAccepted(hook=hook_id, webhook_id=webhook_id, invocation_id=invocation)


async def _aimed(rt: Runtime, hook_id: str) -> bool:
    """Whether the hook sends to one agent; a hook of a kind alone makes an agent per
    delivery, which the tenant's agent quota must allow. One this gateway has not seen is
    asked for. While the endpoint cannot answer, it is taken as a hook of a kind: the
    delivery is still taken (202) while the tenant has room for an agent, and is refused
    (429, which senders retry) only at the ceiling; one that is gone makes nothing."""
    aimed = rt.hook_targets.get(hook_id)
    if aimed is not None:
        return aimed
    try:
        found = await rt.ingress.hook(hook_id)
    except IngressUnavailableError:
        return False
    if found is None:
        return True
    rt.hook_targets.add(hook_id, aimed=found.address is not None)
    return found.address is not None


async def _check_target(rt: Runtime, caller: Principal, body: HookIn) -> None:
    if body.address is None and body.kind is None:
        raise ApiError(422, "a hook needs the 'address' of its agent, or a 'kind', or both")
    if body.kind is not None:
        await service.require_published(rt, caller.tenant, body.kind)
    if body.address is None:
        return
    agent = own(caller, body.address, "admin", doing="a hook", field="address")
    row = await rt.projection.read(lambda store: store.agent(agent.address))
    if row is None and body.kind is None and agent.address not in rt.recent:
        raise needs_kind(agent.address)


def _new_id(tenant: str, idempotency_key: str | None) -> str:
    """A random id; one made from the idempotency key, so a retry names the same hook (and
    gets the same secret, derived from the id)."""
    if idempotency_key is None:
        return f"{tenant}.{secrets.token_hex(10)}"
    digest = hashlib.sha256(f"{tenant}\n{idempotency_key}".encode()).hexdigest()
    return f"{tenant}.{digest[:20]}"


def _mine(caller: Principal, hook_id: str) -> bool:
    return hook_id.split(".", 1)[0] == caller.tenant


def _owned(caller: Principal, hook_id: str) -> str:
    """Another tenant's hook is answered like one that does not exist."""
    if not _mine(caller, hook_id):
        raise _unknown(hook_id)
    return hook_id


def _unknown(hook_id: str) -> ApiError:
    return ApiError(404, f"there is no hook {hook_id} for this key's tenant")


def _out(request: Request, hook_id: str, spec: HookSpec) -> HookOut:
    return HookOut(
        id=hook_id,
        url=str(request.url_for("deliver", hook_id=hook_id)),
        template=spec.template,
        address=spec.address,
        kind=spec.kind,
        while_busy=spec.while_busy,
        created=spec.created.isoformat() if spec.created else None,
    )
