/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A per-process cache of decoded SFrame rows, keyed by PC.
 */
#ifndef SFRAME_ROW_CACHE_H
#define SFRAME_ROW_CACHE_H

#include <linux/types.h>

#include "sframe_decode.h"

struct sframe_row_cache;

struct sframe_row_cache *sframe_row_cache_alloc(void);
void sframe_row_cache_free(struct sframe_row_cache *cache);

/*
 * The row cached for pc under generation gen, or false.  gen is the
 * registry's generation read before the row was looked up: any change to
 * the registry makes older entries misses.
 */
bool sframe_row_cache_lookup(struct sframe_row_cache *cache, u32 gen,
			     unsigned long pc, struct sframe_row *row);
void sframe_row_cache_store(struct sframe_row_cache *cache, u32 gen,
			    unsigned long pc, const struct sframe_row *row);

#endif /* SFRAME_ROW_CACHE_H */
