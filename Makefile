# txl: build, test, demo, fixtures.  `make` builds ./txl; objects live in build/.
PKGS    := openblas yaml-0.1 libcjson zlib libpcre2-8
CC      ?= cc
# -march=native: the elementwise passes (dropout, softmax, layernorm, Adam) vectorise for this
# CPU (+12% tokens/s on S). PORTABLE=1 builds for any x86-64 (a binary to copy elsewhere).
ifeq ($(PORTABLE),1)
CFLAGS  ?= -O2 -g
else
CFLAGS  ?= -O3 -march=native -g
endif
# -fno-math-errno: nothing reads errno after a math call, and without it sqrtf (Adam) is a
# branch to libm that keeps the loop scalar. -fno-trapping-math: nothing reads the FP
# exception flags; without it GCC will not turn a select into a blend on AVX2 (only
# AVX-512's masks make that safe), and the softmax's exp and the dropout maps stay scalar.
# Neither changes a value.
override CFLAGS += -std=c11 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -MMD -MP -fopenmp \
                   -fno-math-errno -fno-trapping-math
override CFLAGS += $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# oneDNN (libdnnl-dev) has no pkg-config file: bf16 matrix products (model/gemm_bf16.c)
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -ldnnl -lm -fopenmp
PYTHON  ?= /usr/bin/python3
# make MPI=1: data-parallel training over Open MPI (mpicc, libopenmpi-dev); objects apart
ifeq ($(MPI),1)
CC      := mpicc
override CFLAGS += -DTXL_MPI
BUILD   ?= build-mpi
FLAVOR  := mpi
else ifeq ($(PORTABLE),1)
BUILD   ?= build-portable
FLAVOR  := portable
else
BUILD   ?= build
FLAVOR  := plain
endif
# the binary: ./txl; other builds put theirs elsewhere (make asan: build-asan/txl)
BIN     ?= txl

SRC     := $(wildcard common/*.c model/*.c io/*.c data/*.c optim/*.c config/*.c eval/*.c run/*.c api/*.c cmd/*.c)
OBJ     := $(SRC:%.c=$(BUILD)/%.o)
# the library: every object but the command line's (libtxl.a, libtxl.so; tests link it too)
LIBOBJ  := $(filter-out $(BUILD)/cmd/%,$(OBJ))
CMDOBJ  := $(filter $(BUILD)/cmd/%,$(OBJ))
TESTSRC := $(wildcard tests/test_*.c)
TESTBIN := $(TESTSRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all test check unit e2e demo fixtures clean asan bench bench-adaptive bench-avx2 bench-loaded bench-quality bench-quant bench-sample bench-schemes bench-precision bench-attn test-mpi \
        test-multihost bench-multihost
all: $(BIN)

# ./txl is relinked whenever the flavour (plain, portable or MPI) changes
$(BUILD)/.flavor-$(FLAVOR):
	@mkdir -p $(dir $@)
	@rm -f build*/.flavor-*
	@touch $@

$(BIN): $(OBJ) $(BUILD)/.flavor-$(FLAVOR)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(OBJ) $(LDLIBS)

# make lib: libtxl.a (the objects of ./txl's build) and libtxl.so (the same sources built
# position-independent in BUILD/pic/, exporting only include/txl.h's txl_* functions).
LIBVER  := 0.3.0
PICOBJ  := $(LIBOBJ:$(BUILD)/%.o=$(BUILD)/pic/%.o)
.PHONY: lib examples
lib: $(BUILD)/libtxl.a $(BUILD)/libtxl.so

$(BUILD)/libtxl.a: $(LIBOBJ)
	@rm -f $@
	ar rcs $@ $(LIBOBJ)

$(BUILD)/pic/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -c -o $@ $<

$(BUILD)/libtxl.so: $(PICOBJ) api/txl.map
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,libtxl.so.0 \
		-Wl,--version-script=api/txl.map -o $@ $(PICOBJ) $(LDLIBS)

# make examples: examples/*.c, each a program on include/txl.h alone, linked with libtxl.a
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))
examples: $(EXAMPLES)

$(BUILD)/examples/%: examples/%.c include/txl.h $(BUILD)/libtxl.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude $(LDFLAGS) -o $@ $< $(BUILD)/libtxl.a $(LDLIBS)

