# collectives/: libpcoll (host memory over MPI), its tests and the allreduce benchmark (Fig. 9).
# PCOLL_SRC: both libraries; the data path of device memory is dp_nccl.c (libpcoll_cuda.a), of
# which libpcoll.a has the empty stand-in dp_none.c (collectives/pcoll_impl.h: pcoll_datapath_t).
PCOLL_SRC := collectives/base.c collectives/record.c collectives/pcoll.c collectives/create.c collectives/engine.c \
             collectives/dp_host.c collectives/rd.c collectives/trigger.c collectives/mode.c collectives/live.c
PCOLL_OBJ := $(PCOLL_SRC:%.c=$(B)/%.o) $(B)/collectives/dp_none.o
LIBPCOLL  := $(B)/libpcoll.a

$(B)/collectives/%.o: collectives/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c $< -o $@

$(LIBPCOLL): $(PCOLL_OBJ)
	@mkdir -p $(dir $@)
	ar rcs $@ $^

$(B)/tests/collectives/%.o: tests/collectives/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c $< -o $@

$(B)/tests/collectives/test_pcoll: $(B)/tests/collectives/test_pcoll.o $(LIBPCOLL)
	$(CC) $(LDFLAGS) $^ -o $@ $(MPI_LIBS) $(LDLIBS)

$(B)/tests/collectives/test_pcoll_life: $(B)/tests/collectives/test_pcoll_life.o $(LIBPCOLL)
	$(CC) $(LDFLAGS) $^ -o $@ $(MPI_LIBS) $(LDLIBS)

# the device data path's bounded wait (dev_wait.c: in libpcoll_cuda.a only), pure: runs without a GPU
$(B)/tests/collectives/test_dev_wait: $(B)/tests/collectives/test_dev_wait.o $(B)/collectives/dev_wait.o
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(B)/bench/bench_collectives: $(B)/collectives/bench_collectives.o $(LIBPCOLL)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(MPI_LIBS) -ljansson $(LDLIBS)

$(B)/bench/bench_reduce: $(B)/collectives/bench_reduce.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(MPI_LIBS) -ljansson $(LDLIBS)

# whether the MPI library holds messages back when threads call it at once (no libpcoll in it)
$(B)/bench/threads_stall: tests/jobs/threads_stall.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) $< -o $@ $(LDFLAGS) $(MPI_LIBS) $(LDLIBS)

ALL_BINS  += $(LIBPCOLL) $(B)/bench/bench_collectives $(B)/bench/bench_reduce $(B)/bench/threads_stall
TEST_BINS += $(B)/tests/collectives/test_pcoll $(B)/tests/collectives/test_pcoll_life $(B)/tests/collectives/test_dev_wait

# Fig. 9: P ranks, REPS repetitions of every row (side by side in each), more arguments in BENCH_ARGS
P ?= 8
BENCH_MPIRUN = bash jobs/mpi.sh run $(B) $(P)
UNIT_MS ?= 1
REPS ?= 5
BENCH_ARGS ?=
bench-collectives: $(B)/bench/bench_collectives
	@mkdir -p $(B)/bench
	$(BENCH_MPIRUN) $(B)/bench/bench_collectives \
	  --unit-ms $(UNIT_MS) --reps $(REPS) --json $(B)/bench/collectives.json $(BENCH_ARGS)

# the same benchmark under the two MPI families side by side (needs make test's second tree)
RUNS ?= 3
bench-mpis: $(B)/bench/bench_collectives
	@B=$(B) bash jobs/bench_mpis.sh $(P) $(RUNS)

# a round's reduction part by part against MPI_Allreduce, and libnbc's algorithms (bench_reduce.c)
bench-reduce: $(B)/bench/bench_reduce
	@mkdir -p $(B)/bench
	$(BENCH_MPIRUN) $(B)/bench/bench_reduce \
	  --reps $(REPS) --json $(B)/bench/reduce.json $(BENCH_ARGS)

# ---- device memory (PCOLL_MEM_DEVICE): build/libpcoll_cuda.a, only with nvcc + cuDNN + NCCL ----
# The same objects as $(LIBPCOLL), with the device data path dp_nccl.c over pcoll_nccl.cu in place
# of dp_none.c.  Link: $(LIBPCOLL_CUDA) $(MPI_LIBS) $(PCOLL_CUDA_LDLIBS).
ifeq ($(HAVE_CUDA)$(HAVE_NCCL),11)
PCOLL_CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib))
PCOLL_CUDA_OBJ    := $(PCOLL_SRC:%.c=$(B)/%.o) $(B)/collectives/cuda/dp_nccl.o $(B)/collectives/cuda/pcoll_nccl.o \
                     $(B)/collectives/dev_wait.o
LIBPCOLL_CUDA     := $(B)/libpcoll_cuda.a
PCOLL_CUDA_LDLIBS := -L$(PCOLL_CUDA_LIBDIR) -Wl,-rpath,$(PCOLL_CUDA_LIBDIR) -lnccl -lcudart -lstdc++
PCOLL_GENCODE     ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80
PCOLL_NVCC_FLAGS  := -O3 -std=c++17 $(PCOLL_GENCODE) -I. $(MPI_CFLAGS) \
                     -Xcompiler -Wall,-Wextra,-Werror,-Wno-unused-parameter

$(B)/collectives/cuda/dp_nccl.o: collectives/dp_nccl.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c $< -o $@

$(B)/collectives/cuda/pcoll_nccl.o: collectives/pcoll_nccl.cu collectives/pcoll_dev.h collectives/pcoll.h
	@mkdir -p $(dir $@)
	$(NVCC) $(PCOLL_NVCC_FLAGS) -MMD -MP -c $< -o $@

$(LIBPCOLL_CUDA): $(PCOLL_CUDA_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# partial-allreduce benchmark with --device (device buffers)
$(B)/collectives/cuda/bench_collectives.o: collectives/bench_collectives.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -DPCOLL_HAVE_NCCL -isystem $(CUDA_HOME)/include -c $< -o $@

$(B)/bench/bench_collectives_cuda: $(B)/collectives/cuda/bench_collectives.o $(LIBPCOLL_CUDA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(MPI_LIBS) -ljansson $(PCOLL_CUDA_LDLIBS) $(LDLIBS)

ALL_BINS += $(LIBPCOLL_CUDA)
endif
