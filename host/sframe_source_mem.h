/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Host definition of struct sframe_source: a section held in a memory
 * buffer, with optional fault injection and read accounting, for the unit
 * tests, the fuzzer and the benchmark.
 */
#ifndef SFRAME_SOURCE_MEM_H
#define SFRAME_SOURCE_MEM_H

#include <stdint.h>

#include "sframe_decode.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the decoder asked of a source (optional, see sframe_source.stats). */
struct sframe_mem_stats {
	uint64_t reads;		/* sframe_source_read() calls */
	uint64_t bytes;		/* bytes requested */
	uint64_t out_of_range;	/* requests reaching past size: decoder bugs */
	uint32_t max_len;	/* largest single request */
	uint32_t last_len;	/* length of the latest request */
	uint64_t last_off;	/* offset of the latest request */
	uint64_t pauses;	/* sframe_source_pause() calls */
};

struct sframe_source {
	const uint8_t *data;
	uint64_t size;
	/* Reads touching any byte at or past fault_at fail with -EFAULT. */
	uint64_t fault_at;
	/* If not NULL, updated by every read. */
	struct sframe_mem_stats *stats;
	/*
	 * If not NULL, called after every successful read: tests use it to
	 * trace reads or to change the section under the decoder.
	 */
	void (*on_read)(void *arg, uint64_t off, uint32_t len);
	void *on_read_arg;
	/*
	 * What sframe_source_pause() returns (0: go on); tests set -EINTR to
	 * play a fatal signal arriving during validation.
	 */
	int pause_ret;
};

#define SFRAME_NO_FAULT UINT64_MAX

/* A source over size bytes at data, no fault, no statistics. */
void sframe_source_mem_init(struct sframe_source *src, const void *data,
			    uint64_t size);

#ifdef __cplusplus
}
#endif

#endif /* SFRAME_SOURCE_MEM_H */
