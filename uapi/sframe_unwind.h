/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * sframe_unwind: user-space stack unwinding with SFrame on stock kernels.
 *
 * The ABI of the character device /dev/sframe_unwind.  This header is used
 * from C and C++ in user space and from the kernel module; it is the one
 * definition of the ioctls and record formats.
 *
 * Versioning: every argument struct starts with a __u32 `size` that the
 * caller sets to sizeof() of the struct as it knows it.  The kernel accepts
 * any size from the first published size (the *_SIZE_VER0 constant) on: a
 * larger struct from a newer caller is accepted only if the bytes the kernel
 * does not know are zero (otherwise E2BIG), a smaller one than VER0 is EINVAL.
 * Reserved fields and unknown flag bits must be zero (otherwise EINVAL), so
 * they can be given a meaning later.
 *
 * All addresses are user virtual addresses of the calling process, except
 * those that describe another process's text (SFRAME_IOC_SUPPLY,
 * SFRAME_IOC_LIST_SECTIONS).
 */
#ifndef _UAPI_SFRAME_UNWIND_H
#define _UAPI_SFRAME_UNWIND_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define SFRAME_UNWIND_DEVICE "/dev/sframe_unwind"

/*
 * Version of this ABI, returned by SFRAME_IOC_GET_STATS in abi_version.
 * 2: SFRAME_TARGET_EVENTS (a module of version 1 refuses it with EINVAL).
 * 3: a session's buffer can be mapped (struct sframe_session_mmap_page);
 *    SFRAME_IOC_SESSION_START returns the buffer's size in buffer_size.
 * 4: sample records may carry SFRAME_SAMPLE_F_CROSS_TASK and
 *    SFRAME_SAMPLE_F_NOT_DUMPABLE (no layout change).
 * 5: sections kept per file (SFRAME_IOC_FILE_SUPPLY, _FILE_REMOVE,
 *    _FILE_LIST; SFRAME_SOURCE_FILE; struct sframe_stats grows to
 *    SFRAME_STATS_SIZE_VER2).
 * 6: perf's own callchains walked by the module (its parameter
 *    perf_callchain); struct sframe_stats grows to SFRAME_STATS_SIZE_VER3
 *    with their callchain_* counters.
 */
#define SFRAME_UNWIND_ABI_VERSION 6

/* Largest .sframe section the module accepts (bytes). */
#define SFRAME_MAX_SECTION_SIZE (64u << 20)
/* Largest number of sections registered per process at once. */
#define SFRAME_MAX_SECTIONS_PER_MM 4096
/* Largest max_frames an unwind request may ask for. */
#define SFRAME_MAX_FRAMES 4096

/*
 * ---- Bounds on decoding work ----------------------------------------------
 *
 * A section is data from an unprivileged process, and the FREs of a
 * function have no index: a lookup reads them one by one up to the PC.  So
 * the work the module does for any one request is bounded in three places.
 *
 * Per function: an FDE gives rows only if it has at most
 * SFRAME_MAX_FRES_PER_FDE FREs.  One with more is skipped, not refused:
 * REGISTER and SUPPLY accept its section without reading its FREs and
 * count it (sframe_section_info.nr_fdes_skipped; its text is not in
 * covered_bytes), and a PC in its function has no row, as a PC no
 * section covers: the walk goes on with frame pointers where it may
 * (SFRAME_UNWIND_F_FP), else stops with SFRAME_STOP_NO_COVERAGE; the
 * same for a section rewritten after registration.  (Until issue 28 such
 * a section was refused with E2BIG.)  Measured (November 2026, Debian 12):
 * the most FREs in one FDE is 32 in gcc 12 -O2 -Wa,--gsframe output of
 * googletest's gtest-all.cc (885 FDEs) and of this project's largest C++
 * files, and in SFrame made from .eh_frame by sframe-client gen: 44 in
 * libc.so.6 (3713 FDEs), 175 in libstdc++.so.6 (4868), 88 in python3.11
 * (10222), 100 in libcrypto.so.3 (10952); about 7 on average.  The cap is
 * 8192, 47 times the largest seen (gcc -O2 exceeds it in rare generated
 * code: a 406 KB function of 9,814 FREs); libsframe-client's generator
 * splits a longer function into several FDEs.  Why it is not higher: the
 * comment at SFRAME_MAX_FRES_PER_FDE in module/sframe_decode.h.  One
 * lookup therefore costs at most
 * 32 binary-search probes of the FDE table, one read of a window of FDEs
 * and 8192 FRE decodes: 8225 units.
 *
 * Per walk: a walk may spend SFRAME_WALK_BUDGET units of decoding work,
 * one unit per read of an FDE table (probe or window) and one per FRE
 * decoded; rows the module has cached cost nothing, and neither do frames
 * unwound with frame pointers (each costs two loads).  A walk that runs
 * out stops with SFRAME_STOP_BUDGET.  No real stack comes near it: a
 * lookup costs about 10 to 20 units in the libraries above, so 4096
 * distinct frames need under 100,000.
 *
 * Per request: SFRAME_IOC_UNWIND_SELF unwinds at most max_frames
 * (<= SFRAME_MAX_FRAMES) frames, so its decoding is at most
 * SFRAME_WALK_BUDGET units (a unit is never spent without the budget
 * for it), and its other work 4096 frames of a few loads each.  A unit
 * costs about 6 ns on a current x86 core (the decoder's host build) and
 * about 170 ns in the kernel under qemu's TCG emulation, so the worst
 * request, a section at the cap and 4096 crafted frames with distinct
 * PCs, takes about 7 ms on hardware and 0.1 to 0.4 s under emulation
 * (docs/benchmarks.md), where a typical one takes microseconds.  It
 * reschedules between frames and returns EINTR as soon as the caller
 * has a fatal signal.  Walks for sessions run from the task with the
 * same budget; a walk at sample time (hard interrupt or NMI context)
 * gets 512 units, a few microseconds on hardware, and one that runs out
 * ends with SFRAME_STOP_BUDGET (and is redone from the task where the
 * module can).
 * Validation at REGISTER and SUPPLY (one pass over every FDE and FRE)
 * reschedules every 4096 of them and returns EINTR to a task being
 * killed.
 */
