/*
 * libsframe-client, the C API: plain functions and structs over
 * /dev/sframe_unwind (uapi <sframe_unwind.h>), for C programs and for
 * profilers written in other languages (Go's cgo, Rust's FFI).  The C++
 * classes (sframe_client/sframe_client.hpp) stay the comfortable layer; this
 * is a thin one over them, in the manner of libbpf:
 *
 *   - Handles are opaque (struct sframe_client_device, struct
 *     sframe_client_session), made by a function and freed by another.
 *   - Every function that can fail returns 0 (or a count, where it says so)
 *     on success and a negative errno on failure: -EEXIST, -EINVAL, ...
 *     Nothing throws: every C++ exception is caught at the boundary
 *     (sframe::Error gives its errno, std::bad_alloc -ENOMEM, anything
 *     else -EIO).  sframe_client_errmsg() says what failed and why, in the
 *     words of the C++ sframe::Error: "register text 0x401000-0x402000:
 *     .sframe text range overlaps a registered one (EEXIST)".
 *   - Structs the library writes and structs it reads start with
 *     `size_t sz`, which the caller sets to sizeof() of the struct as its
 *     header has it (SFRAME_CLIENT_OPTS below does it).  The library takes
 *     any sz from the struct's first version on (the *_SZ_VER0 constants;
 *     smaller: -EINVAL):
 *       - a struct it writes (stats, results): it writes the fields both
 *         sides know, and zeroes the rest of the caller's sz bytes (fields
 *         of a newer header than the library's read as 0);
 *       - a struct it reads (options): fields beyond those it knows must be
 *         zero, else -E2BIG (as the uapi does).
 *     A struct the library hands to a callback (struct
 *     sframe_client_record) carries the library's own sz, so a caller
 *     built with a newer header checks it before reading newer fields.
 *     Arrays of structs take their element size as an argument instead.
 *
 * Errno values common to every function: -EINVAL for a NULL handle or a
 * NULL pointer where one is required, or an sz below the first version;
 * -ENOMEM when the library cannot allocate.  Each function lists the others.
 * The uapi header says in detail when the module gives each errno.
 *
 * Thread safety: a device handle may be used by several threads at once
 * (each call is one ioctl); a session handle by one thread at a time.
 *
 *   struct sframe_client_device *dev;
 *   if (sframe_client_open(NULL, &dev) < 0) die(sframe_client_errmsg());
 *   sframe_client_register_loaded_objects(dev, NULL);
 *   uint64_t frames[64];
 *   struct sframe_client_unwind_result res = { .sz = sizeof(res) };
 *   int n = sframe_client_unwind_self(dev, frames, 64, SFRAME_UNWIND_F_SFRAME, &res);
 *
 * x86-64 only (as the module).  Compiles as C99 and later and as C++.
 */
#ifndef SFRAME_CLIENT_SFRAME_CLIENT_H
#define SFRAME_CLIENT_SFRAME_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sframe_client/export.h"
#include "sframe_unwind.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Declares `struct TYPE NAME` with sz set to sizeof(struct TYPE), the fields
 * given as designated initializers after NAME, and every other field zero:
 *   SFRAME_CLIENT_OPTS(sframe_client_session_opts, o, .buffer_size = 1 << 20);
 * (ISO C before C23 wants at least one field after NAME.  A struct the
 * library fills needs none: `struct sframe_client_stats st = { .sz =
 * sizeof(st) };`.  C++ before C++20 has no designated initializers: there,
 * `sframe_client_stats st{}; st.sz = sizeof(st);`.)
 */
#define SFRAME_CLIENT_OPTS(TYPE, NAME, ...) \
	struct TYPE NAME = { .sz = sizeof(struct TYPE), __VA_ARGS__ }

/* ---- errors and version ------------------------------------------------- */

/*
 * The message of the last call in this thread that failed, e.g.
 *   "cannot open /dev/sframe_unwind: No such file or directory (ENOENT)"
 *   "register text 0x5610-0x7a10: .sframe text range overlaps a registered
 *    one (EEXIST)"
 *   "session read record at offset 16: malformed record: nr_kernel 7 +
 *    nr_user 1 ips do not fit in size 56 (EBADMSG)"
 * "" when no call has failed in this thread yet.  Successful calls leave it
 * as it is.  The string is the thread's own and stays valid until its next
 * failing call.
 */
