"""`teaspill users`: how a tenant's end-user tokens are verified, through Restate
ingress like `keys create` (the Tenant object holds it with the keys)."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any, cast

from schemas.tenant import Algorithm, EndUsers
from services.cli.errors import UsageError
from services.contracts import KEYS, SET_END_USERS, Empty
from services.endusers import problem
from services.ingress import Ingress


def commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = verbs.add_parser(
        "users", help="how a tenant's end-user tokens are verified"
    ).add_subparsers(required=True, metavar="VERB")
    setting = group.add_parser(
        "set",
        help="register the key that verifies end-user tokens",
        description="Register how the tenant's end-user tokens (JWTs its backend signs, "
        "naming the user in sub, with exp) are verified, replacing what was. Publishable "
        "keys take tokens checked with it.",
    )
    setting.add_argument("tenant")
    setting.add_argument("--algorithm", choices=("HS256", "RS256", "ES256"), required=True)
    setting.add_argument(
        "--key-file",
        type=Path,
        required=True,
        help="a file holding the HS256 secret, or the PEM public key for RS256 and ES256",
    )
    setting.add_argument("--audience", default="", help="if set, a token's aud must name it")
    setting.add_argument("--issuer", default="", help="if set, a token's iss must be it")
    setting.add_argument(
        "--anonymous",
        action="store_true",
        help="visitors without a token get a conversation of their own",
    )
    setting.set_defaults(run=_set)
    show = group.add_parser("show", help="how the tenant's tokens are verified (never the key)")
    show.add_argument("tenant")
    show.set_defaults(run=lambda a, s, d: end_users_show(d.ingress, a.tenant))


def _set(args: argparse.Namespace, _settings: Any, doors: Any) -> None:
    try:
        key = args.key_file.read_text().strip()
    except OSError as error:
        raise UsageError(
            f"The key file {args.key_file} cannot be read: {error.strerror}."
        ) from error
    wanted = EndUsers(
        cast("Algorithm", args.algorithm), key, args.audience, args.issuer, args.anonymous
    )
    end_users_set(doors.ingress, args.tenant, wanted)


def end_users_set(ingress: Ingress, tenant: str, wanted: EndUsers) -> None:
    if (found := problem(wanted)) is not None:
        raise UsageError(f"The key cannot be registered: {found}.")
    ingress.call(SET_END_USERS, wanted, tenant)
    print(f"Registered {wanted.algorithm} end-user tokens for tenant {tenant}.")
    end_users_show(ingress, tenant)


def end_users_show(ingress: Ingress, tenant: str) -> None:
    held = ingress.call(KEYS, Empty(), tenant).end_users
    if held.algorithm is None:
        print(f"Tenant {tenant} has registered no end-user token key: tokens are refused.")
    else:
        fingerprint = hashlib.sha256(held.key.encode()).hexdigest()[:16]
        print(f"Algorithm: {held.algorithm} (key sha256 {fingerprint})")
        print(f"Audience:  {held.audience or 'not checked'}")
        print(f"Issuer:    {held.issuer or 'not checked'}")
    visitors = "taken" if held.anonymous else "not taken (an end-user token is needed)"
    print(f"Visitors:  {visitors}")
