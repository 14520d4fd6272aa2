--
-- Several locks as one: the array forms.  Held names are ordinary locks
-- afterwards (re-entry, scopes, savepoints, zk_locks, DISCARD ALL); a
-- name given twice counts once; NULL and empty arrays as the single forms
-- treat NULL and empty names.
--
CREATE EXTENSION IF NOT EXISTS zklock;
\set VERBOSITY default
CREATE VIEW held_sets AS SELECT name, mode, scope, holds FROM zk_locks ORDER BY 1, 2, 3;

-- tokens in the order of the names; a duplicate gets its name's token
SELECT t[1] = t[3] AS dup_same, t[1] <> t[2] AS distinct_names, array_length(t, 1)
  FROM zk_lock(ARRAY['set-b', 'set-a', 'set-b']) AS t;
SELECT * FROM held_sets;
-- the token of each name is the one zk_locks shows
SELECT zk_lock(ARRAY['set-a'])  = ARRAY[(SELECT token FROM zk_locks WHERE name = 'set-a')] AS same_token;
SELECT * FROM held_sets;
-- re-entry: a set of held names and a new one gains a hold each
SELECT array_length(zk_lock(ARRAY['set-a', 'set-c']), 1);
SELECT * FROM held_sets;
SELECT zk_unlock(ARRAY['set-a', 'set-a', 'set-b']);
SELECT * FROM held_sets;
SELECT zk_unlock_all();

-- transaction sets: gone at commit, at abort, at ROLLBACK TO
BEGIN;
SELECT array_length(zk_xact_lock(ARRAY['set-x', 'set-y']), 1);
SAVEPOINT s1;
SELECT zk_try_xact_lock(ARRAY['set-y', 'set-z']);
SELECT * FROM held_sets;
ROLLBACK TO s1;
SELECT * FROM held_sets;
COMMIT;
SELECT * FROM held_sets;
BEGIN;
SELECT array_length(zk_xact_lock_shared(ARRAY['set-x', 'set-y']), 1);
SELECT zk_try_xact_lock_shared(ARRAY['set-y', 'set-z']);
SELECT * FROM held_sets;
ROLLBACK;
SELECT * FROM held_sets;

-- shared sets, and their unlock
SELECT array_length(zk_lock_shared(ARRAY['set-s1', 'set-s2']), 1),
       zk_try_lock_shared(ARRAY['set-s2', 'set-s3']);
SELECT * FROM held_sets;
SELECT zk_unlock_shared(ARRAY['set-s1', 'set-s2']), zk_unlock_shared(ARRAY['set-s3', 'set-s2']);
SELECT * FROM held_sets;

-- integer keys: the same locks as the single key forms
SELECT array_length(zk_lock(ARRAY[7, 8]::bigint[]), 1), zk_lock(7) > 0;
SELECT * FROM held_sets;
SELECT zk_unlock(ARRAY[8, 7]), zk_unlock(7);
SELECT * FROM held_sets;

-- DISCARD ALL releases session sets too
SELECT array_length(zk_lock(ARRAY['set-d1', 'set-d2']), 1);
DISCARD ALL;
SELECT count(*) FROM zk_locks;

-- NULL arrays and NULL elements give NULL and take nothing, as a NULL name
SELECT zk_lock(NULL::text[]) IS NULL AS a, zk_lock(ARRAY['set-n', NULL]) IS NULL AS b,
       zk_try_lock(ARRAY[NULL::text]) IS NULL AS c, zk_xact_lock(ARRAY[1, NULL]::bigint[]) IS NULL AS d,
       zk_unlock(NULL::text[]) IS NULL AS e, zk_unlock(ARRAY['set-n', NULL]) IS NULL AS f;
SELECT count(*) FROM zk_locks;

-- bad sets: the single forms' errors, nothing taken
SELECT zk_lock('{}'::text[]);
\echo :LAST_ERROR_SQLSTATE
SELECT zk_lock(ARRAY['set-ok', '']);
\echo :LAST_ERROR_SQLSTATE
SELECT zk_lock(ARRAY['set-ok', repeat('x', 300)]);
\echo :LAST_ERROR_SQLSTATE
SELECT zk_lock(ARRAY[['set-a', 'set-b'], ['set-c', 'set-d']]);
\echo :LAST_ERROR_SQLSTATE
SELECT zk_lock(array_agg('set-' || i)) FROM generate_series(1, 1001) AS i;
\echo :LAST_ERROR_SQLSTATE
SELECT zk_lock(ARRAY['set-ok'], interval '-1 s');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM zk_locks;
SELECT zk_unlock('{}'::text[]);
\echo :LAST_ERROR_SQLSTATE

-- call forms: an untyped literal is one name, an array needs its type
SELECT zk_try_lock('{set-a,set-b}'), zk_try_lock('{set-a,set-b}'::text[]),
       zk_try_lock(names => ARRAY['set-c'], timeout => '1s'),
       zk_try_lock(ARRAY['set-e'], '1s');
SELECT * FROM held_sets;
SELECT zk_unlock_all();
DROP VIEW held_sets;
