"""Agent addresses: `tenant.name[.child...]`, URL-safe, validated, stable.

An address is the key of an agent's Restate virtual object, so it appears verbatim in
ingress URLs (`/Agent/{address}/wake`). Every segment is lower-case letters, digits,
`-` and `_`; segments are joined by `.`. The first segment is the tenant.
"""

from __future__ import annotations

import re

import msgspec

MAX_LENGTH = 200
_SEGMENT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}\Z")


class InvalidAddressError(ValueError):
    """Raised with a sentence that says what is wrong and what is accepted."""


class Address(msgspec.Struct, frozen=True):
    tenant: str
    path: tuple[str, ...]

    def __str__(self) -> str:
        return ".".join((self.tenant, *self.path))

    @property
    def depth(self) -> int:
        """0 for an agent addressed directly, 1 for its children, and so on."""
        return len(self.path) - 1


def parse_address(text: str) -> Address:
    if not text or len(text) > MAX_LENGTH:
        raise InvalidAddressError(
            f"agent address must be 1 to {MAX_LENGTH} characters, got {len(text)}"
        )
    segments = text.split(".")
    if len(segments) < 2:
        raise InvalidAddressError(
            f"agent address {text!r} needs a tenant and a name, as in 'acme.helper'"
        )
    for segment in segments:
        if not _SEGMENT.match(segment):
            raise InvalidAddressError(
                f"agent address {text!r} has an invalid part {segment!r}: each part is 1 to 48 "
                "characters of a-z, 0-9, '-' and '_', starting with a letter or digit"
            )
    return Address(tenant=segments[0], path=tuple(segments[1:]))


def tenant_of(address: str) -> str:
    """The tenant a valid address names: its first part, without parsing the rest."""
    return address.split(".", 1)[0]


def child_address(parent: Address, turn: int, round_: int, index: int) -> Address:
    """The address of the child spawned by the `index`-th call of a round.

    Derived only from the parent and the call's position, so a replayed turn spawns the
    very same child.
    """
    return Address(parent.tenant, (*parent.path, f"t{turn}r{round_}c{index}"))
