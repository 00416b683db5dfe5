/* iter.c: batches, parallel batch loading, and the iterator with its prefetch thread.
 * Prefetch = double buffering: two batch buffers; the caller holds one (the batch it computes on)
 * while the thread fills the other with the next job.  Jobs (index lists) form a FIFO queue: in
 * shard mode all of the epoch's batches are queued at creation, in global mode data_iter_submit
 * queues them.  Every shared field is touched under `mu`; a buffer is written only by whoever owns
 * it (state LOADING: the thread, HELD: the caller), ownership changes under `mu`. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/data/internal.h"

#define ERRLEN 512

/* ---- batches -------------------------------------------------------------------------------- */
void data_set_batch_memory(data_set_t *s, const data_alloc_t *a) {
    if (!s) return;
    memset(&s->mem, 0, sizeof s->mem);
    if (a && a->alloc && a->release) s->mem = *a;
}

/* zeroed memory from the batch's allocator */
static void *batch_mem(const data_batch_t *b, size_t bytes) {
    void *p = b->mem.alloc ? b->mem.alloc(b->mem.ctx, bytes) : malloc(bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

static void batch_release(const data_batch_t *b, void *p) {
    if (!p) return;
    if (b->mem.release)
        b->mem.release(b->mem.ctx, p);
    else
        free(p);
}

data_batch_t *data_batch_new(const data_set_t *s, int cap) {
    if (!s || cap < 1) return NULL;
    data_batch_t *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->cap = cap;
    b->mem = s->mem;
    b->x = batch_mem(b, sizeof(float) * (size_t)cap * (s->numel ? s->numel : 1));
    b->y = batch_mem(b, (size_t)cap * sizeof(int));
    b->target = batch_mem(b, (size_t)cap * sizeof(float));
    b->lengths = batch_mem(b, (size_t)cap * sizeof(int));
    b->idx = calloc((size_t)cap, sizeof(int64_t));
    if (!b->x || !b->y || !b->target || !b->lengths || !b->idx) {
        data_batch_free(b);
        return NULL;
    }
    return b;
}

void data_batch_free(data_batch_t *b) {
    if (!b) return;
    batch_release(b, b->x);
    batch_release(b, b->y);
    batch_release(b, b->target);
    batch_release(b, b->lengths);
    free(b->idx);
    free(b);
}

typedef struct {
    const data_set_t *s;
    const int64_t *idx;
    int n, k0, step;
    int64_t epoch;
    int augment;
    data_batch_t *b;
    int rc, bad; /* first failing position */
    char err[ERRLEN];
} part_t;

static void *load_part(void *arg) {
    part_t *p = arg;
    const data_set_t *s = p->s;
    data_batch_t *b = p->b;
    p->rc = DATA_OK;
    p->bad = -1;
    for (int k = p->k0; k < p->n; k += p->step) {
        float *x = b->x + (size_t)k * b->x_stride;
        int64_t i = p->idx[k];
        int rc = s->ops->load(s, i, p->epoch, p->augment, x, &b->y[k], &b->target[k], p->err, sizeof p->err);
        if (rc) {
            p->rc = rc;
            p->bad = k;
            return NULL;
        }
        int len = s->lengths ? s->lengths[i] : 1;
        if (s->lengths && len < b->t_pad) /* zero the padding frames */
            memset(x + (size_t)len * s->dims[1], 0, sizeof(float) * (size_t)(b->t_pad - len) * s->dims[1]);
    }
    return NULL;
}

int data_load_indices(const data_set_t *s, const int64_t *idx, int n, int64_t epoch, int augment, int threads,
                      data_batch_t *b, char *err, size_t errlen) {
    if (!s || !b || (n > 0 && !idx) || n < 0 || n > b->cap)
        return derr(err, errlen, DATA_ERR_ARG, "data_load_indices: bad arguments (n=%d, cap=%d)", n,
                    b ? b->cap : 0);
    int t_pad = 1;
    double cost = 0;
    for (int k = 0; k < n; k++) {
        if (idx[k] < 0 || idx[k] >= s->n)
            return derr(err, errlen, DATA_ERR_ARG, "data_load_indices: index %lld out of range [0,%lld)",
                        (long long)idx[k], (long long)s->n);
        int len = s->lengths ? s->lengths[idx[k]] : 1;
        if (len > t_pad) t_pad = len;
        b->lengths[k] = len;
        b->idx[k] = idx[k];
        cost += len;
    }
    b->n = n;
    b->t_pad = s->lengths ? t_pad : 1;
    b->x_stride = s->lengths ? (size_t)t_pad * s->dims[1] : s->numel;
    b->cost = cost;
    if (threads < 1) threads = 1;
    if (threads > n) threads = n > 0 ? n : 1;
    part_t *parts = calloc((size_t)threads, sizeof *parts);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    int *started = calloc((size_t)threads, sizeof *started);
    if (!parts || !th || !started) {
        free(parts);
        free(th);
        free(started);
        return derr(err, errlen, DATA_ERR_NOMEM, "data_load_indices: out of memory");
    }
    for (int t = 0; t < threads; t++)
        parts[t] = (part_t){s, idx, n, t, threads, epoch, augment, b, 0, -1, {0}};
    for (int t = 1; t < threads; t++) started[t] = pthread_create(&th[t], NULL, load_part, &parts[t]) == 0;
    for (int t = 1; t < threads; t++) /* threads that failed to start: do their share here */
        if (!started[t]) load_part(&parts[t]);
    load_part(&parts[0]);
    for (int t = 1; t < threads; t++)
        if (started[t]) pthread_join(th[t], NULL);
    int rc = DATA_OK, bad = n;
    for (int t = 0; t < threads; t++) /* report the failing sample of lowest position */
        if (parts[t].rc && parts[t].bad < bad) {
            bad = parts[t].bad;
            rc = parts[t].rc;
            if (err && errlen) snprintf(err, errlen, "%s", parts[t].err);
        }
    free(parts);
    free(th);
    free(started);
    if (rc) b->n = 0;
    return rc;
}

/* ---- iterator ------------------------------------------------------------------------------- */
typedef struct job {
    int64_t *idx;
    int n;
    int64_t epoch, seq;
    struct job *next;
} job_t;

enum { B_FREE, B_LOADING, B_READY, B_HELD };

struct data_iter {
    const data_set_t *set;
    int batch, flags, threads, global, prefetch;
    int64_t nshard, nbatches;
    job_t *head, *tail; /* queued, not yet taken by a loader */
    int64_t next_seq, next_consume;
    data_batch_t *buf[2];
    int state[2], rc[2];
    int64_t seq[2];
    char err[2][ERRLEN];
    int held;
    int sticky;
    char sticky_err[ERRLEN];
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, thread_started;
};

static int push_job(data_iter_t *it, const int64_t *idx, int n, int64_t epoch) {
    job_t *j = calloc(1, sizeof *j);
    int64_t *c = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!j || !c) {
        free(j);
        free(c);
        return DATA_ERR_NOMEM;
    }
    memcpy(c, idx, sizeof(int64_t) * (size_t)n);
    j->idx = c;
    j->n = n;
    j->epoch = epoch;
    j->seq = it->next_seq++;
    if (it->tail)
        it->tail->next = j;
    else
        it->head = j;
    it->tail = j;
    return DATA_OK;
}

static job_t *pop_job(data_iter_t *it) {
    job_t *j = it->head;
    if (j) {
        it->head = j->next;
        if (!it->head) it->tail = NULL;
    }
    return j;
}

static void free_job(job_t *j) {
    if (j) free(j->idx);
    free(j);
}

static void *prefetch_main(void *arg) {
    data_iter_t *it = arg;
    pthread_mutex_lock(&it->mu);
    while (!it->stop) {
        int f = it->state[0] == B_FREE ? 0 : it->state[1] == B_FREE ? 1 : -1;
        if (f < 0 || !it->head) {
            pthread_cond_wait(&it->cv, &it->mu);
            continue;
        }
        job_t *j = pop_job(it);
        int threads = it->threads;
        int augment = (it->flags & DATA_AUGMENT) != 0;
        it->state[f] = B_LOADING;
        pthread_mutex_unlock(&it->mu);
        char err[ERRLEN] = "";
        int rc =
            data_load_indices(it->set, j->idx, j->n, j->epoch, augment, threads, it->buf[f], err, sizeof err);
        pthread_mutex_lock(&it->mu);
        it->rc[f] = rc;
        memcpy(it->err[f], err, ERRLEN);
        it->seq[f] = j->seq;
        it->state[f] = B_READY;
        free_job(j);
        pthread_cond_broadcast(&it->cv);
    }
    pthread_mutex_unlock(&it->mu);
    return NULL;
}

static data_iter_t *iter_alloc(const data_set_t *s, int batch, int flags, char *err, size_t errlen) {
    if (!s || batch < 1) {
        derr(err, errlen, DATA_ERR_ARG, "data_iter: bad set or batch size %d", batch);
        return NULL;
    }
    data_iter_t *it = calloc(1, sizeof *it);
    if (!it) {
        derr(err, errlen, DATA_ERR_NOMEM, "data_iter: out of memory");
        return NULL;
    }
    it->set = s;
    it->batch = batch;
    it->flags = flags;
    it->threads = 1;
    it->held = -1;
    it->prefetch = (flags & DATA_PREFETCH) != 0;
    pthread_mutex_init(&it->mu, NULL);
    pthread_cond_init(&it->cv, NULL);
    for (int i = 0; i < (it->prefetch ? 2 : 1); i++)
        if (!(it->buf[i] = data_batch_new(s, batch))) {
            data_iter_free(it);
            derr(err, errlen, DATA_ERR_NOMEM, "data_iter: out of memory for batch buffers");
            return NULL;
        }
    if (!it->prefetch) it->state[1] = B_HELD; /* unused */
    return it;
}

static int iter_start(data_iter_t *it, char *err, size_t errlen) {
    if (!it->prefetch) return DATA_OK;
    if (pthread_create(&it->th, NULL, prefetch_main, it) != 0)
        return derr(err, errlen, DATA_ERR_NOMEM, "data_iter: cannot start the prefetch thread");
    it->thread_started = 1;
    return DATA_OK;
}

data_iter_t *data_iter_new(const data_set_t *s, int rank, int nranks, int batch, int64_t epoch, int flags,
                           char *err, size_t errlen) {
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        derr(err, errlen, DATA_ERR_ARG, "data_iter_new: bad rank %d of %d", rank, nranks);
        return NULL;
    }
    data_iter_t *it = iter_alloc(s, batch, flags, err, errlen);
    if (!it) return NULL;
    int64_t N = s->n;
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)(N ? N : 1));
    if (!perm) goto nomem;
    if (flags & DATA_SHUFFLE)
        data_permutation(N, s->spec.seed, epoch, perm);
    else
        for (int64_t i = 0; i < N; i++) perm[i] = i;
    int64_t lim = (flags & DATA_EVEN_SHARDS) ? N / nranks * nranks : N;
    int64_t m = 0;
    for (int64_t i = rank; i < lim; i += nranks) perm[m++] = perm[i]; /* in place: m <= i */
    it->nshard = m;
    for (int64_t k = 0; k < m; k += batch) {
        int n = (int)(m - k < batch ? m - k : batch);
        if (n < batch && (flags & DATA_DROP_LAST)) break;
        if (push_job(it, perm + k, n, epoch)) {
            free(perm);
            goto nomem;
        }
        it->nbatches++;
    }
    free(perm);
    if (iter_start(it, err, errlen)) {
        data_iter_free(it);
        return NULL;
    }
    return it;
