# Makefile: every entry point of mixpar: deps, build, test, labs, grading, handout, submit, slides, bench.
# Run `make help` for the list. Outputs go to build/ (binaries, objects) and dist/ (the student edition).

CC      ?= gcc
NVCC    ?= nvcc
BUILD   := build
OPT     ?= -O2
# snprintf into fixed buffers is how paths and messages are bounded here, so its truncation warning is off.
# -fopenmp: the ops/ kernels split rows and heads over threads (OMP_NUM_THREADS) and mark inner loops simd.
# -fno-math-errno: lets sqrtf vectorise (no code here reads errno after math calls).
# -fno-trapping-math: mixpar never unmasks floating-point traps, so GCC may evaluate both sides of a select;
# without it GCC will not vectorise loops with clamps or selects (ops/fastmath.h). Results are unchanged.
SHELL   := /bin/bash
DEPS_OK := $(BUILD)/.deps-ok

# Flags from installed packages (OpenMPI's compiler wrapper) live in build/config.mk, made by
# tools/configure.sh after `make deps`. Make builds an included makefile that is missing, then rereads
# everything, so on a fresh machine the first `make demo` installs the packages, computes the flags and
# builds in one invocation (computing them here with $(shell mpicc ...) would run before mpicc exists).
# Goals that build nothing do not need it.
CONFIG_MK := $(BUILD)/config.mk
ifneq ($(filter-out help clean deps cuda-check,$(or $(MAKECMDGOALS),all)),)
include $(CONFIG_MK)
endif
$(CONFIG_MK): $(DEPS_OK) tools/configure.sh
	@tools/configure.sh >$@.tmp && mv $@.tmp $@

CFLAGS  := -std=gnu11 -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -Wno-format-truncation -fno-trapping-math \
           -fno-math-errno -Werror=implicit-function-declaration -pthread -fopenmp -Icore -MMD -MP \
           $(MPI_CFLAGS)
# OpenBLAS: sgemm for the linear layers (ops/matmul.c). MPI (comm/): flags from OpenMPI's compiler wrapper.
LDLIBS  := -lopenblas -lcjson -lm -pthread -fopenmp $(MPI_LIBS)

# The student edition (made by `make handout`) carries this marker file: its lab regions are stubs, so
# unused-parameter warnings there are expected and silenced.
EDITION := $(if $(wildcard .student-edition),student,instructor)
ifeq ($(EDITION),student)
CFLAGS  += -Wno-unused-parameter -Wno-unused-variable -Wno-unused-but-set-variable -Wno-unused-function
endif

