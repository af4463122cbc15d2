# shardlab build. `make help` lists the targets.
#   make deps    install missing Debian packages (apt-get; needs root or sudo)
#   make         build the library, lessons, tests and build/bin/shardlab into build/
#   make run     deps + build the lessons + every lesson in order on the simulated mesh
#   make test    deps + build + every test (doctest suites, lessons, MPI suites)
#   make sanitize  the suite under ThreadSanitizer and under ASan+UBSan
#   make soak    random verified cases for SOAK_MINUTES (5) on sim and MPI, memory watched
#   make cluster 2 and 4 emulated hosts (network namespaces, as root) under mpiexec -f hosts
#   make plots   sweeps + gnuplot pictures into build/plots/

SHELL := /bin/bash
CXX ?= g++
SAN ?=
PACKAGES := g++ make pkg-config xtensor-dev libxtensor-blas-dev libopenblas-dev libopenblas-pthread-dev mpich libmpich-dev \
            doctest-dev libcli11-dev nlohmann-json3-dev gnuplot-nox libtomlplusplus-dev libpugixml-dev \
            libzip-dev robin-map-dev libxxhash-dev

# Sanitizer builds use -g1 (line tables: every report still names file and line), a third faster to
# compile than -g with no loss in what the sanitizers catch.
ifeq ($(SAN),thread)
  BUILD := build/tsan
  OPT := -O1 -g1 -fsanitize=thread
else ifeq ($(SAN),address)
  BUILD := build/asan
  # -Wno-maybe-uninitialized: GCC 12 at -O1 with ASan warns inside <regex> (pulled in by xtensor's xnpy).
  # UBSan without four of its checks, which made this build a third slower to compile (measured on
  # one unit: 25.1 s with all, 17.2 s without, 15.0 s ASan alone; test units 69 s and 44 s): null
  # and object-size, whose bad accesses ASan reports itself (a SEGV on address 0, an overflow of
  # the object); pointer-overflow, an address wrapping around, which ASan reports when it is read;
  # and vptr (no dynamic_cast or polymorphic downcast here). Signed overflow, shifts, bounds,
  # division by zero, alignment, bool, enum, unreachable and return stay.
  UBSAN := -fsanitize=undefined -fno-sanitize=null,object-size,pointer-overflow,vptr -fno-sanitize-recover=undefined
  OPT := -O1 -g1 -fsanitize=address $(UBSAN) -fno-omit-frame-pointer -Wno-maybe-uninitialized
  # Not position-independent (as every build, below): the suite starts thousands of sanitized
  # processes, and a 100 MB PIE spends a third of its start relocating itself (shardlab version:
  # 62 ms instead of 100).
else
  BUILD := build
  OPT := -O2 -g0
endif

MPI_CFLAGS := -I/usr/include/x86_64-linux-gnu/mpich
MPI_LIBS := -lmpich
# toml++ (case files) as Debian builds it: a compiled library, not header-only.
TOML_CFLAGS := -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1
CXXFLAGS := -std=c++17 $(OPT) -Wall -Wextra -pthread -I. $(MPI_CFLAGS) $(TOML_CFLAGS)
# OpenBLAS linked statically where Debian's archive is installed (libopenblas-pthread-dev), and
# programs not position-independent: the suite starts about 2000 programs, and a start spent most
# of its time in the dynamic loader, mapping and relocating libraries (the lessons program, --help,
# 30 runs each side by side: 22 ms with libopenblas.so and PIE, 15 ms with libopenblas.a and
# -no-pie). Without the archive, the shared library as before.
OPENBLAS_A := $(firstword $(wildcard /usr/lib/$(shell $(CXX) -print-multiarch)/openblas-pthread/libopenblas.a))
OPENBLAS_LIBS := $(if $(OPENBLAS_A),$(OPENBLAS_A) -lgfortran,-lopenblas)
# -rdynamic: programs export their symbols to the mpi backend's module (below), and link the whole
# library, so that what only the module calls (stop points, the signal hand-over) is there to
# export in every build (UNITY=0 links a program only the library objects it calls itself).
# `override`: a LDFLAGS given on the command line adds to these instead of dropping them.
override LDFLAGS += -no-pie -rdynamic
WHOLE_LIB = -Wl,--whole-archive $(LIB) -Wl,--no-whole-archive
# libzip: .npz files (harness/check/npz.hpp). libmvec: glibc's vector erfc and exp (core/gelu.cpp).
LDLIBS := $(OPENBLAS_LIBS) -ltomlplusplus -lpugixml -lzip -lmvec -pthread -ldl

