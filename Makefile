# zklock: cluster-wide advisory locks backed by a ZooKeeper ensemble.
#
# From a release (the dist zip, PGXN, the Debian source package), as any
# PGXS extension: the ZooKeeper C client's source travels in zookeeper/
# and is built first, into zkc-build/ (CMake, patch, OpenSSL's headers; no
# network, no Java, no root):
#   make            build (PGXS; PG_CONFIG=/path/to/pg_config picks the
#                   PostgreSQL)
#   make install    install (as the owner of PostgreSQL's directories)
#   make installcheck   the regression suites against the running server
#                   and the installed zklock, with ZKLOCK_HOSTS or a
#                   throwaway standalone ZooKeeper (test/installcheck.sh)
# From a clone, which carries no client source, as root the first time:
#   make deps       install what building needs from Debian's packages and
#                   build the TLS-capable ZooKeeper C client from Debian's
#                   source package (test/deps.sh build, test/build_zkc.sh)
#   make deb        the Debian source package and postgresql-NN-zklock, in
#                   deb/ (dpkg-buildpackage of the .dsc)
#   make dist       zklock-VERSION.zip at the top: the last commit and the
#                   client's source, the PGXN distribution
#   make demo       ZooKeeper ensemble + two PostgreSQL clusters, see README
#   make demo-stop  stop what make demo started
#   make test       every test suite on PostgreSQL 15 (the package make deb
#                   builds, installed with apt) and 18 with ZooKeeper 3.8
#                   servers, and four TAP tests on the last major again
#                   with ZooKeeper 3.9 servers; ends with "N passed, N failed"
#   make bench      benchmarks under bench/
# demo, test and bench install what they need on top of make deps
# (test/deps.sh says what each needs).
#
# Which PostgreSQL: PG_CONFIG=/path/to/pg_config, as for any PGXS extension;
# or PG=15 (Debian's) or PG=18 (built from Debian's source package into
# $(ZKLOCK_PG_CACHE)/pg/18 by test/build_pg.sh, which make deps runs when
# 18 is wanted).  make test without either runs on 15 and on 18.

EXTENSION = zklock
# The extension's version is default_version in zklock.control; it goes
# into the magic block (pg_get_loaded_modules() on 18).  A release is
# numbered in SemVer from it (1.2 is release 1.2.0; test/release.sh): the
# dist zip's name, META.json's versions (PGXN) and debian/changelog's
# upstream version, which are written by hand and must agree: make dist and
# make deb refuse otherwise, and test/t/005_version.pl checks them.
ZKLOCK_TOP := $(patsubst %/,%,$(dir $(abspath $(firstword $(MAKEFILE_LIST)))))
EXTVERSION := $(shell sed -n "s/^default_version = '\([^']*\)'.*/\1/p" \
	$(ZKLOCK_TOP)/zklock.control)

MODULE_big = zklock
OBJS = src/deadlock.o src/engine.o src/engine_set.o src/queue.o src/fleet.o src/guc.o src/hosts.o src/lockset.o src/names.o src/owner.o src/recipe.o src/semaphore.o src/session.o src/stats.o \
	src/session_cleanup.o src/session_clock.o src/session_lease.o src/session_log.o \
	src/session_request.o src/session_sasl.o src/session_state.o src/session_sync.o src/session_tls.o \
	src/session_wait.o src/sql_advisory.o src/sql_api.o src/sql_stats.o src/tls_shared.o src/zklock.o

DATA = zklock--1.0.sql zklock--1.0--1.1.sql zklock--1.1--1.2.sql zklock--1.2--1.3.sql
# zklock's licence and the notices of the client it links, installed with
# the extension under the documentation directory's extension/zklock/ (a
# directory of its own: DOCS would install them as extension/LICENSE, a
# name any extension may use)
ZKLOCK_DOCS = LICENSE NOTICE
PGFILEDESC = "zklock - cluster-wide advisory locks on ZooKeeper"