# the Makefile too: a change of flags rebuilds every object
$(BUILD)/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# The installed configs directory (make install's PREFIX) is compiled into cmd/cli.c, which
# looks bare config names up there: a header rewritten only when PREFIX changes, so
# `make install PREFIX=...` rebuilds txl for its prefix and other makes rebuild nothing.
PREFIX  ?= /usr/local
CONFIGDIR = $(PREFIX)/share/txl/configs
$(BUILD)/txl_paths.h: FORCE
	@mkdir -p $(dir $@)
	@printf '#define TXL_CONFIG_DIR "%s"\n' '$(CONFIGDIR)' > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
$(BUILD)/cmd/cli.o: $(BUILD)/txl_paths.h
$(BUILD)/cmd/cli.o: override CFLAGS += -DTXL_PATHS='"$(abspath $(BUILD)/txl_paths.h)"'
.PHONY: FORCE
FORCE:

$(BUILD)/tests/%: tests/%.c $(LIBOBJ) $(BUILD)/tests/testlib.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJ) $(BUILD)/tests/testlib.o $(LDLIBS)

$(BUILD)/tests/testlib.o: tests/testlib.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# The fuzz harnesses (tests/fuzz/) as plain objects: test_fuzz_replay runs them over the
# committed corpora, so `make test` needs no clang.
FUZZNAMES := config checkpoint corpus vocab plotlog
FUZZLIB := $(addprefix $(BUILD)/fuzzlib/,$(FUZZNAMES:%=fuzz_%.o) fuzz_util.o replay.o)
# the plotlog harness reads logs as `txl plot` does: with the command's own reader
PLOTLOG_OBJ := $(BUILD)/cmd/plot_curves.o $(BUILD)/cmd/plot_util.o

$(BUILD)/fuzzlib/%.o: tests/fuzz/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DTXL_FUZZ_NO_ENTRY -c -o $@ $<

$(BUILD)/tests/test_fuzz_replay: tests/test_fuzz_replay.c $(FUZZLIB) $(PLOTLOG_OBJ) $(LIBOBJ) $(BUILD)/tests/testlib.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(FUZZLIB) $(PLOTLOG_OBJ) $(LIBOBJ) $(BUILD)/tests/testlib.o $(LDLIBS)

# Unit tests (C programs, one per file) and end-to-end CLI scripts (tests/e2e/*.sh), in
# parallel (TXL_TEST_JOBS at a time, default the cores; the longest first). `make check`: the
# unit tests and the fast end-to-end scripts (tests/run_all.sh lists them), for the
# edit-compile-test loop. TXL_SKIP="a.sh b.sh" skips those end-to-end scripts (make asan
# uses ASAN_SKIP).
# the plain build's make test also builds libtxl.so, which install.sh and library.sh install
TESTLIB := $(if $(filter build,$(BUILD)),lib)
test: $(BIN) $(TESTBIN) $(EXAMPLES) $(TESTLIB)
	@TXL_BIN=$(abspath $(BIN)) tests/run_all.sh $(BUILD)

check: $(BIN) $(TESTBIN) $(EXAMPLES)
	@TXL_BIN=$(abspath $(BIN)) tests/run_all.sh $(BUILD) check

unit: $(TESTBIN)
	@for t in $(TESTBIN); do echo "== $$t"; $$t || exit 1; done

# Regenerates tests/fixtures/ from the independent PyTorch reference (needs python3-torch).
fixtures: $(BIN)
	$(PYTHON) tests/ref/gen_fixtures.py tests/fixtures
	TXL_BIN=$(abspath $(BIN)) PYTHON=$(PYTHON) tests/ref/gen_eval_fixture.sh