#define SFRAME_MAX_FRES_PER_FDE 8192
#define SFRAME_WALK_BUDGET (1u << 20)

/*
 * SFRAME_IOC_REGISTER: register the .sframe section at [sframe_addr,
 * sframe_addr + sframe_len) of the caller's memory as describing the text at
 * [text_start, text_start + text_len).  The section stays in user memory and
 * is never pinned: the module validates it at registration and keeps its
 * rows in an index in kernel memory (bounded per user by the module
 * parameter index_max_user_kb), and reads it at unwind time for what the
 * index does not keep.  Rows decoded from it are also cached per process
 * until that process's registrations change.  So a process that rewrites a
 * registered section in place must unregister and register it again.
 *
 * Errors:
 *   EINVAL      size too small, flags or reserved fields not zero, a zero or
 *               overflowing length, text above the user address limit, or a
 *               section whose header or tables are inconsistent (offsets or
 *               counts beyond sframe_len, unsorted FDEs, an FDE outside the
 *               text range, an FRE outside the FRE sub-section)
 *   E2BIG       sframe_len above SFRAME_MAX_SECTION_SIZE, or a larger
 *               struct whose unknown tail is not zero (an FDE with more
 *               than SFRAME_MAX_FRES_PER_FDE FREs is not an error: it is
 *               skipped, see "Bounds on decoding work")
 *   ENOEXEC     the bytes are not SFrame (bad magic)
 *   EOPNOTSUPP  an SFrame version or ABI/arch this module does not read
 *   EFAULT      the section or part of the text range is not mapped, or the
 *               section could not be read
 *   EACCES      part of the text range is mapped but not executable
 *   EEXIST      the text range overlaps a registered one
 *   ENOSPC      the process already has SFRAME_MAX_SECTIONS_PER_MM entries
 *               (sections, and executable mappings discovery found to have
 *               no .sframe)
 *   ENOMEM      out of kernel memory
 *   EINTR       the caller got a fatal signal while the section was being
 *               validated, or while waiting for the process's mmap lock
 *               (held by someone else; no global lock is held meanwhile,
 *               so only this caller waits); the registration does not
 *               happen
 */
struct sframe_register {
	__u32 size;        /* sizeof(struct sframe_register) */
	__u32 flags;       /* none defined yet: 0 */
	__u64 sframe_addr; /* address of the .sframe section */
	__u64 sframe_len;  /* its length in bytes */
	__u64 text_start;  /* start of the text it describes */
	__u64 text_len;    /* length of that text */
	__u64 reserved[2]; /* 0 */
};
#define SFRAME_REGISTER_SIZE_VER0 56

/* sframe_unregister.flags */
#define SFRAME_UNREGISTER_F_PID (1u << 0) /* pid names the process */

/*
 * SFRAME_IOC_UNREGISTER: forget the section registered (or supplied, or
 * discovered) with exactly this text_start, in the caller's process or,
 * with SFRAME_UNREGISTER_F_PID, in process pid (the ptrace-attach rule of
 * SFRAME_IOC_SUPPLY applies).  ENOENT when there is none; ESRCH, EPERM as
 * for SFRAME_IOC_SUPPLY.
 */
struct sframe_unregister {
	__u32 size;       /* sizeof(struct sframe_unregister) */
	__u32 flags;      /* SFRAME_UNREGISTER_F_* */
	__u64 text_start; /* text_start given to SFRAME_IOC_REGISTER */
	__s32 pid;        /* with SFRAME_UNREGISTER_F_PID; else 0 */
	__u32 reserved;   /* 0 */
};
#define SFRAME_UNREGISTER_SIZE_VER0 24

/* Unwind methods, in sframe_unwind_self.flags. */
#define SFRAME_UNWIND_F_SFRAME (1u << 0) /* SFrame where a section covers PC */
#define SFRAME_UNWIND_F_FP     (1u << 1) /* frame pointers where none does */
#define SFRAME_UNWIND_F_ALL    (SFRAME_UNWIND_F_SFRAME | SFRAME_UNWIND_F_FP)

/* Why a walk ended, in sframe_unwind_self.stop_reason. */
enum sframe_stop_reason {
	/* The outermost frame was reached: an FRE with the RA undefined, or a
	 * zero frame pointer in the frame-pointer walk. */
	SFRAME_STOP_OUTERMOST = 1,
	/* The PC is covered by no registered section and the frame-pointer
	 * fallback is off (or was not possible: no valid frame pointer). */
	SFRAME_STOP_NO_COVERAGE = 2,
	/* Reading the stack or the section faulted (e.g. a racing munmap). */
	SFRAME_STOP_FAULT = 3,
	/* max_frames frames were stored. */
	SFRAME_STOP_LIMIT = 4,
	/* The next frame is not valid: the stack did not move up, a
	 * misaligned or zero return address, a malformed row. */
	SFRAME_STOP_BAD_FRAME = 5,
	/* The walk spent its decoding budget (SFRAME_WALK_BUDGET, see the
	 * bounds above) on crafted or pathological sections. */
	SFRAME_STOP_BUDGET = 6,
};

