# trainer/cuda.mk: the CUDA backend (trainer/cuda/), its GPU tests and `make bench-gpu`.
# Built only when nvcc and cuDNN are present (HAVE_CUDA from the top-level Makefile; never in SAN
# builds).  Users link $(NN_CUDA_LIB) $(NN_LIB) $(NN_CUDA_LDLIBS) $(NN_LDLIBS).
# CUDA_GENCODE selects the GPU architectures (H200/H100 = sm_90, A100 = sm_80; PTX for newer).
.PHONY: bench-gpu

CUDA_LIBDIR  ?= $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib))
CUDA_GENCODE ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80 \
                -gencode arch=compute_90,code=compute_90
NVCC_FLAGS   := -O3 -std=c++17 $(CUDA_GENCODE) -I. -isystem $(BLAS_INC) -Xcompiler -Wall,-Wextra,-Werror,-Wno-unused-parameter,-fPIC

# the device choice is a pure function in plain C, built and tested everywhere (no GPU, no CUDA)
$(B)/trainer/cuda/device_pick.o: trainer/cuda/device_pick.c trainer/cuda/nn_cuda.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@
$(B)/tests/cuda/test_device_pick: tests/cuda/test_device_pick.c $(B)/trainer/cuda/device_pick.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(filter %.c %.o,$^) -o $@ $(LDFLAGS) $(LDLIBS)
TEST_BINS += $(B)/tests/cuda/test_device_pick

# the graph-replay and algorithm decisions (replay_algo.c): plain C on cuDNN's enum values (headers only, no GPU)
ifeq ($(HAVE_CUDNN),1)
CUDNN_INC := $(if $(wildcard $(CUDA_HOME)/include/cudnn.h),-isystem $(CUDA_HOME)/include,)
$(B)/trainer/cuda/replay_algo.o: trainer/cuda/replay_algo.c trainer/cuda/replay_algo.h trainer/cuda/nn_cuda.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CUDNN_INC) -c $< -o $@
$(B)/tests/cuda/test_cuda_replay_algo: tests/cuda/test_cuda_replay_algo.c $(B)/trainer/cuda/replay_algo.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CUDNN_INC) $(filter %.c %.o,$^) -o $@ $(LDFLAGS) $(LDLIBS)
TEST_BINS += $(B)/tests/cuda/test_cuda_replay_algo
endif

ifeq ($(HAVE_CUDA),1)

