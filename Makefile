EXTENSION = ratelimit
EXTVERSION = 0.6.0

MODULE_big = ratelimit
OBJS = \
	src/ratelimit.o \
	src/api/drop_extension.o \
	src/api/forward.o \
	src/api/gc.o \
	src/api/http_guard.o \
	src/api/leases.o \
	src/api/monitor.o \
	src/api/privilege_hint.o \
	src/api/result.o \
	src/api/token_bucket.o \
	src/api/trigger.o \
	src/api/zone_admin.o \
	src/api/zone_calls.o \
	src/decision/algorithms.o \
	src/decision/decide.o \
	src/decision/decide_leases.o \
	src/decision/decide_refund.o \
	src/decision/decide_several_zones.o \
	src/decision/decide_wait.o \
	src/decision/zone.o \
	src/store/row_direct.o \
	src/store/row_hint.o \
	src/store/row_spi.o \
	src/store/shmem_eviction.o \
	src/store/shmem_file.o \
	src/store/shmem_leases.o \
	src/store/shmem_save.o \
	src/store/shmem_scan.o \
	src/store/shmem_sets.o \
	src/store/shmem_store.o \
	src/store/state_statements.o \
	src/store/state_table.o \
	src/store/store.o \
	src/store/table_cache.o \
	src/store/table_store.o \
	src/base/args.o \
	src/base/clock.o \
	src/base/counters.o \
	src/base/key_hash.o \
	src/base/settings.o \
	src/base/spi_exec.o \
	src/base/wait_lines.o \
	src/core/client_address.o \
	src/core/counter_algorithms.o \
	src/core/key_debt.o \
	src/core/keyed_hash.o \
	src/core/leases.o \
	src/core/sliding_window.o \
	src/core/token_bucket.o