/*
 * SFRAME_IOC_UNWIND_SELF: unwind the calling thread's user stack from the
 * registers it had when it made this ioctl.  frames[0] is the user PC right
 * after the system call instruction, frames[1] its caller's return address,
 * and so on.  The walk always terminates: each frame's stack pointer must be
 * above the previous one (except across a signal frame, where the walk
 * goes on from the registers the kernel saved for the interrupted code,
 * possibly on another stack: at most 32 signal frames per walk), and at
 * most max_frames are stored.  Its decoding
 * work is bounded by SFRAME_WALK_BUDGET (see "Bounds on decoding work"
 * above): a walk that spends it stops with SFRAME_STOP_BUDGET.
 *
 * Errors: EINVAL (size, flags: at least one method, reserved, max_frames of
 * 0 or above SFRAME_MAX_FRAMES), E2BIG, EFAULT (the struct or frames buffer
 * is not writable), EINTR (the caller got a fatal signal during the walk:
 * nothing is written back).  A walk that stops early is not an error: see
 * stop_reason.
 */
struct sframe_unwind_self {
	__u32 size;        /* sizeof(struct sframe_unwind_self) */
	__u32 flags;       /* SFRAME_UNWIND_F_* */
	__u64 frames;      /* address of a __u64[max_frames] buffer */
	__u32 max_frames;  /* in: its capacity */
	/* The out fields are ignored on input: a request that came back may
	 * be issued again as it is. */
	__u32 nr_frames;   /* out: frames stored */
	__u32 stop_reason; /* out: enum sframe_stop_reason */
	__u32 nr_sframe;   /* out: frames unwound with SFrame */
	__u32 nr_fp;       /* out: frames unwound with frame pointers */
	__u32 reserved0;   /* 0 */
	__u64 reserved[2]; /* 0 */
};
#define SFRAME_UNWIND_SELF_SIZE_VER0 56

/*
 * SFRAME_IOC_GET_STATS: counters of the module (global) and of the calling
 * process (mm_*).  Only `size` is read; the rest is written.
 */
struct sframe_stats {
	__u32 size;             /* sizeof(struct sframe_stats) */
	__u32 abi_version;      /* SFRAME_UNWIND_ABI_VERSION */
	__u64 sections;         /* sections registered now, all processes */
	__u64 processes;        /* processes with a registry now */
	__u64 registrations;    /* successful SFRAME_IOC_REGISTER, ever */
	__u64 registrations_rejected; /* failed SFRAME_IOC_REGISTER, ever */
	__u64 unwinds;          /* unwinds performed, ever */
	__u64 frames_sframe;    /* frames unwound with SFrame, ever */
	__u64 frames_fp;        /* frames unwound with frame pointers, ever */
	__u64 unwind_faults;    /* walks that stopped on a fault, ever */
	__u64 unwind_bad_frames; /* walks that stopped on an invalid frame */
	__u64 mm_sections;      /* sections registered for the caller's
				   process (by it, by discovery or supplied) */
	__u64 samples_deferred; /* perf samples captured for sessions, ever */
	__u64 samples_nmi;      /* ...of them, captured in NMI context */
	__u64 sections_discovered; /* sections registered by discovery */
	__u64 supplied_bytes;   /* kernel memory held now by supplied
				   sections, all processes */
	/* Fork children given copies of their parent's registered and
	   supplied sections, and those that could not be (out of memory, a
	   bound): ever. */
	__u64 forks_inherited;
	__u64 forks_not_inherited;
	/* Since SFRAME_STATS_SIZE_VER1: */
	__u64 walks_budget_exhausted; /* walks ended by SFRAME_STOP_BUDGET */
	__u64 samples_timed_out; /* session samples delivered without their
				    user stack because the task stayed in the
				    kernel too long (SFRAME_SAMPLE_F_TIMEOUT) */
	/* What the caller's user (real uid) holds now, and its bounds (the
	   module parameters; U64_MAX: unbounded for this caller). */
	__u64 user_supplied_bytes;
	__u64 user_supplied_limit;
	__u64 user_sessions;
	__u64 user_sessions_limit;
	__u64 user_session_bytes;
	__u64 user_session_bytes_limit;
	/* Since SFRAME_STATS_SIZE_VER2: the file store (see
	   SFRAME_IOC_FILE_SUPPLY). */
	__u64 file_entries;     /* files with a section now */
	__u64 file_bytes;       /* kernel memory their sections hold now */
	__u64 file_bytes_limit; /* bound of file_bytes (file_max_kb) */
	__u64 file_attaches;    /* mappings covered from the store, ever */
	__u64 file_invalidated; /* entries dropped because their file was
				   written, opened for writing, truncated or
				   deleted, ever */
	/* Since SFRAME_STATS_SIZE_VER3: perf's own user callchains (perf
	   record -g, BPF's stacks; on Linux 7.x also perf's deferred ones,
	   --call-graph fp,defer, walked by the kernel's unwind_user()) while
	   the module's parameter perf_callchain is on; all ever, all
	   processes. */
	__u64 callchain_served;   /* callchains whose user part the module
				     walked */
	__u64 callchain_declined; /* left to perf's own walk: of a 32-bit
				     task, a guest, a task without user
				     memory, or recursion (deferred: also
				     of an exiting task or a kernel
				     thread) */
	__u64 callchain_frames;   /* return addresses the module gave perf
				     (after each sampled PC) */
	__u64 callchain_fp_continued; /* walks that went on by frame
					 pointers where SFrame had no row */
	__u64 callchain_truncated; /* walks ended by perf's own bound
				      (max_stack, the callchain full;
				      deferred: unwind_user()'s
				      max_entries) */
	__u64 callchain_discoveries; /* deferred walks asked for, to find
					the sections of mappings not looked
					at yet (at the task's return to user
					space) */
	__u64 callchain_discoveries_dropped; /* not asked for: all the
						walks in flight (a later
						sample asks again) */
};
/*
 * The sizes callers have used.  VER0, VER1 and VER2 each end 16 bytes
 * before the end of their group above (forks_*, user_session_bytes*,
 * file_attaches and file_invalidated): a caller of that size gets the
 * fields before it, and the module accepts any size from VER0 up.  VER3
 * is the whole struct.
 */
