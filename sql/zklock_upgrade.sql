--
-- Upgrades: from 1.0, 1.1 and 1.2, ALTER EXTENSION zklock UPDATE adds the
-- later surface (integer keys in 1.1, sets in 1.2, the pg_advisory_*
-- wrappers in 1.3) with the 1.0 privilege rules, and a lock held across it
-- stays held.
--
DROP EXTENSION IF EXISTS zklock;
CREATE EXTENSION zklock VERSION '1.0';
SELECT extversion FROM pg_extension WHERE extname = 'zklock';
-- 1.0 has no integer keys
SELECT zk_lock(42);
\echo :LAST_ERROR_SQLSTATE
-- a lock held across the update stays held and releasable
SELECT zk_lock('held-across-update') > 0;
ALTER EXTENSION zklock UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'zklock';
SELECT name, holds, state FROM zk_locks;
SELECT zk_unlock('held-across-update');
SELECT zk_lock(42) > 0, zk_unlock(42);
SELECT array_length(zk_lock(ARRAY['up-a', 'up-b']), 1), zk_unlock(ARRAY['up-a', 'up-b']);

-- what the update left: every function, its language, strictness and
-- whether PUBLIC may call it (acquiring forms must not be)
SELECT p.oid::regprocedure AS function, l.lanname, p.proisstrict,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_call
  FROM pg_proc p
  JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
  JOIN pg_language l ON l.oid = p.prolang
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'zklock')
 ORDER BY p.oid::regprocedure::text;

-- Upgrade from 1.1: sets arrive, a lock held across the update stays held
DROP EXTENSION zklock;
CREATE EXTENSION zklock VERSION '1.1';
SELECT extversion FROM pg_extension WHERE extname = 'zklock';
-- 1.1 has no sets
SELECT zk_lock(ARRAY['up-a']);
\echo :LAST_ERROR_SQLSTATE
SELECT zk_lock(43) > 0;
ALTER EXTENSION zklock UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'zklock';
SELECT name, holds, state FROM zk_locks;
SELECT zk_unlock(ARRAY[43]);
SELECT t[1] > 0 AND t[2] > 0 AS tokens FROM zk_xact_lock(ARRAY[44, 45]) AS t;
SELECT count(*) FROM zk_locks;
-- the same functions, with the same privileges, as the update from 1.0
SELECT p.oid::regprocedure AS function, l.lanname, p.proisstrict,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_call
  FROM pg_proc p
  JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
  JOIN pg_language l ON l.oid = p.prolang
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'zklock')
   AND p.proname IN ('zk_lock', 'zk_try_xact_lock_shared', 'zk_unlock')
 ORDER BY p.oid::regprocedure::text;

-- Upgrade from 1.2: the wrappers pg_advisory_* calls become arrive.
-- Before them a listed key's calls stay PostgreSQL's alone; once the
-- update is done they are routed, in this session too.
DROP EXTENSION zklock;
CREATE EXTENSION zklock VERSION '1.2';
LOAD 'zklock';
SET zklock.fleet_advisory_keys = '46';
SELECT pg_advisory_lock(46);
SELECT count(*) FROM zk_locks;
SELECT zk_lock(47) > 0;
ALTER EXTENSION zklock UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'zklock';
SELECT name, holds, state FROM zk_locks;
SELECT pg_advisory_unlock(46);
SELECT pg_advisory_lock(46);
SELECT name, holds FROM zk_locks ORDER BY name;
SELECT pg_advisory_unlock(46), zk_unlock(47);
SELECT count(*) FROM zk_locks;
-- what 1.3 adds: PUBLIC may call every wrapper, as it may the builtins
SELECT p.oid::regprocedure AS function, l.lanname, p.proisstrict, p.proparallel,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_call
  FROM pg_proc p
  JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
  JOIN pg_language l ON l.oid = p.prolang
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'zklock')
   AND p.proname LIKE 'zk\_fleet\_%advisory%'
 ORDER BY p.oid::regprocedure::text;
-- without the extension in this database the calls are left alone
DROP EXTENSION zklock;
SELECT pg_advisory_lock(46), pg_try_advisory_lock(46), pg_advisory_unlock(46),
       pg_advisory_unlock(46);
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
CREATE EXTENSION zklock;
SELECT pg_advisory_lock(46);
SELECT name FROM zk_locks;
SELECT pg_advisory_unlock_all();
SELECT count(*) FROM zk_locks;
RESET zklock.fleet_advisory_keys;
