--
-- Scopes, like PostgreSQL's advisory locks: transaction locks at commit,
-- abort and ROLLBACK TO; session locks ignore ROLLBACK; PREPARE refused.
--
CREATE EXTENSION IF NOT EXISTS zklock;
CREATE VIEW held AS SELECT name, mode, scope, holds FROM zk_locks ORDER BY 1, 2, 3;

-- transaction locks go at commit
BEGIN;
SELECT zk_xact_lock('sc-x') > 0, zk_xact_lock('sc-x') > 0, zk_try_xact_lock_shared('sc-x');
SELECT * FROM held;
COMMIT;
SELECT * FROM held;

-- and at abort
BEGIN;
SELECT zk_xact_lock_shared('sc-x') > 0, zk_try_xact_lock('sc-y', '2s');
SELECT * FROM held;
ROLLBACK;
SELECT * FROM held;

-- outside a transaction block a transaction lock lasts one statement
SELECT zk_xact_lock('sc-x') > 0, (SELECT count(*) FROM zk_locks) AS during;
SELECT * FROM held;

-- session locks ignore ROLLBACK
BEGIN;
SELECT zk_lock('sc-s') > 0;
ROLLBACK;
SELECT * FROM held;

-- one node serves both scopes: same token, released when both are gone
BEGIN;
SELECT zk_xact_lock('sc-s') = (SELECT token FROM zk_locks WHERE scope = 'session') AS same_node;
SELECT * FROM held;
COMMIT;
SELECT * FROM held;
SELECT zk_unlock('sc-s');
SELECT * FROM held;

-- zk_unlock does not release transaction locks
BEGIN;
SELECT zk_xact_lock('sc-t') > 0;
SELECT zk_unlock('sc-t');
SELECT * FROM held;
COMMIT;

-- savepoints: ROLLBACK TO releases the locks taken after it
BEGIN;
SELECT zk_xact_lock('sp-1') > 0;
SAVEPOINT a;
SELECT zk_xact_lock('sp-2') > 0, zk_xact_lock('sp-1') > 0;
SELECT * FROM held;
ROLLBACK TO a;
SELECT * FROM held;
-- RELEASE moves holds to the parent, so a later ROLLBACK TO an outer
-- savepoint releases them and an inner one does not
SAVEPOINT b;
SAVEPOINT c;
SELECT zk_xact_lock('sp-3') > 0;
RELEASE c;
SAVEPOINT d;
SELECT zk_xact_lock_shared('sp-3') > 0;
ROLLBACK TO d;
SELECT * FROM held;
ROLLBACK TO b;
SELECT * FROM held;
-- a session lock taken in a rolled-back savepoint stays
SAVEPOINT e;
SELECT zk_lock('sp-session') > 0;
ROLLBACK TO e;
SELECT * FROM held;
COMMIT;
SELECT * FROM held;
SELECT zk_unlock('sp-session');

-- an error inside a subtransaction releases its locks
BEGIN;
SAVEPOINT f;
SELECT zk_xact_lock('sp-err') > 0;
SELECT 1/0;
ROLLBACK TO f;
SELECT * FROM held;
COMMIT;

-- PREPARE TRANSACTION with a transaction lock is refused
BEGIN;
SELECT zk_xact_lock('sc-prep') > 0;
PREPARE TRANSACTION 'zk_prep';
SELECT * FROM held;
-- without one it works, with session locks held too (on a server with
-- max_prepared_transactions = 0, as make installcheck may meet, PostgreSQL
-- refuses it: zklock_scopes_1.out, and _2.out for 15's hint)
SELECT zk_lock('sc-prep-session') > 0;
BEGIN;
SELECT 1;
PREPARE TRANSACTION 'zk_prep_ok';
COMMIT PREPARED 'zk_prep_ok';
SELECT zk_unlock_all();
SELECT * FROM held;
DROP VIEW held;