#define SFRAME_STATS_SIZE_VER0 120
#define SFRAME_STATS_SIZE_VER1 184
#define SFRAME_STATS_SIZE_VER2 224
#define SFRAME_STATS_SIZE_VER3 296

/*
 * ---- Sections for another process, and what a process has --------------
 */

/*
 * Bounds of supplied sections: bytes of kernel memory held (unswappable).
 * Each kernel copy of a section counts once in the total and for the user
 * who supplied it (real uid), however many processes share it: a fork
 * child shares its parent's copies and counts them only in its own
 * per-process bound.  A user with CAP_IPC_LOCK is exempt from the per-user
 * bound (as from perf's perf_event_mlock_kb), not from the total.  Module
 * parameters lower each: supply_max_process_kb, supply_max_user_kb,
 * supply_max_total_kb.  SFRAME_IOC_GET_STATS shows the caller's user's
 * bytes and bound (user_supplied_bytes, user_supplied_limit) and the total
 * (supplied_bytes).
 */
#define SFRAME_SUPPLY_MAX_PER_PROCESS (64u << 20)
#define SFRAME_SUPPLY_MAX_PER_USER    (128u << 20)
#define SFRAME_SUPPLY_MAX_TOTAL       (512u << 20)

/*
 * SFRAME_IOC_SUPPLY: give the module an SFrame section by value for the
 * text at [text_start, text_start + text_len) of process pid (0: the
 * caller).  This is how a profiler covers binaries that carry no .sframe:
 * it makes a section for them and supplies it.  The caller must be allowed
 * to ptrace-attach to the target (the rule ptrace(2) applies,
 * PTRACE_MODE_ATTACH_REALCREDS).  The module copies the sframe_len bytes at
 * sframe_data (the caller's memory) into kernel memory charged to the
 * caller's memory cgroup, validates them as SFRAME_IOC_REGISTER does, and
 * keeps them until the text is unmapped, the target execs or exits, or the
 * section is unregistered.  PC-relative FDE addresses are read as if the
 * section were mapped at sframe_addr in the target: for a section cut out
 * of a file, where the file's .sframe is mapped (or would be).  A supplied
 * section replaces discovered ones it overlaps.
 *
 * Errors: as SFRAME_IOC_REGISTER (EFAULT and EACCES about the target's
 * text, EFAULT also for unreadable sframe_data; EINTR for a fatal signal
 * during validation), and:
 *   ESRCH   no process pid (or it has no address space: exiting, kernel)
 *   EPERM   the caller may not ptrace-attach to pid
 *   EDQUOT  the target's supplied sections would exceed
 *           SFRAME_SUPPLY_MAX_PER_PROCESS bytes, the caller's user's would
 *           exceed SFRAME_SUPPLY_MAX_PER_USER, or all processes' would
 *           exceed SFRAME_SUPPLY_MAX_TOTAL (each lowered by the module
 *           parameters supply_max_process_kb, supply_max_user_kb,
 *           supply_max_total_kb; see above)
 *   EINTR   a fatal signal arrived while waiting for the target's mmap
 *           lock
 */
struct sframe_supply {
	__u32 size;        /* sizeof(struct sframe_supply) */
	__u32 flags;       /* 0 */
	__s32 pid;         /* target process in the caller's pid namespace;
			      0: the caller */
	__u32 reserved0;   /* 0 */
	__u64 sframe_data; /* the section's bytes, in the caller's memory */
	__u64 sframe_len;  /* their length */
	__u64 sframe_addr; /* where the section counts as mapped in the
			      target, for PC-relative FDE addresses */
	__u64 text_start;  /* the target's text it describes */
	__u64 text_len;
	__u64 reserved[2]; /* 0 */
};
#define SFRAME_SUPPLY_SIZE_VER0 72

/* Where a process's entry came from, in sframe_section_info.source. */
#define SFRAME_SOURCE_REGISTERED 1 /* SFRAME_IOC_REGISTER by the process */
#define SFRAME_SOURCE_DISCOVERED 2 /* found by the module in a mapped file */
#define SFRAME_SOURCE_SUPPLIED   3 /* SFRAME_IOC_SUPPLY, held by the module */
#define SFRAME_SOURCE_FILE       5 /* the file store's section for the
				      mapped file (SFRAME_IOC_FILE_SUPPLY),
				      shared by every mapping of it */
#define SFRAME_SOURCE_NONE       4 /* (part of) an executable mapping
				      discovery found no usable .sframe for:
				      none in the file, a bad one, or one
				      overlapping a registered section (the
				      part around the PC that asked, without
				      the entries already there); nothing
				      covers it, and the file is not read
				      again for it */

