/* C call chains for c_api_vmtest: built as C with the VM tests' SFrame
 * flags (-O2 -fomit-frame-pointer -Wa,--gsframe), so only SFrame can walk
 * them.  Each function is noipa and does something after its call, so no
 * call is a tail call and the names in a chain are exact. */
#include "c_api_chain.h"

#include <time.h>

#define C_NOIPA __attribute__((noipa))
#define C_BARRIER() __asm__ volatile("" ::: "memory")

C_NOIPA void c_chain_c(struct c_chain_req *req)
{
	req->ret = sframe_client_unwind_self(req->dev, req->frames, req->max_frames, req->flags,
					     &req->res);
	C_BARRIER();
}

C_NOIPA void c_chain_b(struct c_chain_req *req)
{
	c_chain_c(req);
	C_BARRIER();
}

C_NOIPA void c_chain_a(struct c_chain_req *req)
{
	c_chain_b(req);
	C_BARRIER();
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins for ms milliseconds, nearly all of it in this function's own loop. */
C_NOIPA uint64_t c_spin_leaf(unsigned ms)
{
	const uint64_t end = now_ns() + (uint64_t)ms * 1000000u;
	uint64_t x = 1;

	do {
		for (unsigned i = 0; i < 100000; i++) {
			x = x * 6364136223846793005u + 1442695040888963407u;
			C_BARRIER();
		}
	} while (now_ns() < end);
	return x;
}

C_NOIPA uint64_t c_spin_b(unsigned ms)
{
	uint64_t x = c_spin_leaf(ms);

	C_BARRIER();
	return x + 1;
}

C_NOIPA uint64_t c_spin_a(unsigned ms)
{
	uint64_t x = c_spin_b(ms);

	C_BARRIER();
	return x + 1;
}