# MODULE_big, not MODULES: PGXS ignores SHLIB_LINK for MODULES.  The
# multithreaded client sends heartbeats while the backend is busy.
#
# The client is Apache's 3.8.0 C client with OpenSSL, Cyrus SASL
# (libsasl2, linked dynamically as OpenSSL is; zklock itself links MIT's
# GSS-API and krb5 for its Kerberos credentials) and the patches in
# test/zkc/ (Debian's libzookeeper_mt has no TLS), built by
# test/build_zkc.sh into $(ZKLOCK_ZKC): in a release from the source in
# zookeeper/ into zkc-build/zkc (the first make does it); in a clone,
# which carries no client source, by make deps from Debian's source
# package into $(ZKLOCK_PG_CACHE)/zkc.  It is linked in statically
# (position-independent), and --exclude-libs keeps its symbols out of
# zklock.so's dynamic table: nothing else in the backend can bind to them,
# and the system's libzookeeper_mt, if another module loads it, cannot
# clash with it.  test/zkc/README.md says why not a shared library.
#
# zklock.so is linked with the distribution's hardening flags for the
# linker (read-only relocations, bound at load: -z relro -z now), as
# Debian's PostgreSQL packages are; a PostgreSQL built from source (18
# here) passes none.  test/check_hardening.sh checks them.
ZKLOCK_PG_CACHE ?= /var/cache/zklock
ZKLOCK_ZK_TREE := $(if $(wildcard $(ZKLOCK_TOP)/zookeeper/zookeeper-client/zookeeper-client-c/CMakeLists.txt),$(ZKLOCK_TOP)/zookeeper)
ifneq ($(ZKLOCK_ZK_TREE),)
ZKLOCK_ZKC ?= $(ZKLOCK_TOP)/zkc-build/zkc
else
ZKLOCK_ZKC ?= $(ZKLOCK_PG_CACHE)/zkc
endif
ZKLOCK_HARDEN_LDFLAGS := $(shell DEB_BUILD_MAINT_OPTIONS="hardening=+all reproducible=-all" \
	dpkg-buildflags --get LDFLAGS 2>/dev/null || echo "-Wl,-z,relro -Wl,-z,now")
SHLIB_LINK = $(ZKLOCK_ZKC)/lib/libzookeeper.a $(ZKLOCK_ZKC)/lib/libhashtable.a \
	-lsasl2 -lgssapi_krb5 -lkrb5 -lssl -lcrypto -lpthread -Wl,--exclude-libs,ALL $(ZKLOCK_HARDEN_LDFLAGS)
PG_CPPFLAGS = -I$(ZKLOCK_ZKC)/include -DTHREADED -DHAVE_OPENSSL_H -DHAVE_CYRUS_SASL_H \
	-DZKL_VERSION='"$(EXTVERSION)"'
# No JIT bitcode: nothing here is worth inlining, and it needs clang.
override with_llvm = no

# pg_regress suites, run against a temporary instance configured by
# test/run_regress.sh with a one-server ensemble.
REGRESS = zklock_api zklock_scopes zklock_errors zklock_parity zklock_sets zklock_upgrade

pg_config_of = $(if $(filter 15,$(1)),/usr/lib/postgresql/15/bin/pg_config,$(ZKLOCK_PG_CACHE)/pg/$(1)/bin/pg_config)
ifneq ($(PG),)
PG_CONFIG = $(call pg_config_of,$(PG))
endif
PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
ifeq ($(PGXS),)
# No PostgreSQL to build for: only the targets that install one can run.
all install installcheck:
	@echo "$(PG_CONFIG) not found: install PostgreSQL's server development files (Debian: postgresql-server-dev-NN), name their pg_config with PG_CONFIG=..., or in a clone run 'make deps'" >&2; exit 1
else
include $(PGXS)
endif

# PostgreSQL 15's own headers trip -Wunused-parameter under -Wextra; keep
# the warnings for our code and read the server headers as system headers.
ifneq ($(PGXS),)
override CPPFLAGS := $(patsubst -I%,-isystem %,$(filter -I$(includedir_server)%,$(CPPFLAGS))) \
	$(filter-out -I$(includedir_server)%,$(CPPFLAGS))
endif

# A call that skips a layer must not compile: each layer's header refuses
# the files of other layers (see DESIGN), and a call without a declaration
# is an error, not a warning.
override CFLAGS += -Werror=implicit-function-declaration

# Export only what PostgreSQL looks up (src/compat.h marks it): PGXS
# compiles modules with -fvisibility=hidden from 16 on, 15's does not.
ifneq ($(PGXS),)
ifeq ($(CFLAGS_SL_MODULE),)
override CFLAGS += -fvisibility=hidden
endif
endif