NN_CUDA_LIB    := $(B)/libnn_cuda.a
NN_CUDA_LDLIBS := -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcudnn -lcublas -lcudart -lstdc++
NN_CUDA_CFLAGS := $(NN_CFLAGS) -isystem $(CUDA_HOME)/include
NN_CUDA_TESTS  := $(B)/tests/cuda/test_cuda_layers $(B)/tests/cuda/test_cuda_ref
NN_CUDA_BENCH  := $(B)/bench/nn_bench_gpu
NN_CUDA_CU     := $(wildcard trainer/cuda/*.cu)
NN_CUDA_OBJS   := $(NN_CUDA_CU:%.cu=$(B)/%.o) $(B)/trainer/cuda/replay_algo.o $(B)/trainer/cuda/device_pick.o
ALL_BINS  += $(NN_CUDA_LIB) $(NN_CUDA_BENCH)
TEST_BINS += $(NN_CUDA_TESTS)

$(B)/trainer/cuda/%.o: trainer/cuda/%.cu trainer/cuda/nn_cuda_impl.h trainer/cuda/nn_cuda.h trainer/cuda/replay_algo.h \
                       trainer/nn/nn.h trainer/nn/nn_impl.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -MMD -MP -c $< -o $@

$(NN_CUDA_LIB): $(NN_CUDA_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(NN_CUDA_TESTS): $(B)/tests/cuda/%: tests/cuda/%.c tests/cuda/cuda_test_util.h $(NN_CUDA_LIB) $(NN_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(NN_CUDA_CFLAGS) $< -o $@ $(LDFLAGS) $(NN_CUDA_LIB) $(NN_LIB) $(NN_CUDA_LDLIBS) $(NN_LDLIBS) $(LDLIBS)
# the CPU half of cuda_layers (tests/cuda/step_ref.h: per model and step the kept batch draw and the
# CPU's results), made here and carried to the GPU host in the build folder (about 6 MB, 1-2 min of
# one core); NO_STEP_REF=1 leaves it out (make test's second MPI tree, which runs no GPU test)
ifneq ($(NO_STEP_REF),1)
CUDA_STEP_REF := $(B)/gpu-data/cuda_step.ref
TEST_BINS     += $(CUDA_STEP_REF)
$(CUDA_STEP_REF): $(B)/tests/cuda/test_cuda_layers
	@mkdir -p $(dir $@)
	@echo "test_cuda_layers --make-ref $@ (log: $(B)/cuda_step_ref.log)"
	@$< --make-ref $@ > $(B)/cuda_step_ref.log 2>&1 || { grep -E '^FAIL' $(B)/cuda_step_ref.log | head -5; \
	  echo "$@: not made (log: $(B)/cuda_step_ref.log)"; exit 1; }
endif
# the reference checks, shared with the CPU test (tests/nn/test_nn_ref.c)
$(B)/tests/cuda/test_cuda_ref: tests/nn/nn_ref_check.h

$(NN_CUDA_BENCH): trainer/cuda/bench_gpu.c trainer/nn/bench_step.h $(NN_CUDA_LIB) $(NN_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(NN_CUDA_CFLAGS) $< -o $@ $(LDFLAGS) $(NN_CUDA_LIB) $(NN_LIB) $(NN_CUDA_LDLIBS) $(NN_LDLIBS) $(LDLIBS)

# device partial allreduce: test (MPI + NCCL) and benchmark with device buffers
ifneq ($(LIBPCOLL_CUDA),)
TEST_BINS += $(B)/tests/cuda/test_pcoll_device
ALL_BINS  += $(B)/bench/bench_collectives_cuda

$(B)/tests/cuda/test_pcoll_device: tests/cuda/test_pcoll_device.c $(LIBPCOLL_CUDA)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -isystem $(CUDA_HOME)/include $< -o $@ $(LDFLAGS) $(LIBPCOLL_CUDA) \
	  $(MPI_LIBS) $(PCOLL_CUDA_LDLIBS) $(LDLIBS)
endif

# `make gpu-check` (tests/cuda/gpu_check.sh, 4,096 of the samples) and `make core-check` (the DDP
# race, all 12,000) train on this Fashion-MNIST subset, kept inside the build folder so that
# carrying `build` to the device machine carries the data too (about 5.7 MiB)
FMNIST_SRC ?= /usr/share/datasets/fashion-mnist
GPU_DATA   := $(B)/gpu-data/fashion-mnist
ifneq ($(wildcard $(FMNIST_SRC)/train-images-idx3-ubyte.gz),)
ALL_BINS += $(GPU_DATA)/t10k-labels-idx1-ubyte.gz
$(GPU_DATA)/t10k-labels-idx1-ubyte.gz: tests/cuda/fmnist_subset.sh trainer/cuda.mk
	bash tests/cuda/fmnist_subset.sh $(FMNIST_SRC) $(GPU_DATA) 12000 1000
endif

bench-gpu: $(NN_CUDA_BENCH) $(if $(LIBPCOLL_CUDA),$(B)/bench/bench_collectives_cuda,)
	@sh jobs/bench_gpu.sh $(B)

else

bench-gpu:
	@echo "bench-gpu: no CUDA build here (nvcc=$(call yn,$(HAVE_NVCC)) cudnn=$(call yn,$(HAVE_CUDNN))): install the CUDA toolkit with cuDNN and run on a machine with an NVIDIA GPU" >&2
	@exit 1

endif