struct sframe_section_info {
	__u64 text_start;    /* the text described */
	__u64 text_len;
	__u64 sframe_addr;   /* the section in the process's memory (for
				SUPPLIED: where it counts as mapped); 0 for
				NONE */
	__u64 sframe_len;
	__u64 covered_bytes; /* text bytes that FDEs give rows for (those
				of skipped FDEs left out) */
	__u32 source;        /* SFRAME_SOURCE_* */
	__u32 version;       /* SFrame version; 0 for NONE */
	__u32 nr_fdes;       /* all of them, skipped ones included */
	/* FDEs skipped: more than SFRAME_MAX_FRES_PER_FDE FREs, so no rows.
	   (Was `reserved`, always 0: a module before issue 28 writes 0.) */
	__u32 nr_fdes_skipped;
};

/*
 * SFRAME_IOC_LIST_SECTIONS: what process pid (0: the caller) has, ordered
 * by text_start.  Up to max_entries are written to entries; nr_entries
 * says how many there are (call again with a larger buffer if more).  The
 * caller must be allowed to ptrace-read the target
 * (PTRACE_MODE_READ_REALCREDS), like reading /proc/PID/maps.
 *
 * Errors: EINVAL (size, flags, reserved, max_entries above
 * SFRAME_MAX_SECTIONS_PER_MM), E2BIG, ESRCH, EPERM, EFAULT, ENOMEM.
 */
struct sframe_list_sections {
	__u32 size;        /* sizeof(struct sframe_list_sections) */
	__u32 flags;       /* 0 */
	__s32 pid;         /* 0: the caller */
	__u32 max_entries; /* capacity of entries; 0 only counts */
	__u64 entries;     /* address of sframe_section_info[max_entries] */
	__u32 nr_entries;  /* out: entries the process has */
	__u32 reserved0;   /* 0 */
	__u64 reserved[2]; /* 0 */
};
#define SFRAME_LIST_SECTIONS_SIZE_VER0 48

/*
 * ---- Sections kept per file (the file store) ------------------------------
 *
 * SFRAME_IOC_FILE_SUPPLY: give the module an SFrame section for an ELF
 * file, by value, given as an open descriptor (fd, opened for reading).
 * Every executable mapping of that file, in every process, now or later,
 * is then covered by the one kernel copy: the walk finds it the way
 * discovery finds a file's own .sframe, with no copy per process and no
 * call from user space.  The section describes the file as linked:
 * sframe_vaddr is where the file's headers would put it at load bias 0
 * (PC-relative FDE addresses count from there), and its FDEs must lie
 * within the text of the file's executable PT_LOAD segments, which the
 * module reads from the file itself.  This is how a coverage service
 * (sframe-coverd) covers every library of the machine at once.
 *
 * Keyed by the file's inode (for an overlayfs file, the inode of the file
 * it maps), never by a path: a file renamed over it, a bind mount or a
 * container's file of the same path is another inode.  The entry holds a
 * reference on the inode and watches it (fsnotify): the moment the file is
 * written, truncated, opened for writing or deleted, the entry is dropped,
 * and walks stop using it (file_invalidated counts these).
 *
 * CAP_SYS_ADMIN only, not CAP_PERFMON: an entry changes how every process
 * of every user that maps the file is unwound (a wrong section makes their
 * stacks lie, which CAP_PERFMON, a right to observe, does not grant), and
 * it pins an inode and kernel memory that no process or user owns.  The
 * bytes are charged to the caller's memory cgroup, and bounded in total by
 * the module parameter file_max_kb (at most SFRAME_FILE_MAX_TOTAL) and in
 * number by SFRAME_FILE_MAX_ENTRIES.
 *
 * On success, id is the entry's identity (never reused while the module is
 * loaded).  Errors:
 *   EPERM    no CAP_SYS_ADMIN
 *   EBADF    fd is not open for reading
 *   EINVAL   size, flags, reserved fields; fd not a regular file
 *   ENOEXEC  not a 64-bit little-endian x86-64 ELF executable or shared
 *            object with an executable PT_LOAD (at most
 *            SFRAME_FILE_MAX_LOADS of them)
 *   E2BIG    sframe_len above SFRAME_MAX_SECTION_SIZE
 *   ETXTBSY  the file is open for writing somewhere
 *   EEXIST   the file has an entry (SFRAME_FILE_F_REPLACE replaces it)
 *   EDQUOT   the store would hold more than file_max_kb
 *   ENOSPC   the store has SFRAME_FILE_MAX_ENTRIES entries
 *   EAGAIN   the file changed while it was being supplied
 *   EFAULT, ENOMEM, EINTR, and what validation says of the section, as
 *   SFRAME_IOC_REGISTER (EINVAL, ENOEXEC, EOPNOTSUPP)
 */
#define SFRAME_FILE_MAX_TOTAL   (1024u << 20)
#define SFRAME_FILE_MAX_ENTRIES 65536
#define SFRAME_FILE_MAX_LOADS   8
#define SFRAME_FILE_F_REPLACE   0x1

struct sframe_file_supply {
	__u32 size;         /* sizeof(struct sframe_file_supply) */
	__u32 flags;        /* SFRAME_FILE_F_* */
	__s32 fd;           /* the file */
	__u32 reserved0;    /* 0 */
	__u64 sframe_data;  /* the section's bytes, in the caller's memory */
	__u64 sframe_len;
	__u64 sframe_vaddr; /* where it counts as loaded at bias 0 */
	__u64 id;           /* out: the entry */
	__u64 reserved[2];  /* 0 */
};
#define SFRAME_FILE_SUPPLY_SIZE_VER0 64

