/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel version differences, kept out of the logic.
 *
 * The module targets Debian 12's 6.1 first.  It needs the maple tree
 * (mtree_*, 6.1) for the per-process registry and the get/put interface
 * of MMU notifiers (5.5) for the process lifetime; older kernels are
 * refused at build time with a clear message rather than by a broken build.
 */
#ifndef SFRAME_COMPAT_H
#define SFRAME_COMPAT_H

#include <linux/version.h>
#include <linux/irq_work.h>
#include <linux/mm.h>
#include <linux/preempt.h>
#include <linux/ptrace.h>
#include <linux/security.h>
#include <asm/ibt.h>

/*
 * Every difference below is chosen by what the kernel's own headers say
 * (module/Kbuild probes them and defines SFRAME_HAVE_* or SFRAME_*), never
 * by its version number: Debian's stable kernels carry backported API
 * changes (WireGuard's compat layer works the same way).  The version
 * number only refuses kernels older than the oldest supported.
 */

/*
 * put_unaligned()/get_unaligned(): <asm/unaligned.h> moved to
 * <linux/unaligned.h> in 6.12 (the asm-generic header was made the only
 * one); the old name is gone there.
 */
#ifdef SFRAME_HAVE_LINUX_UNALIGNED_H
#include <linux/unaligned.h>
#else
#include <asm/unaligned.h>
#endif

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0)
#error "sframe_unwind needs Linux 6.1 or later (maple tree registry)"
#endif

/*
 * The first VMA that ends above addr, or NULL.  find_vma() is exported and
 * keeps the same meaning on every kernel we target; the VMA iterators do
 * not (6.1 introduced them, later kernels changed them).
 */
static inline struct vm_area_struct *sframe_next_vma(struct mm_struct *mm,
						      unsigned long addr)
{
	return find_vma(mm, addr);
}

/*
 * Is the task's core dump (and so its ptrace by its owner) allowed in the
 * default way, SUID_DUMP_USER?  A setuid exec or prctl(PR_SET_DUMPABLE, 0)
 * makes it not.  The state lived in mm->flags (get_dumpable(mm)) until it
 * moved to an RCU-protected task->exec_state (7.2: <linux/sched/exec_state.h>,
 * whose reader task_exec_state_get_dumpable() is not exported; the struct
 * is in the header).  Kbuild probes for that header
 * (SFRAME_HAVE_TASK_EXEC_STATE).  Task context.
 */
#ifdef SFRAME_HAVE_TASK_EXEC_STATE
#include <linux/sched/exec_state.h>
static inline bool sframe_dumpable_by_owner(struct task_struct *task)
{
	const struct task_exec_state *es;
	bool owner;

	rcu_read_lock();
	es = rcu_dereference(task->exec_state);
	owner = es && READ_ONCE(es->dumpable) == TASK_DUMPABLE_OWNER;
	rcu_read_unlock();
	return owner && task->mm;
}
#else
#include <linux/sched/coredump.h>
static inline bool sframe_dumpable_by_owner(struct task_struct *task)
{
	return task->mm && get_dumpable(task->mm) == SUID_DUMP_USER;
}
#endif

/* The ELF program header of .sframe; <linux/elf.h> names it from 6.x on. */
#ifndef PT_GNU_SFRAME
#define PT_GNU_SFRAME 0x6474e554
#endif

/*
 * Is this instruction word an ENDBR (or the poison that replaces a sealed
 * one)?  is_endbr(u32 val) became is_endbr(u32 *addr), a fault-safe reader
 * that is not exported, in 6.18 or so, with the value test renamed
 * __is_endbr(); Debian backports such changes, so Kbuild probes
 * <asm/ibt.h> for __is_endbr (SFRAME_HAVE___IS_ENDBR) instead of trusting
 * the version.
 */
#ifdef SFRAME_HAVE___IS_ENDBR
#define sframe_is_endbr(val) __is_endbr(val)
#else
#define sframe_is_endbr(val) is_endbr(val)
#endif

/*
 * The function containing a kprobe's address at offset 0: with IBT the
 * kprobe sits after the ENDBR instruction, and an indirect call must land
 * on it.
 */
static inline unsigned long sframe_function_entry(unsigned long kprobe_addr)
{
#ifdef CONFIG_X86_KERNEL_IBT
	if (sframe_is_endbr(*(u32 *)(kprobe_addr - ENDBR_INSN_SIZE)))
		return kprobe_addr - ENDBR_INSN_SIZE;
#endif
	return kprobe_addr;
}

/*
 * The perf sample path hooked by perf_hook.c: perf_prepare_sample() runs
 * for every sample written to a perf ring buffer, in the context of the
 * sample (NMI for hardware events, the hrtimer interrupt for software
 * ones), with the sampled event and registers as arguments.  Its
 * signature lost the header argument in 6.3.
 */
