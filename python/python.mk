# python/: the PyTorch package eager_sgd (python/eager_sgd/, docs/DESIGN.md#13-the-pytorch-package)
# loads ONE shared library with ctypes: $(B)/libeager.so = libpcoll (host data path) + the
# controller + the package's C side (python/csrc/eager_py.c) + nn_sgd_share (trainer/nn/optim.c),
# linked against the MPI of this build ($(B)/mpi.mk), so that mpi4py or any other user of that MPI
# in the process shares MPI_COMM_WORLD with it. With CUDA and NCCL also $(B)/libeager_cuda.so: the
# same with the device data path (dp_nccl.c) in place of dp_none.c; the package loads one of the
# two, never both. Objects are compiled again with -fPIC under $(B)/pic/ (the static libraries and
# programs are unchanged). Not built under SAN (a sanitised library cannot load into python).
ifeq ($(SAN),)
EG_SRC     := $(PCOLL_SRC) $(CTL_SRCS) python/csrc/eager_py.c trainer/nn/optim.c trainer/nn/prof.c
EG_OBJ     := $(EG_SRC:%.c=$(B)/pic/%.o)
LIBEAGER   := $(B)/libeager.so
# nn_sgd_share is pure: optim.c without OpenMP (its pragmas ignored), so libeager.so brings no
# OpenMP runtime into a process that has PyTorch's
$(B)/pic/trainer/nn/%.o: trainer/nn/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -O3 -fPIC -Wno-unknown-pragmas -c $< -o $@
$(B)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC $(MPI_CFLAGS) -c $< -o $@

$(LIBEAGER): $(EG_OBJ) $(B)/pic/collectives/dp_none.o
	$(CC) -shared -Wl,-z,defs $(LDFLAGS) $^ -o $@ $(MPI_LIBS) $(LDLIBS)
ALL_BINS += $(LIBEAGER)

ifeq ($(HAVE_CUDA)$(HAVE_NCCL),11)
LIBEAGER_CUDA := $(B)/libeager_cuda.so
$(B)/pic/collectives/cuda/dp_nccl.o: collectives/dp_nccl.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC $(MPI_CFLAGS) -c $< -o $@
$(B)/pic/collectives/cuda/pcoll_nccl.o: collectives/pcoll_nccl.cu collectives/pcoll_dev.h collectives/pcoll.h
	@mkdir -p $(dir $@)
	$(NVCC) $(PCOLL_NVCC_FLAGS) -Xcompiler -fPIC -c $< -o $@
$(LIBEAGER_CUDA): $(EG_OBJ) $(B)/pic/collectives/cuda/dp_nccl.o $(B)/pic/collectives/cuda/pcoll_nccl.o \
                  $(B)/pic/collectives/dev_wait.o
	$(CC) -shared -Wl,-z,defs $(LDFLAGS) $^ -o $@ $(MPI_LIBS) $(PCOLL_CUDA_LDLIBS) $(LDLIBS)
ALL_BINS += $(LIBEAGER_CUDA)
endif
endif
