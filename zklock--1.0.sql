/* zklock--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION zklock" to load this file. \quit

-- Lock functions: not STRICT, because a NULL timeout means "lock_timeout,
-- else wait for ever"; a NULL name returns NULL.  PARALLEL RESTRICTED: a
-- lock belongs to the backend's own ZooKeeper session.

CREATE FUNCTION zk_lock(name text, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock_shared(name text, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_lock(name text, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_lock_shared(name text, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_xact_lock(name text, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_xact_lock_shared(name text, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_xact_lock(name text, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_xact_lock_shared(name text, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_unlock(name text)
RETURNS boolean
AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_unlock_shared(name text)
RETURNS boolean
AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_unlock_all()
RETURNS void
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_locks_info(
    OUT name text, OUT mode text, OUT scope text, OUT holds integer,
    OUT node text, OUT token bigint, OUT acquired_at timestamptz,
    OUT state text)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- This backend's own locks.
CREATE VIEW zk_locks AS SELECT * FROM zk_locks_info();
GRANT SELECT ON zk_locks TO PUBLIC;

-- The znode path a lock name maps to, for Curator, kazoo and other clients.
CREATE FUNCTION zk_lock_path(name text)
RETURNS text
AS 'MODULE_PATHNAME' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;

-- This backend's ZooKeeper session (opens none): state, id, server,
-- negotiated timeout, locks held, watch notifications received.
CREATE FUNCTION zk_session(
    OUT state text, OUT session_id text, OUT server text,
    OUT timeout_ms integer, OUT locks integer, OUT notifications bigint)
RETURNS record
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock_queue_raw(
    name text, OUT "position" integer, OUT mode text, OUT holds boolean,
    OUT node text, OUT token bigint, OUT data text)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

-- Every contender of a lock, fleet-wide, in queue order.  Owner columns
-- come from the JSON that zklock puts in its nodes; nodes of other
-- clients show with their raw data only.
CREATE FUNCTION zk_lock_queue(
    name text, OUT "position" integer, OUT mode text, OUT holds boolean,
    OUT node text, OUT token bigint, OUT cluster_name text, OUT host text,
    OUT port integer, OUT pid integer, OUT database text, OUT "user" text,
    OUT application_name text, OUT acquired_at timestamptz, OUT data text)
RETURNS SETOF record
LANGUAGE sql STRICT VOLATILE PARALLEL RESTRICTED
AS $$
  SELECT q."position", q.mode, q.holds, q.node, q.token,
         o->>'cluster_name', o->>'host', (o->>'port')::integer,
         (o->>'pid')::integer, o->>'database', o->>'user',
         o->>'application_name', (o->>'acquired_at')::timestamptz, q.data
    FROM @extschema@.zk_lock_queue_raw(name) AS q,
         LATERAL (SELECT CASE WHEN q.data LIKE '{"host":%' THEN q.data::jsonb END) AS j(o)
   ORDER BY q."position"
$$;

-- Default privileges.  A zklock lock is seen by every cluster on the
-- ensemble, so taking one can hold up jobs far from this database: the
-- acquiring functions are not for PUBLIC.  Grant them to the roles that
-- coordinate work (README.md, "Privileges").  Releasing and looking at
-- one's own locks stays open to everyone.
REVOKE EXECUTE ON FUNCTION
    zk_lock(text, interval), zk_lock_shared(text, interval),
    zk_try_lock(text, interval), zk_try_lock_shared(text, interval),
    zk_xact_lock(text, interval), zk_xact_lock_shared(text, interval),
    zk_try_xact_lock(text, interval), zk_try_xact_lock_shared(text, interval)
FROM PUBLIC;