SFRAME_CLIENT_API const char *sframe_client_errmsg(void);

/*
 * The symbolic name of an errno value, negative or positive: "EEXIST" for
 * -EEXIST and for EEXIST; "E<n>" (n positive) for a value the library does
 * not name.  Names are static strings; an unnamed value's string is the
 * thread's own and stays valid until the next call that gives one.
 */
SFRAME_CLIENT_API const char *sframe_client_errno_name(int err);

/* The library's version, "MAJOR.MINOR.PATCH" (the project's version). */
SFRAME_CLIENT_API const char *sframe_client_version(void);

/* ---- the device ---------------------------------------------------------- */

struct sframe_client_device;

/*
 * Opens path (NULL: SFRAME_UNWIND_DEVICE, "/dev/sframe_unwind") O_RDWR |
 * O_CLOEXEC and stores a new handle in *out (NULL on failure).
 * Errors: -EINVAL (out NULL), the errno of open(2) (-ENOENT: no such file,
 * the module is not loaded; -EACCES: no permission), -ENOMEM.  A file that
 * is not the device opens fine; its first call then fails (-ENOTTY from
 * the ioctls of a file that is no sframe_unwind device).
 */
SFRAME_CLIENT_API int sframe_client_open(const char *path, struct sframe_client_device **out);

/* Closes the handle's descriptor and frees it.  NULL is ignored.
 * Registrations stay: they belong to the process, not to the descriptor. */
SFRAME_CLIENT_API void sframe_client_close(struct sframe_client_device *dev);

/* The handle's file descriptor (owned by the handle), or -EINVAL for NULL. */
SFRAME_CLIENT_API int sframe_client_fd(const struct sframe_client_device *dev);

/*
 * SFRAME_IOC_REGISTER: registers the .sframe section at [sframe_addr,
 * sframe_addr + sframe_len) of this process as describing the text at
 * [text_start, text_start + text_len).  It stays registered until
 * sframe_client_unregister(), the text is unmapped, or the process execs or
 * exits.
 * Errors (uapi): -EINVAL (zero or overflowing lengths, text beyond user
 * space, inconsistent header or tables), -E2BIG (section above
 * SFRAME_MAX_SECTION_SIZE; an FDE with too many FREs is not an error, the
 * module skips it: nr_fdes_skipped of sframe_client_list_sections()),
 * -ENOEXEC (not SFrame), -EOPNOTSUPP (SFrame version or ABI not read by the
 * module), -EFAULT (section or text not mapped), -EACCES (text not
 * executable), -EEXIST (the text overlaps a registered section), -ENOSPC
 * (too many sections in this process), -ENOMEM, -EINTR (fatal signal).
 */
SFRAME_CLIENT_API int sframe_client_register(struct sframe_client_device *dev,
					     uint64_t sframe_addr, uint64_t sframe_len,
					     uint64_t text_start, uint64_t text_len);

/*
 * SFRAME_IOC_UNREGISTER: forgets this process's section (registered,
 * supplied or discovered) whose text starts exactly at text_start.
 * Errors: -ENOENT (none starts there).
 */
SFRAME_CLIENT_API int sframe_client_unregister(struct sframe_client_device *dev,
					       uint64_t text_start);

/*
 * SFRAME_IOC_SUPPLY: gives the module a copy of the section bytes [data,
 * data + len) for the text [text_start, text_start + text_len) of process
 * pid (0: this process); PC-relative addresses in the section are read as
 * if it were mapped at sframe_addr in that process.  Needs the right to
 * ptrace-attach to pid.
 * Errors: those of sframe_client_register() (about pid's text), and
 * -ESRCH (no process pid, or one without memory), -EPERM (may not
 * ptrace-attach to it), -EDQUOT (a bound on supplied bytes: per process,
 * per user, in total), -EFAULT (data unreadable too).
 */
