# trainer/nn.mk: the "nn" library (layers, models, SGD) + its tests and the CPU benchmark.
# Users link $(NN_LIB) $(NN_LDLIBS).
NN_SRCS   := $(wildcard trainer/nn/*.c)
NN_OBJS   := $(patsubst %.c,$(B)/%.o,$(NN_SRCS))
NN_LIB    := $(B)/libnn.a
NN_OMP    := $(if $(HAVE_OPENMP),-fopenmp,)
# NN_ARCH: the -march of the library's loops (BN, activations, LSTM gates, SGD).  native suits a
# build on the machine that trains; for nodes with other CPUs than the build machine use e.g.
# NN_ARCH=x86-64-v3 or x86-64.  The AVX-512 3x3 convolution is compiled in either way and chosen
# at run time where the CPU has AVX-512 (conv3.c).
NN_ARCH   ?= native
NN_CFLAGS := $(CFLAGS) -O3 -march=$(NN_ARCH) -isystem $(BLAS_INC) $(if $(HAVE_OPENMP),-fopenmp,-Wno-unknown-pragmas)
NN_LDLIBS := -lopenblas $(NN_OMP) -lm

NN_TESTS  := $(B)/tests/nn/test_nn_layers $(B)/tests/nn/test_nn_ref $(B)/tests/nn/test_nn_optim \
             $(B)/tests/nn/test_nn_fmnist
NN_BENCH  := $(B)/bench/nn_bench_cpu
TEST_BINS += $(NN_TESTS)
ALL_BINS  += $(NN_LIB) $(NN_BENCH)

$(B)/trainer/nn/%.o: trainer/nn/%.c
	@mkdir -p $(dir $@)
	$(CC) $(NN_CFLAGS) -c $< -o $@

$(NN_LIB): $(NN_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(NN_TESTS): $(B)/tests/nn/%: tests/nn/%.c tests/nn/nn_test_util.h $(NN_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(NN_CFLAGS) $< -o $@ $(LDFLAGS) $(NN_LIB) $(NN_LDLIBS) $(LDLIBS)
# the reference checks, shared with the CUDA test (tests/cuda/test_cuda_ref.c)
$(B)/tests/nn/test_nn_ref: tests/nn/nn_ref_check.h

$(NN_BENCH): trainer/ref/bench_cpu.c trainer/nn/bench_step.h $(NN_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(NN_CFLAGS) $< -o $@ $(LDFLAGS) $(NN_LIB) $(NN_LDLIBS) $(LDLIBS)

.PHONY: bench-cpu bench-cpu-profile
# bench-cpu: our step times next to PyTorch CPU with the same thread count; writes $(B)/bench/cpu.json
bench-cpu: $(NN_BENCH)
	@sh jobs/bench_cpu.sh $(B)
# bench-cpu-profile: where our step's time goes per kind of work (conv 3x3/1x1/stem, BN, LSTM gates,
# update, ...), same settings as bench-cpu; writes $(B)/bench/cpu_profile.json
bench-cpu-profile: $(NN_BENCH)
	@NN_BENCH_PROFILE=1 sh jobs/bench_cpu.sh $(B)