#define SFRAME_SAMPLE_HOOK_SYMBOL "perf_prepare_sample"

/*
 * The walk's budget follows preemptible() (unwind.c), which without a
 * preemption count says "never": every supported kernel counts
 * (PREEMPT_DYNAMIC, PREEMPT_RT).
 */
#ifndef CONFIG_PREEMPT_COUNT
#error "sframe_unwind needs CONFIG_PREEMPT_COUNT (the walk's budget follows preemptible())"
#endif

/*
 * The argument registers an ftrace_ops handler gets (ftrace_caller saves
 * them in pt_regs' layout): struct ftrace_regs wraps a pt_regs on 6.1 and
 * became opaque, behind arch_ftrace_regs(), in 6.12.  perf_hook.c needs
 * DYNAMIC_FTRACE_WITH_ARGS, which saves them without a full pt_regs.
 */
#ifndef CONFIG_DYNAMIC_FTRACE_WITH_ARGS
#error "sframe_unwind hooks perf's sample path through ftrace and needs CONFIG_DYNAMIC_FTRACE_WITH_ARGS"
#endif
#ifdef SFRAME_HAVE_ARCH_FTRACE_REGS
#define sframe_ftrace_args(fregs) (&arch_ftrace_regs(fregs)->regs)
#else
#define sframe_ftrace_args(fregs) (&(fregs)->regs)
#endif
/*
 * A handler's new instruction pointer for the traced function (an
 * FTRACE_OPS_FL_IPMODIFY ops, as livepatch): the setter was renamed with
 * the opaque ftrace_regs in 6.12.  Both are macros of asm/ftrace.h.
 */
#ifdef ftrace_regs_set_instruction_pointer
#define sframe_ftrace_set_ip(fregs, ip) ftrace_regs_set_instruction_pointer(fregs, ip)
#else
#define sframe_ftrace_set_ip(fregs, ip) ftrace_instruction_pointer_set(fregs, ip)
#endif

/*
 * unwind_user() (kernel/unwind/user.c, 7.x: perf's deferred user
 * callchains), which perf_deferred.c replaces where Kbuild found it
 * (SFRAME_HAVE_UNWIND_USER: CONFIG_UNWIND_USER, and its header).  The
 * ftrace handler reads its arguments from the registers of its ftrace
 * site (trace in rdi, max_entries in rsi), and the replacement, which the
 * call then reaches with the same registers, fills trace->entries[0..nr)
 * with unsigned longs: so the prototype and the struct must be these.
 */
#ifdef SFRAME_HAVE_UNWIND_USER
#include <linux/unwind_user.h>
static_assert(__builtin_types_compatible_p(typeof(&unwind_user),
					   int (*)(struct unwind_stacktrace *,
						   unsigned int)),
	      "unwind_user() has a prototype perf_deferred.c does not know");
static_assert(__builtin_types_compatible_p(typeof(((struct unwind_stacktrace *)0)->nr),
					   unsigned int) &&
	      __builtin_types_compatible_p(typeof(((struct unwind_stacktrace *)0)->entries),
					   unsigned long *),
	      "struct unwind_stacktrace is not what perf_deferred.c fills");
#endif

/*
 * Threads of a user process that never return to user space (io_uring's
 * workers; 6.4 added vhost's and named them all user workers).
 */
#ifdef PF_USER_WORKER
#define SFRAME_PF_USER_WORKER PF_USER_WORKER
#else
#define SFRAME_PF_USER_WORKER PF_IO_WORKER
#endif

/* perf_prepare_sample()'s arguments: 6.3 dropped the header. */
#ifdef SFRAME_PREPARE_SAMPLE_WITHOUT_HEADER
/* (data, event, regs) */
#define SFRAME_SAMPLE_HOOK_EVENT(kregs) ((struct perf_event *)(kregs)->si)
#define SFRAME_SAMPLE_HOOK_REGS(kregs) ((struct pt_regs *)(kregs)->dx)
#else
/* (header, data, event, regs) */
#define SFRAME_SAMPLE_HOOK_EVENT(kregs) ((struct perf_event *)(kregs)->dx)
#define SFRAME_SAMPLE_HOOK_REGS(kregs) ((struct pt_regs *)(kregs)->cx)
#endif

/*
 * security_perf_event_open(), perf_event_open()'s LSM hook (not exported:
 * called through the address ksyms.c finds), lost its unused attr argument
 * upstream ("perf: Remove unnecessary parameter of security check",
 * posted December 2024, after 6.12); Debian's 6.12 kernel (6.12.117, the
 * stable line) carries that change while 6.12.0 does not.  So the version
 * number cannot tell the two apart: the prototype in the kernel's own
 * headers does, at build time.  Called with the wrong arguments, the hook
 * would read attr's address as the event type.
 */