LIB_SRC  := $(sort $(filter-out core/cli/%,$(wildcard core/*/*.c)))
CLI_SRC  := $(sort $(wildcard core/cli/*.c))
LIB      := $(BUILD)/libmixpar.a
MIXPAR   := $(BUILD)/mixpar
GRADER   := $(BUILD)/mixpar-grade
VIZ      := $(BUILD)/mixpar-viz
HARNESS  := $(BUILD)/obj/tests/harness/mptest.o
obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

# labs/lab03-float-formats -> 03
LAB_DIRS := $(sort $(wildcard labs/lab[0-9][0-9]-*))
LAB_NUMS := $(foreach d,$(LAB_DIRS),$(patsubst lab%,%,$(firstword $(subst -, ,$(notdir $(d))))))

.DEFAULT_GOAL := all
.PHONY: all demo plots help deps test unit-tests mpi-tests clean handout grade submit release catchup mutants print-mutant-flags labtests lab-tests slides bench cuda-check regions \
        hidden-objs hidden-tests \
        $(addprefix lab,$(LAB_NUMS))

all: $(MIXPAR) $(GRADER) $(VIZ)

# The main demo: builds the Tang/Song poetry corpus on first use and trains a tiny GPT on the CPU (about
# 20 s on 2 cores), printing a sample before and after and the validation loss as it falls. On a terminal
# the training runs in the background under the live visualizer (viz/demo.sh says what q does); in CI or a
# pipe it runs as before and ends with a text snapshot of the loss panel.
demo: all
	@viz/demo.sh configs/tiny-poetry.json runs/tiny-poetry

help:
	@echo "mixpar ($(EDITION) edition): make targets"
	@echo "  make deps            install missing Debian packages (apt-get; sudo when not root)"
	@echo "  make                 build libmixpar, the mixpar tool and the grader"
	@echo "  make demo            the main demo"
	@echo "  make plots RUN=dir   gnuplot figures of a run (mixpar plot; OUT=dir to choose where)"
	@echo "  make test            run every test; ends with 'N passed, N failed'"
	@echo "  make labNN           run lab NN's experiment (labs: $(LAB_NUMS))"
	@echo "  make grade LAB=NN    grade lab NN  [SUBMISSION=file.tar] [FILTER=name] [JSON=results.json]"
	@echo "  make submit LAB=NN   pack your lab NN regions into submit-labNN.tar"
	@echo "  make catchup LAB=NN  fill the still-stub regions of the labs NN requires from catchup/labRR.tar (released"
	@echo "                       by the instructor with make release LAB=RR), so lab NN runs"
	@echo "  make handout         write the student edition to dist/student"
	@echo "  make slides          build slides/*.md into self-contained HTML in build/slides"
	@echo "  make bench           run the benchmarks in bench/"
	@echo "  make sanitize        unit tests, a short training and 2- and 3-rank runs under ASan + UBSan"
	@echo "  make cuda-check      compile the CUDA sources and link NCCL (needs nvcc; no GPU needed)"
	@echo "  make clean           remove build/ and dist/"

deps: $(DEPS_OK)
$(DEPS_OK): tools/packages.txt tools/deps.sh
	@tools/deps.sh
	@mkdir -p $(BUILD) && touch $@

# ---------------------------------------------------------------- build
$(BUILD)/obj/%.o: %.c | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(call obj,$(LIB_SRC))
	@rm -f $@
	ar rcs $@ $^

$(MIXPAR): $(call obj,$(CLI_SRC)) $(call obj,viz/source.c) $(LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(GRADER): $(call obj,$(wildcard grader/*.c)) $(LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(HARNESS): CFLAGS += -Itests/harness

UNIT_SRC := $(wildcard tests/unit/*.c)
-include $(patsubst %.o,%.d,$(call obj,$(LIB_SRC) $(CLI_SRC) $(wildcard grader/*.c) $(UNIT_SRC) tests/harness/mptest.c))

# ---------------------------------------------------------------- visualizer
# build/mixpar-viz, from viz/*.c: it reads event files and nothing else, so it links ncursesw and cJSON and,
# of the core, only error messages and number parsing. `mixpar viz|plot|trace` exec it (core/cli/cmd_viz.c).
VIZ_SRC  := $(sort $(wildcard viz/*.c))
VIZ_OBJ  := $(call obj,$(filter-out viz/main.c,$(VIZ_SRC)))
VIZ_LIBS := -lncursesw -lcjson -lm

$(VIZ): $(call obj,viz/main.c) $(VIZ_OBJ) $(call obj,core/base/error.c core/base/parse.c)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(VIZ_LIBS)

plots: all
	@[ -n "$(RUN)" ] || { echo "usage: make plots RUN=runs/NAME [OUT=dir]" >&2; exit 2; }
	@$(MIXPAR) plot $(RUN) $(if $(OUT),--out $(OUT))

-include $(patsubst %.o,%.d,$(call obj,$(VIZ_SRC)))

# ---------------------------------------------------------------- labs
# Each lab's test binary: its visible tests, plus the hidden ones where this edition has them.
# A lab whose tests start ranks with mpirun (lab 12) also has a worker program, from tests/worker/*.c,
# built whenever its test binary is. Both are linked from objects, each compiled once with its own dependency
# file: a grade's copy of the tree brings them along, and its hidden tests' binary links the same ones.
$(BUILD)/obj/labs/%.o: CFLAGS += -Itests/harness
-include $(patsubst %.o,%.d,$(call obj,$(wildcard labs/*/tests/*.c labs/*/tests/worker/*.c)))
define LAB_RULES
$(BUILD)/labs/lab$(1)_tests: $(call obj,$(wildcard labs/lab$(1)-*/tests/*.c grader/hidden/lab$(1)/*.c)) $(HARNESS) $(LIB) \
    $(if $(wildcard labs/lab$(1)-*/tests/worker/*.c),| $(BUILD)/labs/lab$(1)_worker)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -o $$@ $$(filter %.o,$$^) $(LIB) $$(LDLIBS)
$(BUILD)/labs/lab$(1)_worker: $(call obj,$(wildcard labs/lab$(1)-*/tests/worker/*.c)) $(LIB)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -o $$@ $$(filter %.o,$$^) $(LIB) $$(LDLIBS)
lab$(1): all
	@$(wildcard labs/lab$(1)-*)/experiment.sh
endef
$(foreach n,$(LAB_NUMS),$(eval $(call LAB_RULES,$(n))))

# mixpar-grade's hidden tests: compiled in this tree (hidden-objs), linked in a grading copy that has none of
# their sources into a binary of their own with the visible tests' helpers (hidden-tests HIDDEN_OBJS=... HIDDEN_OUT=...).
$(BUILD)/obj/grader/hidden/%.o: CFLAGS += -Itests/harness
hidden-objs: $(call obj,$(wildcard grader/hidden/lab$(LAB)/*.c))
-include $(patsubst %.o,%.d,$(call obj,$(wildcard grader/hidden/*/*.c)))
hidden-tests: $(HIDDEN_OBJS) $(call obj,$(wildcard labs/lab$(LAB)-*/tests/*.c)) $(HARNESS) $(LIB)
	@[ -n "$(HIDDEN_OUT)" ] || { echo "usage: make hidden-tests LAB=NN HIDDEN_OBJS='...' HIDDEN_OUT=path (mixpar-grade calls this)" >&2; exit 2; }
	$(CC) $(CFLAGS) -o $(HIDDEN_OUT) $(filter %.o,$^) $(LIB) $(LDLIBS)

lab-tests: $(foreach n,$(LAB_NUMS),$(BUILD)/labs/lab$(n)_tests)

# Planted bugs against each lab's tests (tests/mutants/): make mutants [LAB=NN]
mutants: all lab-tests
	@tests/mutants/run.sh $(LAB)
print-mutant-flags:
	@echo '$(CFLAGS)'
	@echo '$(LDLIBS)'

labtests: $(BUILD)/labs/lab$(LAB)_tests

grade: all
	@[ -n "$(LAB)" ] || { echo "usage: make grade LAB=NN [SUBMISSION=file.tar] [FILTER=name] [JSON=results.json]" >&2; exit 2; }
	@$(GRADER) grade $(LAB) $(if $(SUBMISSION),--submission $(SUBMISSION)) $(if $(FILTER),--filter $(FILTER)) $(if $(JSON),--json $(JSON))

submit: all
	@[ -n "$(LAB)" ] || { echo "usage: make submit LAB=NN" >&2; exit 2; }
	@$(GRADER) submit $(LAB)

# Falling behind: the instructor releases a lab's reference regions (make release LAB=NN, in the instructor's
# edition: catchup/labNN.tar), a student copies them into catchup/ and `make catchup LAB=MM` fills the stubs of the
# labs MM requires, so MM runs; what the student wrote stays.
release: $(GRADER)
	@[ -n "$(LAB)" ] || { echo "usage: make release LAB=NN" >&2; exit 2; }
	@$(GRADER) release $(LAB)

catchup: $(GRADER)
	@[ -n "$(LAB)" ] || { echo "usage: make catchup LAB=NN" >&2; exit 2; }
	@$(GRADER) catchup $(LAB)

handout: all
	@$(GRADER) handout dist/student

regions: all
	@$(GRADER) regions

# ---------------------------------------------------------------- tests
# tests/unit/test_viz_*.c test the visualizer's objects, so the unit tests link them and ncursesw too.
$(BUILD)/tests/unit_tests: $(call obj,$(UNIT_SRC)) $(VIZ_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ -lcriterion $(LDLIBS) -lncursesw

unit-tests: $(BUILD)/tests/unit_tests

# Multi-rank tests (tests/mpi/run.sh starts them under mpirun).
MPI_TEST_SRC := $(wildcard tests/mpi/*.c)
$(BUILD)/tests/mpi/%: tests/mpi/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MF $@.d -o $@ $< $(LIB) $(LDLIBS)
-include $(wildcard $(BUILD)/tests/mpi/*.d)
mpi-tests: $(patsubst tests/mpi/%.c,$(BUILD)/tests/mpi/%,$(MPI_TEST_SRC))

# tests/cli/amp.sh runs bench/amp_perf on the tiny model (lab 10's table of memory by tag)
test: all lab-tests $(if $(filter instructor,$(EDITION)),unit-tests mpi-tests $(BUILD)/bench/amp_perf)
	@tests/run_all.sh $(EDITION)

# ---------------------------------------------------------------- extras
BENCH_SRC := $(wildcard bench/*.c)
$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -O3 -o $@ $< $(LIB) $(LDLIBS)

bench: $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
	@for b in $^; do echo "== $$b"; $$b || exit 1; done

slides: all
	@tools/slides.sh

cuda-check:
	@tools/cuda_check.sh

# `make sanitize`: the unit tests, a short training and 2- and 3-rank runs built with AddressSanitizer and
# UndefinedBehaviorSanitizer in build/sanitize (tools/sanitize.sh; the normal build is untouched).
# SANITIZE=1 adds the flags to CFLAGS, which every compile and link line passes.
ifeq ($(SANITIZE),1)
CFLAGS  += -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
.PHONY: sanitize
sanitize:
	@tools/sanitize.sh

clean:
	rm -rf $(BUILD) dist submit-lab*.tar
