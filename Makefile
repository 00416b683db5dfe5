# eager-SGD harness: top-level Makefile.
# Always builds the CPU targets; detects nvcc/cuDNN/NCCL, PAPI and OpenMP and prints what it found.
# Each folder adds its own targets through its *.mk fragment; tests are listed in tests/*.tests.
#
#   make            build everything this machine can build      make test    all tests
#   make deps       install Debian packages (idempotent)          make asan    tests under ASan+UBSan
#   make bench-collectives  (P=8 UNIT_MS=1)                       make tsan    tests under TSan
#   make gpu-check  on a GPU machine, from a build folder made elsewhere (tests/cuda/gpu_check.sh)
#   make core-check on a machine with a core per rank (16+), likewise (tests/device/core_check.sh)

B      ?= build
SAN    ?=
CC     := gcc
NVCC   ?= nvcc
CUDA_HOME ?= /usr/local/cuda

WARN   := -Wall -Wextra -Werror -Wno-unused-parameter
CSTD   := -std=gnu11
OPT    ?= -O2 -g
CFLAGS := $(CSTD) $(OPT) $(WARN) -pthread -I. -MMD -MP
LDFLAGS := -pthread
LDLIBS := -lm

ifeq ($(SAN),asan)
  CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
endif
ifeq ($(SAN),tsan)
  CFLAGS  += -fsanitize=thread -fno-omit-frame-pointer
  LDFLAGS += -fsanitize=thread
endif

# ---- required pieces -------------------------------------------------------
# Goals that install what is missing first (their recipes re-run make), and gpu-check (runs a
# build folder made elsewhere, needs no headers), must not stop here.
SETUP_GOALS := deps deps-all test asan tsan demo clean gpu-check core-check
CHECK_REQ := $(if $(MAKECMDGOALS),$(filter-out $(SETUP_GOALS),$(MAKECMDGOALS)),all)
HAVE_JANSSON := $(shell test -f /usr/include/jansson.h && echo 1)
# The MPI: found by jobs/mpi.sh (MPI_CFLAGS/MPI_LIBS as given, else the wrapper MPICC in the dialect
# it speaks, else pkg-config), recorded in $(B)/mpi.mk and $(B)/mpi.env (its launcher: MPIEXEC).
# Goals that only install or clean skip it; a failed search is an error for every building goal.
MPICC      ?=
MPIEXEC    ?=
MPI_CFLAGS ?=
MPI_LIBS   ?=
ifneq ($(CHECK_REQ),)
  MPI_CONFIG := $(shell MPIEXEC='$(MPIEXEC)' bash jobs/mpi.sh configure '$(B)' '$(CC)' '$(MPICC)' '$(MPI_CFLAGS)' '$(MPI_LIBS)' 2>&1; echo " rc=$$?")
  ifeq ($(filter rc=0,$(lastword $(MPI_CONFIG))),)
    $(error $(patsubst rc=%,,$(MPI_CONFIG)))
  endif
  MPI_CONFIG := $(patsubst rc=%,,$(MPI_CONFIG))
  include $(B)/mpi.mk
  ifneq ($(HAVE_JANSSON),1)
    $(error jansson not found: /usr/include/jansson.h missing. Run 'make deps' (installs libjansson-dev))
  endif
endif
BLAS_INC := $(firstword $(wildcard /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas))
HAVE_BLAS := $(if $(BLAS_INC),1,)

# ---- optional pieces -------------------------------------------------------
HAVE_OPENMP := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo 1)
HAVE_PAPI   := $(shell test -f /usr/include/papi.h && echo 1)
HAVE_NVCC   := $(shell command -v $(NVCC) >/dev/null 2>&1 && echo 1)
# a header in CUDA's folder, the system's, the system's multiarch folder (Ubuntu's and NVIDIA's
# cuDNN/NCCL packages: /usr/include/x86_64-linux-gnu/cudnn.h) or the local one (a tarball
# installed by hand: /usr/local/include/cudnn.h), all on the compilers' search path
SYS_INCLUDE   ?= /usr/include
LOCAL_INCLUDE ?= /usr/local/include
MULTIARCH     := $(shell $(CC) -print-multiarch 2>/dev/null)
has_header     = $(if $(wildcard $(CUDA_HOME)/include/$(1) $(SYS_INCLUDE)/$(1) $(LOCAL_INCLUDE)/$(1) $(if $(MULTIARCH),$(SYS_INCLUDE)/$(MULTIARCH)/$(1))),1,)
HAVE_CUDNN  := $(call has_header,cudnn.h)
HAVE_NCCL   := $(call has_header,nccl.h)
HAVE_CUDA   := $(if $(and $(HAVE_NVCC),$(HAVE_CUDNN)),1,)
ifeq ($(SAN),)
else
  HAVE_CUDA :=