# Regenerates the tokenizers' expected outputs in tests/data/vocab/ (make test needs none of
# these tools): the word vocabularies and ids of official Transformer-XL's Vocab written again
# in Python (tests/ref/word_vocab.py), the naive bpe trainer's merges (bpe_train.py, needs
# python3-regex), and GPT-2's ids by tiktoken and gpt-3-encoder under node (gpt2_ids.js; the
# npm packages are installed into NPM_REF, outside the tree, when missing).
NPM_REF ?= /tmp/txl-npm-ref
.PHONY: vocab-ref
vocab-ref:
	$(PYTHON) tests/ref/word_vocab.py
	$(PYTHON) tests/ref/bpe_train.py
	@[ -d $(NPM_REF)/node_modules/tiktoken ] || (mkdir -p $(NPM_REF) && cd $(NPM_REF) && \
		npm install --no-save --no-package-lock tiktoken gpt-3-encoder)
	NODE_PATH=$(abspath $(NPM_REF))/node_modules node tests/ref/gpt2_ids.js

# Installs what is missing, builds, trains configs/tiny.yaml on the King James Bible
# (corpora/kjv.txt), evaluates and samples.
demo:
	@scripts/demo.sh

# Downloads the standard enwik8 into corpora/ (enwik8, enwik8_first3MB.txt.gz), checked.
.PHONY: data
data:
	@scripts/get_enwik8.sh

# Builds the scale study's prose corpus (the kernel's Documentation/*.rst from Debian's
# linux-source-6.1, split by file, checked by sha256) into corpora/linuxdoc_*.txt.gz.
.PHONY: data-linuxdoc
data-linuxdoc:
	@scripts/get_corpus_linuxdoc.sh

$(BUILD)/bench/sgemm_peak: bench/sgemm_peak.c $(LIBOBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJ) $(LDLIBS)

$(BUILD)/bench/adaptive: bench/adaptive.c $(LIBOBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJ) $(LDLIBS)

$(BUILD)/bench/vocab_encode: bench/vocab_encode.c $(LIBOBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJ) $(LDLIBS)

$(BUILD)/bench/cache_quality: bench/cache_quality.c $(LIBOBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJ) $(LDLIBS)

$(BUILD)/bench/attn_kernel: bench/attn_kernel.c $(LIBOBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJ) $(LDLIBS)

$(BUILD)/bench/mem_bw: bench/mem_bw.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<

# bf16 against fp32 and PyTorch's autocast bf16 alone (part of make bench)
bench-precision: $(BIN)
	@TXL_BIN=$(abspath $(BIN)) BUILD=$(BUILD) bench/precision.sh

# attention alone: the fused kernel against the OpenBLAS path, side by side (one thread)
bench-attn: $(BUILD)/bench/attn_kernel
	@$(BUILD)/bench/attn_kernel 1 5

# Speed and memory, side by side with the PyTorch reference when /usr/bin/python3 has torch.
bench: $(BIN) $(BUILD)/bench/sgemm_peak $(BUILD)/bench/mem_bw $(BUILD)/bench/attn_kernel \
		$(BUILD)/bench/cache_quality
	@TXL_BIN=$(abspath $(BIN)) BUILD=$(BUILD) bench/bench.sh

# make bench for an AVX2 build (-march=haswell, in build-avx2/) on OpenBLAS's Haswell kernels,
# PyTorch held to AVX2 too, the loaded scenario left out: the AVX2 path measured on any x86-64
# with AVX2 (on an AVX-512 machine, an emulation of an AVX2 CPU at this one's clock).
bench-avx2:
	@$(MAKE) --no-print-directory BUILD=build-avx2 BIN=build-avx2/txl CFLAGS="-O3 -march=haswell -g" \
		build-avx2/txl build-avx2/bench/sgemm_peak build-avx2/bench/mem_bw \
		build-avx2/bench/attn_kernel build-avx2/bench/cache_quality
	@OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 DNNL_MAX_CPU_ISA=AVX2 SKIP_LOADED=1 \
		OUT=runs/bench-avx2 TXL_BIN=$(abspath build-avx2/txl) BUILD=build-avx2 bench/bench.sh

# Training S with one competing CPU-bound process (the bench starts it): default vs the best
# explicit thread setting, and vs idle.
bench-loaded: $(BIN)
	@TXL_BIN=$(abspath $(BIN)) bench/loaded.sh

# Quality per minute: valid bpc of S on enwik8_first3MB after MINUTES (10; QUICK=1: 2) of
# training, txl and the PyTorch reference, then the ready configs/enwik8_10min.yaml (DATA:
# the corpus directory, ../shared/data).
bench-quality: $(BIN)
	@TXL_BIN=$(abspath $(BIN)) bench/quality.sh

