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
 * All addresses are user virtual addresses of the calling process.
 */
#ifndef _UAPI_SFRAME_UNWIND_H
#define _UAPI_SFRAME_UNWIND_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define SFRAME_UNWIND_DEVICE "/dev/sframe_unwind"

/* Version of this ABI, returned by SFRAME_IOC_GET_STATS in abi_version. */
#define SFRAME_UNWIND_ABI_VERSION 1

/* Largest .sframe section the module accepts (bytes). */
#define SFRAME_MAX_SECTION_SIZE (64u << 20)
/* Largest number of sections registered per process at once. */
#define SFRAME_MAX_SECTIONS_PER_MM 4096
/* Largest max_frames an unwind request may ask for. */
#define SFRAME_MAX_FRAMES 4096

/*
 * SFRAME_IOC_REGISTER: register the .sframe section at [sframe_addr,
 * sframe_addr + sframe_len) of the caller's memory as describing the text at
 * [text_start, text_start + text_len).  The section stays in user memory; the
 * module reads it at unwind time and never pins it.  Rows decoded from it are
 * cached per process until that process's registrations change, so a
 * process that rewrites a registered section in place must unregister and
 * register it again.
 *
 * Errors:
 *   EINVAL      size too small, flags or reserved fields not zero, a zero or
 *               overflowing length, text above the user address limit, or a
 *               section whose header or tables are inconsistent (offsets or
 *               counts beyond sframe_len, unsorted FDEs, an FDE outside the
 *               text range, an FRE outside the FRE sub-section)
 *   E2BIG       sframe_len above SFRAME_MAX_SECTION_SIZE, or a larger struct
 *               whose unknown tail is not zero
 *   ENOEXEC     the bytes are not SFrame (bad magic)
 *   EOPNOTSUPP  an SFrame version or ABI/arch this module does not read
 *   EFAULT      the section or part of the text range is not mapped, or the
 *               section could not be read
 *   EACCES      part of the text range is mapped but not executable
 *   EEXIST      the text range overlaps a registered one
 *   ENOSPC      the process already has SFRAME_MAX_SECTIONS_PER_MM sections
 *   ENOMEM      out of kernel memory
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

/*
 * SFRAME_IOC_UNREGISTER: forget the section registered with exactly this
 * text_start.  ENOENT when there is none.
 */
struct sframe_unregister {
	__u32 size;       /* sizeof(struct sframe_unregister) */
	__u32 flags;      /* 0 */
	__u64 text_start; /* text_start given to SFRAME_IOC_REGISTER */
	__u64 reserved;   /* 0 */
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
};

/*
 * SFRAME_IOC_UNWIND_SELF: unwind the calling thread's user stack from the
 * registers it had when it made this ioctl.  frames[0] is the user PC right
 * after the system call instruction, frames[1] its caller's return address,
 * and so on.  The walk always terminates: each frame's stack pointer must be
 * above the previous one, and at most max_frames are stored.
 *
 * Errors: EINVAL (size, flags: at least one method, reserved, max_frames of
 * 0 or above SFRAME_MAX_FRAMES), E2BIG, EFAULT (the struct or frames buffer
 * is not writable).  A walk that stops early is not an error: see
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
	__u64 mm_sections;      /* sections registered by the caller's process */
	__u64 reserved[4];
};
#define SFRAME_STATS_SIZE_VER0 120

#define SFRAME_IOC_MAGIC 0xF5
#define SFRAME_IOC_REGISTER    _IOW(SFRAME_IOC_MAGIC, 1, struct sframe_register)
#define SFRAME_IOC_UNREGISTER  _IOW(SFRAME_IOC_MAGIC, 2, struct sframe_unregister)
#define SFRAME_IOC_UNWIND_SELF _IOWR(SFRAME_IOC_MAGIC, 3, struct sframe_unwind_self)
#define SFRAME_IOC_GET_STATS   _IOWR(SFRAME_IOC_MAGIC, 4, struct sframe_stats)

#endif /* _UAPI_SFRAME_UNWIND_H */
