# txl: build, test, demo, fixtures.  `make` builds ./txl; objects live in build/.
PKGS    := openblas yaml-0.1 libcjson zlib
CC      ?= cc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -MMD -MP -fopenmp
CFLAGS  += $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm -fopenmp
PYTHON  ?= /usr/bin/python3
# make MPI=1: data-parallel training over Open MPI (mpicc, libopenmpi-dev); objects apart
ifeq ($(MPI),1)
CC      := mpicc
CFLAGS  += -DTXL_MPI
BUILD   ?= build-mpi
FLAVOR  := mpi
else
BUILD   ?= build
FLAVOR  := plain
endif

SRC     := $(wildcard common/*.c model/*.c data/*.c optim/*.c cmd/*.c)
OBJ     := $(SRC:%.c=$(BUILD)/%.o)
LIBOBJ  := $(filter-out $(BUILD)/cmd/main.o,$(OBJ))
TESTSRC := $(wildcard tests/test_*.c)
TESTBIN := $(TESTSRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all test unit e2e demo fixtures clean asan bench test-mpi
all: txl

# ./txl is relinked whenever the flavour (plain or MPI) changes
$(BUILD)/.flavor-$(FLAVOR):
	@mkdir -p $(dir $@)
	@rm -f build*/.flavor-*
	@touch $@

txl: $(OBJ) $(BUILD)/.flavor-$(FLAVOR)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(OBJ) $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(LIBOBJ) $(BUILD)/tests/testlib.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJ) $(BUILD)/tests/testlib.o $(LDLIBS)

$(BUILD)/tests/testlib.o: tests/testlib.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# Unit tests (C programs, one per file) then end-to-end CLI scripts (tests/e2e/*.sh).
test: txl $(TESTBIN)
	@tests/run_all.sh $(BUILD)

unit: $(TESTBIN)
	@for t in $(TESTBIN); do echo "== $$t"; $$t || exit 1; done

# Regenerates tests/fixtures/ from the independent PyTorch reference (needs python3-torch).
fixtures: txl
	$(PYTHON) tests/ref/gen_fixtures.py tests/fixtures
	PYTHON=$(PYTHON) tests/ref/gen_eval_fixture.sh

# Installs what is missing, builds, trains configs/tiny.yaml on the King James Bible,
# evaluates and samples.
demo:
	@scripts/demo.sh

$(BUILD)/bench/sgemm_peak: bench/sgemm_peak.c $(LIBOBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJ) $(LDLIBS)

# Speed and memory, side by side with the PyTorch reference when /usr/bin/python3 has torch.
bench: txl $(BUILD)/bench/sgemm_peak
	@BUILD=$(BUILD) bench/bench.sh

asan:
	$(MAKE) BUILD=build-asan CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
		LDFLAGS="-fsanitize=address,undefined" TXL_BIN=build-asan/txl test

# The data-parallel equivalence test: 1 rank vs 2 ranks (needs libopenmpi-dev openmpi-bin).
test-mpi:
	$(MAKE) MPI=1 txl
	tests/mpi/equivalence.sh

clean:
	rm -rf build build-asan build-mpi txl

-include $(OBJ:.o=.d) $(TESTBIN:=.d)