#define SFRAME_SECURITY_PERF_OPEN_HAS_ATTR                                \
	__builtin_types_compatible_p(typeof(&security_perf_event_open),   \
				     int (*)(struct perf_event_attr *, int))
static_assert(SFRAME_SECURITY_PERF_OPEN_HAS_ATTR ||
	      __builtin_types_compatible_p(typeof(&security_perf_event_open),
					   int (*)(int)),
	      "security_perf_event_open() has a prototype compat.h does not know");

static inline int sframe_call_security_perf_event_open(void *fn,
							struct perf_event_attr *attr,
							int type)
{
	if (SFRAME_SECURITY_PERF_OPEN_HAS_ATTR)
		return ((int (*)(struct perf_event_attr *, int))fn)(attr, type);
	return ((int (*)(int))fn)(type);
}

/*
 * PREEMPT_RT (Debian's linux-image-rt-amd64, 6.1, and
 * linux-image-6.12-rt-amd64) changes what atomic context may do:
 *
 * - spinlock_t, rwlock_t, wait queues (their lock is a spinlock_t) and the
 *   slab allocator take sleeping locks (rt_mutex), so code that runs with
 *   preemption or interrupts off may use none of them: not in a hard
 *   interrupt, not in an ftrace or kprobe handler, not in a tracepoint probe.  The
 *   perf sample path is all three on RT as elsewhere: perf's cpu-clock and
 *   task-clock hrtimers expire in hard interrupt context (HRTIMER_MODE_*_HARD
 *   on every kernel), software events (page faults, context switches) run
 *   perf_sw_event() with preemption off, hardware ones come in NMI, and the
 *   hook on perf_prepare_sample() runs with preemption off in any case.
 *   raw_spinlock_t, atomics, llists, RCU readers, irq_work_queue(),
 *   task_work_add() and schedule_delayed_work() stay allowed there.
 * - An irq_work runs in the per-CPU irq_work/N thread, preemptible, unless
 *   it is marked IRQ_WORK_HARD_IRQ (IRQ_WORK_INIT_HARD), which runs it in
 *   the interrupt as without RT.  What must run before the interrupted task
 *   continues (queueing the task_work of a sample taken in NMI) is hard;
 *   what needs sleeping locks (waking a reader) is not.
 * - put_task_struct() from atomic context defers the free through RCU
 *   (on 6.12, and on Debian's 6.1 through the stable backport of "kernel/
 *   fork: beware of __put_task_struct() calling context"), so it is safe
 *   anywhere but NMI on all four kernels.  task_work_add(TWA_RESUME)
 *   takes no lock on either kernel.
 *
 * Whether the caller may take a spinlock_t or wake a wait queue here:
 * anywhere but in NMI without RT; on RT, only where it could sleep.  Where
 * it may not, callers defer the wakeup to a plain irq_work (an interrupt
 * without RT, the irq_work thread with it).
 */
static inline bool sframe_may_take_spinlock(void)
{
	if (IS_ENABLED(CONFIG_PREEMPT_RT))
		return preemptible();
	return !in_nmi();
}

/* An irq_work that must run in the interrupt even on RT. */
static inline void sframe_init_irq_work_hard(struct irq_work *work,
					     void (*func)(struct irq_work *))
{
	*work = IRQ_WORK_INIT_HARD(func);
}

/*
 * A VMA's flags: set through vm_flags_set()/vm_flags_clear() from 6.3 on
 * (the flags became read-only for the per-VMA locks); a plain field
 * before.  Debian's 6.1 has not taken the helpers.
 */
#ifdef SFRAME_HAVE_VM_FLAGS_SET
static inline void sframe_vm_flags_set(struct vm_area_struct *vma,
				       vm_flags_t flags)
{
	vm_flags_set(vma, flags);
}

static inline void sframe_vm_flags_clear(struct vm_area_struct *vma,
					 vm_flags_t flags)
{
	vm_flags_clear(vma, flags);
}
#else
static inline void sframe_vm_flags_set(struct vm_area_struct *vma,
				       vm_flags_t flags)
{
	vma->vm_flags |= flags;
}

static inline void sframe_vm_flags_clear(struct vm_area_struct *vma,
					 vm_flags_t flags)
{
	vma->vm_flags &= ~flags;
}
#endif

/*
 * An inode's ctime: through inode_get_ctime() from 6.6 on (the field
 * became private to multigrain timestamps); Debian's 6.1 has the helper
 * backported, so the header is asked (SFRAME_HAVE_INODE_GET_CTIME).
 */
#ifdef SFRAME_HAVE_INODE_GET_CTIME
static inline struct timespec64 sframe_inode_ctime(const struct inode *inode)
{
	return inode_get_ctime(inode);
}
#else
static inline struct timespec64 sframe_inode_ctime(const struct inode *inode)
{
	return inode->i_ctime;
}
#endif

#endif /* SFRAME_COMPAT_H */
