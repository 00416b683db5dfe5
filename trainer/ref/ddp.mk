# trainer/ref/ddp.mk: the race against PyTorch DDP (included by the top-level Makefile).
#   make bench-ddp   installs PyTorch (CPU) into $(B)/venv from PyPI if absent, checks the mirror
#                    live (ddp-check), then runs the race on a small setting (DDP_ARGS)
#   make ddp-check   regenerates the mirror reference with PyTorch and checks eager-train against
#                    it (the committed reference is checked by make test without Python)
# The C build needs no Python; these targets and make test (its Python tests) do.
DDP_INIT_HASH := $(B)/tests/trainer/ddp_init_hash
DDP_IMB       := $(B)/tests/trainer/ddp_imb_delays
DDP_PY        ?= $(B)/venv/bin/python3
DDP_ARGS      ?= --ranks 4 --seeds 1 --limit-train 4096 --limit-test 1024 --epochs 2

$(DDP_INIT_HASH): trainer/ref/ddp_init_hash.c $(NN_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(NN_CFLAGS) $< -o $@ $(LDFLAGS) $(NN_LIB) $(NN_LDLIBS) $(LDLIBS)

$(DDP_IMB): trainer/ref/ddp_imb_delays.c $(B)/collectives/sim/imbalance.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDFLAGS) -lm $(LDLIBS)

TEST_BINS += $(DDP_INIT_HASH) $(DDP_IMB)

.PHONY: bench-ddp ddp-check ddp-venv
ddp-venv:
	@B=$(B) DDP_PY=$(DDP_PY) sh trainer/ref/ddp_venv.sh

ddp-check: ddp-venv $(DDP_INIT_HASH) $(DDP_IMB) $(B)/bin/eager-train
	@B=$(B) DDP_PY=$(DDP_PY) bash trainer/ref/ddp_check.sh --live

bench-ddp: ddp-check
	@B=$(B) DDP_PY=$(DDP_PY) bash jobs/ddp_race.sh --out $(B)/bench/ddp $(DDP_ARGS)
