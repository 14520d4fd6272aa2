# zklock: cluster-wide advisory locks backed by a ZooKeeper ensemble.
#
#   make deps       install what is missing from Debian's packages (as root)
#   make            build (PGXS)
#   make demo       ZooKeeper ensemble + two PostgreSQL clusters, see README
#   make demo-stop  stop what make demo started
#   make test       every test suite; ends with "N passed, N failed"
#   make bench      benchmarks under bench/

EXTENSION = zklock
EXTVERSION = 1.1

MODULE_big = zklock
OBJS = src/deadlock.o src/guc.o src/lockset.o src/names.o src/owner.o src/recipe.o src/semaphore.o src/session.o \
	src/session_cleanup.o src/session_lease.o src/session_log.o \
	src/session_request.o src/session_wait.o src/sql_api.o src/zklock.o

DATA = zklock--1.0.sql zklock--1.0--1.1.sql
PGFILEDESC = "zklock - cluster-wide advisory locks on ZooKeeper"

# MODULE_big, not MODULES: PGXS ignores SHLIB_LINK for MODULES.  The
# multithreaded client sends heartbeats while the backend is busy.
SHLIB_LINK = -lzookeeper_mt
PG_CPPFLAGS = -DTHREADED
# No JIT bitcode: nothing here is worth inlining, and it needs clang.
with_llvm = no

# pg_regress suites, run against a temporary instance configured by
# test/run_regress.sh with a one-server ensemble.
REGRESS = zklock_api zklock_scopes zklock_errors zklock_parity zklock_upgrade

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
ifeq ($(PGXS),)
# Not installed yet: only the targets that install it can run.
all install:
	@echo "pg_config not found: run 'make deps' first" >&2; exit 1
else
include $(PGXS)
endif

# PostgreSQL 15's own headers trip -Wunused-parameter under -Wextra; keep
# the warnings for our code and read the server headers as system headers.
ifneq ($(PGXS),)
override CPPFLAGS := $(patsubst -I%,-isystem %,$(filter -I$(includedir_server)%,$(CPPFLAGS))) \
	$(filter-out -I$(includedir_server)%,$(CPPFLAGS))
endif

# PGXS tracks no header dependencies: every object is rebuilt when any of
# the extension's headers changes (a struct that changes size under an
# object built before would corrupt memory).
$(OBJS): $(wildcard src/*.h)

.PHONY: deps demo demo-stop test unit bench

deps:
	@sh test/deps.sh

demo: deps
	@sh test/demo.sh start

demo-stop:
	@sh test/demo.sh stop

# Unit tests of the pure C helpers (no PostgreSQL, no ZooKeeper).
# The owner parser reads data written by any client: it is fuzzed under
# AddressSanitizer and UBSan.
unit: test/unit/test_names test/unit/test_owner
	@./test/unit/test_names
	@./test/unit/test_owner

test/unit/test_names: test/unit/test_names.c test/unit/tap.h src/names.c src/names.h
	$(CC) -Wall -Wextra -Werror -O1 -I src -o $@ test/unit/test_names.c src/names.c

test/unit/test_owner: test/unit/test_owner.c test/unit/tap.h src/owner.c src/owner.h
	$(CC) -Wall -Wextra -Werror -O1 -g -fsanitize=address,undefined \
		-fno-sanitize-recover=all -I src -o $@ test/unit/test_owner.c src/owner.c

test: deps
	@sh test/run_all.sh

bench: deps
	@sh bench/run.sh

EXTRA_CLEAN = test/unit/test_names test/unit/test_owner results regression.diffs regression.out tmp_check
