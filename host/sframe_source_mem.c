// SPDX-License-Identifier: GPL-2.0
/* Memory-buffer sframe_source for the host build of the decoder. */
#include <string.h>

#include "sframe_source_mem.h"

void sframe_source_mem_init(struct sframe_source *src, const void *data,
			    uint64_t size)
{
	src->data = data;
	src->size = size;
	src->fault_at = SFRAME_NO_FAULT;
	src->stats = NULL;
	src->on_read = NULL;
	src->on_read_arg = NULL;
	src->pause_ret = 0;
}

/*
 * Reads with statistics, fault injection or a hook: what the tests and
 * the fuzzer set up.  Out of line, so that the plain path below needs no
 * registers saved.
 */
static __attribute__((noinline))
int read_instrumented(const struct sframe_source *src, uint64_t off,
		      void *dst, uint32_t len)
{
	struct sframe_mem_stats *st = src->stats;
	int out = off > src->size || len > src->size - off;

	if (st) {
		st->reads++;
		st->bytes += len;
		st->last_off = off;
		st->last_len = len;
		if (len > st->max_len)
			st->max_len = len;
		if (out)
			st->out_of_range++;
	}
	/* The decoder promises never to ask for this; the tests check. */
	if (out)
		return -EFAULT;
	/* A fault at fault_at hits every read whose range reaches it. */
	if (len && off + len > src->fault_at)
		return -EFAULT;
	if (len)
		memcpy(dst, src->data + off, len);
	if (src->on_read)
		src->on_read(src->on_read_arg, off, len);
	return 0;
}

int sframe_source_read(const struct sframe_source *src, uint64_t off,
		       void *dst, uint32_t len)
{
	/*
	 * The decoder calls this for every field it reads (about 11 times
	 * per lookup), so a plain source (tools, the benchmark) does no
	 * more than the bounds check and the copy.
	 */
	if (src->stats || src->on_read || src->fault_at != SFRAME_NO_FAULT)
		return read_instrumented(src, off, dst, len);
	if (off > src->size || len > src->size - off)
		return -EFAULT;
	if (len)
		memcpy(dst, src->data + off, len);
	return 0;
}

/*
 * The host has no scheduler to yield to and no signal to honour: a pause
 * only counts (with stats) and returns what the test asked for.
 */
int sframe_source_pause(const struct sframe_source *src)
{
	if (src->stats)
		src->stats->pauses++;
	return src->pause_ret;
}
