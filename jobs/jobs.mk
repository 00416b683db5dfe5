# jobs/: Slurm job scripts (one per experiment of the paper), jobs/lib.sh (shared), jobs/local.sh
# (the same scripts without Slurm), jobs/sweep.sh (all runs of one figure), jobs/minicluster.sh
# (throw-away Slurm cluster: one node, or several in network namespaces), and the experiment drivers
# without Slurm (demo.sh, ddp_race.sh, bench_*.sh, plot*.sh; their make targets are
# in the fragments of what they measure). See jobs/README.md.
#   make slurm-test   install Slurm + munge if missing (root), then every jobs_slurm* line of
#                     tests/jobs.tests: a one-node cluster (Fig. 9 benchmark, tiny fmnist runs, a
#                     sweep) and two-node ones (sbatch -N 2 -n 4: Fig. 9, fmnist sync + adaptive;
#                     a RESTARTS=1 job that loses a whole node and finishes on the other)
#   make jobs-test    every jobs_* test line (local runner, missing data, sweep, Slurm)
.PHONY: slurm-test jobs-test
slurm-test: $(B)/bin/eager-train $(B)/bench/bench_collectives $(B)/bin/pcoll-validate $(B)/bin/pcoll-compare
	@B=$(B) T='^jobs_slurm' bash tests/run.sh
jobs-test: build-all
	@B=$(B) T='^jobs_' bash tests/run.sh

# tests/jobs/gen_data: small CIFAR-10 / ImageNet / UCF101 data sets in their real formats for
# tests/jobs/scripts_test.sh (the file writers of tests/data/testutil.c)
$(B)/tests/jobs/gen_data: tests/jobs/gen_data.c $(B)/tests/data/testutil.o
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) $(filter %.c %.o,$^) -o $@ $(DATA_LDLIBS) $(LDLIBS)
TEST_BINS += $(B)/tests/jobs/gen_data

# pcoll-hog: the CPU / memory-bandwidth load jobs/interfere.sh runs beside chosen ranks
$(B)/bin/pcoll-hog: jobs/hog.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) $< -o $@
ALL_BINS += $(B)/bin/pcoll-hog