# Internal headers: dependencies of the objects, never installed (PGXS
# would install a HEADERS list into the server's include directory).
RL_HEADERS = $(wildcard src/*/*.h)

# The install script is built from sql/$(EXTENSION).sql; DATA is for upgrade
# scripts (sql/$(EXTENSION)--<from>--<to>.sql), none so far.
DATA = $(wildcard sql/$(EXTENSION)--*--*.sql)
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql

# make installcheck runs on any server: setup first (it creates what the
# other tests share), then the tests that need nothing but the extension,
# then those whose needs below the server under test meets (it is asked,
# see the end of this file); the others are reported as skipped, with the
# reason, and never counted.  REGRESS="..." on the command line runs
# exactly those tests (scripts/test.sh does), asking nothing.
# ratelimit in shared_preload_libraries: the tests that make a shmem zone.
RL_NEEDS_preload = cron durable gc grants headers keys leases multi_zone portability refund shadow trigger wait zone_changes
# pg_cron in shared_preload_libraries (with its default cron.database_name
# = 'postgres'): the pg_cron refill mode.
RL_NEEDS_cron = cron
# max_prepared_transactions > 0 (PostgreSQL's default is 0): PREPARE
# TRANSACTION.
RL_NEEDS_2pc = gc transactions
RL_NEEDS_SOMETHING = $(sort $(RL_NEEDS_preload) $(RL_NEEDS_cron) $(RL_NEEDS_2pc))
# shmem counts exactly from an empty store: it runs alone, on a fresh
# server (scripts/test.sh): make installcheck REGRESS="setup shmem".
RL_BASE_TESTS = $(filter-out setup shmem $(RL_NEEDS_SOMETHING) $(EXTENSION) $(EXTENSION)--%,$(basename $(notdir $(wildcard $(srcdir)/sql/*.sql))))
REGRESS = setup $(RL_BASE_TESTS)
REGRESS_OPTS = --inputdir=$(srcdir) --load-extension=$(EXTENSION)

PG_CPPFLAGS = -I$(srcdir)/src
# RL_ASSERTS=1: the extension's Assert()s are checked even where the server
# was built without them (the test suite builds so; never benchmark it).
ifeq ($(RL_ASSERTS),1)
PG_CPPFLAGS += -DUSE_ASSERT_CHECKING
endif
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Werror
# -fno-exceptions: a throw in the core is a compile error, never an unwind
# through PostgreSQL frames.
PG_CXXFLAGS = -std=c++17 -fno-exceptions -Wno-register -Wall -Wextra -Werror
# make CC=clang CXX=clang++ against a server built with gcc: clang does not
# know some of gcc's flags in the server's CFLAGS, nor gnu_printf (PostgreSQL's
# own bitcode rule passes the same); every other warning stays on.
CLANG_WITH_GCC_FLAGS = -Wno-unknown-warning-option -Wno-ignored-optimization-argument -Wno-ignored-attributes
ifneq (,$(findstring clang,$(CC)))
PG_CFLAGS += $(CLANG_WITH_GCC_FLAGS)
endif
ifneq (,$(findstring clang,$(CXX)))
PG_CXXFLAGS += $(CLANG_WITH_GCC_FLAGS)
endif
SHLIB_LINK = -lstdc++

PG_CONFIG ?= pg_config
# Before PGXS: its clean rule reads EXTRA_CLEAN when it is included.  The
# unit tests' binary goes with it: one built in another major's chroot
# (another glibc) must not be taken as up to date.
EXTRA_CLEAN = test/unit/run_unit_tests results regression.diffs regression.out $(EXTENSION)-*.zip
# make dist packs the sources only: it needs no PostgreSQL (PGXN's release
# tooling and a machine without the server headers run it).
ifneq ($(MAKECMDGOALS),dist)
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
endif

sql/$(EXTENSION)--$(EXTVERSION).sql: sql/$(EXTENSION).sql
	cp $< $@

# PGXS does not track header dependencies.
$(OBJS): $(RL_HEADERS)

# The LLVM bitcode step compiles C++ with clang: give it the same standard.
COMPILE.cxx.bc = $(CLANG) -xc++ -std=c++17 -Wno-ignored-attributes $(BITCODE_CXXFLAGS) $(CPPFLAGS) -flto=thin -emit-llvm -c

# ---- GoogleTest unit tests of src/core (no server needed) ----
CORE_SRCS = $(wildcard src/core/*.cpp)
UNIT_SRCS = $(wildcard test/unit/*.cpp)

test/unit/run_unit_tests: $(CORE_SRCS) $(UNIT_SRCS) $(wildcard src/core/*.h test/unit/*.h test/common/*.h)
	$(CXX) -std=c++17 -O1 -g -Wall -Wextra -Werror -Isrc -o $@ $(CORE_SRCS) $(UNIT_SRCS) -lgtest -lgtest_main -pthread

unit: test/unit/run_unit_tests
	test/unit/run_unit_tests

# A source archive for PGXN: what git holds at HEAD, nothing built.
dist:
	git archive --format zip --prefix=$(EXTENSION)-$(EXTVERSION)/ --output $(EXTENSION)-$(EXTVERSION).zip HEAD

.PHONY: unit dist

# ---- make installcheck: what the server under test can run ----
# Asked once, with the psql of PG_CONFIG and the usual PGHOST, PGPORT,
# PGUSER (as pg_regress connects), only when installcheck chooses its tests.
ifeq ($(origin REGRESS)|$(filter installcheck,$(MAKECMDGOALS)),file|installcheck)
comma := ,
RL_SERVER := $(shell $(bindir)/psql -X -A -t -q -d postgres -F ' ' -c "SELECT current_setting('max_prepared_transactions'), current_setting('shared_preload_libraries')" 2>/dev/null || echo '? (unknown: psql could not connect)')
RL_SERVER_2PC := $(firstword $(RL_SERVER))
RL_SERVER_PRELOAD := $(wordlist 2,$(words $(RL_SERVER)),$(RL_SERVER))
# "pg_cron, ratelimit", '$$libdir/ratelimit', "ratelimit": the bare names.
RL_PRELOADED := $(notdir $(subst ",,$(subst $(comma), ,$(RL_SERVER_PRELOAD))))
# Shown in the shell's double quotes: a $$libdir stays as it is.
RL_HAS_PRELOAD = the server has shared_preload_libraries = '$(subst $$,\$$,$(RL_SERVER_PRELOAD))'
RL_UNMET = $(if $(filter ratelimit,$(RL_PRELOADED)),,preload) $(if $(filter pg_cron,$(RL_PRELOADED)),,cron) \
	$(if $(filter-out ? 0,$(RL_SERVER_2PC)),,2pc)
RL_WHY_preload = need ratelimit in shared_preload_libraries; $(RL_HAS_PRELOAD)
RL_WHY_cron = need pg_cron in shared_preload_libraries; $(RL_HAS_PRELOAD)
RL_WHY_2pc = need max_prepared_transactions > 0; the server has $(RL_SERVER_2PC)
RL_SKIPPED_TESTS = $(sort $(foreach need,$(RL_UNMET),$(RL_NEEDS_$(need))))
REGRESS += $(filter-out $(RL_SKIPPED_TESTS),$(RL_NEEDS_SOMETHING))
# (pgxs.mk has read REGRESS_PREP already: a prerequisite of our own.)
installcheck: rl-report-skipped
endif

# Before pg_regress: the tests this server cannot run, and why.
rl-report-skipped:
	@$(foreach need,$(RL_UNMET),echo "skipped ($(RL_WHY_$(need))): $(RL_NEEDS_$(need))";)
	@$(if $(RL_SKIPPED_TESTS),echo "skipped: $(words $(RL_SKIPPED_TESTS)) of $(words setup $(RL_BASE_TESTS) $(RL_NEEDS_SOMETHING)) tests$(comma) not run and not counted below")

.PHONY: rl-report-skipped
