# collectives/: libpcoll (host memory over MPI), its tests and the allreduce benchmark (Fig. 9).
PCOLL_SRC := collectives/pcoll.c collectives/engine.c collectives/trigger.c
PCOLL_OBJ := $(PCOLL_SRC:%.c=$(B)/%.o)
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

$(B)/tests/test_pcoll: $(B)/tests/collectives/test_pcoll.o $(LIBPCOLL)
	$(CC) $(LDFLAGS) $^ -o $@ $(MPI_LIBS) $(LDLIBS)

$(B)/bench/bench_collectives: $(B)/collectives/bench_collectives.o $(LIBPCOLL)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(MPI_LIBS) -ljansson $(LDLIBS)

ALL_BINS  += $(LIBPCOLL) $(B)/bench/bench_collectives
TEST_BINS += $(B)/tests/test_pcoll

P ?= 8
UNIT_MS ?= 1
bench-collectives: $(B)/bench/bench_collectives
	@mkdir -p $(B)/bench
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 \
	OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none \
	mpirun --oversubscribe --bind-to none -np $(P) $(B)/bench/bench_collectives \
	  --unit-ms $(UNIT_MS) --json $(B)/bench/collectives.json
