/* datasplit.c -- one split of --data opened as the options describe it. */
#include "trainer/datasplit.h"
#include <string.h>

static int data_kind(const char *s) {
    return !strcmp(s, "cifar10")      ? DATA_CIFAR10
           : !strcmp(s, "imagenet")   ? DATA_IMAGENET
           : !strcmp(s, "ucf101")     ? DATA_UCF101
           : !strcmp(s, "hyperplane") ? DATA_HYPERPLANE
           : !strcmp(s, "fmnist")     ? DATA_FMNIST
                                      : 0;
}

data_set_t *run_open_split(const cfg_t *c, data_split_t split, int64_t limit, char *err, size_t n) {
    data_spec_t s;
    memset(&s, 0, sizeof s);
    s.kind = data_kind(c->data);
    if (!s.kind) {
        snprintf(err, n, "--data '%s' is not a data kind", c->data);
        return NULL;
    }
    s.path = *c->data_path ? c->data_path : NULL;
    s.split = split;
    s.seed = c->seed;
    s.image_size = c->image_size;
    s.limit = limit;
    s.ucf_split = c->ucf_split;
    s.max_t = c->max_t;
    s.hp_features = c->hp_features;
    s.hp_samples = split == DATA_TRAIN ? c->hp_samples : c->hp_samples / 8;
    return data_open(&s, err, n);
}
