--
-- What pg_advisory_lock users rely on: integer keys, DISCARD ALL, DROP
-- EXTENSION under held locks, call forms that stay unambiguous, and
-- settings that fail clearly.
--
CREATE EXTENSION IF NOT EXISTS zklock;
\set VERBOSITY default

-- integer keys: bigint and (int, int), each its own lock and directory
SELECT zk_lock(42) > 0 AS big, zk_lock(1, 2) > 0 AS pair, zk_lock('42') > 0 AS text42;
SELECT zk_lock(0, 42) > 0 AS pair_0_42;
SELECT name, mode, scope, holds FROM zk_locks ORDER BY name;
SELECT zk_lock_path(42), zk_lock_path(1, 2), zk_lock_path(-9223372036854775808),
       zk_lock_path('42'), zk_lock_path('key:42');
SELECT count(DISTINCT node) FROM zk_locks;
-- the queue of a key shows its holder, with the owner record
SELECT position, holds, pid = pg_backend_pid() AS own_pid FROM zk_lock_queue(42);
SELECT position, holds, pid = pg_backend_pid() AS own_pid FROM zk_lock_queue(1, 2);
-- re-entry keeps the token, as for names
SELECT zk_lock(42) = token AS same_token FROM zk_locks WHERE name = 'key:42';
SELECT zk_unlock(42), zk_unlock(42), zk_unlock(1, 2), zk_unlock(0, 42), zk_unlock('42');
-- the text name 'key:42' is not key 42
SELECT zk_unlock('key:42');
SELECT count(*) FROM zk_locks;

-- every acquiring function takes keys; shared and transaction forms too
BEGIN;
SELECT zk_xact_lock(7) > 0, zk_xact_lock_shared(8) > 0, zk_try_xact_lock(9),
       zk_try_xact_lock_shared(3, 4), zk_xact_lock(5, 6) > 0;
SELECT name, mode, scope FROM zk_locks ORDER BY name;
COMMIT;
SELECT zk_lock_shared(10) > 0, zk_try_lock(11), zk_try_lock_shared(12),
       zk_lock_shared(13, 14) > 0, zk_try_lock(15, 16);
SELECT zk_unlock_shared(10), zk_unlock(11), zk_unlock_shared(12),
       zk_unlock_shared(13, 14), zk_unlock(15, 16);
SELECT count(*) FROM zk_locks;
-- NULL keys give NULL, as a NULL name does
SELECT zk_lock(NULL::bigint) IS NULL, zk_try_lock(NULL::int, 1) IS NULL,
       zk_unlock(NULL::bigint) IS NULL;

-- call forms: untyped timeouts still read as intervals next to (int, int)
SELECT zk_try_lock('forms', '1s'), zk_try_lock('forms', NULL),
       zk_try_lock(name => 'forms', timeout => '2s'),
       zk_try_lock('forms', interval '1s'), zk_lock('forms', '1 min') > 0;
SELECT zk_try_lock(17, timeout => '1s'), zk_try_lock(17::bigint, '1s'),
       zk_try_lock(18, 19, '1s');
SELECT name, holds FROM zk_locks ORDER BY name;
SELECT zk_lock('forms', 'not an interval');
\echo :LAST_ERROR_SQLSTATE
SELECT zk_unlock_all();

-- DISCARD ALL releases session locks, as it releases advisory locks
SELECT zk_lock('discarded') > 0, zk_lock(77) > 0, zk_lock_shared('discarded') > 0;
DISCARD ALL;
SELECT count(*) FROM zk_locks;
SELECT count(*) FROM zk_lock_queue('discarded');
-- not inside a transaction block: refused there, nothing released
SELECT zk_lock('kept') > 0;
BEGIN;
DISCARD ALL;
ROLLBACK;
SELECT name FROM zk_locks;
SELECT zk_unlock('kept');

