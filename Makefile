# octd - real-time OCT processing daemon.  Plain GNU make.
#
#   make            build everything (CUDA parts when nvcc is found)
#   make check      build and run all tests (unit tests under ASan+UBSan, then end-to-end)
#   make demo       simulator -> octd -> images (CPU when no GPU)
#   make deps       install the Debian packages octd needs
#   make bench      run octbench (CPU; add BENCH_ARGS=--backend=cuda on a GPU machine)
#   make install    PREFIX=/usr/local DESTDIR= (programs, liboctipc, docs, man pages)
#   make man        man pages from --help (help2man) in $(BUILD)/man
#   make bundle     relocatable tree in build/bundle (binaries + $ORIGIN rpath libs)
#   make fuzz       libFuzzer targets (clang, ASan+UBSan) FUZZ_SECONDS each [60]
#   make valgrind   valgrind memcheck of octproc and an octd session (CPU build)

PREFIX   ?= /usr/local
DESTDIR  ?=
BIN      ?= bin
CC       ?= gcc
PYTHON   ?= /usr/bin/python3
CUDA_HOME ?= /usr/local/cuda
NVCC     ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
# NO_CUDA=1 forces a CPU-only build.
ifneq ($(NO_CUDA),)
NVCC :=
endif
# Objects of CUDA and CPU-only builds differ (-DOCT_HAVE_CUDA): keep them apart.
BUILD    ?= build/$(if $(NVCC),cuda,cpu)

VERSION  := 0.1.0
INCLUDES := -Ikernels -Iipc -Iconfig -Itools/common
WARN     := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wformat=2 -Wstrict-prototypes
BASE_CFLAGS := -std=gnu11 -g -fPIC -pthread -fopenmp -D_GNU_SOURCE -DOCT_VERSION=\"$(VERSION)\" $(INCLUDES) $(WARN) \
               -DOCT_DOCDIR=\"$(PREFIX)/share/doc/octd\"
CFLAGS   ?= -O2
LIBS     := -lfftw3f -lfftw3f_threads -lfftw3 -lfftw3_threads -lyaml -linih -lzmq -lpng -ldl -lm -lrt
LDFLAGS  ?=
# HDF5 (recording: octd, octgrab --record)
HDF5_CFLAGS := $(shell pkg-config --cflags hdf5 2>/dev/null || echo -I/usr/include/hdf5/serial)
HDF5_LIBS   := $(shell pkg-config --libs hdf5 2>/dev/null || echo -lhdf5_serial)
BASE_CFLAGS += $(HDF5_CFLAGS)

CUDA_LIBS :=
ifneq ($(NVCC),)
BASE_CFLAGS += -DOCT_HAVE_CUDA
NVCCFLAGS ?= -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
             -Xcompiler -fPIC -Xcompiler -Wall -Xcompiler -fopenmp -DOCT_HAVE_CUDA $(INCLUDES) -lineinfo
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcufft -lcublas -lcublasLt -lcudart -lstdc++
endif

