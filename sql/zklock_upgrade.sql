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
-- Only zklock's own wrappers are ever called.  With zklock at 1.2 in a
-- schema where a role may create, that role's functions of the wrappers'
-- names and signatures are not zklock's: the calls stay the builtins.
DROP EXTENSION zklock;
CREATE EXTENSION zklock VERSION '1.2';
CREATE ROLE regress_impostor;
GRANT CREATE ON SCHEMA public TO regress_impostor;
SET ROLE regress_impostor;
DO $$
DECLARE
  f text;
  a text;
BEGIN
  FOREACH f IN ARRAY ARRAY['advisory_lock', 'advisory_lock_shared',
      'advisory_xact_lock', 'advisory_xact_lock_shared', 'try_advisory_lock',
      'try_advisory_lock_shared', 'try_advisory_xact_lock',
      'try_advisory_xact_lock_shared', 'advisory_unlock',
      'advisory_unlock_shared'] LOOP
    FOREACH a IN ARRAY ARRAY['bigint', 'integer, integer'] LOOP
      EXECUTE format($f$CREATE FUNCTION public.zk_fleet_%s(%s) RETURNS %s
          LANGUAGE plpgsql AS 'BEGIN RAISE NOTICE ''impostor ran as %%'', current_user; RETURN %s; END'$f$,
        f, a,
        CASE WHEN f LIKE 'try%' OR f LIKE '%unlock%' THEN 'boolean' ELSE 'void' END,
        CASE WHEN f LIKE 'try%' OR f LIKE '%unlock%' THEN 'true' ELSE '' END);
    END LOOP;
  END LOOP;
  CREATE FUNCTION public.zk_fleet_advisory_unlock_all() RETURNS void
    LANGUAGE plpgsql AS 'BEGIN RAISE NOTICE ''impostor ran as %'', current_user; END';
END
$$;
RESET ROLE;
SELECT count(*) FROM pg_proc WHERE proname LIKE 'zk\_fleet\_%';
SELECT pg_try_advisory_lock(5), pg_advisory_unlock(5);
SELECT pg_advisory_lock(5), pg_advisory_unlock_all();
EXPLAIN (VERBOSE, COSTS OFF) SELECT pg_try_advisory_lock(5);
DROP OWNED BY regress_impostor;
REVOKE CREATE ON SCHEMA public FROM regress_impostor;
DROP ROLE regress_impostor;

-- A statement prepared before the wrappers exist is routed once they do:
-- after CREATE EXTENSION, and after ALTER EXTENSION UPDATE from 1.2.
SET zklock.fleet_advisory_keys = '48';
PREPARE adv_before AS SELECT pg_try_advisory_lock(48);
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE adv_before;
ALTER EXTENSION zklock UPDATE;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE adv_before;
EXECUTE adv_before;
SELECT name FROM zk_locks;
SELECT pg_advisory_unlock(48);
DROP EXTENSION zklock;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE adv_before;
CREATE EXTENSION zklock;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE adv_before;
EXECUTE adv_before;
SELECT name FROM zk_locks;
SELECT pg_advisory_unlock(48);
DEALLOCATE adv_before;
SELECT count(*) FROM zk_locks;

-- zklock in a schema of its own: a role without USAGE on it still calls
-- pg_advisory_* (running a wrapper needs EXECUTE only): an unlisted key
-- stays local, a listed one is routed.
DROP EXTENSION zklock;
CREATE SCHEMA regress_zk;
CREATE EXTENSION zklock SCHEMA regress_zk;
CREATE ROLE regress_no_usage;
SET zklock.fleet_advisory_keys = '49';
SET ROLE regress_no_usage;
SELECT pg_try_advisory_lock(50), pg_advisory_unlock(50);
SELECT pg_advisory_lock(49);
RESET ROLE;
SELECT name FROM regress_zk.zk_locks;
SET ROLE regress_no_usage;
SELECT pg_advisory_unlock(49);
RESET ROLE;
SELECT count(*) FROM regress_zk.zk_locks;
DROP ROLE regress_no_usage;
DROP EXTENSION zklock;
DROP SCHEMA regress_zk;
CREATE EXTENSION zklock;
RESET zklock.fleet_advisory_keys;
