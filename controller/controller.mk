# controller/: the adaptive policy (pure) and the controller thread -> $(B)/libcontroller.a
# Tests: tests/controller.tests (names ctl_*), sources in tests/controller/.

CTL_SRCS := controller/policy.c controller/levels.c controller/options.c controller/signals.c controller/state.c controller/rate.c \
            controller/predict.c controller/thread.c
CTL_OBJS := $(patsubst %.c,$(B)/%.o,$(CTL_SRCS))

$(B)/controller/%.o: controller/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c $< -o $@

$(B)/libcontroller.a: $(CTL_OBJS)
	@rm -f $@
	ar rcs $@ $^

ALL_BINS += $(B)/libcontroller.a

# The pure tests link the archive and libpcoll's two pure parts (collectives/mode.o: the rules as
# text; record.o: round records): no MPI or libpcoll needed at link time.
CTL_PURE := $(B)/libcontroller.a $(B)/collectives/mode.o $(B)/collectives/record.o
$(B)/tests/controller/test_policy: tests/controller/test_policy.c $(CTL_PURE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -MF $(B)/tests/controller/test_policy.d $< -o $@ $(LDFLAGS) $(CTL_PURE) $(LDLIBS)

TEST_BINS += $(B)/tests/controller/test_policy

.PHONY: controller
controller: $(B)/libcontroller.a $(B)/tests/controller/test_policy

# test_thread: the controller thread against a mock libpcoll defined in the test itself (links
# the pure objects; MPI libs only for the MPI_Abort reference of the default abort handler).
$(B)/tests/controller/test_thread: tests/controller/test_thread.c $(CTL_PURE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -MF $(B)/tests/controller/test_thread.d $< -o $@ $(LDFLAGS) $(CTL_PURE) $(MPI_LIBS) $(LDLIBS)

TEST_BINS += $(B)/tests/controller/test_thread
controller: $(B)/tests/controller/test_thread

# the controller thread on the real libpcoll, under mpirun
$(B)/tests/controller/test_ctl_mpi: tests/controller/test_ctl_mpi.c $(B)/libcontroller.a $(LIBPCOLL)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) $< -o $@ $(LDFLAGS) $(B)/libcontroller.a $(LIBPCOLL) $(MPI_LIBS) $(LDLIBS)
TEST_BINS += $(B)/tests/controller/test_ctl_mpi

$(B)/tests/controller/test_state: tests/controller/test_state.c $(CTL_PURE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -MF $(B)/tests/controller/test_state.d $< -o $@ $(LDFLAGS) $(CTL_PURE) $(LDLIBS)
TEST_BINS += $(B)/tests/controller/test_state
controller: $(B)/tests/controller/test_state

$(B)/tests/controller/test_rate: tests/controller/test_rate.c $(CTL_PURE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -MF $(B)/tests/controller/test_rate.d $< -o $@ $(LDFLAGS) $(CTL_PURE) $(LDLIBS)
TEST_BINS += $(B)/tests/controller/test_rate
controller: $(B)/tests/controller/test_rate

# bench_follow: how the rate rule follows a change (detection delay, cost against an oracle, false
# alarms) on test_rate's mock; prints a table and writes JSON (docs/DESIGN.md#the-rate-rule)
$(B)/bench/ctl_follow: tests/controller/bench_follow.c $(CTL_PURE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -MF $(B)/bench/ctl_follow.d $< -o $@ $(LDFLAGS) $(CTL_PURE) $(LDLIBS)
ALL_BINS += $(B)/bench/ctl_follow