nomem:
    data_iter_free(it);
    derr(err, errlen, DATA_ERR_NOMEM, "data_iter_new: out of memory");
    return NULL;
}

data_iter_t *data_iter_new_global(const data_set_t *s, int batch, int flags, char *err, size_t errlen) {
    data_iter_t *it = iter_alloc(s, batch, flags, err, errlen);
    if (!it) return NULL;
    it->global = 1;
    if (iter_start(it, err, errlen)) {
        data_iter_free(it);
        return NULL;
    }
    return it;
}

int data_iter_submit(data_iter_t *it, const int64_t *idx, int n, int64_t epoch) {
    if (!it || !it->global || n < 1 || n > it->batch || !idx) return DATA_ERR_ARG;
    for (int k = 0; k < n; k++)
        if (idx[k] < 0 || idx[k] >= it->set->n) return DATA_ERR_ARG;
    pthread_mutex_lock(&it->mu);
    int rc = push_job(it, idx, n, epoch);
    pthread_cond_broadcast(&it->cv);
    pthread_mutex_unlock(&it->mu);
    return rc;
}

void data_iter_set_threads(data_iter_t *it, int threads) {
    if (!it) return;
    pthread_mutex_lock(&it->mu);
    it->threads = threads < 1 ? 1 : threads;
    pthread_mutex_unlock(&it->mu);
}

