/* datasplit.h -- one split of --data opened as the options describe it (datasplit.c). */
#ifndef TRAINER_DATASPLIT_H
#define TRAINER_DATASPLIT_H

#include "trainer/config.h"
#include "trainer/data/data.h"

/* One split of --data with the first `limit` samples (0: all). NULL with the reason in err. */
data_set_t *run_open_split(const cfg_t *c, data_split_t split, int64_t limit, char *err, size_t n);

#endif
