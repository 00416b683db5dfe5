/* test_nn_fmnist.c: train the small ResNet ("resnet-fmnist") on Fashion-MNIST and check the test
 * accuracy.  Usage: test_nn_fmnist [epochs=1] [min_accuracy=0.85] [dir]
 * Data: the IDX files of Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist,
 * gzip'ed; read through `gzip -dc`).  Exits 77 (skip) when they are missing.
 * SGD momentum 0.9, batch 64, lr 0.05 with 100-step warm-up and linear decay to 0, wd 5e-4 on
 * weights; inputs normalised with mean 0.2860, std 0.3530; no augmentation. */
#include "tests/nn/nn_test_util.h"
#include <time.h>

static unsigned char *read_idx(const char *dir, const char *name, int *count, int rank) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "gzip -dc '%s/%s.gz' 2>/dev/null", dir, name);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    unsigned char h[16];
    size_t hl = rank == 3 ? 16 : 8;
    if (fread(h, 1, hl, p) != hl) {
        pclose(p);
        return NULL;
    }
    int n = (h[4] << 24) | (h[5] << 16) | (h[6] << 8) | h[7];
    size_t per = rank == 3 ? 28 * 28 : 1, tot = (size_t)n * per;
    unsigned char *d = malloc(tot);
    size_t got = d ? fread(d, 1, tot, p) : 0;
    pclose(p);
    if (got != tot) {
        free(d);
        return NULL;
    }
    *count = n;
    return d;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    double epochs = argc > 1 ? atof(argv[1]) : 1.0, minacc = argc > 2 ? atof(argv[2]) : 0.85;
    const char *dir = argc > 3 ? argv[3] : "/usr/share/datasets/fashion-mnist";
    int ntr, ntrl, nte, ntel;
    unsigned char *xtr = read_idx(dir, "train-images-idx3-ubyte", &ntr, 3);
    unsigned char *ytr = read_idx(dir, "train-labels-idx1-ubyte", &ntrl, 1);
    unsigned char *xte = read_idx(dir, "t10k-images-idx3-ubyte", &nte, 3);
    unsigned char *yte = read_idx(dir, "t10k-labels-idx1-ubyte", &ntel, 1);
    if (!xtr || !ytr || !xte || !yte || ntr != ntrl || nte != ntel) {
        printf("skip: Fashion-MNIST not found in %s (apt-get install dataset-fashion-mnist)\n", dir);
        return 77;
    }
    const int B = 64, EB = 250;
    char err[512];
    nn_model_t *m = nn_model_build("resnet-fmnist", EB, 1, err, sizeof err);
    nnCheck(m ? 0 : 1, err, "model build");
    char sum[512];
    nn_model_summary(m, sum, sizeof sum);
    printf("%s\n", sum);
    float *x = malloc(sizeof(float) * EB * 784);
    int lab[EB], *perm = malloc(sizeof(int) * ntr);
    nn_rng_t r;
    nn_rng_seed(&r, 11);
    long steps = (long)(epochs * ntr / B), step = 0;
    double t0 = now(), tstep = 0;
    nn_sgd_t o = {.lr = 0.05f, .momentum = 0.9f, .wd = 5e-4f};
    double lsum = 0;
    int lcnt = 0, c1 = 0;
    while (step < steps) {
        for (int i = 0; i < ntr; i++) perm[i] = i;
        for (int i = ntr - 1; i > 0; i--) {
            int j = (int)(nn_rng_u64(&r) % (i + 1)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int b0 = 0; b0 + B <= ntr && step < steps; b0 += B, step++) {
            for (int n = 0; n < B; n++) {
                int k = perm[b0 + n];
                for (int i = 0; i < 784; i++)
                    x[n * 784 + i] = (xtr[(size_t)k * 784 + i] / 255.f - 0.2860f) / 0.3530f;
                lab[n] = ytr[k];
            }
            double warm = step < 100 ? (step + 1) / 100.0 : 1.0;
            o.lr = (float)(0.05 * warm * (1.0 - (double)step / steps));
            nn_batch_t bt = {.x = x, .labels = lab, .n = B, .ndim = 3, .shape = {1, 28, 28}};
            double ts = now();
            nn_zero_grad(m);
            nnCheck(nn_forward(m, &bt), m->err, "forward");
            nnCheck(nn_backward(m), m->err, "backward");
            nnCheck(nn_check_finite(m, step, err, sizeof err), err, "lower the learning rate");
            nn_sgd_step(m, &o);
            tstep += now() - ts;
            lsum += m->loss;
            c1 += m->top1;
            lcnt++;
            if ((step + 1) % 200 == 0) {
                printf("step %5ld/%ld  loss %.4f  train top-1 %.3f  lr %.4f  %.1f ms/step\n", step + 1, steps,
                       lsum / lcnt, (double)c1 / (lcnt * B), o.lr, 1e3 * tstep / (step + 1));
                fflush(stdout);
                lsum = 0;
                lcnt = 0;
                c1 = 0;
            }
        }
    }
    nn_set_training(m, 0);
    long correct = 0, top5 = 0;
    for (int b0 = 0; b0 < nte; b0 += EB) {
        int nb = nte - b0 < EB ? nte - b0 : EB;
        for (int n = 0; n < nb; n++) {
            for (int i = 0; i < 784; i++)
                x[n * 784 + i] = (xte[(size_t)(b0 + n) * 784 + i] / 255.f - 0.2860f) / 0.3530f;
            lab[n] = yte[b0 + n];
        }
        nn_batch_t bt = {.x = x, .labels = lab, .n = nb};
        nnCheck(nn_forward(m, &bt), m->err, "eval forward");
        correct += m->top1;
        top5 += m->top5;
    }
    double acc = (double)correct / nte;
    printf(
        "%.2f epochs (%ld steps of %d) in %.1f s (%.1f ms/step): test top-1 %.4f top-5 %.4f (need >= %.2f)\n",
        epochs, steps, B, now() - t0, 1e3 * tstep / (steps ? steps : 1), acc, (double)top5 / nte, minacc);
    nn_model_free(m);
    free(x);
    free(perm);
    free(xtr);
    free(ytr);
    free(xte);
    free(yte);
    printf("%s\n", acc >= minacc ? "PASS" : "FAIL");
    return acc >= minacc ? 0 : 1;
}