SFRAME_CLIENT_API int sframe_client_supply(struct sframe_client_device *dev, pid_t pid,
					   const void *data, uint64_t len, uint64_t sframe_addr,
					   uint64_t text_start, uint64_t text_len);

/*
 * SFRAME_IOC_UNREGISTER with SFRAME_UNREGISTER_F_PID: forgets process pid's
 * entry whose text starts at text_start.
 * Errors: -ENOENT (none), -ESRCH (no process pid), -EPERM (may not
 * ptrace-attach to it).
 */
SFRAME_CLIENT_API int sframe_client_unregister_pid(struct sframe_client_device *dev, pid_t pid,
						   uint64_t text_start);

/* One entry of a process's registry (SFRAME_IOC_LIST_SECTIONS). */
struct sframe_client_section_info {
	uint64_t text_start;    /* the text described */
	uint64_t text_len;
	uint64_t sframe_addr;   /* the section in the process's memory; 0 for
				   SFRAME_SOURCE_NONE */
	uint64_t sframe_len;
	uint64_t covered_bytes; /* text bytes its FDEs give rows for */
	uint32_t source;        /* SFRAME_SOURCE_* */
	uint32_t version;       /* SFrame version; 0 for SFRAME_SOURCE_NONE */
	uint32_t nr_fdes;       /* skipped ones included */
	/* FDEs the module skips: more than SFRAME_MAX_FRES_PER_FDE FREs, so
	   no rows (0 from a module that predates it; was `reserved`). */
	uint32_t nr_fdes_skipped;
};
#define SFRAME_CLIENT_SECTION_INFO_SZ_VER0 56

/*
 * SFRAME_IOC_LIST_SECTIONS: process pid's entries (0: this process), in
 * text order.  Writes up to max_entries of them to entries, an array whose
 * elements are entry_sz bytes each (sizeof(struct
 * sframe_client_section_info) as the caller's header has it; at least
 * SFRAME_CLIENT_SECTION_INFO_SZ_VER0).  Returns the number of entries the
 * process has, which may be more than max_entries (call again with room
 * for them); entries may be NULL when max_entries is 0.  Needs the right
 * to ptrace-read pid.
 * Errors: -EINVAL (entry_sz too small, entries NULL with max_entries not
 * 0), -ESRCH (no process pid), -EPERM (may not ptrace-read it), -ENOMEM.
 */
SFRAME_CLIENT_API int sframe_client_list_sections(struct sframe_client_device *dev, pid_t pid,
						  struct sframe_client_section_info *entries,
						  size_t entry_sz, size_t max_entries);

/* SFRAME_IOC_GET_STATS; see struct sframe_stats in the uapi for each. */
struct sframe_client_stats {
	size_t sz;                  /* in: sizeof(struct sframe_client_stats) */
	uint32_t abi_version;       /* SFRAME_UNWIND_ABI_VERSION of the module */
	uint32_t reserved0;         /* written as 0 */
	uint64_t sections;          /* sections registered now, all processes */
	uint64_t processes;         /* processes with a registry now */
	uint64_t registrations;     /* successful registrations, ever */
	uint64_t registrations_rejected;
	uint64_t unwinds;
	uint64_t frames_sframe;
	uint64_t frames_fp;
	uint64_t unwind_faults;
	uint64_t unwind_bad_frames;
	uint64_t mm_sections;       /* sections of this process */
	uint64_t samples_deferred;  /* perf samples captured for sessions */
	uint64_t samples_nmi;       /* ...of them in NMI context */
	uint64_t sections_discovered;
	uint64_t supplied_bytes;    /* kernel memory held by supplied sections */
	uint64_t forks_inherited;
	uint64_t forks_not_inherited;
	/* 0 from a module older than SFRAME_STATS_SIZE_VER1: */
	uint64_t walks_budget_exhausted;
	uint64_t samples_timed_out;
	uint64_t user_supplied_bytes;  /* this user's (real uid) holdings ... */
	uint64_t user_supplied_limit;  /* ... and bounds (UINT64_MAX: none) */
	uint64_t user_sessions;
	uint64_t user_sessions_limit;
	uint64_t user_session_bytes;
	uint64_t user_session_bytes_limit;
};
#define SFRAME_CLIENT_STATS_SZ_VER0 208

