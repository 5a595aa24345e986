"""The PostgreSQL projection's schema, as an ordered list of migrations. Append only: never
edit a migration that has shipped.

It holds what the SQLite schema (`migrations.py`) holds as its migrations leave it, with
PostgreSQL's types: keys and addresses compare byte by byte (`collate "C"`), as SQLite's
text does, so pages and prefixes order the same whatever the database's locale; times stay
ISO text, compared as SQLite compares them; an event is `json` (its text as written, so
its size is the bytes the encoder made). Full-text search is a `tsvector` of the `simple`
configuration (lower-cased words, no stemming, no stopwords: what FTS5's `unicode61`
tokenizer indexes), kept by a generated column and searched through a GIN index.
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    """
    create table events (
        agent text collate "C" not null,
        seq bigint not null,
        turn bigint not null,
        type text collate "C" not null,
        at text collate "C" not null,
        event json not null,
        primary key (agent, seq)
    );
    create index events_by_type_and_time on events (type, at);

    create table agents (
        address text collate "C" primary key,
        tenant text collate "C" not null,
        kind text collate "C" not null default '',
        spec_version bigint not null default 0,
        status text collate "C" not null default 'idle',
        turn bigint not null default 0,
        last_seq bigint not null default 0,
        last_outcome text collate "C",
        last_activity text collate "C" not null,
        status_seq bigint not null default 0,
        started_seq bigint not null default 0,
        ended_seq bigint not null default 0
    );
    create index agents_by_tenant on agents (tenant, kind, status, address);

    create table specs (
        tenant text collate "C" not null,
        kind text collate "C" not null,
        version bigint not null,
        spec bytea not null,
        published_at text collate "C" not null,
        primary key (tenant, kind, version)
    );

    create table keys (
        id text collate "C" primary key,
        tenant text collate "C" not null,
        scope text collate "C" not null
            check (scope in ('read', 'write', 'admin', 'publishable')),
        hash text collate "C" not null unique,
        created_at text collate "C" not null,
        revoked_at text collate "C",
        name text not null default '',
        origins text not null default '[]',
        kinds text not null default '[]'
    );

    create table memories (
        id text collate "C" not null unique,
        tenant text collate "C" not null,
        scope text collate "C" not null check (scope in ('agent', 'user', 'tenant')),
        owner text collate "C" not null,
        kind text collate "C" not null check (kind in ('episodic', 'semantic')),
        at text collate "C" not null,
        text text not null,
        words tsvector generated always as (to_tsvector('simple', text)) stored
    );
    create index memories_by_scope on memories (tenant, scope, owner, at);
    create index memory_words on memories using gin (words);

    create table documents (
        id text collate "C" primary key,
        tenant text collate "C" not null,
        title text not null,
        format text collate "C" not null check (format in ('text', 'markdown')),
        sha256 text collate "C" not null,
        chars bigint not null,
        status text collate "C" not null check (status in ('draft', 'released')),
        uploaded_at text collate "C" not null,
        released_at text collate "C",
        passages bigint not null default 0
    );
    create index documents_by_tenant on documents (tenant, uploaded_at);
    create table passages (
        document text collate "C" not null,
        tenant text collate "C" not null,
        n bigint not null,
        start bigint not null,
        section text not null,
        text text not null,
        words tsvector generated always as (to_tsvector('simple', section || ' ' || text)) stored,
        unique (document, n)
    );
    create index passages_by_tenant on passages (tenant, document);
    create index passage_words on passages using gin (words);
    """,
    # Vectors for hybrid ranking, as SQLite's eighth migration adds them.
    """
    alter table memories add column vector_model text;
    alter table memories add column vector bytea;
    alter table passages add column vector_model text;
    alter table passages add column vector bytea;
    """,
    # PDF documents, and the page each passage is on, as SQLite's ninth migration adds them.
    """
    alter table documents drop constraint documents_format_check;
    alter table documents add constraint documents_format_check
        check (format in ('text', 'markdown', 'pdf'));
    alter table passages add column page bigint not null default 0;
    """,
)