/*
 * SFRAME_IOC_FILE_REMOVE: drop the entry id, or with id 0 the entry of the
 * file fd.  Mappings it covers lose their coverage at once.  CAP_SYS_ADMIN.
 * Errors: EPERM, EINVAL, EBADF, ENOENT (no such entry).
 */
struct sframe_file_remove {
	__u32 size;        /* sizeof(struct sframe_file_remove) */
	__u32 flags;       /* 0 */
	__s32 fd;          /* with id 0: the file whose entry goes */
	__u32 reserved0;   /* 0 */
	__u64 id;          /* the entry, or 0 */
	__u64 reserved[2]; /* 0 */
};
#define SFRAME_FILE_REMOVE_SIZE_VER0 40

struct sframe_file_info {
	__u64 id;
	__u64 dev;           /* the inode's device (new_encode_dev()) */
	__u64 ino;
	__u64 file_size;     /* at supply */
	__u64 sframe_len;
	__u64 sframe_vaddr;
	__u64 text_vaddr;    /* the text described, at bias 0 */
	__u64 text_len;
	__u64 covered_bytes; /* text bytes its FDEs give rows for */
	__u64 attaches;      /* mappings covered by it, ever */
	__u32 version;       /* SFrame version */
	__u32 nr_fdes;
	__u32 nr_fdes_skipped;
	__u32 reserved0;
};

/*
 * SFRAME_IOC_FILE_LIST: the store's entries, by id.  Up to max_entries
 * into entries; nr_entries says how many there are.  Open to every user:
 * an entry tells a device and inode number and sizes, as /proc/locks does.
 * Errors: EINVAL (size, flags, reserved, max_entries above
 * SFRAME_FILE_MAX_ENTRIES), E2BIG, EFAULT, ENOMEM, EAGAIN (the store kept
 * growing while it was copied: ask again).
 */
struct sframe_file_list {
	__u32 size;        /* sizeof(struct sframe_file_list) */
	__u32 flags;       /* 0 */
	__u32 max_entries;
	__u32 nr_entries;  /* out */
	__u64 entries;     /* address of sframe_file_info[max_entries] */
	__u64 reserved[2]; /* 0 */
};
#define SFRAME_FILE_LIST_SIZE_VER0 40

#define SFRAME_IOC_MAGIC 0xF5
#define SFRAME_IOC_REGISTER    _IOW(SFRAME_IOC_MAGIC, 1, struct sframe_register)
#define SFRAME_IOC_UNREGISTER  _IOW(SFRAME_IOC_MAGIC, 2, struct sframe_unregister)
#define SFRAME_IOC_UNWIND_SELF _IOWR(SFRAME_IOC_MAGIC, 3, struct sframe_unwind_self)
#define SFRAME_IOC_GET_STATS   _IOWR(SFRAME_IOC_MAGIC, 4, struct sframe_stats)

/*
 * ---- Sessions: stitched kernel + user stacks of perf samples -------------
 *
 * A profiler opens a perf sampling event on its target (perf_event_open(),
 * e.g. PERF_COUNT_SW_CPU_CLOCK; no PERF_SAMPLE_CALLCHAIN needed) and starts
 * a session on an open /dev/sframe_unwind with SFRAME_IOC_SESSION_START.
 * From then on, every sample of a perf event owned by the caller's process
 * whose task matches the session's target produces one record: the kernel
 * stack captured at sample time, stitched to the user stack unwound when
 * that task returns to user space (where page faults are allowed).  All
 * samples taken while a task stays in the kernel share one user unwind and
 * one cookie (a task that moves to another CPU meanwhile may get a second
 * unwind and cookie for the same stack).  A sample waits for its task's
 * return to user space at most sample_max_wait_ms (a module parameter,
 * 250 ms by default, 10..10000): a task blocked in the kernel longer gets
 * its samples delivered with their kernel stack only and
 * SFRAME_SAMPLE_F_TIMEOUT.  Records are read with read(): whole records only (a buffer
 * too small for the next record is EINVAL); read() blocks until a record
 * is there unless the file is O_NONBLOCK (then EAGAIN); poll() says
 * EPOLLIN when one is.  read() on a file that is not a session is EINVAL.
 * One session per open file; closing the file ends the session.  Each
 * session's user stacks are unwound with its own unwind_flags.  Instead
 * of read(), a reader may map the buffer (below), as perf record maps
 * its ring, and write records out without copying them first.
 */

/* Which tasks a session follows, in sframe_session_start.target_type. */
#define SFRAME_TARGET_THREAD  1 /* the thread target_id */
#define SFRAME_TARGET_PROCESS 2 /* every thread of the process target_id */
#define SFRAME_TARGET_ALL     3 /* every task (perf's CPU-wide rule) */
/*
 * Every task the caller's own perf events sample, whichever it is: the
 * tasks an event with attr.inherit follows into new threads and child
 * processes, as perf record follows a command.  perf_event_open() checked
 * the caller's right to each event's task or CPU, and perf itself drops
 * inherited events from a task that execs a setuid program, so such a
 * session sees only samples the caller could read from its perf events
 * anyway.  target_id must be 0.  ABI version 2.
 */
#define SFRAME_TARGET_EVENTS  4

