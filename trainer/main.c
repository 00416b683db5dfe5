/* main.c -- eager-train: eager-SGD data-parallel training on libpcoll partial allreduces.
 *
 * Every epoch each rank runs its steps (forward/backward, deposit the gradient into a partial
 * allreduce, apply every completed round in order), then joins: its engine keeps taking part
 * until every rank has joined, and every round is applied by every rank, so the replicas are
 * bitwise equal at the epoch end (checked: a hash of parameters, momentum and BN statistics is
 * compared across ranks before every evaluation). A round's learning rate is a function of the
 * epoch and of the share of the epoch's gradients applied, never of a rank's own step, so every
 * rank applies a round with the same lr. BN running statistics are averaged across ranks before
 * every evaluation and checkpoint (as DDP broadcasts buffers). See run.h for the modules and
 * docs/DESIGN.md for the semantics.
 */
#include "trainer/curve.h"
#include "trainer/end.h"
#include "trainer/epoch.h"
#include "trainer/epoch_end.h"
#include "trainer/gradstats.h"
#include "trainer/runlog.h"
#include "trainer/setup.h"

int main(int argc, char **argv) {
    run_t r;
    if (run_init(&r, &argc, &argv)) return 1; /* MPI, thread level checked */
    int help = run_configure(&r, argc, argv);
    if (help) return help < 0; /* --help */
    run_set_threads(&r);
    runlog_config(&r);

    run_open_data(&r);
    run_build_model(&r);
    curve_open(&r); /* --curve-every: the accuracy curve's snapshots and test subset */
    run_set_optimiser(&r);
    run_open_backend(&r);
    gstats_open(&r); /* --grad-stats: the CSV of the applied results' statistics */
    run_resume(&r);
    run_set_rounds(&r);
    runlog_open(&r, argc, argv);
    run_warmup(&r); /* the backend's one-time work (cuDNN searches, graph capture), before any round */

    r.t_start = run_now() - r.wall0;
    for (int epoch = r.epoch0; epoch < r.cfg.epochs; epoch++) {
        epoch_t e;
        train_epoch(&r, epoch, &e);   /* steps, rounds, join, the controller's end of epoch */
        runlog_papi_epoch(&r, epoch); /* this epoch's hardware counters of every rank */
        end_epoch(&r, epoch, &e);     /* replicas equal, evaluation, record, checkpoint */
    }
    return run_finish(&r);
}
