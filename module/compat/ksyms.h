/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel symbols the module needs but the kernel does not export to
 * modules, found at load time through kallsyms.
 */
#ifndef SFRAME_KSYMS_H
#define SFRAME_KSYMS_H

#include <linux/sched.h>
#include <linux/types.h>

struct callback_head;
struct perf_event_attr;

struct sframe_ksyms {
	/* kernel/task_work.c; stable since 5.x, unlike task_work_cancel() */
	struct callback_head *(*task_work_cancel_match)(
		struct task_struct *task,
		bool (*match)(struct callback_head *, void *data), void *data);
	/* kernel/ptrace.c: perf_event_open()'s rule for another's task */
	bool (*ptrace_may_access)(struct task_struct *task, unsigned int mode);
	/*
	 * kernel/fork.c: the target's mm if the caller may ptrace it in
	 * mode, checked under the target's exec_update_lock (as
	 * process_vm_writev() does); NULL without an mm, ERR_PTR(-EACCES)
	 */
	struct mm_struct *(*mm_access)(struct task_struct *task,
				       unsigned int mode);
	/* kernel/events/core.c: kernel.perf_event_paranoid */
	int *perf_event_paranoid;
	/*
	 * security/security.c: perf_event_open()'s LSM hook; optional
	 * (NULL on a kernel built without CONFIG_SECURITY); its prototype
	 * differs between kernels: called through compat.h's
	 * sframe_call_security_perf_event_open()
	 */
	void *security_perf_event_open;
};

extern struct sframe_ksyms sframe_ksyms;

/* Resolve every symbol above; -ENOENT (and a log line) if one is missing. */
int sframe_ksyms_init(void);

#endif /* SFRAME_KSYMS_H */