/* Defaults and limits of a session. */
#define SFRAME_SESSION_DEFAULT_BUFFER (1u << 20)
#define SFRAME_SESSION_MIN_BUFFER     (1u << 16)
#define SFRAME_SESSION_MAX_BUFFER     (64u << 20)
#define SFRAME_SESSION_DEFAULT_USER_FRAMES 127
#define SFRAME_SESSION_MAX_KERNEL_FRAMES   64

/* sframe_session_start.out_flags */
#define SFRAME_SESSION_KERNEL_VISIBLE (1u << 0) /* kernel addresses shown */

/*
 * SFRAME_IOC_SESSION_START: make this open file a session.
 *
 * Permissions follow perf_event_open() of the running kernel: without
 * CAP_PERFMON (or CAP_SYS_ADMIN), kernel.perf_event_paranoid must be at
 * most 2 (at most 0 for SFRAME_TARGET_ALL); for a thread or process
 * target the caller must be allowed to ptrace-read it
 * (PTRACE_MODE_READ_REALCREDS, checked under the target's
 * exec_update_lock), with or without CAP_PERFMON, as perf checks it; and
 * the LSM hook of perf_event_open() must allow it.  Kernel addresses are
 * shown only with CAP_PERFMON/CAP_SYS_ADMIN or perf_event_paranoid <= 1;
 * otherwise records carry no kernel frames and
 * SFRAME_SAMPLE_F_KERNEL_HIDDEN.  The owner and the target are held by
 * identity, not by number: a pid number reused after they exit matches
 * nothing.
 *
 * Bounds per user (real uid; the module parameters session_max_user,
 * default 64 sessions, and session_max_user_kb, default 65536 KiB of
 * buffers; the memory bound does not apply with CAP_IPC_LOCK, as perf's
 * perf_event_mlock_kb does not), reported by SFRAME_IOC_GET_STATS.
 *
 * Errors: EINVAL (size, flags, reserved, target_type, limits), E2BIG,
 * ESRCH (no such target), EACCES (perf_event_paranoid or an LSM forbids
 * it), EPERM (the target belongs to someone the caller may not trace),
 * EDQUOT (the caller's user is at one of its bounds), EBUSY (this file
 * already is a session), EINTR (a signal while waiting for the target's
 * exec_update_lock), ENOMEM.
 */
struct sframe_session_start {
	__u32 size;             /* sizeof(struct sframe_session_start) */
	__u32 flags;            /* 0 */
	__u32 target_type;      /* SFRAME_TARGET_* */
	__s32 target_id;        /* tid or pid in the caller's pid namespace;
				   0 for SFRAME_TARGET_ALL and
				   SFRAME_TARGET_EVENTS */
	__u32 max_user_frames;  /* 0: default; at most SFRAME_MAX_FRAMES */
	__u32 max_kernel_frames; /* 0: default (and max)
				    SFRAME_SESSION_MAX_KERNEL_FRAMES */
	__u32 buffer_size;      /* bytes; 0: default; rounded up to a power
				   of two within [MIN, MAX]_BUFFER.  Out
				   (ABI 3): the size used */
	__u32 unwind_flags;     /* SFRAME_UNWIND_F_*; 0: SFRAME_UNWIND_F_ALL */
	__u32 out_flags;        /* out: SFRAME_SESSION_* */
	__u32 wakeup_bytes;     /* wake readers only once this many bytes
				   wait (as perf's wakeup_watermark); 0: at
				   every record.  Above half the buffer: half
				   the buffer.  With a watermark, poll() with a
				   timeout: a blocking read() may sleep until
				   the watermark is reached */
	__u64 reserved[2];      /* 0 */
};
#define SFRAME_SESSION_START_SIZE_VER0 56

/* Record types. */
#define SFRAME_RECORD_SAMPLE 1
#define SFRAME_RECORD_LOST   2

/* Every record starts with this; size counts the whole record, a multiple
 * of 8. */
struct sframe_record_header {
	__u16 type;     /* SFRAME_RECORD_* */
	__u16 reserved; /* 0 */
	__u32 size;
};

/* sframe_sample_record.flags: what happened to the sample. */
#define SFRAME_SAMPLE_F_USER_MODE     (1u << 0) /* taken in user mode */
#define SFRAME_SAMPLE_F_KERNEL_HIDDEN (1u << 1) /* the sample had kernel
						   frames, withheld from
						   this reader */
#define SFRAME_SAMPLE_F_KTHREAD       (1u << 2) /* kernel thread: no user
						   stack exists */
#define SFRAME_SAMPLE_F_EXITED        (1u << 3) /* the task exited before
						   returning to user space */
#define SFRAME_SAMPLE_F_EXECED        (1u << 4) /* the task exec'd before
						   returning: the old user
						   stack is gone */
#define SFRAME_SAMPLE_F_NO_USER       (1u << 5) /* no user stack, for one of
						   the reasons above or
						   another (see the stats) */
#define SFRAME_SAMPLE_F_TIMEOUT       (1u << 6) /* the task stayed in the
						   kernel longer than a
						   sample is held (blocked
						   in a system call): sent
						   without its user stack */
#define SFRAME_SAMPLE_F_COMPAT        (1u << 7) /* a 32-bit task: no user
						   stack is unwound */
/*
 * ABI 4.  The sample was taken for another task than the one running (a
 * tracepoint naming another task, such as sched:sched_waking, or a BPF
 * output event): no user stack, as perf gives none ("cross-task user
 * callchains"), with SFRAME_SAMPLE_F_NO_USER.
 */
