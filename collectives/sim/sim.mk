# collectives/sim: pcoll-sim, a discrete-event model of libpcoll's rounds at scale, its
# calibration program and its tests. pcoll-sim links imbalance.o (the delay models, also the
# trainer's), collectives/trigger.o for majority's initiator and collectives/mode.o for the mode
# names (the same functions the real runs use).
SIM_OBJS := $(B)/collectives/sim/sim.o $(B)/collectives/trigger.o $(B)/collectives/mode.o

$(B)/collectives/sim/%.o: collectives/sim/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c $< -o $@

$(B)/bench/pcoll-sim: $(B)/collectives/sim/sim_main.o $(SIM_OBJS) $(B)/collectives/sim/imbalance.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ -ljansson $(LDLIBS)

$(B)/bench/pcoll-sim-calibrate: $(B)/collectives/sim/calibrate.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(MPI_LIBS) -ljansson $(LDLIBS)

$(B)/tests/sim/test_sim: tests/sim/test_sim.c $(SIM_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) $(filter %.c %.o,$^) -o $@ $(LDFLAGS) $(LDLIBS)

ALL_BINS  += $(B)/bench/pcoll-sim $(B)/bench/pcoll-sim-calibrate
TEST_BINS += $(B)/tests/sim/test_sim

.PHONY: bench-sim
# make bench-sim: the model without skew from P=4 to 4,096 (flat vs tree activation), and under
# linear skew and log-normal delays to P=1,024 (a partial rule under skew runs about one round
# per deposit, so the model's cost grows as P^2 per iteration); table, JSON and the figure.
SIM_COST = $(if $(wildcard $(B)/bench/sim-cost.json),--cost $(B)/bench/sim-cost.json,)
bench-sim: $(B)/bench/pcoll-sim
	$(B)/bench/pcoll-sim --P 4,8,16,32,64,128,256,512,1024,2048,4096 --iters 16 --warmup 2 \
	  --imbalance none $(SIM_COST) --json $(B)/bench/sim-none.json
	$(B)/bench/pcoll-sim --P 4,8,16,32,64,128,256,512,1024 --iters 16 --warmup 2 \
	  --imbalance linear:unit=1 --imbalance lognormal:mean=5,std=2 $(SIM_COST) --json $(B)/bench/sim-skew.json
	jq -s '.[0] + {results: (.[0].results + .[1].results)}' $(B)/bench/sim-none.json $(B)/bench/sim-skew.json > $(B)/bench/sim.json
	sh jobs/plot_sim.sh $(B)/bench/sim.json $(B)/bench/figures $(wildcard $(B)/bench/collectives-p*.json)
