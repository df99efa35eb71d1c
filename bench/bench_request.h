/* The request the floor probes and ladders send (bench_floor.cu,
 * bench_ladder.cu), on host or device: a 64-byte slot of vecadd add of
 * (i..i+2) and (i+3..i+5) to grain i % keys, so the reply's first element is
 * 2i + 3. All of the header but its stamp (seq) is written. */
#ifndef GB_BENCH_REQUEST_H
#define GB_BENCH_REQUEST_H

#include "gpubridge/ring.h"
#include "vecadd.h"

GB_HD void gbk_bench_request(unsigned char *slot, int i, unsigned keys)
{
    gb_slot_hdr_t *h = (gb_slot_hdr_t *)slot;
    h->key = (uint64_t)((unsigned)i % keys);
    h->corr = (uint64_t)i;
    h->type = GB_VECADD_MSG_REQUEST;
    h->status = 0;
    h->len = gb_vecadd_request_len(3);
    h->aux = 0;
    uint32_t *w = (uint32_t *)(slot + GB_SLOT_HDR_SIZE);
    w[0] = GB_VECADD_ADD;
    w[1] = 3;
    float *f = (float *)(w + 2);
    for (int k = 0; k < 6; k++)
        f[k] = (float)(i + k);
}

#endif
