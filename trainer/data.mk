# trainer/data.mk: the data-loading library (libdata.a), its tests and fuzz targets.
# Link users with $(B)/libdata.a $(DATA_LDLIBS).   make fuzz  builds + runs the libFuzzer targets.

DATA_SRCS   := $(wildcard trainer/data/*.c)
DATA_OBJS   := $(DATA_SRCS:%.c=$(B)/%.o)
DATA_LIB    := $(B)/libdata.a
# libjpeg(-turbo) is linked statically where its archive exists, so no binary needs a
# distribution's libjpeg soname (Debian ships libjpeg.so.62, Ubuntu libjpeg.so.8); zlib's
# libz.so.1 is the same everywhere.  JPEG_LIB=-ljpeg links the shared library instead.
JPEG_A      := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libjpeg.a /usr/lib/aarch64-linux-gnu/libjpeg.a \
                 /usr/lib64/libjpeg.a /usr/lib/libjpeg.a /usr/local/lib/libjpeg.a))
JPEG_LIB    ?= $(if $(JPEG_A),$(JPEG_A),-ljpeg)
DATA_LDLIBS := $(JPEG_LIB) -lz -lm

$(B)/trainer/data/%.o: trainer/data/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

$(DATA_LIB): $(DATA_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

DATA_TEST_SRCS := $(wildcard tests/data/test_*.c)
DATA_TEST_BINS := $(DATA_TEST_SRCS:%.c=$(B)/%)
DATA_TEST_OBJS := $(DATA_TEST_SRCS:%.c=$(B)/%.o) $(B)/tests/data/testutil.o
.SECONDARY: $(DATA_TEST_OBJS)

$(B)/tests/data/%.o: tests/data/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

$(DATA_TEST_BINS): $(B)/tests/data/%: $(B)/tests/data/%.o $(B)/tests/data/testutil.o $(DATA_LIB) trainer/data.mk
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $(filter-out %.mk,$^) -o $@ $(DATA_LDLIBS) $(LDLIBS)

TEST_BINS += $(DATA_TEST_BINS)
ALL_BINS  += $(DATA_LIB)

# ---- fuzzing (clang libFuzzer + ASan; not part of make test) --------------------------------
FUZZ_CC      ?= clang
FUZZ_RUNS    ?= 100000
FUZZ_TARGETS := $(patsubst tests/data/fuzz_%.c,%,$(wildcard tests/data/fuzz_*.c))
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(B)/fuzz/fuzz_%)
FUZZ_CFLAGS  := -std=gnu11 -g -O1 -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined

$(B)/fuzz/fuzz_%: tests/data/fuzz_%.c $(DATA_SRCS) trainer/data/data.h trainer/data/internal.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $< $(DATA_SRCS) -o $@ $(DATA_LDLIBS) -pthread

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS)
fuzz: fuzz-build
	@sh tests/data/fuzz.sh $(B)/fuzz $(FUZZ_RUNS) $(FUZZ_TARGETS)