/*
 * SFRAME_IOC_GET_STATS: the module's counters and this process's, into *st
 * (st->sz set by the caller).
 * Errors: -EINVAL (st NULL, st->sz below SFRAME_CLIENT_STATS_SZ_VER0), and
 * -ENOTTY when the handle's file is no sframe_unwind device.
 */
SFRAME_CLIENT_API int sframe_client_get_stats(struct sframe_client_device *dev,
					      struct sframe_client_stats *st);

/* What SFRAME_IOC_UNWIND_SELF said besides the frames. */
struct sframe_client_unwind_result {
	size_t sz;            /* in: sizeof(struct sframe_client_unwind_result) */
	uint32_t nr_frames;   /* frames stored (also the return value) */
	uint32_t stop_reason; /* enum sframe_stop_reason: why the walk ended */
	uint32_t nr_sframe;   /* frames unwound with SFrame */
	uint32_t nr_fp;       /* frames unwound with frame pointers */
};
#define SFRAME_CLIENT_UNWIND_RESULT_SZ_VER0 24

/*
 * SFRAME_IOC_UNWIND_SELF: unwinds the calling thread's user stack into
 * frames[0, max_frames) with the methods in flags (SFRAME_UNWIND_F_*) and
 * returns the number of frames stored; res (may be NULL) gets that number,
 * the stop reason and the counts per method.  frames[0] is the PC after the
 * system call, inside the library (sframe::Device::unwind_self, which makes
 * the call itself: glibc's ioctl() has no .sframe, see device.h), frames[1]
 * the return address into sframe_client_unwind_self, frames[2] the one into
 * its caller.  libsframe-client.so has its own .sframe (PT_GNU_SFRAME), so
 * these first frames are walked with SFrame once it is registered (e.g.
 * by sframe_client_register_loaded_objects()), and with frame pointers
 * anyway.  A walk that stops early is no error: see res->stop_reason.
 * The library unwinds into a buffer of its own and copies the frames to
 * frames, which must be writable for max_frames entries.
 * Errors: -EINVAL (frames NULL, max_frames above 2^20; from the module:
 * max_frames 0 or above SFRAME_MAX_FRAMES, no method or unknown bits in
 * flags), -EINTR (fatal signal), -ENOTTY (not the device), -ENOMEM.
 */
SFRAME_CLIENT_API int sframe_client_unwind_self(struct sframe_client_device *dev,
						uint64_t *frames, uint32_t max_frames,
						uint32_t flags,
						struct sframe_client_unwind_result *res);

/*
 * Registers the in-memory .sframe (PT_GNU_SFRAME) of every object loaded in
 * this process that has one (the program, libraries built with
 * -Wa,--gsframe, libsframe-client.so itself), for its executable text, and
 * stores how many in *nr_registered (may be NULL).  Objects without
 * PT_GNU_SFRAME (Debian's libc among them) are skipped.  The registrations
 * then stay until they are unregistered (sframe_client_unregister() with
 * the object's text start, see sframe_client_list_sections()) or the
 * process execs or exits: closing the handle does not end them.  All or
 * nothing: on a failure, the sections registered by this call are
 * unregistered again.
 * Errors: those of sframe_client_register() for the first object the
 * module refuses (-EEXIST: already registered, e.g. by an earlier call);
 * sframe_client_errmsg() names the object.
 */
SFRAME_CLIENT_API int sframe_client_register_loaded_objects(struct sframe_client_device *dev,
							    size_t *nr_registered);

/*
 * Registers the .sframe of the loaded object with a segment holding addr
 * (e.g. a function of a library just dlopen()ed), and stores the text start
 * it was registered for in *text_start (may be NULL), to unregister it by.
 * It stays registered as in sframe_client_register_loaded_objects().
 * Errors: -ENOENT (no loaded object holds addr), -ENODATA (the object has
 * no PT_GNU_SFRAME), those of sframe_client_register().
 */
SFRAME_CLIENT_API int sframe_client_register_object_containing(struct sframe_client_device *dev,
							       const void *addr,
							       uint64_t *text_start);