-- DROP EXTENSION is refused while this backend holds a lock
SELECT zk_lock('held-at-drop') > 0;
DROP EXTENSION zklock;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT zk_unlock_all();
SELECT zk_xact_lock('xact-at-drop') > 0;
DROP EXTENSION zklock;
ROLLBACK;
SELECT count(*) FROM zk_locks;
DROP EXTENSION zklock;
CREATE EXTENSION zklock;
SELECT zk_lock('after-recreate') > 0;
SELECT zk_unlock('after-recreate');

-- zklock.root: what ZooKeeper would refuse is refused when it is set
SET zklock.root = E'/ctl\x01char';
SET zklock.root = E'/del\x7f';
SET zklock.root = U&'/private-use-\E000';
SET zklock.root = U&'/emoji-\+01F600';
SET zklock.root = U&'/special-\FFF0';
SELECT '/' || string_agg('d' || i, '/') AS deep FROM generate_series(1, 33) i \gset
SET zklock.root = :'deep';
SELECT '/' || repeat('x', 1100) AS long \gset
SET zklock.root = :'long';
\echo :LAST_ERROR_SQLSTATE
-- what it accepts works, non-ASCII letters included
SET zklock.root = '/zklock-regress/ünï/çødé';
SELECT zk_lock('accented-root') > 0;
SELECT node LIKE '/zklock-regress/ünï/çødé/accented-root/%' FROM zk_locks;
SELECT zk_unlock('accented-root');
SELECT '/' || string_agg('d' || i, '/') AS deep32 FROM generate_series(1, 32) i \gset
SET zklock.root = :'deep32';
SELECT zk_lock('deep-root') > 0;
SELECT zk_unlock('deep-root');
RESET zklock.root;

-- zklock.hosts: a chroot in ZooKeeper's own tree, or one ZooKeeper refuses
SET zklock.hosts = '127.0.0.1:2181/zookeeper';
SET zklock.hosts = 'zk1:2181,zk2:2181/zookeeper/config';
SET zklock.hosts = '127.0.0.1:2181/a//b';
\echo :LAST_ERROR_SQLSTATE
SET zklock.hosts = '127.0.0.1:2181/';
RESET zklock.hosts;
-- a chroot that does not exist: an error naming it, nothing created
\c
SELECT set_config('zklock.hosts', current_setting('zklock.hosts') || '/no-such-chroot', false) IS NOT NULL;
SELECT zk_lock('chrooted');
\echo :LAST_ERROR_SQLSTATE
SELECT zk_try_xact_lock(5);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM zk_locks;
RESET zklock.hosts;
\c
SELECT count(*) FROM zk_lock_queue('chrooted');
SELECT zk_lock('chrooted') > 0, zk_unlock('chrooted');

-- the README's grant of every acquiring form
CREATE ROLE regress_batch_jobs;
DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT p.oid FROM pg_proc p
             JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
            WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'zklock')
              AND p.proname ~ '^zk_(try_)?(xact_)?lock(_shared)?$'
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO regress_batch_jobs', f);
  END LOOP;
END $$;
SELECT count(*) FILTER (WHERE has_function_privilege('regress_batch_jobs', p.oid, 'EXECUTE')) AS granted,
       count(*) FILTER (WHERE has_function_privilege('public', p.oid, 'EXECUTE')) AS public
  FROM pg_proc p
 WHERE p.proname ~ '^zk_(try_)?(xact_)?lock(_shared)?$';
SET ROLE regress_batch_jobs;
SELECT zk_try_lock(5, 6), zk_try_lock('granted-all', '1s'), zk_lock(7) > 0;
SELECT zk_unlock_all();
RESET ROLE;
DROP OWNED BY regress_batch_jobs;
DROP ROLE regress_batch_jobs;

