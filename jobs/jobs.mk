# jobs/: Slurm job scripts (one per experiment of the paper), jobs/lib.sh (shared), jobs/local.sh
# (the same scripts without Slurm), jobs/sweep.sh (all runs of one figure), jobs/minicluster.sh
# (throw-away single-node Slurm cluster). See jobs/README.md.
#   make slurm-test   install Slurm + munge if missing (root), bring up a single-node cluster in a
#                     temp folder, sbatch the Fig. 9 benchmark and tiny fmnist runs, check them
#                     (tests/jobs/slurm_test.sh; also the jobs_slurm line of tests/jobs.tests).
#   make jobs-test    every jobs_* test line (local runner, missing data, sweep, Slurm)
.PHONY: slurm-test jobs-test
slurm-test: $(B)/bin/eager-train $(B)/bench/bench_collectives $(B)/bin/pcoll-validate
	@B=$(B) bash tests/jobs/slurm_test.sh
jobs-test: build-all
	@B=$(B) T='^jobs_' bash tests/run.sh
