/* zklock--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '1.1'" to load this file. \quit

-- Integer keys, as pg_advisory_lock takes them: a bigint, or two integers.
-- Each acquiring function also gets a (text, text) form: with (int, int)
-- beside it, zk_lock('x', '1s') would otherwise be ambiguous, since its
-- second literal could be an interval or an integer.  An unknown literal
-- prefers text, so such calls land on the (text, text) form, which reads
-- its timeout as an interval: the same behaviour as 1.0.
-- Key 42 locks the znode directory "key:42" under zklock.root and the
-- pair (1, 2) "key:1:2"; no text name escapes to a name with a colon, so
-- key 42, the pair (0, 42) and the text name '42' are three different
-- locks.  Same scopes, waiting rules and privileges as the text forms.

CREATE FUNCTION zk_lock(name text, timeout text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_lock_tt' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock(key bigint, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_lock_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock(key1 integer, key2 integer, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_lock_int4' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock_shared(name text, timeout text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_lock_shared_tt' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock_shared(key bigint, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_lock_shared_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock_shared(key1 integer, key2 integer, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_lock_shared_int4' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_lock(name text, timeout text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_lock_tt' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_lock(key bigint, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_lock_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_lock(key1 integer, key2 integer, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_lock_int4' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_lock_shared(name text, timeout text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_lock_shared_tt' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_lock_shared(key bigint, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_lock_shared_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_lock_shared(key1 integer, key2 integer, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_lock_shared_int4' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_xact_lock(name text, timeout text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_xact_lock_tt' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_xact_lock(key bigint, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_xact_lock_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_xact_lock(key1 integer, key2 integer, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_xact_lock_int4' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_xact_lock_shared(name text, timeout text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_xact_lock_shared_tt' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_xact_lock_shared(key bigint, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_xact_lock_shared_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_xact_lock_shared(key1 integer, key2 integer, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_xact_lock_shared_int4' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_xact_lock(name text, timeout text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_xact_lock_tt' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_xact_lock(key bigint, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_xact_lock_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_xact_lock(key1 integer, key2 integer, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_xact_lock_int4' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_xact_lock_shared(name text, timeout text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_xact_lock_shared_tt' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_xact_lock_shared(key bigint, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_xact_lock_shared_int8' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_xact_lock_shared(key1 integer, key2 integer, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_xact_lock_shared_int4' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_unlock(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_unlock_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_unlock(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_unlock_int4' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_unlock_shared(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_unlock_shared_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_unlock_shared(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_unlock_shared_int4' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock_path(key bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'zk_lock_path_int8' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock_path(key1 integer, key2 integer)
RETURNS text
AS 'MODULE_PATHNAME', 'zk_lock_path_int4' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;

-- The fleet view reads owner records in C, so that node data of other
-- clients that merely looks like zklock's JSON can no longer make it fail
-- (1.0 cast it to jsonb); such rows keep their raw data and NULL owners.
CREATE OR REPLACE FUNCTION zk_lock_queue(
    name text, OUT "position" integer, OUT mode text, OUT holds boolean,
    OUT node text, OUT token bigint, OUT cluster_name text, OUT host text,
    OUT port integer, OUT pid integer, OUT database text, OUT "user" text,
    OUT application_name text, OUT acquired_at timestamptz, OUT data text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zk_lock_queue' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock_queue(
    key bigint, OUT "position" integer, OUT mode text, OUT holds boolean,
    OUT node text, OUT token bigint, OUT cluster_name text, OUT host text,
    OUT port integer, OUT pid integer, OUT database text, OUT "user" text,
    OUT application_name text, OUT acquired_at timestamptz, OUT data text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zk_lock_queue_int8' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_lock_queue(
    key1 integer, key2 integer, OUT "position" integer, OUT mode text,
    OUT holds boolean, OUT node text, OUT token bigint, OUT cluster_name text,
    OUT host text, OUT port integer, OUT pid integer, OUT database text,
    OUT "user" text, OUT application_name text, OUT acquired_at timestamptz,
    OUT data text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zk_lock_queue_int4' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

-- The fleet's wait-for graph, for operators (like pg_blocking_pids, but
-- across clusters): every zklock backend that has waited at least
-- deadlock_timeout, each contender in its way, and that contender's owner
-- when it is a zklock node (other clients' nodes have NULL owners).
CREATE FUNCTION zk_lock_waits(
    OUT waiter_cluster_name text, OUT waiter_pid integer, OUT lock_path text,
    OUT waiter_node text, OUT blocker_node text, OUT blocker_holds boolean,
    OUT blocker_cluster_name text, OUT blocker_host text,
    OUT blocker_pid integer, OUT blocker_data text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zk_lock_waits' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- The acquiring forms stay off PUBLIC, as in 1.0 (README.md, "Privileges").
REVOKE EXECUTE ON FUNCTION
    zk_lock(text, text), zk_lock(bigint, interval), zk_lock(integer, integer, interval),
    zk_lock_shared(text, text), zk_lock_shared(bigint, interval), zk_lock_shared(integer, integer, interval),
    zk_try_lock(text, text), zk_try_lock(bigint, interval), zk_try_lock(integer, integer, interval),
    zk_try_lock_shared(text, text), zk_try_lock_shared(bigint, interval), zk_try_lock_shared(integer, integer, interval),
    zk_xact_lock(text, text), zk_xact_lock(bigint, interval), zk_xact_lock(integer, integer, interval),
    zk_xact_lock_shared(text, text), zk_xact_lock_shared(bigint, interval), zk_xact_lock_shared(integer, integer, interval),
    zk_try_xact_lock(text, text), zk_try_xact_lock(bigint, interval), zk_try_xact_lock(integer, integer, interval),
    zk_try_xact_lock_shared(text, text), zk_try_xact_lock_shared(bigint, interval), zk_try_xact_lock_shared(integer, integer, interval)
FROM PUBLIC;

-- Semaphores: at most max_leases holders of one name across the fleet, on
-- the nodes of Curator's InterProcessSemaphoreV2 under zk_lock_path(name)
-- (its "locks" and "leases" children), so Curator clients share the limit.
-- Every call takes a new lease with its own node and token; session leases
-- last until released (or zk_unlock_all, DISCARD ALL, exit), transaction
-- leases until commit or abort.
CREATE FUNCTION zk_semaphore(name text, max_leases integer, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_semaphore' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_semaphore(name text, max_leases integer, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_semaphore' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_xact_semaphore(name text, max_leases integer, timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zk_xact_semaphore' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION zk_try_xact_semaphore(name text, max_leases integer, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_try_xact_semaphore' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- One session lease: the one with this token, else the newest.
CREATE FUNCTION zk_semaphore_release(name text, token bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_semaphore_release' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- Every session lease of this backend (zk_unlock_all releases them too).
CREATE FUNCTION zk_semaphore_release_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'zk_semaphore_release_all' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- Fleet view: the leases (mode 'lease') in creation order, then the
-- acquirer that holds the semaphore's mutex (mode 'mutex': it is letting
-- itself in, its lease the last one) and those queued behind it ('queued').
CREATE FUNCTION zk_semaphore_queue(
    name text, OUT "position" integer, OUT mode text, OUT holds boolean,
    OUT node text, OUT token bigint, OUT cluster_name text, OUT host text,
    OUT port integer, OUT pid integer, OUT database text, OUT "user" text,
    OUT application_name text, OUT acquired_at timestamptz, OUT data text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zk_semaphore_queue' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

REVOKE EXECUTE ON FUNCTION
    zk_semaphore(text, integer, interval), zk_try_semaphore(text, integer, interval),
    zk_xact_semaphore(text, integer, interval), zk_try_xact_semaphore(text, integer, interval)
FROM PUBLIC;
