/* dp_none.c -- libpcoll.a (host memory only) has no device data path: pcoll_create refuses
 * PCOLL_MEM_DEVICE with PCOLL_ERR_UNSUPPORTED. libpcoll_cuda.a links dp_nccl.c instead. */
#include "collectives/pcoll_impl.h"

const pcoll_datapath_t *const pcoll_dp_device = NULL;
