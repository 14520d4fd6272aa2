/* zklock--1.2--1.3.sql */

\echo Use "ALTER EXTENSION zklock UPDATE TO '1.3'" to load this file. \quit

-- Fleet-wide advisory keys (README.md, "Migration tools"): with
-- zklock.fleet_advisory_keys set, PostgreSQL's own pg_advisory_* functions
-- on a listed key take zklock's lock of that key as well, the lock
-- zk_lock(key) takes.  zklock's planner hook rewrites every call of a
-- builtin pg_advisory_* function in this database into a call of the
-- function below of the same signature, result, strictness, volatility
-- and parallel safety; each decides by its key, when it runs, whether to
-- call the builtin alone or to take both locks.  They are not meant to be
-- called by name.
--
-- Privileges: every pg_advisory_* call in this database becomes one of
-- these, so they stay executable by PUBLIC, as the builtins are.  Whether
-- a call reaches ZooKeeper is decided by zklock.fleet_advisory_keys, which
-- only a superuser sets (for a role with ALTER ROLE ... SET).

CREATE FUNCTION zk_fleet_advisory_lock(key bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'zk_fleet_advisory_lock_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_advisory_lock(key1 integer, key2 integer)
RETURNS void
AS 'MODULE_PATHNAME', 'zk_fleet_advisory_lock_int4' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_advisory_lock_shared(key bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'zk_fleet_advisory_lock_shared_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_advisory_lock_shared(key1 integer, key2 integer)
RETURNS void
AS 'MODULE_PATHNAME', 'zk_fleet_advisory_lock_shared_int4' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_advisory_xact_lock(key bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'zk_fleet_advisory_xact_lock_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_advisory_xact_lock(key1 integer, key2 integer)
RETURNS void
AS 'MODULE_PATHNAME', 'zk_fleet_advisory_xact_lock_int4' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_advisory_xact_lock_shared(key bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'zk_fleet_advisory_xact_lock_shared_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_advisory_xact_lock_shared(key1 integer, key2 integer)
RETURNS void
AS 'MODULE_PATHNAME', 'zk_fleet_advisory_xact_lock_shared_int4' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_try_advisory_lock(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_fleet_try_advisory_lock_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_try_advisory_lock(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_fleet_try_advisory_lock_int4' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_try_advisory_lock_shared(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_fleet_try_advisory_lock_shared_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_try_advisory_lock_shared(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_fleet_try_advisory_lock_shared_int4' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_try_advisory_xact_lock(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_fleet_try_advisory_xact_lock_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_try_advisory_xact_lock(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_fleet_try_advisory_xact_lock_int4' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_try_advisory_xact_lock_shared(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_fleet_try_advisory_xact_lock_shared_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_try_advisory_xact_lock_shared(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_fleet_try_advisory_xact_lock_shared_int4' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_advisory_unlock(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_fleet_advisory_unlock_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_advisory_unlock(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_fleet_advisory_unlock_int4' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_advisory_unlock_shared(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_fleet_advisory_unlock_shared_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_advisory_unlock_shared(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_fleet_advisory_unlock_shared_int4' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_fleet_advisory_unlock_all()
RETURNS void
AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
