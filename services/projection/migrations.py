"""The projection's schema, as an ordered list of migrations. Append only: never edit
a migration that has shipped."""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    """
    create table events (
        agent text not null,
        seq integer not null,
        turn integer not null,
        type text not null,
        at text not null,
        event blob not null,
        primary key (agent, seq)
    ) without rowid;

    create table agents (
        address text primary key,
        tenant text not null,
        kind text not null default '',
        spec_version integer not null default 0,
        status text not null default 'idle',
        turn integer not null default 0,
        last_seq integer not null default 0,
        last_outcome text,
        last_activity text not null
    );
    create index agents_by_tenant on agents (tenant, kind, status, address);

    create table specs (
        tenant text not null,
        kind text not null,
        version integer not null,
        spec blob not null,
        published_at text not null,
        primary key (tenant, kind, version)
    );

    create table keys (
        id text primary key,
        tenant text not null,
        scope text not null check (scope in ('read', 'write', 'admin')),
        hash text not null unique,
        created_at text not null,
        revoked_at text
    );
    """,
)