/* ---- the file store: one section per file, for every mapping of it ---------
 *
 * Since 0.2.0 (version node SFRAME_CLIENT_0.2.0).  See "Sections kept per
 * file" in the uapi header: an entry is keyed by the file's inode, covers
 * every executable mapping of that file in every process, and is dropped by
 * the module the moment the file is written, truncated, opened for writing
 * or deleted.  Supplying and removing need CAP_SYS_ADMIN; listing and the
 * counters are open to every user.  A module without the file store
 * (before SFRAME_UNWIND_ABI_VERSION 5) gives -ENOTTY.
 */

/*
 * SFRAME_IOC_FILE_SUPPLY: gives the module a copy of the section bytes
 * [data, data + len) for the ELF file open for reading at fd.  The section
 * describes the file as linked: sframe_vaddr is where it counts as loaded
 * at load bias 0 (the file's PT_GNU_SFRAME p_vaddr for its own section),
 * and its FDEs must lie within the text of the file's executable PT_LOAD
 * segments.  flags: 0, or SFRAME_FILE_F_REPLACE to replace an entry the
 * file has.  Stores the new entry's id in *id (may be NULL: the entry can
 * be removed by its file with sframe_client_file_remove_fd()).
 * Errors: -EINVAL (flags other than SFRAME_FILE_F_REPLACE; from the module:
 * len 0, sframe_vaddr beyond user space, fd not a regular file, an
 * inconsistent section as for sframe_client_register()), -EPERM (no
 * CAP_SYS_ADMIN), -EBADF (fd not open for reading), -ENOEXEC (the file is
 * no x86-64 ELF executable or shared object with an executable PT_LOAD, or
 * the bytes are not SFrame), -EOPNOTSUPP (SFrame version or ABI not read
 * by the module), -E2BIG (len above SFRAME_MAX_SECTION_SIZE), -ETXTBSY (the
 * file is open for writing somewhere), -EEXIST (the file has an entry and
 * flags lack SFRAME_FILE_F_REPLACE), -EDQUOT (the store would hold more
 * than the module parameter file_max_kb), -ENOSPC (the store has
 * SFRAME_FILE_MAX_ENTRIES entries), -EAGAIN (the file changed while it was
 * being supplied), -EFAULT (data unreadable), -ENOMEM, -EINTR.
 * sframe_client_errmsg() names the file (its path, from /proc/self/fd).
 */
SFRAME_CLIENT_API int sframe_client_file_supply(struct sframe_client_device *dev, int fd,
						const void *data, uint64_t len,
						uint64_t sframe_vaddr, uint32_t flags,
						uint64_t *id);

/*
 * SFRAME_IOC_FILE_REMOVE: drops the entry id (as sframe_client_file_supply()
 * or sframe_client_file_list() gave it).  Mappings it covers lose their
 * coverage at once.
 * Errors: -EINVAL (id 0: no entry has it; remove by file with
 * sframe_client_file_remove_fd()), -EPERM (no CAP_SYS_ADMIN), -ENOENT (no
 * entry id, e.g. the module dropped it because its file changed).
 */
SFRAME_CLIENT_API int sframe_client_file_remove(struct sframe_client_device *dev, uint64_t id);

/*
 * SFRAME_IOC_FILE_REMOVE by file: drops the entry of the file open for
 * reading at fd (its inode, whatever path it was supplied by).
 * Errors: -EPERM (no CAP_SYS_ADMIN), -EBADF (fd not open for reading),
 * -EINVAL (fd not a regular file), -ENOENT (the file has no entry).
 */
SFRAME_CLIENT_API int sframe_client_file_remove_fd(struct sframe_client_device *dev, int fd);

