# trainer/prog.mk: the eager-train program (MPI): trainer/*.c on nn + data + controller + libpcoll.
# --device cuda: with the CUDA backend and the device-capable libpcoll when both were built
# (HAVE_NN_CUDA: metrics.c's CUDA graph report, used by backend_cuda.c)
TRAIN_CUDA := $(if $(and $(NN_CUDA_LIB),$(LIBPCOLL_CUDA)),1,)
TRAIN_PCOLL := $(if $(TRAIN_CUDA),$(LIBPCOLL_CUDA),$(LIBPCOLL))

TRAIN_SRCS := trainer/main.c trainer/setup.c trainer/datasplit.c trainer/epoch.c trainer/apply.c trainer/epoch_end.c trainer/eval.c \
              trainer/curve.c trainer/gradstats.c trainer/runlog.c trainer/end.c trainer/run.c trainer/output.c trainer/crash.c trainer/watchdog.c \
              trainer/backend.c trainer/backend_host.c trainer/backend_cpu.c \
              $(if $(TRAIN_CUDA),trainer/backend_cuda.c,) \
              trainer/config.c trainer/metrics.c trainer/checkpoint.c trainer/dealer.c trainer/warmup_plan.c trainer/warmup.c
TRAIN_OBJS := $(patsubst %.c,$(B)/%.o,$(TRAIN_SRCS)) $(B)/collectives/sim/imbalance.o
TRAIN_BIN  := $(B)/bin/eager-train
ALL_BINS   += $(TRAIN_BIN)

$(B)/trainer/%.o: trainer/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) $(NN_OMP) $(if $(HAVE_PAPI),-DHAVE_PAPI,) \
	  $(if $(TRAIN_CUDA),-DHAVE_NN_CUDA -isystem $(CUDA_HOME)/include,) -c $< -o $@

# relinked when a fragment's link flags change (data.mk: static libjpeg; here: no -lpapi)
$(TRAIN_BIN): $(TRAIN_OBJS) $(if $(TRAIN_CUDA),$(NN_CUDA_LIB),) $(NN_LIB) $(DATA_LIB) $(B)/libcontroller.a $(TRAIN_PCOLL) \
              trainer/prog.mk trainer/data.mk
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(filter-out %.mk,$^) -o $@ $(MPI_LIBS) $(NN_LDLIBS) $(DATA_LDLIBS) -ljansson \
	  $(if $(TRAIN_CUDA),$(NN_CUDA_LDLIBS) $(PCOLL_CUDA_LDLIBS),) $(LDLIBS)

# Unit tests of one trainer object each: the test's source and the objects it tests.
TRAINER_UNITS := test_imbalance test_dealer test_warmup_plan test_output
$(B)/tests/trainer/test_imbalance: $(B)/collectives/sim/imbalance.o
$(B)/tests/trainer/test_dealer: $(B)/trainer/dealer.o
$(B)/tests/trainer/test_warmup_plan: $(B)/trainer/warmup_plan.o
$(B)/tests/trainer/test_output: $(B)/trainer/output.o
$(TRAINER_UNITS:%=$(B)/tests/trainer/%): $(B)/tests/trainer/%: tests/trainer/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(filter %.c %.o,$^) -o $@ $(LDFLAGS) $(LDLIBS)
TEST_BINS += $(TRAINER_UNITS:%=$(B)/tests/trainer/%)

# tests/trainer/ckpt_damage.sh: damages a checkpoint on purpose (flip a bit, set a value, re-sign)
$(B)/tests/trainer/ckpt_edit: tests/trainer/ckpt_edit.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(filter %.c,$^) -o $@ $(LDFLAGS) $(LDLIBS)
TEST_BINS += $(B)/tests/trainer/ckpt_edit