# ---- sources ---------------------------------------------------------------
# tools/common: the command-line convention of every program (cli.h)
LIB_SRC  := $(sort $(wildcard kernels/*.c ipc/*.c config/*.c tools/common/*.c))
CU_SRC   := $(if $(NVCC),$(sort $(wildcard kernels/*.cu)))
IPC_SRC  := $(sort $(wildcard ipc/*.c)) kernels/error.c
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(CU_SRC:%.cu=$(BUILD)/obj/%.cu.o)
IPC_OBJ  := $(IPC_SRC:%.c=$(BUILD)/obj/%.o)
TOOLS    := $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard tools/*/main.c)))))
PROGS    := $(BIN)/octd $(TOOLS:%=$(BIN)/%)
TEST_LIB_SRC := $(sort $(wildcard tests/lib/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# Sanitizer build of the unit tests: CPU only (CUDA and ASan do not mix well).
SAN_FLAGS := -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/san/%.o)
SAN_TEST_LIB_OBJ := $(TEST_LIB_SRC:%.c=$(BUILD)/san/%.o)
SAN_TESTS := $(TEST_SRC:tests/%.c=$(BUILD)/san/tests/%)

.PHONY: all lib progs tests check demo deps bench install bundle clean fuzz soak valgrind valgrind-progs man
# keep test helper objects between builds (they are intermediate to make)
.SECONDARY:
all: lib progs tests

# ---- dependencies ----------------------------------------------------------
DEPS_STAMP := $(BUILD)/.deps-ok
$(DEPS_STAMP):
	@tools/build/deps.sh --check >/dev/null 2>&1 || tools/build/deps.sh
	@mkdir -p $(BUILD) && touch $@
deps:
	tools/build/deps.sh
	@mkdir -p $(BUILD) && touch $(DEPS_STAMP)

# ---- library ---------------------------------------------------------------
# liboctipc: ABI major 1 is the soname; the file carries major.minor.patch.
IPC_LIBVERSION := 1.2.0
IPC_LIBS := $(BUILD)/liboctipc.a $(BUILD)/liboctipc.so.$(IPC_LIBVERSION) $(BUILD)/liboctipc.so.1 \
            $(BUILD)/liboctipc.so $(BUILD)/octipc-uninstalled.pc
lib: $(BUILD)/liboct.a $(IPC_LIBS) $(BUILD)/liboct.so

$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/liboct.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The whole library, shared and versioned, for the Python package (octd.Engine
# through ctypes): the objects of liboct.a.
LIBOCT_SOVERSION := 0
$(BUILD)/liboct.so.$(VERSION): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,liboct.so.$(LIBOCT_SOVERSION) -fopenmp -pthread $(LDFLAGS) -o $@ $^ $(LIBS) $(CUDA_LIBS)
$(BUILD)/liboct.so: $(BUILD)/liboct.so.$(VERSION)
	ln -sf liboct.so.$(VERSION) $(BUILD)/liboct.so.$(LIBOCT_SOVERSION)
	ln -sf liboct.so.$(VERSION) $@

# The IPC library alone, for acquisition programs (pkg-config octipc):
# shared (soname liboctipc.so.1, links .so.1 and .so beside it) and static,
# usable from the build tree through octipc-uninstalled.pc.
$(BUILD)/liboctipc.so.$(IPC_LIBVERSION): $(IPC_OBJ)
	$(CC) -shared -Wl,-soname,liboctipc.so.1 -pthread -o $@ $^ -lrt
$(BUILD)/liboctipc.so.1 $(BUILD)/liboctipc.so: $(BUILD)/liboctipc.so.$(IPC_LIBVERSION)
	ln -sfn liboctipc.so.$(IPC_LIBVERSION) $(BUILD)/liboctipc.so.1
	ln -sfn liboctipc.so.1 $(BUILD)/liboctipc.so
$(BUILD)/liboctipc.a: $(IPC_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/octipc-uninstalled.pc: ipc/octipc-uninstalled.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e "s#@SRCDIR@#$(CURDIR)#g" -e "s#@BUILDDIR@#$(abspath $(BUILD))#g" -e "s#@VERSION@#$(VERSION)#g" $< >$@

# ---- programs --------------------------------------------------------------
progs: $(PROGS) $(BUILD)/liboct.so

$(BIN)/octd: $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard daemon/*.c)) $(BUILD)/liboct.a
	@mkdir -p $(BIN)
	$(CC) -fopenmp -pthread $(LDFLAGS) -o $@ $^ $(LIBS) $(HDF5_LIBS) -lcivetweb $(CUDA_LIBS)

define TOOL_RULE
$(BIN)/$(1): $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tools/$(1)/*.c)) $(if $(NVCC),$(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(wildcard tools/$(1)/*.cu))) $(BUILD)/liboct.a
	@mkdir -p $(BIN)
	$$(CC) -fopenmp -pthread $$(LDFLAGS) -o $$@ $$^ $$(LIBS) $(if $(filter octgrab,$(1)),$$(HDF5_LIBS)) $$(CUDA_LIBS)
endef
$(foreach t,$(TOOLS),$(eval $(call TOOL_RULE,$(t))))
# octweb (the browser console) serves HTTP/WebSocket through civetweb;
# octweb-tls.so makes civetweb 1.15's TLS work with OpenSSL 3 (see its source)
$(BIN)/octweb: LIBS += -lcivetweb
progs: $(BIN)/octweb-tls.so
$(BIN)/octweb-tls.so: tools/octweb/tls/shim.c | $(DEPS_STAMP)
	@mkdir -p $(BIN)
	$(CC) -shared -fPIC -O2 -Wall -Wl,-soname,libssl.so -o $@ $< -lssl

# ---- tests -----------------------------------------------------------------
tests: $(TESTS) $(SAN_TESTS)

$(BUILD)/tests/%: tests/%.c $(TEST_LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/liboct.a | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -Itests -o $@ $^ $(LIBS) $(CUDA_LIBS) $(shell pkg-config --libs check)

$(BUILD)/san/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -DOCT_HAVE_CUDA,$(BASE_CFLAGS)) $(SAN_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/san/liboct.a: $(SAN_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/san/tests/%: tests/%.c $(SAN_TEST_LIB_OBJ) $(BUILD)/san/liboct.a | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -DOCT_HAVE_CUDA,$(BASE_CFLAGS)) $(SAN_FLAGS) -Itests -o $@ $^ $(LIBS) $(shell pkg-config --libs check)

# test_angio and octbench score angiograms on octsim's flow phantom
$(BUILD)/tests/test_angio: $(BUILD)/obj/tools/octsim/flow.o
$(BUILD)/san/tests/test_angio: $(BUILD)/san/tools/octsim/flow.o
$(BIN)/octbench: $(BUILD)/obj/tools/octsim/flow.o

# make check: unit tests under ASan+UBSan (CPU), the CUDA tests when a device
# is present (skipped, saying so, when not), then the end-to-end scripts.
check: $(DEPS_STAMP) all valgrind-progs
	BUILD=$(BUILD) BIN=$(BIN) VG_BIN=$(VG_BIN) PYTHON=$(PYTHON) tests/run.sh

# ---- tools around the build ------------------------------------------------
demo: $(DEPS_STAMP) progs
	BIN=$(BIN) PYTHON=$(PYTHON) tools/build/demo.sh

# Fuzzing (issue 8): tests/fuzz/ built with clang into build/fuzz/, each
# target run FUZZ_SECONDS; FUZZ_TARGETS="ini npy ..." picks some.
FUZZ_SECONDS ?= 60
fuzz:
	@tools/build/deps.sh --check --fuzz >/dev/null 2>&1 || tools/build/deps.sh --fuzz
	FUZZ_SECONDS=$(FUZZ_SECONDS) tools/build/fuzz.sh $(FUZZ_TARGETS)

# Soak (issue 8): octsim -> octd -> octgrab for SOAK_SECONDS, fails on a
# crash, RSS/fd growth, skipped frames below the sustained rate, p99 regression.
SOAK_SECONDS ?= 600
soak: $(DEPS_STAMP) progs
	SOAK_SECONDS=$(SOAK_SECONDS) BIN=$(BIN) PYTHON=$(PYTHON) tools/build/soak.sh

# Valgrind memcheck of the CPU path (issue 8): CPU-only programs (the CUDA
# libraries only add noise and minutes under valgrind) in $(VG_BIN).
VG_BIN := $(if $(NVCC),build/cpu/bin,$(BIN))
valgrind-progs:
ifneq ($(NVCC),)
	$(MAKE) NO_CUDA=1 BIN=build/cpu/bin progs
endif
valgrind: $(DEPS_STAMP) valgrind-progs
	BIN=$(VG_BIN) PYTHON=$(PYTHON) tools/build/valgrind.sh

bench: $(DEPS_STAMP) progs
	$(BIN)/octbench $(BENCH_ARGS)

# ---- man pages (issue 14.9): generated from --help with help2man --------------
MAN_PAGES := $(BUILD)/man/octd.8 $(TOOLS:%=$(BUILD)/man/%.1)
MAN_DESC_octd     := real-time OCT processing daemon (frame ring -> images over ZeroMQ)
MAN_DESC_octctl   := operators' tool: octd's control values, commands and status
MAN_DESC_octsim   := reference acquirer: simulated OCT frames into octd's frame ring
MAN_DESC_octgrab  := subscriber: receives, prints and saves octd's images
MAN_DESC_octproc  := offline processing of recorded frames with octd's engine
MAN_DESC_octbench := benchmarks of octd's engine, shared memory and whole path
MAN_DESC_octweb   := browser console for octd: live images, controls and health
man: $(MAN_PAGES)
$(BUILD)/man/octd.8: $(BIN)/octd
	@mkdir -p $(dir $@)
	help2man -N -s 8 --version-string="$(VERSION)" -n "$(MAN_DESC_octd)" -o $@ ./$<
$(BUILD)/man/%.1: $(BIN)/%
	@mkdir -p $(dir $@)
	help2man -N -s 1 --version-string="$(VERSION)" -n "$(MAN_DESC_$*)" -o $@ ./$<

install: all man $(IPC_LIBS)
	PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) BUILD=$(BUILD) BIN=$(BIN) VERSION=$(VERSION) IPC_LIBVERSION=$(IPC_LIBVERSION) tools/build/install.sh

bundle: all
	BUILD=$(BUILD) BIN=$(BIN) CUDA_HOME=$(CUDA_HOME) tools/build/bundle.sh

clean:
	rm -rf $(BUILD) $(BIN)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
