/* bench_hop's floor: a bare ping-pong of a sequence number in device memory
 * between two resident kernels, one thread each (st.release.gpu /
 * ld.acquire.gpu), the least a hop between two ring kernels can cost. */
#ifndef GB_HOP_FLOOR_H
#define GB_HOP_FLOOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Variants, for what a hop's parts cost beside the floor. */
#define GB_HOP_FLOOR_BARE 0
#define GB_HOP_FLOOR_CLOCK 1 /* and a %globaltimer read before each send */
#define GB_HOP_FLOOR_CAS 2   /* and a compare-and-swap in device memory before each send */

/* Median ns a hop of `rounds` samples of n hops each on CUDA device
 * `device`, into *median_ns and *p99_ns. -1 without CUDA or on an error. */
int gb_hop_floor(int device, int variant, uint32_t n, uint32_t rounds, double *median_ns, double *p99_ns);

#ifdef __cplusplus
}
#endif
#endif