#define SFRAME_SAMPLE_F_CROSS_TASK    (1u << 8)
/*
 * ABI 4.  The task's credentials changed between the sample and its
 * unwind (a setuid or setcap exec), or its image is not dumpable
 * (get_dumpable() other than SUID_DUMP_USER): the user stack is withheld
 * (SFRAME_SAMPLE_F_NO_USER) from a reader without CAP_PERFMON or
 * CAP_SYS_ADMIN at session start, and marked for one with them.
 */
#define SFRAME_SAMPLE_F_NOT_DUMPABLE  (1u << 9)

/*
 * One sample: nr_kernel kernel frames (the sampled PC first), then nr_user
 * user frames (the user PC first), in ips[].  user_stop is the enum
 * sframe_stop_reason of the user walk (0 when there was none).
 */
struct sframe_sample_record {
	struct sframe_record_header header; /* SFRAME_RECORD_SAMPLE */
	__u32 pid;       /* process (tgid), in the reader's pid namespace */
	__u32 tid;       /* thread */
	__u64 time;      /* CLOCK_MONOTONIC ns when the sample was taken */
	__u64 cookie;    /* one per kernel entry: shared by every sample of
			    the entry, so they share one user unwind */
	__u32 cpu;
	__u32 flags;     /* SFRAME_SAMPLE_F_* */
	__u16 nr_kernel;
	__u16 nr_user;
	__u32 user_stop; /* enum sframe_stop_reason */
	__u64 ips[];
};

/* Records were dropped because the buffer was full. */
struct sframe_lost_record {
	struct sframe_record_header header; /* SFRAME_RECORD_LOST */
	__u64 lost;      /* samples dropped since the previous LOST record */
};

/* SFRAME_IOC_SESSION_STATS: counters of this file's session. */
struct sframe_session_stats {
	__u32 size;      /* sizeof(struct sframe_session_stats) */
	__u32 reserved0;
	__u64 samples;   /* samples that matched the session */
	__u64 records;   /* sample records written to the buffer */
	__u64 lost;      /* samples dropped: buffer full */
	__u64 lost_capture; /* samples dropped at sample time: no free
			       sample buffer or request in the module */
	__u64 unwinds;   /* user unwinds whose result went to this session */
	__u64 reserved[3];
};
#define SFRAME_SESSION_STATS_SIZE_VER0 72

/*
 * ---- A session's buffer, mapped (ABI version 3) ------------------------
 *
 *   len = page_size + buffer_size (as SFRAME_IOC_SESSION_START returned it)
 *   mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, session_fd, 0)
 *
 * The first page is struct sframe_session_mmap_page; the buffer follows
 * at data_offset, a ring of data_size bytes (a power of two) holding the
 * same records read() returns, each at ring offset (position & (data_size
 * - 1)).  A record may wrap from the ring's end to its start.  The reader
 * loads data_head with acquire semantics, consumes the records in
 * [data_tail, data_head), and then stores the position up to which it is
 * done into data_tail with release semantics (perf's protocol for its
 * ring, with positions in bytes ever written).  Until the reader moves
 * data_tail, the kernel does not touch those bytes; a record that does
 * not fit is dropped and counted (a LOST record follows, as with read()).
 *
 * data_tail is the reader's to write, and the kernel takes it only if it
 * is a multiple of 8 and lies between the last data_tail it took and
 * data_head; any other value leaves the ring as full as it was, so samples
 * are dropped and counted, never written over unread ones.  The ring's
 * bytes are the reader's to spoil too: the kernel never reads them.  For
 * that reason, once a session's buffer has been mapped, read() on it
 * fails with EBUSY.
 *
 * A mapping of page_size bytes maps the control page alone, for a reader
 * that wants to learn data_size first.
 *
 * Errors of mmap(): EINVAL (an offset other than 0, a length other than
 * page_size + buffer_size or page_size, a mapping that is not shared and
 * writable),
 * ENODEV (not a session).  The mapping is not inherited by fork() and
 * cannot be made executable.  poll() works as with read(): EPOLLIN when
 * data_head differs from a data_tail the kernel would take.
 */
#define SFRAME_SESSION_MMAP_VERSION 1
struct sframe_session_mmap_page {
	__u32 version;     /* SFRAME_SESSION_MMAP_VERSION */
	__u32 data_offset; /* of the ring from the mapping's start */
	__u64 data_size;   /* of the ring, bytes */
	__u64 data_head;   /* bytes ever written: kernel-written, load-acquire */
	__u64 data_tail;   /* bytes consumed: reader-written, store-release */
	__u64 reserved[4]; /* 0 */
};

#define SFRAME_IOC_SESSION_START _IOWR(SFRAME_IOC_MAGIC, 5, struct sframe_session_start)
#define SFRAME_IOC_SESSION_STATS _IOWR(SFRAME_IOC_MAGIC, 6, struct sframe_session_stats)
#define SFRAME_IOC_SUPPLY        _IOW(SFRAME_IOC_MAGIC, 7, struct sframe_supply)
#define SFRAME_IOC_LIST_SECTIONS _IOWR(SFRAME_IOC_MAGIC, 8, struct sframe_list_sections)
#define SFRAME_IOC_FILE_SUPPLY   _IOWR(SFRAME_IOC_MAGIC, 9, struct sframe_file_supply)
#define SFRAME_IOC_FILE_REMOVE   _IOW(SFRAME_IOC_MAGIC, 10, struct sframe_file_remove)
#define SFRAME_IOC_FILE_LIST     _IOWR(SFRAME_IOC_MAGIC, 11, struct sframe_file_list)

#endif /* _UAPI_SFRAME_UNWIND_H */
