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
