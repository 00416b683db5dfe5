# collectives/sim: pcoll-sim, a discrete-event model of libpcoll's rounds at scale, its
# calibration program and its tests. The model links trainer/imbalance.o for the delay models
# and collectives/trigger.o for majority's initiator (the same functions the real runs use).
SIM_OBJS := $(B)/collectives/sim/sim.o $(B)/collectives/trigger.o

$(B)/collectives/sim/%.o: collectives/sim/%.c collectives/sim/sim.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c $< -o $@

$(B)/bench/pcoll-sim: $(B)/collectives/sim/sim_main.o $(SIM_OBJS) $(B)/trainer/imbalance.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ -ljansson $(LDLIBS)

$(B)/bench/pcoll-sim-calibrate: $(B)/collectives/sim/calibrate.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(MPI_LIBS) -ljansson $(LDLIBS)

$(B)/tests/test_sim: tests/sim/test_sim.c $(SIM_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) $^ -o $@ $(LDFLAGS) $(LDLIBS)

ALL_BINS  += $(B)/bench/pcoll-sim $(B)/bench/pcoll-sim-calibrate
TEST_BINS += $(B)/tests/test_sim

.PHONY: bench-sim
# make bench-sim: the model from P=4 to 4,096 (flat and tree activation), table + JSON
bench-sim: $(B)/bench/pcoll-sim
	$(B)/bench/pcoll-sim --P 4,8,16,32,64,128,256,512,1024,2048,4096 --iters 16 --warmup 2 \
	  --imbalance none --imbalance linear:unit=1 --imbalance lognormal:mean=5,std=2 \
	  $(if $(wildcard $(B)/bench/sim-cost.json),--cost $(B)/bench/sim-cost.json,) --json $(B)/bench/sim.json