-- zklock.fleet_advisory_keys: PostgreSQL's own pg_advisory_* functions on
-- a listed key take zklock's lock of that key too, the lock zk_lock(key)
-- takes, with PostgreSQL's results, counting and scopes; other keys stay
-- local.  zklock is loaded here by LOAD (a deployer's backend loads it by
-- shared_preload_libraries or session_preload_libraries).
LOAD 'zklock';
SET zklock.fleet_advisory_keys = '42, 1:2';
SELECT pg_advisory_lock(42), pg_advisory_lock(42), pg_advisory_lock(1, 2);
SELECT name, mode, scope, holds FROM zk_locks ORDER BY name;
SELECT mode, holds, pid = pg_backend_pid() AS own_pid FROM zk_lock_queue(42);
SELECT mode, holds FROM zk_lock_queue(1, 2);
-- pg_locks still shows PostgreSQL's own advisory locks
SELECT classid, objid, objsubid, mode, granted FROM pg_locks
 WHERE locktype = 'advisory' AND pid = pg_backend_pid() ORDER BY objsubid;
SELECT pg_advisory_unlock(42), pg_advisory_unlock(1, 2);
SELECT name, holds FROM zk_locks;
SELECT pg_advisory_unlock(42);
SELECT pg_advisory_unlock(42);
SELECT count(*) FROM zk_locks;
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- a key the setting does not list stays local; (int, int) 0:42 is not 42
SELECT pg_advisory_lock(43), pg_advisory_lock(0, 42), pg_try_advisory_lock(1, 3);
SELECT count(*) FROM zk_locks;
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT pg_advisory_unlock_all();
-- every form on a listed key, shared and exclusive, session and transaction
SELECT pg_advisory_lock_shared(42), pg_try_advisory_lock(1, 2),
       pg_try_advisory_lock_shared(42), pg_advisory_lock_shared(1, 2);
SELECT name, mode, scope, holds FROM zk_locks ORDER BY name, mode;
SELECT mode, holds FROM zk_lock_queue(42);
SELECT pg_advisory_unlock_shared(42), pg_advisory_unlock_shared(42),
       pg_advisory_unlock(1, 2), pg_advisory_unlock_shared(1, 2);
SELECT count(*) FROM zk_locks;
BEGIN;
SELECT pg_advisory_xact_lock(42), pg_advisory_xact_lock_shared(1, 2),
       pg_try_advisory_xact_lock(1, 2), pg_try_advisory_xact_lock_shared(42);
SELECT name, mode, scope, holds FROM zk_locks ORDER BY name, mode;
SELECT mode FROM zk_lock_queue(42) ORDER BY mode;
COMMIT;
SELECT count(*) FROM zk_locks;
SELECT count(*) FROM zk_lock_queue(42);
BEGIN;
SELECT pg_advisory_xact_lock_shared(42), pg_advisory_xact_lock(1, 2),
       pg_try_advisory_xact_lock(42), pg_try_advisory_xact_lock_shared(1, 2);
SELECT name, mode, scope FROM zk_locks ORDER BY name, mode;
ROLLBACK;
SELECT count(*) FROM zk_locks;
-- pg_advisory_unlock_all releases the routed session holds, and only those
SELECT pg_advisory_lock(42), pg_advisory_lock(42), pg_advisory_lock_shared(1, 2),
       zk_lock('not-routed') > 0;
SELECT pg_advisory_unlock_all();
SELECT name, holds FROM zk_locks;
SELECT zk_unlock('not-routed');
-- and quietly, as PostgreSQL's: a routed hold whose ZooKeeper half is gone
-- already (zk_unlock_all released it) gives no WARNING
SELECT pg_advisory_lock(42), pg_advisory_lock_shared(1, 2), zk_unlock_all();
SELECT pg_advisory_unlock_all();
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- NULL keys give NULL, as PostgreSQL's do
SELECT pg_advisory_lock(NULL::bigint) IS NULL, pg_try_advisory_lock(NULL, 2) IS NULL,
       pg_advisory_unlock(NULL::bigint) IS NULL;
