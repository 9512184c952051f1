# fuzz.mk - builds the libFuzzer targets of tests/fuzz/ (run by
# tools/build/fuzz.sh; `make -f tests/fuzz/fuzz.mk` from the repository root).
#
# The library sources are compiled again with clang, ASan + UBSan and
# coverage instrumentation into $(FUZZ_BUILD)/; the gcc objects of build/
# are not used.  Every UBSan finding aborts, so libFuzzer keeps it as a crash.

FUZZ_CC    ?= clang
FUZZ_BUILD ?= build/fuzz
VERSION    ?= 0.1.0
INCLUDES   := -Ikernels -Iipc -Iconfig
SAN        := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# FUZZ_COV=1: source-based coverage build (no sanitizers) to measure what
# the corpora reach (tools/build/fuzz.sh --coverage)
ifneq ($(FUZZ_COV),)
SAN        := -fprofile-instr-generate -fcoverage-mapping
endif
FUZZ_CFLAGS := -std=gnu11 -g -O1 -pthread -fopenmp -D_GNU_SOURCE -DOCT_VERSION=\"$(VERSION)\" \
               $(INCLUDES) -Wall -Wextra -Wno-unused-parameter $(SAN)
FUZZ_LIBS  := -lfftw3f -lfftw3f_threads -lfftw3 -lfftw3_threads -lyaml -linih -lzmq -lpng \
              -ldl -lm -lrt

LIB_SRC  := $(sort $(wildcard kernels/*.c ipc/*.c config/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
# octgrab's header reader is fuzzed from its own source file
JSONHDR  := $(wildcard tools/octgrab/jsonhdr.c)
TARGETS  := $(filter-out $(if $(JSONHDR),,fuzz_jsonhdr),$(basename $(notdir $(wildcard tests/fuzz/fuzz_*.c))))

.PHONY: all list
all: $(TARGETS:%=$(FUZZ_BUILD)/%)
list:
	@echo $(TARGETS:fuzz_%=%)

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/liboct_fuzz.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_jsonhdr: EXTRA_OBJ := $(JSONHDR:%.c=$(FUZZ_BUILD)/obj/%.o)
$(FUZZ_BUILD)/fuzz_jsonhdr: EXTRA_INC := -Itools/octgrab
$(FUZZ_BUILD)/fuzz_jsonhdr: $(JSONHDR:%.c=$(FUZZ_BUILD)/obj/%.o)

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(FUZZ_BUILD)/liboct_fuzz.a
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(EXTRA_INC) -fsanitize=fuzzer -o $@ $< $(EXTRA_OBJ) \
	    $(FUZZ_BUILD)/liboct_fuzz.a $(FUZZ_LIBS)

-include $(shell find $(FUZZ_BUILD)/obj -name '*.d' 2>/dev/null)