/* One entry of the file store (SFRAME_IOC_FILE_LIST, struct sframe_file_info). */
struct sframe_client_file_info {
	uint64_t id;            /* the entry, never reused while the module is loaded */
	uint64_t dev;           /* the file's device (the kernel's new_encode_dev(), as
				   stat(2)'s st_dev) */
	uint64_t ino;           /* and inode */
	uint64_t file_size;     /* the file's size when it was supplied */
	uint64_t sframe_len;    /* the section's bytes */
	uint64_t sframe_vaddr;  /* where it counts as loaded, at bias 0 */
	uint64_t text_vaddr;    /* the text described, at bias 0 */
	uint64_t text_len;
	uint64_t covered_bytes; /* text bytes its FDEs give rows for */
	uint64_t attaches;      /* mappings covered by it, ever */
	uint32_t version;       /* SFrame version */
	uint32_t nr_fdes;       /* skipped ones included */
	uint32_t nr_fdes_skipped; /* FDEs the module skips (too many FREs) */
	uint32_t reserved0;     /* written as 0 */
};
#define SFRAME_CLIENT_FILE_INFO_SZ_VER0 96

/*
 * SFRAME_IOC_FILE_LIST: the store's entries, in id order, as
 * sframe_client_list_sections() gives a process's: writes up to
 * max_entries of them to entries, an array whose elements are entry_sz
 * bytes each (sizeof(struct sframe_client_file_info) as the caller's header
 * has it; at least SFRAME_CLIENT_FILE_INFO_SZ_VER0), and returns the number
 * of entries the store has, which may be more than max_entries (call again
 * with room for them; the store may change in between); entries may be NULL
 * when max_entries is 0.
 * Errors: -EINVAL (entry_sz too small, entries NULL with max_entries not
 * 0), -EAGAIN (the store kept growing while it was copied: call again),
 * -ENOMEM.
 */
SFRAME_CLIENT_API int sframe_client_file_list(struct sframe_client_device *dev,
					      struct sframe_client_file_info *entries,
					      size_t entry_sz, size_t max_entries);

/* The file store's counters (SFRAME_IOC_GET_STATS; struct sframe_stats's
 * file_* fields): all 0 from a module older than SFRAME_STATS_SIZE_VER2.
 * A struct of its own, so that struct sframe_client_stats keeps its size. */
struct sframe_client_file_store_stats {
	size_t sz;            /* in: sizeof(struct sframe_client_file_store_stats) */
	uint64_t entries;     /* files with a section now */
	uint64_t bytes;       /* kernel memory their sections hold now */
	uint64_t bytes_limit; /* the bound of bytes (module parameter file_max_kb) */
	uint64_t attaches;    /* mappings covered from the store, ever */
	uint64_t invalidated; /* entries dropped because their file changed, ever */
};
#define SFRAME_CLIENT_FILE_STORE_STATS_SZ_VER0 48

/*
 * SFRAME_IOC_GET_STATS: the file store's counters into *st (st->sz set by
 * the caller).
 * Errors: -EINVAL (st NULL, st->sz below
 * SFRAME_CLIENT_FILE_STORE_STATS_SZ_VER0), and -ENOTTY when the handle's
 * file is no sframe_unwind device.
 */
SFRAME_CLIENT_API int sframe_client_file_store_get_stats(struct sframe_client_device *dev,
							 struct sframe_client_file_store_stats *st);

/* perf's own user callchains (perf record -g, BPF's stacks) walked by the
 * module while its parameter perf_callchain is on (SFRAME_IOC_GET_STATS;
 * struct sframe_stats's callchain_* fields), all processes, ever: all 0
 * from a module older than SFRAME_STATS_SIZE_VER3.  A struct of its own,
 * so that struct sframe_client_stats keeps its size. */
struct sframe_client_perf_callchain_stats {
	size_t sz;                    /* in: sizeof(struct sframe_client_perf_callchain_stats) */
	uint64_t served;              /* callchains whose user part the module walked */
	uint64_t declined;            /* left to perf's own walk: 32-bit task, guest, recursion */
	uint64_t frames;              /* return addresses given to perf */
	uint64_t fp_continued;        /* walks that went on by frame pointers */
	uint64_t truncated;           /* walks ended by perf's max_stack */
	uint64_t discoveries;         /* deferred walks asked for, to find sections */
	uint64_t discoveries_dropped; /* not asked for: all in flight */
};
#define SFRAME_CLIENT_PERF_CALLCHAIN_STATS_SZ_VER0 64