# Sampling alone, with the memory full (TXL_BASE=old/txl: old and new side by side).
bench-sample: $(BIN) $(BUILD)/bench/mem_bw
	@TXL_BIN=$(abspath $(BIN)) BUILD=$(BUILD) bench/sample.sh

# What txl quantize and the decoding caches cost in quality: bits per byte and greedy
# samples of a trained S (bench/quant.sh; trains one for MINUTES, default 5, unless Q_CKPT
# names one).
bench-quant: $(BIN) $(BUILD)/bench/cache_quality
	@TXL_BIN=$(abspath $(BIN)) BUILD=$(BUILD) bench/quant.sh

# The adaptive softmax against the full softmax over WikiText-103's 267,735 words: training
# tokens/s side by side, and the memory each plans at V, 2V and 4V (bench/adaptive.sh).
bench-adaptive: $(BIN) $(BUILD)/bench/adaptive
	@TXL_BIN=$(abspath $(BIN)) BUILD=$(BUILD) bench/adaptive.sh

# The tokenizers' speed, side by side: GPT-2 encoding against tiktoken's npm build (node),
# learning 32000 bpe tokens against sentencepiece's spm_train (bench/vocab.sh).
.PHONY: bench-vocab
bench-vocab: $(BIN) $(BUILD)/bench/vocab_encode
	@TXL_BIN=$(abspath $(BIN)) BUILD=$(BUILD) bench/vocab.sh

# What each positional scheme and the anchors cost in training tokens/s, against mlp.
bench-schemes: $(BIN)
	@TXL_BIN=$(abspath $(BIN)) bench/schemes.sh

# Everything (txl, unit tests, fuzz replay) with ASan + UBSan (any report fails) in
# build-asan/, then the whole suite against build-asan/txl. ASAN_SKIP lists end-to-end
# scripts to leave out (to keep CI short; ASAN_SKIP= runs them all). -march=native: the code
# paths of the real build (the few-row GEMM kernel exists only with AVX).
ASAN_SKIP ?=
asan:
	$(MAKE) BUILD=build-asan BIN=build-asan/txl \
		CFLAGS="-O1 -march=native -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
		LDFLAGS="-fsanitize=address,undefined" TXL_SKIP="$(ASAN_SKIP)" test

# libFuzzer (clang): builds build-fuzz/fuzz_{config,checkpoint,corpus,vocab,plotlog} and runs each for
# FUZZ_SECONDS (tests/fuzz/run.sh: seeds, dictionaries, crash artifacts in build-fuzz/).
# FUZZ=name runs one harness. Plain replay programs: make build/fuzz/replay_<name>.
FUZZ_SECONDS ?= 300
FUZZ ?= $(FUZZNAMES)
FUZZ_CFLAGS := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
.PHONY: fuzz fuzz-build
fuzz: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh $(FUZZ)

fuzz-build:
	$(MAKE) CC=clang BUILD=build-fuzz CFLAGS="$(FUZZ_CFLAGS)" \
		$(FUZZNAMES:%=build-fuzz/fuzz_%)

build-fuzz/fuzz_%: $(BUILD)/fuzz/fuzz_%.o $(BUILD)/fuzz/fuzz_util.o $(LIBOBJ)
	$(CC) $(CFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS)

$(BUILD)/fuzz/%.o: tests/fuzz/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/fuzz/replay_%: $(BUILD)/fuzz/fuzz_%.o $(BUILD)/fuzz/replay.o $(BUILD)/fuzz/fuzz_util.o $(LIBOBJ)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

build-fuzz/fuzz_plotlog $(BUILD)/fuzz/replay_plotlog: $(PLOTLOG_OBJ)

# The data-parallel equivalence test: 1 rank vs 2 ranks (needs libopenmpi-dev openmpi-bin).
test-mpi:
	$(MAKE) MPI=1 $(BIN)
	TXL_BIN=$(abspath $(BIN)) tests/mpi/equivalence.sh
	TXL_BIN=$(abspath $(BIN)) sh tests/mpi/signal_race.sh

