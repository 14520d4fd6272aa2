/* zklock--1.1--1.2.sql */

\echo Use "ALTER EXTENSION zklock UPDATE TO '1.2'" to load this file. \quit

-- Sets of locks taken as one (README.md, "Several locks as one"): all or
-- nothing, in one round trip when they are free, never deadlocking with
-- each other whatever order the names are given in.  The lock forms
-- return the fencing tokens in the order of the given names, the try
-- forms whether the whole set was taken, the unlock forms whether every
-- name was held.  A name given twice counts once; a NULL array or a NULL
-- element gives NULL with nothing taken or released, as a NULL name does;
-- an empty array is an error, as an empty name is.

CREATE FUNCTION zk_lock(names text[], timeout interval DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'zk_lock_set' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock(keys bigint[], timeout interval DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'zk_lock_set_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock_shared(names text[], timeout interval DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'zk_lock_shared_set' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock_shared(keys bigint[], timeout interval DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'zk_lock_shared_set_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_lock(names text[], timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_lock_set' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_lock(keys bigint[], timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_lock_set_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_lock_shared(names text[], timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_lock_shared_set' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_lock_shared(keys bigint[], timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_lock_shared_set_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_xact_lock(names text[], timeout interval DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'zk_xact_lock_set' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_xact_lock(keys bigint[], timeout interval DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'zk_xact_lock_set_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_xact_lock_shared(names text[], timeout interval DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'zk_xact_lock_shared_set' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_xact_lock_shared(keys bigint[], timeout interval DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'zk_xact_lock_shared_set_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_xact_lock(names text[], timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_xact_lock_set' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_xact_lock(keys bigint[], timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_xact_lock_set_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_xact_lock_shared(names text[], timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_xact_lock_shared_set' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_xact_lock_shared(keys bigint[], timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_xact_lock_shared_set_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_unlock(names text[])
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_unlock_set' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_unlock(keys bigint[])
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_unlock_set_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_unlock_shared(names text[])
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_unlock_shared_set' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_unlock_shared(keys bigint[])
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_unlock_shared_set_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

-- The acquiring forms stay off PUBLIC, as in 1.0 (README.md, "Privileges").
REVOKE EXECUTE ON FUNCTION
    zk_lock(text[], interval), zk_lock(bigint[], interval),
    zk_lock_shared(text[], interval), zk_lock_shared(bigint[], interval),
    zk_try_lock(text[], interval), zk_try_lock(bigint[], interval),
    zk_try_lock_shared(text[], interval), zk_try_lock_shared(bigint[], interval),
    zk_xact_lock(text[], interval), zk_xact_lock(bigint[], interval),
    zk_xact_lock_shared(text[], interval), zk_xact_lock_shared(bigint[], interval),
    zk_try_xact_lock(text[], interval), zk_try_xact_lock(bigint[], interval),
    zk_try_xact_lock_shared(text[], interval), zk_try_xact_lock_shared(bigint[], interval)
FROM PUBLIC;

-- Cumulative statistics (README.md, "Statistics"): kept in shared memory,
-- so only with zklock in shared_preload_libraries; the views raise
-- otherwise.  Members of pg_read_all_stats see every row of zk_stat_locks,
-- others their own user's rows.
CREATE FUNCTION zk_stat_locks_info(
    OUT database text, OUT "user" text, OUT name text, OUT mode text,
    OUT acquisitions bigint, OUT waited bigint,
    OUT wait_time_total double precision, OUT wait_time_max double precision,
    OUT timeouts bigint, OUT cancels bigint, OUT deadlocks bigint,
    OUT lost bigint, OUT commits_refused bigint,
    OUT hold_time_total double precision, OUT hold_time_max double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW zk_stat_locks AS SELECT * FROM zk_stat_locks_info();
GRANT SELECT ON zk_stat_locks TO PUBLIC;

CREATE FUNCTION zk_stat_sessions_info(
    OUT sessions_opened bigint, OUT sessions_expired bigint,
    OUT reconnects bigint, OUT proofs bigint, OUT proofs_failed bigint,
    OUT requests bigint, OUT notifications bigint,
    OUT connections_refused bigint, OUT sessions_open bigint,
    OUT dealloc bigint, OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW zk_stat_sessions AS SELECT * FROM zk_stat_sessions_info();
GRANT SELECT ON zk_stat_sessions TO PUBLIC;

CREATE FUNCTION zk_stat_reset()
RETURNS void
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
REVOKE EXECUTE ON FUNCTION zk_stat_reset() FROM PUBLIC;

-- The fleet at a glance (README.md, "The fleet at a glance"): every lock
-- and semaphore under zklock.root with a holder or a waiter, read from
-- ZooKeeper with listings and gets (never a watch); max_locks bounds how
-- many directories are read.
CREATE FUNCTION zk_fleet_locks(
    max_locks integer DEFAULT NULL,
    OUT name text, OUT path text, OUT kind text, OUT holders integer,
    OUT waiting integer, OUT oldest_wait interval, OUT holder_node text,
    OUT cluster_name text, OUT host text, OUT port integer, OUT pid integer,
    OUT database text, OUT "user" text, OUT application_name text,
    OUT acquired_at timestamptz, OUT data text)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
