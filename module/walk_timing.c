// SPDX-License-Identifier: GPL-2.0
/*
 * Timing of the user walks done in interrupt context (walk_timing.h),
 * built only with SFRAME_WALK_TIMING=y (module/Kbuild): the test suite's
 * and the benchmarks' module.
 */
#include <linux/math64.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/sysfs.h>
#include <asm/tsc.h>

#include "walk_timing.h"

/*
 * What the walks done in interrupt context cost, for benchmarks: root may
 * write 0 to start a new measurement.  They are timed in TSC cycles and
 * shown in ns: two rdtsc cost a few instructions on every sample, where
 * a clock read (ktime_get_mono_fast_ns(): a seqcount and an indirect call
 * to the clocksource) costs some 40.
 *
 * The sums are per CPU, added to on the sample path without an atomic
 * operation (a sample runs on one CPU with interrupts off), summed when
 * read.  Writing a value sets the sum to it.
 */
static unsigned long irq_walk_max_cycles;
static DEFINE_PER_CPU(unsigned long, irq_walks);
static DEFINE_PER_CPU(unsigned long, irq_walk_cycles);

static u64 sframe_cycles_to_ns(u64 cycles)
{
	return tsc_khz ? mul_u64_u32_div(cycles, NSEC_PER_MSEC, tsc_khz) : 0;
}

static u64 sframe_ns_to_cycles(u64 ns)
{
	return mul_u64_u32_div(ns, tsc_khz, NSEC_PER_MSEC);
}

/* A per-CPU sum shown as a parameter; in_cycles: TSC cycles, shown in ns. */
struct sframe_percpu_param {
	unsigned long __percpu *sum;
	bool in_cycles;
};

static int sframe_param_set_percpu(const char *val,
				   const struct kernel_param *kp)
{
	const struct sframe_percpu_param *p = kp->arg;
	unsigned long v;
	int ret = kstrtoul(val, 0, &v);
	int cpu;

	if (ret)
		return ret;
	if (p->in_cycles)
		v = sframe_ns_to_cycles(v);
	for_each_possible_cpu(cpu)
		*per_cpu_ptr(p->sum, cpu) = 0;
	*per_cpu_ptr(p->sum, cpumask_first(cpu_possible_mask)) = v;
	return 0;
}

static int sframe_param_get_percpu(char *buf, const struct kernel_param *kp)
{
	const struct sframe_percpu_param *p = kp->arg;
	unsigned long total = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		total += READ_ONCE(*per_cpu_ptr(p->sum, cpu));
	if (p->in_cycles)
		total = sframe_cycles_to_ns(total);
	return sysfs_emit(buf, "%lu\n", total);
}

static const struct kernel_param_ops sframe_param_percpu_ops = {
	.set = sframe_param_set_percpu,
	.get = sframe_param_get_percpu,
};
static struct sframe_percpu_param sframe_irq_walks_param = {
	.sum = &irq_walks,
};
static struct sframe_percpu_param sframe_irq_walk_ns_param = {
	.sum = &irq_walk_cycles,
	.in_cycles = true,
};
module_param_cb(irq_walks, &sframe_param_percpu_ops, &sframe_irq_walks_param,
		0644);
MODULE_PARM_DESC(irq_walks, "User walks done in interrupt context");
module_param_cb(irq_walk_ns, &sframe_param_percpu_ops,
		&sframe_irq_walk_ns_param, 0644);
MODULE_PARM_DESC(irq_walk_ns, "Their total time (ns)");

static int sframe_param_set_max(const char *val, const struct kernel_param *kp)
{
	unsigned long v;
	int ret = kstrtoul(val, 0, &v);

	if (ret)
		return ret;
	WRITE_ONCE(irq_walk_max_cycles, sframe_ns_to_cycles(v));
	return 0;
}

static int sframe_param_get_max(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%llu\n",
			  sframe_cycles_to_ns(READ_ONCE(irq_walk_max_cycles)));
}

static const struct kernel_param_ops sframe_param_max_ops = {
	.set = sframe_param_set_max,
	.get = sframe_param_get_max,
};
module_param_cb(irq_walk_max_ns, &sframe_param_max_ops, NULL, 0644);
MODULE_PARM_DESC(irq_walk_max_ns,
		 "Longest user walk done in interrupt context (ns), since load or since 0 was written");

void sframe_walk_timing_note(u64 start)
{
	unsigned long cycles = rdtsc() - start;
	unsigned long old = READ_ONCE(irq_walk_max_cycles);

	this_cpu_inc(irq_walks);
	this_cpu_add(irq_walk_cycles, cycles);
	while (cycles > old) {
		unsigned long seen = cmpxchg(&irq_walk_max_cycles, old, cycles);

		if (seen == old)
			break;
		old = seen;
	}
}