-- however the call is written: qualified, under a tool's search_path, in a
-- prepared statement, PL/pgSQL, an SQL function or a view
SET search_path = 'sqitch';
SELECT pg_catalog.pg_try_advisory_lock(42), pg_try_advisory_lock(42);
RESET search_path;
SELECT name, holds FROM zk_locks;
SELECT pg_advisory_unlock_all();
PREPARE adv(bigint) AS SELECT pg_try_advisory_lock($1);
EXECUTE adv(42);
SELECT name, holds FROM zk_locks;
DO $$
DECLARE
  got boolean;
BEGIN
  PERFORM pg_advisory_unlock(42);
  got := pg_try_advisory_lock(42);    -- an assignment: a simple expression
  IF got AND (SELECT holds FROM zk_locks WHERE name = 'key:42') = 1
     AND pg_advisory_unlock(42) THEN
    PERFORM pg_advisory_lock_shared(42);
  END IF;
END $$;
SELECT name, mode, holds FROM zk_locks;
CREATE FUNCTION regress_adv_unlock(k bigint) RETURNS boolean
  LANGUAGE sql AS 'SELECT 1; SELECT pg_advisory_unlock_shared(k)';
CREATE VIEW regress_adv_view AS SELECT pg_try_advisory_lock(1, 2) AS got;
SELECT regress_adv_unlock(42), got FROM regress_adv_view;
SELECT name, mode, holds FROM zk_locks;
SELECT pg_advisory_unlock(1, 2);
-- a one-SELECT SQL function, which the planner inlines into the query,
-- and one with a SQL-standard body, inlined too
CREATE FUNCTION regress_adv_inlined(k bigint) RETURNS boolean
  LANGUAGE sql AS 'SELECT pg_try_advisory_lock(k)';
CREATE FUNCTION regress_adv_atomic(k bigint) RETURNS boolean
  LANGUAGE sql RETURN pg_advisory_unlock(k);
EXPLAIN (VERBOSE, COSTS OFF) SELECT regress_adv_inlined(42);
SELECT regress_adv_inlined(42) FROM generate_series(1, 2);
SELECT name, holds FROM zk_locks;
SELECT regress_adv_atomic(42), regress_adv_atomic(42);
SELECT count(*) FROM zk_locks;
DROP FUNCTION regress_adv_inlined(bigint);
DROP FUNCTION regress_adv_atomic(bigint);
-- the plan decides nothing: one cached before the setting changed follows it
EXECUTE adv(44);
SELECT count(*) FROM zk_locks;
SELECT pg_advisory_unlock(44);
SET zklock.fleet_advisory_keys = '44';
EXECUTE adv(44);
SELECT name, holds FROM zk_locks;
-- a routed hold is released by unlock even once the setting no longer lists it
RESET zklock.fleet_advisory_keys;
SELECT pg_advisory_unlock(44);
SELECT count(*) FROM zk_locks;
-- what a call becomes
EXPLAIN (VERBOSE, COSTS OFF) SELECT pg_advisory_lock(42);
-- '*' lists every key
SET zklock.fleet_advisory_keys = '*';
SELECT pg_try_advisory_lock(-5), pg_try_advisory_lock(2147483647, -2147483648);
SELECT name FROM zk_locks ORDER BY name;
-- DISCARD ALL releases both halves
DISCARD ALL;
SELECT count(*) FROM zk_locks;
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SET zklock.fleet_advisory_keys = '*';
SELECT pg_advisory_unlock(-5);
-- only a superuser sets it (ALTER ROLE ... SET for a deployer's role)
CREATE ROLE regress_deployer;
SET ROLE regress_deployer;
SET zklock.fleet_advisory_keys = '42';
\echo :LAST_ERROR_SQLSTATE
SELECT pg_try_advisory_lock(42), pg_advisory_unlock(42);
RESET ROLE;
DROP FUNCTION regress_adv_unlock(bigint);
DROP VIEW regress_adv_view;
DROP ROLE regress_deployer;
RESET zklock.fleet_advisory_keys;