# The mpi backend is a module of its own, the only code linked with MPICH (collectives/mpi.hpp):
# programs load it with dlopen when they first run on MPI. A program's start maps and relocates
# every library it is linked with, and MPICH with UCX and hwloc was 9 ms of it here (an empty
# program linked with -lmpich, 30 starts: 13.5 ms against 4 ms), in each of the suite's ~2000 starts.
# Compiled as one unit, position-independent.
MPI_MODULE_SRCS := collectives/mpi_run.cpp collectives/mpi_world.cpp collectives/mpi_exit.cpp \
                   collectives/mpi_monitor.cpp collectives/mpi_watchdog.cpp collectives/mpi_transport.cpp \
                   collectives/mpich_calls.cpp collectives/mpi_ucx_close.cpp
MPI_MODULE := $(BUILD)/lib/libshardlab_mpi.so

LIB_SRCS := $(filter-out %_main.cpp $(MPI_MODULE_SRCS),$(wildcard core/*.cpp collectives/*.cpp harness/*/*.cpp))
LIB_OBJS := $(LIB_SRCS:%.cpp=$(BUILD)/obj/%.o)
LIB := $(BUILD)/libshardlab.a
LESSON_SRCS := $(sort $(wildcard lessons/[0-9]*.cpp))
LESSONS := $(LESSON_SRCS:lessons/%.cpp=$(BUILD)/bin/%)
TEST_SRCS := $(wildcard tests/test_*.cpp)
# ThreadSanitizer runs the suites where threads meet in the code they test: the sim runtime and
# transport, the collectives, collective_permute and point-to-point, the watchdog, traces, the
# progress display's ticker, and programs, plans, gradients, FFN strategies, ZeRO and pipelines run
# on the sim mesh (in-process); with shardlab and the three lessons those suites start. The suites
# left out test commands and lessons through their output; the sim threads they start run the same
# runtime and collectives the suites above race-check directly.
TSAN_SUITES := sim runtime collectives p2p permute watchdog trace ledger program program_plan \
               planner planner_property plan_search gradient ffn zero_run pipeline progress moe \
               uneven split keep_gathered replay
TSAN_LESSONS := 02_reduction_allreduce 08_gspmd_ffn 16_pipeline
TSAN_TEST_SRCS := $(TSAN_SUITES:%=tests/test_%.cpp)
ifeq ($(SAN),thread)
  TEST_SRCS := $(TSAN_TEST_SRCS)
  LESSONS := $(TSAN_LESSONS:%=$(BUILD)/bin/%)
