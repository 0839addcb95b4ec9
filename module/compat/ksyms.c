// SPDX-License-Identifier: GPL-2.0
/*
 * Unexported kernel symbols, through kallsyms_lookup_name().
 *
 * kallsyms_lookup_name() itself is not exported since 5.7; the usual way
 * to its address is a kprobe on it: registering one resolves the symbol.
 * On kernels built with IBT a kprobe at offset 0 is placed after the
 * ENDBR instruction, so the address is moved back onto it: an indirect
 * call must land on the ENDBR.
 */
#include <linux/kprobes.h>
#include <linux/printk.h>

#include "compat.h"
#include "ksyms.h"

struct sframe_ksyms sframe_ksyms;

static unsigned long (*sframe_kallsyms_lookup_name)(const char *name);

static int sframe_find_kallsyms_lookup_name(void)
{
	struct kprobe kp = { .symbol_name = "kallsyms_lookup_name" };
	unsigned long addr;
	int ret;

	ret = register_kprobe(&kp);
	if (ret)
		return ret;
	addr = (unsigned long)kp.addr;
	unregister_kprobe(&kp);
	sframe_kallsyms_lookup_name = (void *)sframe_function_entry(addr);
	return 0;
}

static void *sframe_lookup(const char *name)
{
	unsigned long addr = sframe_kallsyms_lookup_name(name);

	if (!addr)
		pr_err("sframe_unwind: kernel symbol %s not found\n", name);
	return (void *)addr;
}

int sframe_ksyms_init(void)
{
	int ret = sframe_find_kallsyms_lookup_name();

	if (ret) {
		pr_err("sframe_unwind: cannot find kallsyms_lookup_name (%d)\n",
		       ret);
		return ret;
	}
	sframe_ksyms.task_work_cancel_match =
		sframe_lookup("task_work_cancel_match");
	sframe_ksyms.ptrace_may_access = sframe_lookup("ptrace_may_access");
	sframe_ksyms.mm_access = sframe_lookup("mm_access");
	sframe_ksyms.perf_event_paranoid =
		sframe_lookup("sysctl_perf_event_paranoid");
	sframe_ksyms.security_perf_event_open = (void *)
		sframe_kallsyms_lookup_name("security_perf_event_open");
	if (!sframe_ksyms.task_work_cancel_match ||
	    !sframe_ksyms.ptrace_may_access || !sframe_ksyms.mm_access ||
	    !sframe_ksyms.perf_event_paranoid)
		return -ENOENT;
	return 0;
}