/*
 * SFRAME_IOC_GET_STATS: the perf callchain counters into *st (st->sz set
 * by the caller).
 * Errors: -EINVAL (st NULL, st->sz below
 * SFRAME_CLIENT_PERF_CALLCHAIN_STATS_SZ_VER0), and -ENOTTY when the
 * handle's file is no sframe_unwind device.
 */
SFRAME_CLIENT_API int sframe_client_perf_callchain_get_stats(
	struct sframe_client_device *dev, struct sframe_client_perf_callchain_stats *st);

/* ---- sessions: stitched kernel + user stacks of perf samples ---------------
 *
 * A session follows a target (SFRAME_TARGET_*) and yields one record per
 * sample of the perf events this process owns (opened with
 * perf_event_open(2); no PERF_SAMPLE_CALLCHAIN needed) whose task matches.
 * See "Sessions" in the uapi header.
 */

struct sframe_client_session;

/* The optional fields of SFRAME_IOC_SESSION_START (0: the module's default). */
struct sframe_client_session_opts {
	size_t sz;                  /* sizeof(struct sframe_client_session_opts) */
	const char *device;         /* NULL: SFRAME_UNWIND_DEVICE */
	uint32_t max_user_frames;   /* at most SFRAME_MAX_FRAMES */
	uint32_t max_kernel_frames; /* at most SFRAME_SESSION_MAX_KERNEL_FRAMES */
	uint32_t buffer_size;       /* bytes, within SFRAME_SESSION_*_BUFFER */
	uint32_t unwind_flags;      /* SFRAME_UNWIND_F_*; 0: all methods */
	uint32_t wakeup_bytes;      /* wake readers at this many bytes; 0: each record */
	uint32_t reserved;          /* 0 */
};
#define SFRAME_CLIENT_SESSION_OPTS_SZ_VER0 40

/*
 * Opens opts->device (its own file: one session per file) O_RDWR |
 * O_NONBLOCK | O_CLOEXEC, issues SFRAME_IOC_SESSION_START for target_type
 * (SFRAME_TARGET_THREAD, _PROCESS, _ALL, _EVENTS) and target_id (a tid, a
 * pid, 0 for _ALL and _EVENTS), and stores a new handle in *out (NULL on
 * failure).  opts may be NULL: every default.
 * Errors: -EINVAL (out NULL, opts->sz below the first version, reserved not
 * 0; from the module: target_type, limits, unwind_flags), -E2BIG (opts
 * fields this library does not know set), open(2)'s errnos for the device,
 * -ESRCH (no such target), -EACCES (perf_event_paranoid or an LSM forbids
 * it), -EPERM (the target is someone the caller may not trace), -EDQUOT
 * (the user's bound on sessions or their memory), -EINTR, -ENOMEM,
 * -ENOTTY (a module without sessions).
 */
SFRAME_CLIENT_API int sframe_client_session_start(uint32_t target_type, pid_t target_id,
						  const struct sframe_client_session_opts *opts,
						  struct sframe_client_session **out);

/* Ends the session (closes its file) and frees the handle.  NULL is ignored. */
SFRAME_CLIENT_API void sframe_client_session_close(struct sframe_client_session *sess);

/* The session's file descriptor (to poll with others), or -EINVAL for NULL.
 * It is non-blocking; read records with sframe_client_session_read(). */
SFRAME_CLIENT_API int sframe_client_session_fd(const struct sframe_client_session *sess);

/* out_flags of SFRAME_IOC_SESSION_START (SFRAME_SESSION_KERNEL_VISIBLE: the
 * records carry kernel addresses); 0 for NULL. */
SFRAME_CLIENT_API uint32_t sframe_client_session_out_flags(const struct sframe_client_session *sess);

/* SFRAME_IOC_SESSION_STATS. */
struct sframe_client_session_stats {
	size_t sz;             /* in: sizeof(struct sframe_client_session_stats) */
	uint64_t samples;      /* samples that matched the session */
	uint64_t records;      /* sample records written to its buffer */
	uint64_t lost;         /* samples dropped: buffer full */
	uint64_t lost_capture; /* samples dropped at sample time */
	uint64_t unwinds;      /* user unwinds whose result went to it */
};
#define SFRAME_CLIENT_SESSION_STATS_SZ_VER0 48

