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
    # The seq at which each catalog field was decided, so that a batch written late (a
    # redelivery, or a batch overtaken by a newer one) never takes a field back; filled
    # from the events for a file written before.
    """
    alter table agents add column status_seq integer not null default 0;
    alter table agents add column started_seq integer not null default 0;
    alter table agents add column ended_seq integer not null default 0;
    update agents set
        status_seq = coalesce((select max(seq) from events e where e.agent = agents.address
            and e.type in ('turn_started', 'model_message', 'tool_called', 'tool_finished',
                'child_spawned', 'waiting', 'approval_requested', 'turn_parked',
                'approval_answered', 'approval_abandoned', 'turn_ended')), 0),
        started_seq = coalesce((select max(seq) from events e where e.agent = agents.address
            and e.type = 'turn_started'), 0),
        ended_seq = coalesce((select max(seq) from events e where e.agent = agents.address
            and e.type = 'turn_ended'), 0);
    """,
    # A key's name, which approvals and the console show.
    """
    alter table keys add column name text not null default '';
    """,
    # A tenant's model tokens of the day are summed over its `model_message` events since
    # midnight (the gateway's daily quota): by type and time, not over every event.
    """
    create index events_by_type_and_time on events (type, at);
    """,
    # Memory records, and their text indexed for full-text search (BM25): the index holds
    # no copy of the text (external content), triggers keep it in step with the table.
    """
    create table memories (
        id text not null unique,
        tenant text not null,
        scope text not null check (scope in ('agent', 'user', 'tenant')),
        owner text not null,
        kind text not null check (kind in ('episodic', 'semantic')),
        at text not null,
        text text not null
    );
    create index memories_by_scope on memories (tenant, scope, owner, at);
    create virtual table memory_text using fts5(
        text, content = 'memories', content_rowid = 'rowid', tokenize = 'unicode61'
    );
    create trigger memories_indexed after insert on memories begin
        insert into memory_text (rowid, text) values (new.rowid, new.text);
    end;
    create trigger memories_unindexed after delete on memories begin
        insert into memory_text (memory_text, rowid, text) values ('delete', old.rowid, old.text);
    end;
    """,
    # Knowledge documents (drafts too), and the passages of released ones with their text
    # indexed for full-text search (BM25), external content as for memories.
    """
    create table documents (
        id text primary key,
        tenant text not null,
        title text not null,
        format text not null check (format in ('text', 'markdown')),
        sha256 text not null,
        chars integer not null,
        status text not null check (status in ('draft', 'released')),
        uploaded_at text not null,
        released_at text,
        passages integer not null default 0
    );
    create index documents_by_tenant on documents (tenant, uploaded_at);
    create table passages (
        document text not null,
        tenant text not null,
        n integer not null,
        start integer not null,
        section text not null,
        text text not null,
        unique (document, n)
    );
    create virtual table passage_text using fts5(
        section, text, content = 'passages', content_rowid = 'rowid', tokenize = 'unicode61'
    );
    create trigger passages_indexed after insert on passages begin
        insert into passage_text (rowid, section, text) values (new.rowid, new.section, new.text);
    end;
    create trigger passages_unindexed after delete on passages begin
        insert into passage_text (passage_text, rowid, section, text)
            values ('delete', old.rowid, old.section, old.text);
    end;
    """,
    # Publishable keys, with their origins and kinds (JSON arrays): the scope's check
    # cannot be altered in place, so the table is made anew and its rows copied.
    """
    create table keys_rebuilt (
        id text primary key,
        tenant text not null,
        scope text not null check (scope in ('read', 'write', 'admin', 'publishable')),
        hash text not null unique,
        created_at text not null,
        revoked_at text,
        name text not null default '',
        origins text not null default '[]',
        kinds text not null default '[]'
    );
    insert into keys_rebuilt (id, tenant, scope, hash, created_at, revoked_at, name)
        select id, tenant, scope, hash, created_at, revoked_at, name from keys;
    drop table keys;
    alter table keys_rebuilt rename to keys;
    """,
    # Vectors for hybrid ranking (derived from the text by the embeddings server the
    # settings name, unit-length float32; null until made), and the model that made each:
    # the model's column first, so a search that checks it reads no vector's overflow pages.
    """
    alter table memories add column vector_model text;
    alter table memories add column vector blob;
    alter table passages add column vector_model text;
    alter table passages add column vector blob;
    """,
    # PDF documents (format `pdf`), and the page each passage is on (0 for a text): the
    # format's check cannot be altered in place, so the table is made anew and its rows
    # copied.
    """
    create table documents_rebuilt (
        id text primary key,
        tenant text not null,
        title text not null,
        format text not null check (format in ('text', 'markdown', 'pdf')),
        sha256 text not null,
        chars integer not null,
        status text not null check (status in ('draft', 'released')),
        uploaded_at text not null,
        released_at text,
        passages integer not null default 0
    );
    insert into documents_rebuilt select id, tenant, title, format, sha256, chars, status,
        uploaded_at, released_at, passages from documents;
    drop table documents;
    alter table documents_rebuilt rename to documents;
    create index documents_by_tenant on documents (tenant, uploaded_at);
    alter table passages add column page integer not null default 0;
    """,
)