endif
TEST_OBJS := $(TEST_SRCS:%.cpp=$(BUILD)/obj/%.o) $(BUILD)/obj/tests/doctest_main.o
MPI_TEST_SRCS := $(wildcard tests/mpi/*.cpp)
MPI_TEST_OBJS := $(MPI_TEST_SRCS:%.cpp=$(BUILD)/obj/%.o)

# UNITY=1 (the default) compiles few, large translation units: the library as one unit per folder
# and the tests as TEST_UNITS units (tests/unity.sh), each in a namespace of its own. Most of a
# file's compile time here is the xtensor, CLI11 and JSON templates it instantiates, once per unit:
# measured on 2 cores, harness/cli took 319 s as 19 files and 64 s as one unit, and 26 test files
# 210 s apart and 56 s together (at -O1). UNITY=0 compiles every file on its own (quick rebuilds
# of one file while you work on it). The files in UNITY_ALONE include <cblas.h>, which clashes with
# xtensor-blas in one unit, or define main().
UNITY ?= 1
TEST_UNITS ?= 4
UNITY_ALONE := core/blas.cpp core/gemm.cpp tests/test_blas.cpp tests/mpi/main.cpp
# The folders that take longest (measured per unit, ASan build: models 324 s, cli 223 s) come
# first, so that make -j2 starts them first and no long unit is left alone at the end; models
# compiles as two halves (every other file), so both cores share it.
UNITY_FIRST := harness/models harness/cli harness/check harness/plan
UNITY_HALVED := harness/models
ifeq ($(UNITY),1)
  LIB_DIRS := $(sort $(patsubst %/,%,$(dir $(filter-out $(UNITY_ALONE),$(LIB_SRCS)))))
  LIB_DIRS := $(filter $(LIB_DIRS),$(UNITY_FIRST)) $(filter-out $(UNITY_FIRST),$(LIB_DIRS))
  LIB_OBJS := $(foreach d,$(LIB_DIRS),$(if $(filter $(d),$(UNITY_HALVED)),\
                $(BUILD)/obj/unity/half1_$(subst /,_,$(d)).o $(BUILD)/obj/unity/half2_$(subst /,_,$(d)).o,\
                $(BUILD)/obj/unity/lib_$(subst /,_,$(d)).o)) \
              $(patsubst %.cpp,$(BUILD)/obj/%.o,$(filter $(UNITY_ALONE),$(LIB_SRCS)))
  TEST_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(filter $(UNITY_ALONE),$(TEST_SRCS))) \
               $(foreach k,$(shell seq $(TEST_UNITS)),$(BUILD)/obj/unity/tests_$(k).o) $(BUILD)/obj/tests/doctest_main.o
  MPI_TEST_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(filter $(UNITY_ALONE),$(MPI_TEST_SRCS))) \
                   $(BUILD)/obj/unity/mpi_tests.o
endif
SHARDLAB := $(BUILD)/bin/shardlab
TESTS := $(BUILD)/bin/tests
MPI_TESTS := $(if $(MPI_TEST_SRCS),$(BUILD)/bin/mpi_tests)

# Unity sources are named targets, so make keeps them (as intermediates of a chain of pattern rules it
# would delete them, and rebuild every unit next time).
UNITY_SRCS := $(patsubst $(BUILD)/obj/unity/%.o,$(BUILD)/unity/%.cpp,$(filter $(BUILD)/obj/unity/%,$(LIB_OBJS) $(TEST_OBJS) $(MPI_TEST_OBJS)))
.SECONDARY: $(UNITY_SRCS)
.PHONY: all bins deps run test test-unit test-cases test-mpi test-plots test-torch sanitize plots clean help soak cluster bench-peer
all: $(LIB) $(MPI_MODULE) $(SHARDLAB) $(LESSONS) $(TESTS) $(MPI_TESTS)

# The binaries the doctest suite runs, for a sanitizer build (make SAN=address bins).
bins: $(MPI_MODULE) $(SHARDLAB) $(LESSONS) $(TESTS)

help:
	@sed -n '2,8p' Makefile | sed 's/^# *//'

deps:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "deps: all $(words $(PACKAGES)) Debian packages present, nothing to install"; \
	else echo "deps: missing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo=sudo; \
	  else echo "deps: not root and no sudo; install them by hand: apt-get install$$missing" >&2; exit 2; fi; \
	  $$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	@echo "  CXX  $<"
	@$(CXX) $(CXXFLAGS) -MMD -MP -c $< -o $@

# A unity source is rewritten only when its list of files changes (so make does not rebuild it for
# nothing); -MMD tracks the files it includes. Each recipe writes $@.tmp, then replace_if_changed.
replace_if_changed = if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/unity/lib_%.cpp: $(LIB_SRCS) Makefile
	@mkdir -p $(dir $@)
	@printf '#include "%s"\n' $(filter-out $(UNITY_ALONE),$(filter $(subst _,/,$*)/%,$(LIB_SRCS))) > $@.tmp
	@$(replace_if_changed)

# half1_<folder> and half2_<folder>: the odd and the even files of a folder in UNITY_HALVED.
$(BUILD)/unity/half%.cpp: $(LIB_SRCS) Makefile
	@mkdir -p $(dir $@)
	@k=$(firstword $(subst _, ,$*)); \
	printf '%s\n' $(filter $(subst _,/,$(patsubst $(firstword $(subst _, ,$*))_%,%,$*))/%,$(filter-out $(UNITY_ALONE),$(LIB_SRCS))) | \
	  awk -v k=$$k 'NR % 2 == k % 2 { printf "#include \"%s\"\n", $$0 }' > $@.tmp
	@$(replace_if_changed)

$(BUILD)/unity/tests_%.cpp: $(TEST_SRCS) tests/unity.sh Makefile
	@mkdir -p $(dir $@)
	@tests/unity.sh $* $(TEST_UNITS) $(filter-out $(UNITY_ALONE),$(TEST_SRCS)) > $@.tmp
	@$(replace_if_changed)

$(BUILD)/unity/mpi_tests.cpp: $(MPI_TEST_SRCS) tests/unity.sh Makefile
	@mkdir -p $(dir $@)
	@tests/unity.sh 1 1 $(filter-out $(UNITY_ALONE),$(MPI_TEST_SRCS)) > $@.tmp
	@$(replace_if_changed)

$(BUILD)/obj/unity/%.o: $(BUILD)/unity/%.cpp
	@mkdir -p $(dir $@)
	@echo "  CXX  $< ($$(grep -c '^#include "' $<) includes)"
	@$(CXX) $(CXXFLAGS) -MMD -MP -c $< -o $@

# The tests' own code is compiled at -O1 (-O0 in sanitizer builds, which instrument it all the same):
# a third of -O2's compile time, and the time the suite runs is spent in the library, the lessons
# and shardlab, which keep the build's level.
TEST_OPT := $(if $(SAN),-O0,-O1)
$(BUILD)/obj/tests/%.o $(BUILD)/obj/unity/tests_%.o $(BUILD)/obj/unity/mpi_tests.o: CXXFLAGS += $(TEST_OPT)

$(LIB): $(LIB_OBJS)
	@echo "  AR   $@"
	@rm -f $@ && ar rcs $@ $^

.SECONDARY: $(BUILD)/unity/mpi_module.cpp
$(BUILD)/unity/mpi_module.cpp: Makefile
	@mkdir -p $(dir $@)
	@printf '#include "%s"\n' $(MPI_MODULE_SRCS) > $@.tmp
	@$(replace_if_changed)
$(BUILD)/obj/unity/mpi_module.o: CXXFLAGS += -fPIC
$(MPI_MODULE): $(BUILD)/obj/unity/mpi_module.o
	@mkdir -p $(dir $@)
	@echo "  LINK $@"
	@$(CXX) $(CXXFLAGS) -shared $< $(MPI_LIBS) -o $@

ifeq ($(UNITY),1)
# Every lesson is linked into one program, $(BUILD)/bin/lessons, compiled as one unit
# (tests/unity.sh --main): it runs the lesson its name names, and $(BUILD)/bin/NN_name are links
# to it. Twenty lessons compiled one by one took 104 s of CPU at -O2 and 20 links (46 s as one
# unit, measured side by side), and 4 minutes of the build under ASan+UBSan. UNITY=0 builds each
# lesson as a program of its own.
LESSON_BUILT_SRCS := $(LESSONS:$(BUILD)/bin/%=lessons/%.cpp)
.SECONDARY: $(BUILD)/unity/lessons.cpp
$(BUILD)/unity/lessons.cpp: $(LESSON_BUILT_SRCS) tests/unity.sh Makefile
	@mkdir -p $(dir $@)
	@tests/unity.sh --main $(LESSON_BUILT_SRCS) > $@.tmp
	@$(replace_if_changed)

$(BUILD)/bin/lessons: $(BUILD)/obj/unity/lessons.o $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LINK $@"
	@$(CXX) $(CXXFLAGS) $< $(WHOLE_LIB) $(LDFLAGS) $(LDLIBS) -o $@

$(LESSONS): $(BUILD)/bin/lessons
	@ln -sf lessons $@
else
# A static pattern rule: lesson objects are named prerequisites, so make keeps them (a chain of
# implicit rules would delete them as intermediates and relink every lesson next time).
$(LESSONS): $(BUILD)/bin/%: $(BUILD)/obj/lessons/%.o $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LINK $@"
	@rm -f $@  # a link to a default build's lessons program: the linker would write through it
	@$(CXX) $(CXXFLAGS) $< $(WHOLE_LIB) $(LDFLAGS) $(LDLIBS) -o $@

endif

$(SHARDLAB): $(BUILD)/obj/harness/cli/shardlab_main.o $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LINK $@"
	@$(CXX) $(CXXFLAGS) $< $(WHOLE_LIB) $(LDFLAGS) $(LDLIBS) -o $@

$(TESTS): $(TEST_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LINK $@"
	@$(CXX) $(CXXFLAGS) $(TEST_OBJS) $(WHOLE_LIB) $(LDFLAGS) $(LDLIBS) -o $@

$(BUILD)/bin/mpi_tests: $(MPI_TEST_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LINK $@"
	@$(CXX) $(CXXFLAGS) $(MPI_TEST_OBJS) $(WHOLE_LIB) $(LDFLAGS) $(LDLIBS) -o $@

# make run builds only what the lessons need (the library, the lessons program and shardlab, whose
# commands the lessons' Next: and Exercise: lines name); make and make test build the test suites.
# Without a -j of the user's, the build inside run and test uses every core (AUTO_JOBS): a plain
# `make run`, as the README gives it, would otherwise compile one unit at a time.
AUTO_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc))
run: deps
	@$(MAKE) --no-print-directory $(AUTO_JOBS) $(LESSONS) $(SHARDLAB)
	@set -e; for l in $(LESSONS); do echo; echo "===== $$l ====="; OPENBLAS_NUM_THREADS=1 $$l; done

# Tests find binaries through SHARDLAB_BIN; one BLAS thread per device. The three parts run one
# after another even under make -j: their logs stay readable and no MPI run shares the 2 cores.
# Each part prints its seconds when it ends, so a slow one shows in the log.
timed = t=$$(date +%s); $(MAKE) --no-print-directory $(2) $(1) || exit 1; echo "== make $(1) took $$(( $$(date +%s) - t )) s"
# '+': make cannot see the $(MAKE) inside the call, so without it the sub-make got no jobserver and
# built with -j1 ("jobserver unavailable"): a fresh clone's build took 11 minutes instead of 5-6.
test: deps
	@+$(call timed,all,$(AUTO_JOBS))
	@+$(call timed,test-unit)
	@+$(call timed,test-cases)
	@+$(call timed,test-mpi)
	@+$(call timed,test-plots)
	@+$(call timed,test-torch)

# MPICH's hwloc reads every PCI device's config space in MPI_Init: a fifth of an empty MPI program's
# start here, 20-30 ms of each of the suites' few hundred mpiexec launches. On one machine nothing
# uses what it finds; tests/run_binary.hpp's clean_env() carries the setting into nested runs.
test-unit test-cases test-mpi tsan-suite asan-suite: export HWLOC_COMPONENTS := -linuxio

# The doctest suite runs one process per test file, two at a time (tests/run_suite.sh): the suite
# spends much of its time waiting on the lessons and shardlab it starts, so a second file fills the
# other core. A failing file's log is printed whole; each file's log is in $(BUILD)/suite/.
SUITE_JOBS ?= 2
test-unit:
	@echo "== doctest suite: $(TESTS), one process per test file, $(SUITE_JOBS) at a time"
	@SHARDLAB_BIN=$(BUILD)/bin OPENBLAS_NUM_THREADS=1 tests/run_suite.sh $(SUITE_JOBS) $(BUILD)/suite $(TESTS) $(TEST_SRCS)

# The shipped case files, as CI runs them: one line each, JUnit XML beside the binaries.
test-cases:
	@echo "== case files: $(SHARDLAB) check harness/cases --junit $(BUILD)/junit.xml"
	@OPENBLAS_NUM_THREADS=1 $(SHARDLAB) check harness/cases --junit $(BUILD)/junit.xml

# shardlab against PyTorch (tests/torch/roundtrip.py, docs/case-files.md): a transformer layer,
# attention and a layer norm run from .npz inputs, their saved outputs and gradients compared with
# autograd's; the MoE's gating, drops, output and gradients (shardlab moe) and one Adam step
# (shardlab adam, against torch.optim.Adam) likewise. Needs Debian's python3-torch (about 800 MB, so not in PACKAGES: .ci/run installs it);
# without it, one line says it is skipped. TEST_TORCH=later: skipped, .ci/run runs it once installed.
TEST_TORCH ?= yes
test-torch: $(SHARDLAB)
	@if [ "$(TEST_TORCH)" = later ]; then echo "== tests/torch/roundtrip.py: later (TEST_TORCH=later; .ci/run runs it when PyTorch is in)"; \
	elif /usr/bin/python3 -c 'import numpy, torch' 2>/dev/null; then \
	  echo "== tests/torch/roundtrip.py --shardlab $(SHARDLAB)  (against PyTorch)"; \
	  OPENBLAS_CORETYPE=$${OPENBLAS_CORETYPE:-Haswell} OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tests/torch/roundtrip.py \
	    --shardlab $(SHARDLAB); \
	else echo "== tests/torch/roundtrip.py skipped: PyTorch is not installed (apt-get install python3-torch runs it)"; fi

# The MPI suite at 2 and 8 ranks (and its nested-mpiexec cases on one rank), lessons and shardlab
# on 8, 4 and 3 processes, a wrong process count, then faults (tests/mpi/fault_test.sh) and the
# cluster smoke run: tests/mpi/test_mpi.sh says what each part checks.
test-mpi:
	@tests/mpi/test_mpi.sh $(BUILD)/bin

# Soak (not in make test): random valid matmul cases for SOAK_MINUTES on sim, then as long under
# mpiexec -n 2, each verified, resident memory flat (under 5% growth after warm-up), no hang; then
# SIGINT and SIGTERM to mpiexec 20 times each, 130 and 143 every time.
# SOAK_DTYPE (all: each case's element type drawn at random; or float32, float64, bfloat16): the
# run prints each type's cases and seconds.
SOAK_MINUTES ?= 5
SOAK_DTYPE ?= all
soak: all
	@echo "== $(SHARDLAB) soak --minutes $(SOAK_MINUTES) --dtype $(SOAK_DTYPE)"
	@OPENBLAS_NUM_THREADS=1 timeout $$(( $(SOAK_MINUTES) * 60 + 120 )) $(SHARDLAB) soak --minutes $(SOAK_MINUTES) \
	  --dtype $(SOAK_DTYPE)
	@echo "== mpiexec -n 2 $(SHARDLAB) soak --backend mpi --minutes $(SOAK_MINUTES) --dtype $(SOAK_DTYPE)"
	@OPENBLAS_NUM_THREADS=1 timeout $$(( $(SOAK_MINUTES) * 60 + 120 )) mpiexec -n 2 $(SHARDLAB) soak --backend mpi \
	  --minutes $(SOAK_MINUTES) --dtype $(SOAK_DTYPE)
	@echo "== tests/mpi/signal_test.sh: SIGINT and SIGTERM to mpiexec, 20 times each"
	@tests/mpi/signal_test.sh $(BUILD)/bin 20

# Several hosts on one machine (not in make test, which runs only its 2-host smoke test): network
# namespaces on a bridge, links shaped by tc, one rank per host under mpiexec -f hosts; each result
# against one host's, a link taken down mid-collective, the fitted link rate against tc's (10%) and
# its cost model against every collective from 1 MiB up (15% on 2 hosts; 4 hosts, sharing 2 cores,
# printed), Ctrl-C and kill -9 clean-up (tests/cluster/cluster_test.sh). Needs root; CLUSTER_RATE
# (100mbit), CLUSTER_MODEL_ERR (15).
cluster: all
	@tests/cluster/cluster_test.sh $(BUILD)/bin

# Plots: the sweeps write .dat files into $(PLOT_DIR), then each plots/*.gp renders one PNG there
# (pngcairo); `make plots TERM=dumb` draws them in this terminal instead. TERM counts only when it
# is given on make's command line: the shell's own TERM (xterm ...) must not pick the terminal.
# First this machine (machine.dat: GEMM, reduction, alpha and link fitted under mpiexec -n 2) and busbw
# (ours against MPICH's, 1K to PLOT_MAX), a few seconds, or both on the sim backend; then the pure sweeps,
# whose this-machine figures come from that machine.dat.
# plots/bytes_per_device.png (the README's picture) is refreshed when it changed.
# GNUPLOT=<program> picks another gnuplot (GNUPLOT=none shows what happens without one);
# PLOT_README=no leaves the committed picture alone (make test renders into a directory of its own);
# PLOT_SWEEP=no draws again from the .dat files an earlier run left in PLOT_DIR, measuring nothing.
# PLOT_MAX is the largest message busbw measures (make test: 1M, 5 s instead of 11 s under mpiexec).
PLOT_DIR := $(BUILD)/plots
PLOT_MAX ?= 16M
PLOT_TERM := $(if $(filter command line,$(origin TERM)),$(TERM),pngcairo)
GNUPLOT ?= gnuplot
PLOT_README ?= yes
PLOT_SWEEP ?= yes
PLOT_DATA := machine.dat busbw.dat bytes_per_device.dat comm_share.dat memory_per_device.dat zero_memory.dat bubble.dat plan_model.dat
plots:
	@case "$(PLOT_TERM)" in dumb|png|pngcairo) ;; \
	  *) echo "plots: TERM=$(PLOT_TERM) is not a plot terminal; give TERM=dumb, or leave TERM out for PNG files" >&2; exit 2;; esac
	@$(MAKE) --no-print-directory deps || echo "plots: deps could not install every package; going on with what is here"
	@$(MAKE) --no-print-directory $(SHARDLAB)
	@if [ "$(PLOT_SWEEP)" = no ]; then for d in $(PLOT_DATA); do [ -s $(PLOT_DIR)/$$d ] || \
	  { echo "plots: PLOT_SWEEP=no draws from the .dat files of an earlier make plots, and $(PLOT_DIR)/$$d is not there" >&2; exit 2; }; done; \
	  echo "== PLOT_SWEEP=no: drawing from the .dat files already in $(PLOT_DIR)"; exit 0; fi; \
	busbw="$(SHARDLAB) sweep --out $(PLOT_DIR) --what machine,busbw --min 1K --max $(PLOT_MAX)"; \
	if command -v mpiexec >/dev/null; then \
	  echo "== mpiexec -n 2 $$busbw --backend mpi"; \
	  OPENBLAS_NUM_THREADS=1 timeout 120 mpiexec -n 2 $$busbw --backend mpi && exit 0; \
	  echo "mpiexec failed: measuring on the sim backend instead (busbw: ours only; machine: no link)"; \
	else echo "mpiexec not found: measuring on the sim backend (busbw: ours only; machine: no link)"; fi; \
	echo "== $$busbw --backend sim"; OPENBLAS_NUM_THREADS=1 $$busbw --backend sim
	@[ "$(PLOT_SWEEP)" = no ] || echo "== $(SHARDLAB) sweep --out $(PLOT_DIR) --what bytes,share,memory,zero,bubble,plan --machine $(PLOT_DIR)/machine.dat"
	@[ "$(PLOT_SWEEP)" = no ] || OPENBLAS_NUM_THREADS=1 $(SHARDLAB) sweep --out $(PLOT_DIR) --what bytes,share,memory,zero,bubble,plan --machine $(PLOT_DIR)/machine.dat
	@if ! command -v $(GNUPLOT) >/dev/null; then echo "gnuplot not found: skipping plots"; exit 0; fi; \
	term=$(PLOT_TERM); [ $$term = dumb ] || term=pngcairo; written=""; \
	for g in plots/*.gp; do \
	  png=$(PLOT_DIR)/$$(basename $$g .gp).png; \
	  echo "== $(GNUPLOT) -e \"dir='$(PLOT_DIR)'; term='$$term'\" $$g"; \
	  [ $$term = dumb ] || rm -f $$png; \
	  $(GNUPLOT) -e "dir='$(PLOT_DIR)'; term='$$term'" $$g || { echo "plots: gnuplot failed on $$g" >&2; exit 1; }; \
	  if [ $$term != dumb ]; then \
	    [ -s $$png ] || { echo "plots: $$g wrote no $$png" >&2; exit 1; }; written="$$written $$png"; fi; \
	done; \
	if [ $$term != dumb ]; then \
	  [ "$(PLOT_README)" = no ] || cmp -s $(PLOT_DIR)/bytes_per_device.png plots/bytes_per_device.png || \
	    { cp $(PLOT_DIR)/bytes_per_device.png plots/bytes_per_device.png; echo "plots: refreshed plots/bytes_per_device.png"; }; \
	  echo "plots: PNG files written:"; for p in $$written; do echo "  $$p ($$(stat -c %s $$p) bytes)"; done; fi

# shardlab beside PyTorch + gloo on the same layer and collectives (bench/peer.py; docs/performance.md).
# PyTorch is a comparison dependency only, not in PACKAGES: without python3-torch it says so and
# skips. PEER_ARGS, e.g. PEER_ARGS='--dims B=8,S=128,M=1024,H=4096 --rounds 3'.
PEER_ARGS ?=
bench-peer: $(SHARDLAB) $(MPI_MODULE)
	@/usr/bin/python3 bench/peer.py --shardlab $(SHARDLAB) $(PEER_ARGS)

# make plots as a new user runs it, into a directory of its own: PNG files listed and non-empty (the
# plots target checks each), the bytes-per-device plot drawn in the terminal with TERM=dumb, and a
# message instead of a failure without gnuplot.
TEST_PLOTS := $(BUILD)/test-plots
test-plots:
	@echo "== make plots PLOT_DIR=$(TEST_PLOTS) PLOT_MAX=1M"
	@rm -rf $(TEST_PLOTS); out=$$($(MAKE) --no-print-directory plots PLOT_DIR=$(TEST_PLOTS) PLOT_README=no PLOT_MAX=1M 2>&1) || \
	  { echo "$$out"; echo "   FAIL: make plots"; exit 1; }; \
	if ! command -v $(GNUPLOT) >/dev/null; then echo "   gnuplot not found: plots skipped, as make plots says"; exit 0; fi; \
	pngs=$$(grep -cE '^  $(TEST_PLOTS)/[a-z_]+\.png \([0-9]+ bytes\)$$' <<<"$$out"); \
	files=$$(ls $(TEST_PLOTS)/*.png 2>/dev/null | wc -l); \
	if [ $$pngs -ge 4 ] && [ $$pngs = $$files ]; then echo "   $$pngs PNG files listed and written"; \
	else echo "$$out"; echo "   FAIL: $$pngs PNG files listed, $$files written"; exit 1; fi
	@echo "== make plots TERM=dumb PLOT_SWEEP=no PLOT_DIR=$(TEST_PLOTS)"
	@out=$$($(MAKE) --no-print-directory plots TERM=dumb PLOT_SWEEP=no PLOT_DIR=$(TEST_PLOTS) PLOT_README=no 2>&1) || \
	  { echo "$$out"; echo "   FAIL: make plots TERM=dumb"; exit 1; }; \
	if ! command -v $(GNUPLOT) >/dev/null; then exit 0; fi; \
	if grep -q "Bytes sent per device" <<<"$$out" && grep -q "bytes sent per device, forward + backward" <<<"$$out" && \
	   grep -q "pairwise" <<<"$$out"; then echo "   bytes-per-device plot drawn in the terminal, axis label and legend as text"; \
	else echo "$$out"; echo "   FAIL: no bytes-per-device plot in the terminal"; exit 1; fi
	@echo "== make plots GNUPLOT=none PLOT_SWEEP=no PLOT_DIR=$(TEST_PLOTS)"
	@out=$$($(MAKE) --no-print-directory plots GNUPLOT=none PLOT_SWEEP=no PLOT_DIR=$(TEST_PLOTS) PLOT_README=no 2>&1); rc=$$?; \
	if [ $$rc = 0 ] && grep -q "gnuplot not found: skipping plots" <<<"$$out"; then echo "   exit 0: gnuplot not found: skipping plots"; \
	else echo "$$out"; echo "   FAIL: exit $$rc without gnuplot"; exit 1; fi

# ThreadSanitizer and ASan+UBSan. ThreadSanitizer runs the suites where threads meet (TSAN_SUITES
# above: a test binary of just those, with shardlab and the lessons they start); ASan+UBSan runs
# the whole doctest suite with every lesson and shardlab built the same way. Under make -j2 the
# ThreadSanitizer suite runs while the ASan build compiles. Any finding fails the target, and the
# log of the file it was found in is printed whole.
# UCX_MEM_EVENTS=no: tests that start MPI in-process load MPICH's UCX, whose memory hooks patch
# madvise; glibc calls it as a thread exits, after TSan has torn that thread's state down, and the
# hook's rwlock then segfaults inside TSan's interceptor (seen in CI: "make: *** sanitize
# Segmentation fault"). Without the events UCX only skips its registration cache.
# NO_ASLR: GCC 12's TSan runtime stops with "unexpected memory mapping" on kernels with more ASLR
# entropy (vm.mmap_rnd_bits > 28); running without address randomization avoids that, where allowed.
NO_ASLR = $(shell setarch $$(uname -m) -R true 2>/dev/null && echo setarch $$(uname -m) -R)
# exitcode 86/87: a finding in a lesson or shardlab that a test runs must not look like the exit 1
# a test expects from a failing verdict (ASan and UBSan exit 1 by default); 86 or 87 fails the test.
ASAN_ENV := SHARDLAB_BIN=build/asan/bin ASAN_OPTIONS=detect_leaks=1:exitcode=86 \
            UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=87 OPENBLAS_NUM_THREADS=1
.PHONY: sanitize-suites tsan-suite asan-suite
sanitize: deps
	@$(MAKE) --no-print-directory $(AUTO_JOBS) SAN=thread bins
	@$(MAKE) --no-print-directory $(AUTO_JOBS) sanitize-suites

sanitize-suites: tsan-suite asan-suite

# The ThreadSanitizer suite runs one file at a time while the ASan build takes the other core; the
# ASan suite two at a time. Each is a queue of one process per test file (tests/run_suite.sh), so
# the slowest files do not leave a core idle at the end.
tsan-suite:
	@echo "== ThreadSanitizer suite: $(words $(TSAN_SUITES)) suites where threads meet, shardlab and lessons sanitized too (log: build/tsan/suite.log)"
	@SHARDLAB_BIN=build/tsan/bin UCX_MEM_EVENTS=no TSAN_OPTIONS=halt_on_error=1 OPENBLAS_NUM_THREADS=1 \
	  $(NO_ASLR) tests/run_suite.sh 1 build/tsan/suite build/tsan/bin/tests $(TSAN_TEST_SRCS) \
	  >build/tsan/suite.log 2>&1; rc=$$?; \
	echo "== ThreadSanitizer suite ended, exit $$rc:"; cat build/tsan/suite.log; exit $$rc

asan-suite:
	@$(MAKE) --no-print-directory SAN=address bins
	@echo "== AddressSanitizer + UndefinedBehaviorSanitizer suite, two test files at a time (lessons and shardlab sanitized too)"
	@$(ASAN_ENV) tests/run_suite.sh 2 build/asan/suite build/asan/bin/tests $(TEST_SRCS)

clean:
	rm -rf build

# The dependency files are only read: without this empty rule make would try to remake a missing or
# old one through its built-in `%: %.o` and the unity rules (it compiled an empty lib_core.d.cpp).
%.d: ;
-include $(shell find build -name '*.d' 2>/dev/null)
