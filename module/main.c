// SPDX-License-Identifier: GPL-2.0
/*
 * sframe_unwind: user-space stack unwinding with SFrame for stock kernels.
 *
 * This file only ties the parts together: the registry of sections
 * (registry.c), the unwinder (unwind.c, sframe_decode.c) and the character
 * device that exposes them (device.c).
 */
#include <linux/module.h>

#include "device.h"
#include "registry.h"
#include "stats.h"

struct sframe_counters sframe_counters;

static int __init sframe_unwind_init(void)
{
	int ret;

	ret = sframe_registry_init();
	if (ret)
		return ret;
	ret = sframe_device_init();
	if (ret) {
		sframe_registry_exit();
		return ret;
	}
	return 0;
}

static void __exit sframe_unwind_exit(void)
{
	/* No file is open once we get here: each open file holds us. */
	sframe_device_exit();
	sframe_registry_exit();
}

module_init(sframe_unwind_init);
module_exit(sframe_unwind_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("User-space stack unwinding with SFrame");
MODULE_VERSION("0.1.0");
