/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The decoder's byte source in the kernel: a .sframe section in the user
 * memory of the current process, or a supplied section's copy in kernel
 * memory (kbase set).
 */
#ifndef SFRAME_SOURCE_USER_H
#define SFRAME_SOURCE_USER_H

#include <linux/types.h>
#include <linux/compiler_types.h>

struct sframe_source {
	const void __user *base;
	const void *kbase; /* if set, read here instead of at base */
	u64 size;
};

#endif /* SFRAME_SOURCE_USER_H */