int data_iter_next(data_iter_t *it, const data_batch_t **out, char *err, size_t errlen) {
    *out = NULL;
    if (!it) return derr(err, errlen, DATA_ERR_ARG, "data_iter_next: NULL iterator");
    if (it->sticky) return derr(err, errlen, it->sticky, "%s", it->sticky_err);
    if (!it->prefetch) {
        job_t *j = pop_job(it);
        if (!j) return 0;
        int rc = data_load_indices(it->set, j->idx, j->n, j->epoch, (it->flags & DATA_AUGMENT) != 0,
                                   it->threads, it->buf[0], it->sticky_err, ERRLEN);
        free_job(j);
        if (rc) {
            it->sticky = rc;
            return derr(err, errlen, rc, "%s", it->sticky_err);
        }
        *out = it->buf[0];
        return 1;
    }
    pthread_mutex_lock(&it->mu);
    if (it->held >= 0) { /* give the previous batch back to the loader */
        it->state[it->held] = B_FREE;
        it->held = -1;
        pthread_cond_broadcast(&it->cv);
    }
    int f = -1;
    for (;;) {
        for (int i = 0; i < 2; i++)
            if (it->state[i] == B_READY && it->seq[i] == it->next_consume) f = i;
        if (f >= 0) break;
        if (!it->head && it->state[0] != B_LOADING && it->state[1] != B_LOADING && it->state[0] != B_READY &&
            it->state[1] != B_READY) {
            pthread_mutex_unlock(&it->mu);
            return 0;
        }
        pthread_cond_wait(&it->cv, &it->mu);
    }
    it->state[f] = B_HELD;
    it->held = f;
    it->next_consume++;
    int rc = it->rc[f];
    if (rc) {
        it->sticky = rc;
        memcpy(it->sticky_err, it->err[f], ERRLEN);
    }
    pthread_mutex_unlock(&it->mu);
    if (rc) return derr(err, errlen, rc, "%s", it->sticky_err);
    *out = it->buf[f];
    return 1;
}

