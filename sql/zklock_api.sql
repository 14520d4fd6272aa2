--
-- The SQL surface on one backend: every function, tokens, re-entry counts,
-- names, the zk_locks view.  Tokens and paths vary, so only their
-- properties are shown.
--
CREATE EXTENSION zklock;
-- Its members, as \dx+ lists them, less the view's row type and its array:
-- PostgreSQL 18 makes them members of the extension too, 15 does not.
SELECT pg_describe_object(classid, objid, 0) AS member
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'zklock')
   AND pg_describe_object(classid, objid, 0) NOT LIKE 'type %'
 ORDER BY 1;

-- exclusive session lock: a positive token, the same on re-entry
SELECT zk_lock('api-a') AS tok \gset
SELECT :tok > 0 AS positive, zk_lock('api-a') = :tok AS same_token_on_reentry;
SELECT name, mode, scope, holds, state, token = :tok AS token_ok,
       node LIKE '/zklock/api-a/_c_%-lock-%' AS node_ok,
       acquired_at <= now() + interval '1 min' AS time_ok
  FROM zk_locks;

-- counted: two acquires need two unlocks; a third unlock warns
SELECT zk_unlock('api-a');
SELECT holds FROM zk_locks WHERE name = 'api-a';
SELECT zk_unlock('api-a');
SELECT zk_unlock('api-a');
SELECT count(*) FROM zk_locks;

-- a later acquisition gets a larger token (czxid grows ensemble-wide)
SELECT zk_lock('api-a') AS tok2 \gset
SELECT :tok2 > :tok AS token_grows;
SELECT zk_unlock('api-a');

-- try forms
SELECT zk_try_lock('api-b'), zk_try_lock('api-b', '1s'), zk_try_lock_shared('api-b');
SELECT name, mode, holds FROM zk_locks ORDER BY name, mode;
SELECT zk_unlock('api-b'), zk_unlock('api-b'), zk_unlock_shared('api-b');

-- shared session locks
SELECT zk_lock_shared('api-s') > 0 AS got, zk_lock_shared('api-s', '5s') > 0 AS again;
SELECT name, mode, holds, node LIKE '%-__READ__%' AS reader_node FROM zk_locks;
SELECT zk_unlock_shared('api-s'), zk_unlock_shared('api-s');
-- shared and exclusive are separate locks
SELECT zk_unlock_shared('api-s');
SELECT zk_lock('api-s') > 0;
SELECT zk_unlock_shared('api-s');
SELECT zk_unlock('api-s');

-- a backend never waits on its own nodes: shared, then exclusive, then shared
SELECT zk_lock_shared('api-own') > 0, zk_try_lock('api-own'), zk_try_lock_shared('api-own');
SELECT mode, holds FROM zk_locks WHERE name = 'api-own' ORDER BY mode;
SELECT zk_unlock_all();
SELECT count(*) FROM zk_locks;

-- zk_unlock_all releases every session hold, however many
SELECT zk_lock('api-u1') > 0, zk_lock('api-u1') > 0, zk_lock_shared('api-u2') > 0;
SELECT zk_unlock_all();
SELECT count(*) FROM zk_locks;
SELECT zk_unlock('api-u1');

-- any text is a name: slashes, dots, percent signs, spaces, Unicode
SELECT zk_lock(n) > 0 AS got
  FROM unnest(ARRAY['a/b/c', '..', '.', '%2F', 'two words', 'zookeeper',
                    'ünïcødé ✓', repeat('x', 256)]) AS n;
SELECT left(name, 12) AS name, octet_length(name) AS bytes,
       left(split_part(node, '/', 3), 40) AS directory,
       node LIKE '/zklock/%/_c_%' AS node_ok
  FROM zk_locks ORDER BY zk_locks.name;
SELECT zk_unlock_all();

-- NULL name gives NULL; NULL timeout means lock_timeout, else for ever
SELECT zk_lock(NULL) IS NULL, zk_lock_shared(NULL) IS NULL,
       zk_try_lock(NULL) IS NULL, zk_try_lock_shared(NULL) IS NULL,
       zk_xact_lock(NULL) IS NULL, zk_xact_lock_shared(NULL) IS NULL,
       zk_try_xact_lock(NULL) IS NULL, zk_try_xact_lock_shared(NULL) IS NULL,
       zk_unlock(NULL) IS NULL, zk_unlock_shared(NULL) IS NULL;
SELECT zk_lock('api-n', NULL) > 0, zk_try_lock('api-n', NULL);
SELECT zk_unlock_all();

-- every function is PARALLEL RESTRICTED
SELECT proname, proparallel, provolatile, proisstrict FROM pg_proc
 WHERE pronamespace = 'public'::regnamespace AND proname LIKE 'zk\_%'
 ORDER BY proname;

-- fleet view: the path a name maps to, the queue seen from ZooKeeper, the session
SELECT zk_lock_path('nightly-billing'), zk_lock_path('a/b c'), zk_lock_path(NULL) IS NULL;
SELECT zk_lock_path('');
SELECT state, session_id LIKE '0x%' AS has_id, server IS NOT NULL AS has_server,
       timeout_ms > 0 AS has_timeout, locks FROM zk_session();
SELECT zk_lock('api-q') > 0, zk_lock_shared('api-q2') > 0;
SELECT position, mode, holds, node = (SELECT node FROM zk_locks WHERE name = 'api-q') AS own_node,
       token = (SELECT token FROM zk_locks WHERE name = 'api-q') AS own_token,
       pid = pg_backend_pid() AS own_pid, database, "user",
       acquired_at <= now() + interval '1 min' AS time_ok,
       data LIKE '{"host":%' AS raw_data
  FROM zk_lock_queue('api-q');
SELECT locks FROM zk_session();
SELECT count(*) FROM zk_lock_queue('api-no-such-lock');
-- node naming for Curator's InterProcessReadWriteLock
SET zklock.node_naming = 'readwrite';
SELECT zk_lock('api-rw') > 0, zk_lock_shared('api-rw') > 0;
SELECT position, mode, holds, node ~ '/_c_[0-9a-f-]{36}-__WRIT__[0-9]{10}$' AS write_node,
       node ~ '/_c_[0-9a-f-]{36}-__READ__[0-9]{10}$' AS read_node
  FROM zk_lock_queue('api-rw');
RESET zklock.node_naming;
SELECT zk_unlock_all();
SELECT locks FROM zk_session();