endif

yn = $(if $(1),yes,no)
$(if $(CHECK_REQ),$(info config: $(MPI_CONFIG) jansson=yes openblas=$(call yn,$(HAVE_BLAS)) openmp=$(call yn,$(HAVE_OPENMP)) papi=$(call yn,$(HAVE_PAPI)) nvcc=$(call yn,$(HAVE_NVCC)) cudnn=$(call yn,$(HAVE_CUDNN)) nccl=$(call yn,$(HAVE_NCCL)) san=$(if $(SAN),$(SAN),none) build=$(B)))

ALL_BINS :=
TEST_BINS :=

.PHONY: all deps deps-all test demo asan tsan clean bench-collectives build-all
all: build-all

include collectives/collectives.mk
-include controller/controller.mk
-include trainer/trainer.mk
-include collectives/sim/sim.mk
-include results/results.mk
-include trainer/ref/ddp.mk
-include jobs/jobs.mk
-include python/python.mk

build-all: $(ALL_BINS) $(TEST_BINS)

deps:
	@sh jobs/deps.sh core
deps-all:
	@sh jobs/deps.sh all

# make test: installs what is missing, builds, runs every tests/*.tests line; then the lines tagged
# mpi2 again on a second tree built against the other MPI family (make deps installs MPICH beside
# Open MPI: $(B)-mpich); ends 'N passed, N failed' counting both, after the skips grouped by reason
# (only lines tagged gpu may skip; any other skip counts as failed: tests/run.sh). Without SAN it
# also makes sure of the PyTorch venv $(B)/venv (trainer/ref/ddp_venv.sh) the Python tests run in.
test: deps
	@if [ -z "$(SAN)" ]; then B=$(B) DDP_PY=$(DDP_PY) sh trainer/ref/ddp_venv.sh; fi
	@$(MAKE) --no-print-directory build-all B=$(B) SAN=$(SAN) -j2
	@set -- $$(bash jobs/mpi.sh second $(B)); \
	if [ -z "$(SAN)" ] && [ -n "$${1:-}" ]; then \
	  $(MAKE) --no-print-directory build-all B=$$1 MPICC=$$2 NO_STEP_REF=1 -j2 >$(B)/mpi2-build.log 2>&1 || \
	    { tail -20 $(B)/mpi2-build.log; echo "make test: the second tree ($$1, MPICC=$$2) did not build"; exit 1; }; \
	  head -1 $(B)/mpi2-build.log; \
	elif [ -z "$(SAN)" ]; then echo "make test: no second MPI family installed: the mpi2 pass is skipped"; fi; \
	B=$(B) B2=$${1:-} SAN=$(SAN) bash tests/run.sh

# make demo: the README's first command: installs, builds, runs the eager-SGD vs sync comparison
demo: deps
	@$(MAKE) --no-print-directory build-all B=$(B) -j2
	@B=$(B) bash jobs/demo.sh

asan:
	@$(MAKE) --no-print-directory test B=build-asan SAN=asan
tsan:
	@$(MAKE) --no-print-directory test B=build-tsan SAN=tsan

clean:
	rm -rf build build-asan build-tsan build-mpich build-openmpi

# make gpu-check: on a GPU machine, with a `build` folder made elsewhere (no rebuild, no headers
# needed): preflight, GPU tests, short benchmarks, 2-rank CUDA training; logs under $$OUT
.PHONY: gpu-check
gpu-check:
	@B=$(B) bash tests/cuda/gpu_check.sh

# make core-check: on a machine with 16+ cores, with a `build` folder made elsewhere: the eager
# rounds against MPI_Allreduce at 8 ranks and the race against PyTorch DDP, a core per rank
.PHONY: core-check
core-check:
	@B=$(B) bash tests/device/core_check.sh

-include $(shell find $(B) -name '*.d' 2>/dev/null)
