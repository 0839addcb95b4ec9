// SPDX-License-Identifier: GPL-2.0
/*
 * sframe_unwind: user-space stack unwinding with SFrame for stock kernels.
 *
 * This file only ties the parts together: the registry of sections
 * (registry.c), the unwinder (unwind.c, sframe_decode.c, row_cache.c), the
 * perf sample hook (perf_hook.c), the sessions' samples (sample.c),
 * perf's own user callchains (perf_callchain.c),
 * deferred unwinding (deferred.c), the readers (session.c) and their buffers
 * (session_ring.c), the character device that
 * exposes them (device.c), discovery of sections in mapped files
 * (discovery.c, elf_file.c), the sections kept per file (file_store.c),
 * their inheritance across fork (inherit.c) and the kernel
 * symbols found at load (ksyms.c).
 */
#include <linux/module.h>

#include "device.h"
#include "file_store.h"
#include "inherit.h"
#include "ksyms.h"
#include "nmi_test.h"
#include "perf_callchain.h"
#include "quota.h"
#include "registry.h"
#include "session.h"
#include "stats.h"

struct sframe_counters sframe_counters;

/*
 * Each part is started after the parts it uses and stopped in the reverse
 * order, the failure path included: exit mirrors init.  The ksyms are
 * looked up once and need no stopping; quota.c has nothing to start and
 * only waits, at the end, for the users' structs freed under RCU.
 */
static int __init sframe_unwind_init(void)
{
	int ret;

	ret = sframe_ksyms_init();
	if (ret)
		return ret;
	ret = sframe_files_init();
	if (ret)
		goto fail_files;
	ret = sframe_registry_init();
	if (ret)
		goto fail_registry;
	ret = sframe_sessions_init();
	if (ret)
		goto fail_sessions;
	ret = sframe_nmi_test_init();
	if (ret)
		goto fail_nmi;
	ret = sframe_inherit_init();
	if (ret)
		goto fail_inherit;
	ret = sframe_callchain_init();
	if (ret)
		goto fail_callchain;
	ret = sframe_device_init();
	if (ret)
		goto fail_device;
	return 0;

fail_device:
	sframe_callchain_exit();
fail_callchain:
	sframe_inherit_exit();
fail_inherit:
	sframe_nmi_test_exit();
fail_nmi:
	sframe_sessions_exit();
fail_sessions:
	sframe_registry_exit();
fail_registry:
	sframe_files_exit();
fail_files:
	sframe_quota_exit();
	return ret;
}

static void __exit sframe_unwind_exit(void)
{
	/*
	 * No file is open once we get here: each open file holds us, so no
	 * session exists.  sframe_sessions_exit() removes the perf hook and
	 * has sample.c and deferred.c hand back or wait for the samples queued
	 * on tasks.
	 */
	sframe_device_exit();
	sframe_callchain_exit();
	sframe_inherit_exit();
	sframe_nmi_test_exit();
	sframe_sessions_exit();
	sframe_registry_exit();
	sframe_files_exit();
	sframe_quota_exit();
}

module_init(sframe_unwind_init);
module_exit(sframe_unwind_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("User-space stack unwinding with SFrame");
MODULE_VERSION("0.1.0");
