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
