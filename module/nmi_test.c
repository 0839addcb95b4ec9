// SPDX-License-Identifier: GPL-2.0
/*
 * A test hook: drive the perf sample path from a real NMI.
 *
 * Hardware perf samples arrive in NMI context, but the machines the tests
 * run on have no PMU (qemu TCG): every perf sample there comes from an
 * hrtimer interrupt.  To test the NMI side (no sleeping, faulting or
 * locking; the NMI -> irq_work -> task_work chain), root writes the tgid
 * of a session's process to the nmi_test_owner parameter, and an NMI of
 * unknown reason (qemu's monitor command `nmi`) then takes a sample of
 * whatever task it interrupted, as if a perf event of that process had
 * overflowed there.  0 (the default) disarms it; the handler then leaves
 * the NMI to the kernel.
 */
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sysfs.h>
#include <asm/nmi.h>

#include "nmi_test.h"
#include "session.h"

/*
 * The session owner's pid, referenced: resolved when the parameter is
 * written (process context), since an NMI can look nothing up safely.
 */
static struct pid *nmi_test_pid;
static DEFINE_MUTEX(nmi_test_lock);

static int nmi_test_owner_set(const char *val, const struct kernel_param *kp)
{
	struct pid *pid = NULL, *old;
	int tgid, ret;

	ret = kstrtoint(val, 0, &tgid);
	if (ret)
		return ret;
	if (tgid > 0) {
		pid = find_get_pid(tgid);
		if (!pid)
			return -ESRCH;
	}
	mutex_lock(&nmi_test_lock);
	old = nmi_test_pid;
	WRITE_ONCE(nmi_test_pid, pid);
	mutex_unlock(&nmi_test_lock);
	/* A handler on another CPU may still look at the old pid. */
	synchronize_rcu();
	put_pid(old);
	return 0;
}

static int nmi_test_owner_get(char *buf, const struct kernel_param *kp)
{
	int tgid;

	mutex_lock(&nmi_test_lock);
	tgid = nmi_test_pid ? pid_nr(nmi_test_pid) : 0;
	mutex_unlock(&nmi_test_lock);
	return sysfs_emit(buf, "%d\n", tgid);
}

static const struct kernel_param_ops nmi_test_owner_ops = {
	.set = nmi_test_owner_set,
	.get = nmi_test_owner_get,
};
module_param_cb(nmi_test_owner, &nmi_test_owner_ops, NULL, 0600);
MODULE_PARM_DESC(nmi_test_owner,
		 "Test only: tgid whose sessions get a sample at every unknown NMI (0: off)");

/*
 * A function of its own (noinline) that tests can name: perf_callchain_vmtest
 * records a kprobe event on this function with callchains, so that perf
 * takes its sample in the NMI, as a hardware event does.
 */
static noinline int sframe_nmi_test_handler(unsigned int type,
					    struct pt_regs *regs)
{
	struct pid *owner;

	rcu_read_lock();
	owner = READ_ONCE(nmi_test_pid);
	if (owner)
		sframe_sessions_sample(regs, owner, 0);
	rcu_read_unlock();
	return owner ? NMI_HANDLED : NMI_DONE;
}

int sframe_nmi_test_init(void)
{
	return register_nmi_handler(NMI_UNKNOWN, sframe_nmi_test_handler, 0,
				    "sframe_unwind_test");
}

void sframe_nmi_test_exit(void)
{
	/* Waits for a handler running on another CPU. */
	unregister_nmi_handler(NMI_UNKNOWN, "sframe_unwind_test");
	put_pid(nmi_test_pid);
	nmi_test_pid = NULL;
}