int data_iter_next_into(data_iter_t *it, float *x, int *y, int *lengths, int *nb, int *t_pad, double *cost,
                        char *err, size_t errlen) {
    const data_batch_t *b;
    int rc = data_iter_next(it, &b, err, errlen);
    if (nb) *nb = rc == 1 ? b->n : 0;
    if (rc != 1) return rc;
    memcpy(x, b->x, sizeof(float) * b->x_stride * (size_t)b->n);
    if (y) memcpy(y, b->y, sizeof(int) * (size_t)b->n);
    if (lengths) memcpy(lengths, b->lengths, sizeof(int) * (size_t)b->n);
    if (t_pad) *t_pad = b->t_pad;
    if (cost) *cost = b->cost;
    return 1;
}

int64_t data_iter_num_samples(const data_iter_t *it) { return it ? it->nshard : 0; }
int64_t data_iter_num_batches(const data_iter_t *it) { return it ? it->nbatches : 0; }

void data_iter_free(data_iter_t *it) {
    if (!it) return;
    if (it->thread_started) {
        pthread_mutex_lock(&it->mu);
        it->stop = 1;
        pthread_cond_broadcast(&it->cv);
        pthread_mutex_unlock(&it->mu);
        pthread_join(it->th, NULL);
    }
    job_t *j;
    while ((j = pop_job(it))) free_job(j);
    data_batch_free(it->buf[0]);
    data_batch_free(it->buf[1]);
    pthread_mutex_destroy(&it->mu);
    pthread_cond_destroy(&it->cv);
    free(it);
}
