/* C call chains for c_api_vmtest (c_api_chain.c). */
#ifndef SFRAME_VMTEST_C_API_CHAIN_H
#define SFRAME_VMTEST_C_API_CHAIN_H

#include <stdint.h>

#include "sframe_client/sframe_client.h"

#ifdef __cplusplus
extern "C" {
#endif

struct c_chain_req {
	struct sframe_client_device *dev;
	uint64_t *frames;
	uint32_t max_frames;
	uint32_t flags;
	struct sframe_client_unwind_result res; /* res.sz set by the caller */
	int ret;                                /* sframe_client_unwind_self's */
};

/* c_chain_a -> c_chain_b -> c_chain_c -> sframe_client_unwind_self. */
void c_chain_a(struct c_chain_req *req);
void c_chain_b(struct c_chain_req *req);
void c_chain_c(struct c_chain_req *req);

/* c_spin_a -> c_spin_b -> c_spin_leaf, which spins for ms milliseconds. */
uint64_t c_spin_a(unsigned ms);
uint64_t c_spin_b(unsigned ms);
uint64_t c_spin_leaf(unsigned ms);

#ifdef __cplusplus
}
#endif

#endif /* SFRAME_VMTEST_C_API_CHAIN_H */
