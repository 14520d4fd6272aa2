--
-- Bad input: a clear error with the right SQLSTATE, and nothing left
-- behind.
--
CREATE EXTENSION IF NOT EXISTS zklock;
\set VERBOSITY default

SELECT zk_lock('');
\echo :LAST_ERROR_SQLSTATE
SELECT zk_try_xact_lock_shared('');
\echo :LAST_ERROR_SQLSTATE
SELECT zk_lock(repeat('x', 257));
\echo :LAST_ERROR_SQLSTATE
SELECT zk_lock(repeat('é', 129));
\echo :LAST_ERROR_SQLSTATE
SELECT zk_lock('neg', '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT zk_try_lock('neg', '-1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT zk_unlock('');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM zk_locks;

-- unlocking what is not held: false and a WARNING
SELECT zk_unlock('never-taken'), zk_unlock_shared('never-taken');

-- zklock.root must be a sane absolute path
SET zklock.root = 'relative';
SET zklock.root = '/';
SET zklock.root = '/a//b';
SET zklock.root = '/a/../b';
SET zklock.root = '/zookeeper/quota';
SET zklock.root = '/trailing/';
\echo :LAST_ERROR_SQLSTATE
SET zklock.root = '/zklock-regress/nested';
SELECT zk_lock('rooted') > 0;
SELECT node LIKE '/zklock-regress/nested/rooted/%' AS under_new_root FROM zk_locks;
SELECT zk_unlock('rooted');
RESET zklock.root;

-- settings: the reserved prefix, units, bounds
SET zklock.no_such_setting = 1;
-- out of range (the message's wording differs between majors: the code only)
\set VERBOSITY sqlstate
SET zklock.session_timeout = '50ms';
\set VERBOSITY default
SET zklock.connect_timeout = '2s';
SHOW zklock.connect_timeout;
RESET zklock.connect_timeout;
SET zklock.on_lock_loss = 'ignore';
SET zklock.on_lock_loss = 'terminate';
SHOW zklock.on_lock_loss;
RESET zklock.on_lock_loss;
SET zklock.node_naming = 'kazoo';
-- zklock.auth: a malformed value is refused when a session opens, not echoed
\c
SET zklock.auth = 'no-colon-here';
SELECT zk_lock('bad-auth');
\echo :LAST_ERROR_SQLSTATE
RESET zklock.auth;

-- zklock.hosts unset: an error naming the setting (in a new backend)
\c
SET zklock.hosts = '';
SELECT zk_lock('no-hosts');
\echo :LAST_ERROR_SQLSTATE
RESET zklock.hosts;

-- an unreachable ensemble: an 08 error within connect_timeout, no hang
\c
SET zklock.hosts = '127.0.0.1:1';
SET zklock.connect_timeout = '500ms';
SELECT clock_timestamp() AS t0 \gset
SELECT zk_lock('unreachable');
\echo :LAST_ERROR_SQLSTATE
SELECT clock_timestamp() - :'t0' < interval '5s' AS bounded;
-- the session is not left half-open: with good hosts the next call works
RESET zklock.hosts;
SELECT zk_lock('reachable-again') > 0;
SELECT zk_unlock('reachable-again');

-- a connect string that cannot be read is refused when it is set (zklock
-- loaded); the port defaults to 2181, an IPv6 address goes in brackets
\c
LOAD 'zklock';
SET zklock.hosts = ',,,';
\echo :LAST_ERROR_SQLSTATE
SET zklock.hosts = '127.0.0.1:99999';
SET zklock.hosts = 'zk1:2181,zk2:2181,';  -- an empty entry is skipped
SET zklock.hosts = '::1:2181';
SET zklock.hosts = '[fe80::1]:2181';
SET zklock.hosts = '[zk1]:2181';
SET zklock.hosts = 'zk1:2181, zk2 , [::1], [2001:db8::7]:2182/app';
SHOW zklock.hosts;
RESET zklock.hosts;

-- privileges: hosts and root are superuser-only; taking locks needs a grant
CREATE ROLE regress_zk_user;
SET ROLE regress_zk_user;
SET zklock.hosts = '127.0.0.1:2181';
\echo :LAST_ERROR_SQLSTATE
SET zklock.root = '/elsewhere';
SET zklock.auth = 'someone:secret';
-- not for others (the message's wording differs between majors: the code only)
\set VERBOSITY sqlstate
SHOW zklock.auth;
\set VERBOSITY default
SELECT count(*) FROM pg_settings WHERE name = 'zklock.auth';
SET zklock.node_naming = 'readwrite';
SELECT zk_lock('not-granted');
\echo :LAST_ERROR_SQLSTATE
SELECT zk_unlock('not-granted');
SELECT count(*) FROM zk_locks;
RESET ROLE;
GRANT EXECUTE ON FUNCTION zk_lock(text, interval) TO regress_zk_user;
SET ROLE regress_zk_user;
SELECT zk_lock('granted') > 0;
SELECT zk_unlock('granted');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION zk_lock(text, interval) FROM regress_zk_user;
DROP ROLE regress_zk_user;

-- semaphores: every refusal with its SQLSTATE
SELECT zk_semaphore('sem-bad', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT zk_try_semaphore('sem-bad', -3);
\echo :LAST_ERROR_SQLSTATE
SELECT zk_semaphore('', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT zk_semaphore('sem-bad', 1, '-1s');
\echo :LAST_ERROR_SQLSTATE
SELECT zk_semaphore(NULL, 1) IS NULL AS null_name, zk_semaphore('sem-bad', NULL) IS NULL AS null_max;
-- the one lease of max 1 is ours: no wait can end it (a timeout of 0: 55P03,
-- any other: 40P01, this backend would wait for itself)
SELECT zk_semaphore('sem-full', 1) > 0 AS leased;
SELECT zk_try_semaphore('sem-full', 1);
SELECT zk_semaphore('sem-full', 1, '0');
\echo :LAST_ERROR_SQLSTATE
SELECT zk_semaphore('sem-full', 1, '10s');
\echo :LAST_ERROR_SQLSTATE
SELECT zk_semaphore_release('sem-full');
SELECT zk_semaphore_release('sem-full');
SELECT zk_semaphore_release('sem-never');
SELECT count(*) FROM zk_locks;

-- statistics live in shared memory: without zklock in
-- shared_preload_libraries the views say so, with a hint
\set VERBOSITY default
SELECT * FROM zk_stat_locks;
\echo :LAST_ERROR_SQLSTATE
SELECT sessions_opened FROM zk_stat_sessions;
SELECT zk_stat_reset();
\set VERBOSITY terse

-- zklock.fleet_advisory_keys: a value that is not a key list is refused
-- when it is set, with the form in a hint
LOAD 'zklock';
\set VERBOSITY default
SET zklock.fleet_advisory_keys = 'abc';
\echo :LAST_ERROR_SQLSTATE
SET zklock.fleet_advisory_keys = '9223372036854775808';
\echo :LAST_ERROR_SQLSTATE
SET zklock.fleet_advisory_keys = '1:2:3';
\echo :LAST_ERROR_SQLSTATE
SET zklock.fleet_advisory_keys = '2147483648:1';
SET zklock.fleet_advisory_keys = '42,,43';
SET zklock.fleet_advisory_keys = '4 2';
SHOW zklock.fleet_advisory_keys;
-- what it accepts
SET zklock.fleet_advisory_keys = ' 75474063 , -9223372036854775808, 7:-42 ';
SHOW zklock.fleet_advisory_keys;
-- blanks inside a pair too; an unquoted list (GUC_LIST_INPUT), as
-- ALTER ROLE ... SET takes it
SET zklock.fleet_advisory_keys = '7 : 8, 9';
SHOW zklock.fleet_advisory_keys;
SET zklock.fleet_advisory_keys = 42, -43;
SHOW zklock.fleet_advisory_keys;
CREATE ROLE regress_list_keys;
ALTER ROLE regress_list_keys SET zklock.fleet_advisory_keys = 75474063, 44;
SELECT setconfig FROM pg_db_role_setting
 WHERE setrole = 'regress_list_keys'::regrole;
DROP ROLE regress_list_keys;
-- a trailing comma is an empty entry too
SET zklock.fleet_advisory_keys = '42,';
SET zklock.fleet_advisory_keys = '*';
SET zklock.fleet_advisory_keys = '';
RESET zklock.fleet_advisory_keys;
\set VERBOSITY terse