# 2 ranks on two simulated machines (network namespaces joined by a veth pair, TCP only; needs
# root and ip netns, skips otherwise): the same training bit for bit, a killed rank, the
# shaped link, auto's decision (tests/mpi/multihost.sh, about a minute). bench-multihost:
# the measurements of doc/mpi.md (bench/multihost.sh: S and M, overlap off/on/auto, 1 and
# 10 Gbit/s; RESULTS=file.jsonl, resumed where it stopped).
test-multihost:
	$(MAKE) MPI=1 $(BIN) build-mpi/bench/mpi_link build-mpi/tests/link_delay
	TXL_BIN=$(abspath $(BIN)) MH_DELAY_BIN=build-mpi/tests/link_delay sh tests/mpi/multihost.sh

bench-multihost:
	$(MAKE) MPI=1 $(BIN) build-mpi/bench/mpi_link build-mpi/tests/link_delay
	TXL_BIN=$(abspath $(BIN)) MH_DELAY_BIN=build-mpi/tests/link_delay sh bench/multihost.sh

# the link probe (MPI builds only: mpicc)
$(BUILD)/bench/mpi_link: bench/mpi_link.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<

# the simulated link's delay (tests/mpi/netns.sh): libnetfilter-queue
$(BUILD)/tests/link_delay: tests/mpi/link_delay.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lnetfilter_queue

clean:
	rm -rf build build-asan build-mpi build-fuzz build-portable build-avx2 $(sort txl $(BIN))

# make install [PREFIX=/usr/local] [DESTDIR=]: the binary, the man page (doc/txl.1), the
# ready configs and the bash completion (contrib/txl.bash). `make uninstall` removes them.
# txl finds the configs by bare name (txl train -c tiny.yaml) in $(CONFIGDIR), or in
# ../share/txl/configs of the binary's directory (a DESTDIR or a moved tree).
DESTDIR ?=
INSTDIR  = $(DESTDIR)$(PREFIX)
.PHONY: install uninstall
install: $(BIN) lib
	install -d $(INSTDIR)/bin $(INSTDIR)/share/man/man1 $(INSTDIR)/share/txl/configs \
		$(INSTDIR)/share/bash-completion/completions $(INSTDIR)/include $(INSTDIR)/lib/pkgconfig
	install -m 644 include/txl.h $(INSTDIR)/include/txl.h
	install -m 644 $(BUILD)/libtxl.a $(INSTDIR)/lib/libtxl.a
	install -m 755 $(BUILD)/libtxl.so $(INSTDIR)/lib/libtxl.so.$(LIBVER)
	ln -sf libtxl.so.$(LIBVER) $(INSTDIR)/lib/libtxl.so.0
	ln -sf libtxl.so.0 $(INSTDIR)/lib/libtxl.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(LIBVER)|' \
		-e 's|@LIBS@|$(shell pkg-config --libs $(PKGS) 2>/dev/null) -ldnnl -lm -fopenmp|' \
		contrib/txl.pc.in > $(INSTDIR)/lib/pkgconfig/txl.pc
	install -m 755 $(BIN) $(INSTDIR)/bin/txl
	install -m 644 doc/txl.1 $(INSTDIR)/share/man/man1/txl.1
	install -m 644 configs/*.yaml $(INSTDIR)/share/txl/configs/
	install -m 644 contrib/txl.bash $(INSTDIR)/share/bash-completion/completions/txl

uninstall:
	rm -f $(INSTDIR)/bin/txl $(INSTDIR)/share/man/man1/txl.1 $(INSTDIR)/include/txl.h \
		$(INSTDIR)/lib/libtxl.a $(INSTDIR)/lib/libtxl.so $(INSTDIR)/lib/libtxl.so.0 \
		$(INSTDIR)/lib/libtxl.so.$(LIBVER) $(INSTDIR)/lib/pkgconfig/txl.pc \
		$(INSTDIR)/share/bash-completion/completions/txl \
		$(addprefix $(INSTDIR)/share/txl/configs/,$(notdir $(wildcard configs/*.yaml)))
	-rmdir $(INSTDIR)/share/txl/configs $(INSTDIR)/share/txl 2>/dev/null

-include $(OBJ:.o=.d) $(PICOBJ:.o=.d) $(TESTBIN:=.d) $(FUZZLIB:.o=.d)