# PGXS tracks no header dependencies: every object is rebuilt when any of
# the extension's headers changes (a struct that changes size under an
# object built before would corrupt memory).
$(OBJS): $(wildcard src/*.h) $(ZKLOCK_ZKC)/include/zookeeper/zookeeper.h

# Nor which PostgreSQL the objects were built for: make test ends with 18,
# and a make or make install for 15 after it (make demo) would install 18's
# zklock.so.  src/.pg-build names the PostgreSQL (its version and server
# headers), rewritten only when that changes, and every object depends on
# it; it names zklock's version too (compiled into the magic block).
# zklock.so is linked again when the client library is rebuilt.
ifneq ($(PGXS),)
src/.pg-build: zklock-pg-check
	@v="$$($(PG_CONFIG) --version) $$($(PG_CONFIG) --includedir-server) zklock $(EXTVERSION)"; \
	if [ ! -f $@ ] || [ "$$(cat $@)" != "$$v" ]; then echo "$$v" >$@; fi
$(OBJS): src/.pg-build
$(shlib): $(ZKLOCK_ZKC)/lib/libzookeeper.a $(ZKLOCK_ZKC)/lib/libhashtable.a
endif
.PHONY: zklock-pg-check

ifneq ($(ZKLOCK_ZK_TREE),)
$(ZKLOCK_ZKC)/include/zookeeper/zookeeper.h:
	@ZKLOCK_ZK_TREE=$(ZKLOCK_ZK_TREE) ZKLOCK_ZKC=$(ZKLOCK_ZKC) \
		sh $(ZKLOCK_TOP)/test/build_zkc.sh >/dev/null
$(ZKLOCK_ZKC)/lib/libzookeeper.a $(ZKLOCK_ZKC)/lib/libhashtable.a: \
		$(ZKLOCK_ZKC)/include/zookeeper/zookeeper.h
	@test -f $@
else
$(ZKLOCK_ZKC)/include/zookeeper/zookeeper.h:
	@echo "the TLS-capable ZooKeeper client is not built in $(ZKLOCK_ZKC): run 'make deps' first" >&2; exit 1
endif

ifneq ($(PGXS),)
install: install-zklock-docs
uninstall: uninstall-zklock-docs
.PHONY: install-zklock-docs uninstall-zklock-docs
install-zklock-docs:
ifdef docdir
	$(MKDIR_P) '$(DESTDIR)$(docdir)/$(docmoduledir)/zklock'
	$(INSTALL_DATA) $(addprefix $(ZKLOCK_TOP)/, $(ZKLOCK_DOCS)) '$(DESTDIR)$(docdir)/$(docmoduledir)/zklock/'
endif
uninstall-zklock-docs:
ifdef docdir
	rm -rf '$(DESTDIR)$(docdir)/$(docmoduledir)/zklock'
endif

# make installcheck: the suites need a ZooKeeper and zklock.hosts naming
# it; test/installcheck.sh gives both to PGXS's pg_regress command (as
# Makefile.global writes it, without its echo).
pg_regress_installcheck = $(SHELL) $(ZKLOCK_TOP)/test/installcheck.sh \
	$(top_builddir)/src/test/regress/pg_regress --inputdir=$(srcdir) \
	--bindir='$(bindir)' $(pg_regress_locale_flags) $(EXTRA_REGRESS_OPTS)
endif

.PHONY: deps demo demo-stop deb dist test unit bench

# The majors make test runs on: PG=, else the PG_CONFIG given, else 15 and
# 18.  make deps builds PostgreSQL 18 only when one of them is 18.
ifneq ($(PG),)
TEST_PG_CONFIGS = $(PG_CONFIG)
else ifneq ($(filter command line environment,$(origin PG_CONFIG)),)
TEST_PG_CONFIGS = $(PG_CONFIG)
else ifneq ($(filter test,$(MAKECMDGOALS)),)
TEST_PG_CONFIGS = $(call pg_config_of,15) $(call pg_config_of,18)
else
TEST_PG_CONFIGS = $(call pg_config_of,15)
endif
BUILD_MAJORS = $(patsubst $(ZKLOCK_PG_CACHE)/pg/%/bin/pg_config,%,$(filter $(ZKLOCK_PG_CACHE)/pg/%,$(TEST_PG_CONFIGS)))

deps:
	@sh test/deps.sh build
ifeq ($(ZKLOCK_ZK_TREE),)
	@sh test/build_zkc.sh >/dev/null
endif
	@for m in $(BUILD_MAJORS); do sh test/build_pg.sh $$m >/dev/null || exit 1; done

demo: deps
	@sh test/deps.sh demo
	@PG_CONFIG=$(firstword $(TEST_PG_CONFIGS)) sh test/demo.sh start

demo-stop:
	@PG_CONFIG=$(firstword $(TEST_PG_CONFIGS)) sh test/demo.sh stop

# make deb: the Debian source package (postgresql-zklock: the .dsc, two
# upstream tarballs, the client's source the second) and, built from the
# .dsc alone with dpkg-buildpackage, postgresql-NN-zklock for each major in
# debian/pgversions that the host has (Debian 12: 15;
# PG_SUPPORTED_VERSIONS=NN picks one), all in deb/ with the build's log
# (test/release.sh).
deb:
	@sh test/deps.sh build deb
	@sh test/release.sh deb

# make dist: zklock-RELEASE.zip, the last commit and the client's source
# (test/release.sh), PGXN's distribution (META.json at its top).
dist:
	@sh test/deps.sh build
	@sh test/release.sh dist

# Unit tests of the pure C helpers (no PostgreSQL, no ZooKeeper).
# The owner parser reads data written by any client: it is fuzzed under
# AddressSanitizer and UBSan.  Then the tests of the C client's patches
# (test/zkc/README.md): each a program linked with the built libzookeeper.a,
# on loopback sockets of its own (no ZooKeeper server), some under
# AddressSanitizer or with the linker's --wrap around a library call.
ZKC_TESTS = test/zkc/test_init_ssl_leak test/zkc/test_endpoint_text \
	test/zkc/test_host_list test/zkc/test_multi_mutex test/zkc/test_tls_io
unit: test/unit/test_names test/unit/test_owner test/unit/test_hosts $(ZKC_TESTS)
	@./test/unit/test_names
	@./test/unit/test_owner
	@./test/unit/test_hosts
	@for t in $(ZKC_TESTS); do ./$$t || exit 1; done

test/unit/test_names: test/unit/test_names.c test/unit/tap.h src/names.c src/names.h
	$(CC) -Wall -Wextra -Werror -O1 -I src -o $@ test/unit/test_names.c src/names.c

test/unit/test_hosts: test/unit/test_hosts.c test/unit/tap.h src/hosts.c src/hosts.h
	$(CC) -Wall -Wextra -Werror -O1 -fsanitize=address,undefined \
		-fno-sanitize-recover=all -I src -o $@ test/unit/test_hosts.c src/hosts.c

test/unit/test_owner: test/unit/test_owner.c test/unit/tap.h src/owner.c src/owner.h
	$(CC) -Wall -Wextra -Werror -O1 -g -fsanitize=address,undefined \
		-fno-sanitize-recover=all -I src -o $@ test/unit/test_owner.c src/owner.c

ZKC_TEST_FLAGS_init_ssl_leak = -fsanitize=address
ZKC_TEST_FLAGS_host_list = -fsanitize=address -Wl,--wrap=log_message
ZKC_TEST_FLAGS_multi_mutex = \
	-Wl,--wrap=pthread_mutex_init,--wrap=pthread_mutex_destroy,--wrap=pthread_mutex_lock
test/zkc/test_%: test/zkc/test_%.c test/zkc/zkc_test.h test/unit/tap.h \
		$(ZKLOCK_ZKC)/include/zookeeper/zookeeper.h $(ZKLOCK_ZKC)/lib/libzookeeper.a
	$(CC) -Wall -Wextra -Werror -O1 -g $(ZKC_TEST_FLAGS_$*) -DTHREADED -DHAVE_OPENSSL_H \
		-DHAVE_CYRUS_SASL_H -I$(ZKLOCK_ZKC)/include -o $@ $< $(ZKLOCK_ZKC)/lib/libzookeeper.a \
		$(ZKLOCK_ZKC)/lib/libhashtable.a -lsasl2 -lssl -lcrypto -lpthread

test: deps
	@sh test/deps.sh deb test
	@sh test/zk39.sh >/dev/null
	@sh test/run_all.sh $(TEST_PG_CONFIGS)

bench: deps
	@sh test/deps.sh bench
	@sh test/zk39.sh >/dev/null
	@sh bench/run.sh

EXTRA_CLEAN = test/unit/test_names test/unit/test_owner test/unit/test_hosts $(ZKC_TESTS) results regression.diffs regression.out tmp_check src/.pg-build

# The client built from zookeeper/ does not depend on the PostgreSQL built
# for: make clean keeps it (pg_buildext cleans between majors), make
# distclean removes it.
ifneq ($(PGXS),)
distclean maintainer-clean: clean-zkc-build
endif
.PHONY: clean-zkc-build
clean-zkc-build:
	rm -rf zkc-build