/*
 * SFRAME_IOC_SESSION_STATS into *st (st->sz set by the caller).
 * Errors: -EINVAL (st NULL, st->sz too small).
 */
SFRAME_CLIENT_API int sframe_client_session_get_stats(const struct sframe_client_session *sess,
						      struct sframe_client_session_stats *st);

/*
 * Waits up to timeout_ms (negative: no limit) for records.  Returns 1 when
 * there are some (or undelivered ones from the last read), 0 after the
 * timeout (or when the session hung up with nothing left).  A signal does
 * not end the wait early.
 * Errors: -EBADF (POLLNVAL), -EIO (POLLERR), poll(2)'s errnos.
 */
SFRAME_CLIENT_API int sframe_client_session_poll(struct sframe_client_session *sess,
						 int timeout_ms);

/*
 * One record of a session.  The library fills it; sz is sizeof() of the
 * struct as the library knows it: fields beyond sz are not there.
 */
struct sframe_client_record {
	size_t sz;              /* sizeof(struct sframe_client_record), library's */
	uint32_t type;          /* SFRAME_RECORD_SAMPLE or SFRAME_RECORD_LOST */
	/* SFRAME_RECORD_SAMPLE (0 otherwise): */
	uint32_t pid;           /* process, in the reader's pid namespace */
	uint32_t tid;
	uint32_t cpu;
	uint64_t time;          /* CLOCK_MONOTONIC ns at the sample */
	uint64_t cookie;        /* shared by the samples of one kernel entry */
	uint32_t flags;         /* SFRAME_SAMPLE_F_* */
	uint32_t user_stop;     /* enum sframe_stop_reason of the user walk; 0: none */
	uint32_t nr_kernel;
	uint32_t nr_user;
	const uint64_t *kernel; /* nr_kernel kernel PCs, the sampled one first */
	const uint64_t *user;   /* nr_user user PCs, the user PC first */
	/* SFRAME_RECORD_LOST (0 otherwise): */
	uint64_t lost;          /* samples dropped since the previous LOST record */
};

/*
 * Called once per record.  rec and the arrays it points to belong to the
 * library and are valid during the call only.  Return 0 to go on; any other
 * value stops the call that called it, which returns that value (use
 * values the caller cannot take for a count or an errno, e.g. INT_MIN+n,
 * or remember the reason in ctx).  fn must not throw (C++) or longjmp out.
 */
typedef int (*sframe_client_record_fn)(void *ctx, const struct sframe_client_record *rec);

/*
 * Reads what the session has (one non-blocking read(2), with a buffer large
 * enough for its largest record) and calls fn(ctx, rec) for each record, in
 * order.  Returns the number of records passed to fn: 0 when there was
 * nothing.  When fn returns non-zero, the call returns that value at once;
 * the records after it are kept and passed first by the next call (no read
 * happens while some are kept).  Records of types the library does not know
 * are skipped.
 * Errors: -EINVAL (fn NULL), -EBADMSG (the module's bytes are malformed:
 * the records before the bad one are passed to fn first), read(2)'s
 * errnos.
 */
SFRAME_CLIENT_API int sframe_client_session_read(struct sframe_client_session *sess,
						 sframe_client_record_fn fn, void *ctx);

/*
 * Parses the records in buf[0, len) (what one read(2) of a session file
 * returned, for a caller that reads it itself) and calls fn(ctx, rec) for
 * each, in order.  Every field is checked before it is used (header.size at
 * least the header, a multiple of 8, within len; a sample's nr_kernel +
 * nr_user ips within its size; a lost record large enough for its count).
 * Returns the number of records passed to fn, or fn's non-zero return
 * value (the rest is not parsed).
 * Errors: -EINVAL (fn NULL, buf NULL with len not 0), -EBADMSG (malformed:
 * sframe_client_errmsg() says what and at which offset; the records before
 * it are passed to fn first).
 */
SFRAME_CLIENT_API int sframe_client_parse_records(const void *buf, size_t len,
						  sframe_client_record_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SFRAME_CLIENT_SFRAME_CLIENT_H */
