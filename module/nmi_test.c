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
#include <asm/nmi.h>

#include "nmi_test.h"
#include "perf_hook.h"

static int nmi_test_owner;
module_param(nmi_test_owner, int, 0600);
MODULE_PARM_DESC(nmi_test_owner,
		 "Test only: tgid whose sessions get a sample at every unknown NMI (0: off)");

static int sframe_nmi_test_handler(unsigned int type, struct pt_regs *regs)
{
	int owner = READ_ONCE(nmi_test_owner);

	if (owner <= 0)
		return NMI_DONE;
	sframe_perf_sample(regs, owner);
	return NMI_HANDLED;
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
}
