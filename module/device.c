// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/sframe_unwind: the ioctls of uapi/sframe_unwind.h.
 *
 * Requests act on the caller's own process, so the device is open to
 * everyone (mode 0666): registering a section or unwinding one's own stack
 * gives nothing a process could not compute itself.  Requests about
 * another process (supplying a section, listing, unregistering) follow
 * ptrace's rule for it, and sessions perf_event_open()'s.  The file
 * store, which changes how every process is unwound, is CAP_SYS_ADMIN's.
 *
 * Argument structs are extensible the usual way (copy_struct_from_user):
 * the caller's size is in the struct, a newer caller's unknown tail must be
 * zero, and every reserved field and unknown flag must be zero too.
 */
#include <linux/capability.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/ptrace.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task_stack.h>
#include <linux/uaccess.h>

#include "device.h"
#include "file_store.h"
#include "perf_callchain.h"
#include "ksyms.h"
#include "quota.h"
#include "uarg.h"
#include "registry.h"
#include "session.h"
#include "sframe_unwind.h"
#include "stats.h"
#include "unwind.h"

/* Frames copied to user space per copy_to_user(). */
#define SFRAME_FRAME_BATCH 32

static long sframe_do_register(void __user *uarg)
{
	struct sframe_register req;
	long ret;

	ret = sframe_copy_arg(&req, sizeof(req), SFRAME_REGISTER_SIZE_VER0,
			      uarg);
	if (ret < 0)
		return ret;
	if (req.flags || !sframe_all_zero(req.reserved, ARRAY_SIZE(req.reserved)))
		return -EINVAL;
	if (!req.sframe_len || !req.text_len)
		return -EINVAL;
	return sframe_register_section(current->mm, req.sframe_addr,
				       req.sframe_len, req.text_start,
				       req.text_len, SFRAME_SOURCE_REGISTERED,
				       NULL);
}

static long sframe_ioctl_register(void __user *uarg)
{
	long ret = sframe_do_register(uarg);

	/* Every refusal counts, whatever refused it: see the uapi stats. */
	atomic64_inc(ret ? &sframe_counters.registrations_rejected :
			   &sframe_counters.registrations);
	return ret;
}

/*
 * The address space of process pid (0: the caller's), with a reference, if
 * the caller may ptrace it in mode.  ERR_PTR(-ESRCH) or (-EPERM).
 */
static struct mm_struct *sframe_target_mm(s32 pid, unsigned int mode)
{
	struct task_struct *task;
	struct mm_struct *mm;

	if (pid < 0)
		return ERR_PTR(-ESRCH);
	if (!pid) {
		mmget(current->mm);
		return current->mm;
	}
	task = sframe_get_task(pid);
	if (!task)
		return ERR_PTR(-ESRCH);
	/* Checked under the target's exec_update_lock: a racing setuid exec
	 * cannot slip its new mm past the check. */
	mm = sframe_ksyms.mm_access(task, mode);
	put_task_struct(task);
	if (!mm)
		return ERR_PTR(-ESRCH);
	if (IS_ERR(mm))
		return PTR_ERR(mm) == -EACCES ? ERR_PTR(-EPERM) : mm;
	return mm;
}

static long sframe_ioctl_unregister(void __user *uarg)
{
	struct sframe_unregister req;
	struct mm_struct *mm;
	long ret;

	ret = sframe_copy_arg(&req, sizeof(req), SFRAME_UNREGISTER_SIZE_VER0,
			      uarg);
	if (ret < 0)
		return ret;
	if ((req.flags & ~SFRAME_UNREGISTER_F_PID) || req.reserved)
		return -EINVAL;
	if (!(req.flags & SFRAME_UNREGISTER_F_PID)) {
		if (req.pid)
			return -EINVAL;
		return sframe_unregister_section(current->mm, req.text_start);
	}
	mm = sframe_target_mm(req.pid, PTRACE_MODE_ATTACH_REALCREDS);
	if (IS_ERR(mm))
		return PTR_ERR(mm);
	ret = sframe_unregister_section(mm, req.text_start);
	mmput(mm);
	return ret;
}

static long sframe_do_supply(void __user *uarg)
{
	struct sframe_supply req;
	struct sframe_blob *blob;
	struct mm_struct *mm;
	long ret;

	ret = sframe_copy_arg(&req, sizeof(req), SFRAME_SUPPLY_SIZE_VER0, uarg);
	if (ret < 0)
		return ret;
	if (req.flags || req.reserved0 ||
	    !sframe_all_zero(req.reserved, ARRAY_SIZE(req.reserved)))
		return -EINVAL;
	if (!req.sframe_len || !req.text_len)
		return -EINVAL;
	/* Checked before the allocation it bounds. */
	if (req.sframe_len > SFRAME_MAX_SECTION_SIZE)
		return -E2BIG;

	mm = sframe_target_mm(req.pid, PTRACE_MODE_ATTACH_REALCREDS);
	if (IS_ERR(mm))
		return PTR_ERR(mm);
	/* Charged to the caller's memory cgroup, which asks for it. */
	/* Charged to the caller's user, and bounded: see the uapi. */
	blob = sframe_blob_alloc(req.sframe_len);
	if (IS_ERR(blob)) {
		ret = PTR_ERR(blob);
		goto out;
	}
	if (copy_from_user(sframe_blob_data(blob),
			   u64_to_user_ptr(req.sframe_data), req.sframe_len)) {
		sframe_blob_put(blob);
		ret = -EFAULT;
		goto out;
	}
	/* Takes the blob, on success and on failure. */
	ret = sframe_supply_section(mm, blob, req.sframe_len, req.sframe_addr,
				    req.text_start, req.text_len);
out:
	mmput(mm);
	return ret;
}

static long sframe_ioctl_supply(void __user *uarg)
{
	long ret = sframe_do_supply(uarg);

	atomic64_inc(ret ? &sframe_counters.registrations_rejected :
			   &sframe_counters.registrations);
	return ret;
}

static long sframe_ioctl_list_sections(void __user *uarg)
{
	struct sframe_list_sections req;
	struct sframe_section_info *infos = NULL;
	struct mm_struct *mm;
	long usize, ret;
	u32 nr = 0;

	usize = sframe_copy_arg(&req, sizeof(req),
				SFRAME_LIST_SECTIONS_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;
	if (req.flags || req.reserved0 ||
	    !sframe_all_zero(req.reserved, ARRAY_SIZE(req.reserved)))
		return -EINVAL;
	if (req.max_entries > SFRAME_MAX_SECTIONS_PER_MM)
		return -EINVAL;

	mm = sframe_target_mm(req.pid, PTRACE_MODE_READ_REALCREDS);
	if (IS_ERR(mm))
		return PTR_ERR(mm);
	if (req.max_entries) {
		infos = kvcalloc(req.max_entries, sizeof(*infos), GFP_KERNEL);
		if (!infos) {
			ret = -ENOMEM;
			goto out;
		}
	}
	ret = sframe_registry_list(mm, infos, req.max_entries, &nr);
	if (ret)
		goto out;
	ret = -EFAULT;
	if (infos && copy_to_user(u64_to_user_ptr(req.entries), infos,
				  min(nr, req.max_entries) * sizeof(*infos)))
		goto out;
	req.nr_entries = nr;
	if (copy_to_user(uarg, &req, min_t(size_t, usize, sizeof(req))))
		goto out;
	ret = 0;
out:
	kvfree(infos);
	mmput(mm);
	return ret;
}

static long sframe_ioctl_unwind_self(void __user *uarg)
{
	struct sframe_unwind_self req;
	struct sframe_user_unwind uw;
	u64 batch[SFRAME_FRAME_BATCH];
	u64 __user *frames;
	u32 n = 0, in_batch = 0;
	long usize;

	usize = sframe_copy_arg(&req, sizeof(req), SFRAME_UNWIND_SELF_SIZE_VER0,
				uarg);
	if (usize < 0)
		return usize;
	/* nr_frames, stop_reason and the counts are outputs: not checked, so
	 * a request can be issued again as it came back. */
	if (!req.flags || (req.flags & ~SFRAME_UNWIND_F_ALL) ||
	    req.reserved0 ||
	    !sframe_all_zero(req.reserved, ARRAY_SIZE(req.reserved)))
		return -EINVAL;
	if (!req.max_frames || req.max_frames > SFRAME_MAX_FRAMES)
		return -EINVAL;
	frames = u64_to_user_ptr(req.frames);
	if (!access_ok(frames, (size_t)req.max_frames * sizeof(u64)))
		return -EFAULT;

	/* The registers the caller had at the system call. */
	sframe_unwind_start(&uw, task_pt_regs(current), req.flags);
	batch[in_batch++] = uw.ip;
	n = 1;
	/*
	 * At most max_frames (<= SFRAME_MAX_FRAMES) steps, their decoding
	 * bounded by uw.budget.  Between steps: let others run, and give up
	 * for a caller being killed (nothing is written back then).
	 */
	while (n < req.max_frames && sframe_unwind_next(&uw)) {
		cond_resched();
		if (fatal_signal_pending(current))
			return -EINTR;
		batch[in_batch++] = uw.ip;
		n++;
		if (in_batch == SFRAME_FRAME_BATCH) {
			if (copy_to_user(frames + n - in_batch, batch,
					 sizeof(batch)))
				return -EFAULT;
			in_batch = 0;
		}
	}
	if (!uw.stop)
		uw.stop = SFRAME_STOP_LIMIT;
	if (in_batch &&
	    copy_to_user(frames + n - in_batch, batch, in_batch * sizeof(u64)))
		return -EFAULT;
	sframe_unwind_account(&uw);

	req.nr_frames = n;
	req.stop_reason = uw.stop;
	req.nr_sframe = uw.nr_sframe;
	req.nr_fp = uw.nr_fp;
	if (copy_to_user(uarg, &req, min_t(size_t, usize, sizeof(req))))
		return -EFAULT;
	return 0;
}

/*
 * The file fd as the file store takes it: a regular file open for
 * reading.  Referenced (fput() it), or an ERR_PTR.
 */
static struct file *sframe_store_file(int fd)
{
	struct file *file = fget(fd);

	if (!file)
		return ERR_PTR(-EBADF);
	if (!(file->f_mode & FMODE_READ)) {
		fput(file);
		return ERR_PTR(-EBADF);
	}
	if (!S_ISREG(file_inode(file)->i_mode)) {
		fput(file);
		return ERR_PTR(-EINVAL);
	}
	return file;
}

static long sframe_ioctl_file_supply(void __user *uarg)
{
	struct sframe_file_supply req;
	struct file *file;
	long usize, ret;
	u64 id = 0;

	usize = sframe_copy_arg(&req, sizeof(req), SFRAME_FILE_SUPPLY_SIZE_VER0,
				uarg);
	if (usize < 0)
		return usize;
	if ((req.flags & ~SFRAME_FILE_F_REPLACE) || req.reserved0 || req.id ||
	    !sframe_all_zero(req.reserved, ARRAY_SIZE(req.reserved)))
		return -EINVAL;
	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	file = sframe_store_file(req.fd);
	if (IS_ERR(file))
		return PTR_ERR(file);
	ret = sframe_file_supply(file, u64_to_user_ptr(req.sframe_data),
				 req.sframe_len, req.sframe_vaddr, req.flags,
				 &id);
	fput(file);
	if (ret)
		return ret;
	req.id = id;
	if (copy_to_user(uarg, &req, min_t(size_t, usize, sizeof(req))))
		return -EFAULT;
	return 0;
}

static long sframe_ioctl_file_remove(void __user *uarg)
{
	struct sframe_file_remove req;
	struct file *file;
	long ret;

	ret = sframe_copy_arg(&req, sizeof(req), SFRAME_FILE_REMOVE_SIZE_VER0,
			      uarg);
	if (ret < 0)
		return ret;
	if (req.flags || req.reserved0 ||
	    !sframe_all_zero(req.reserved, ARRAY_SIZE(req.reserved)))
		return -EINVAL;
	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (req.id)
		return sframe_file_remove(req.id, NULL);
	file = sframe_store_file(req.fd);
	if (IS_ERR(file))
		return PTR_ERR(file);
	ret = sframe_file_remove(0, d_real_inode(file->f_path.dentry));
	fput(file);
	return ret;
}

static long sframe_ioctl_file_list(void __user *uarg)
{
	struct sframe_file_info *infos = NULL;
	struct sframe_file_list req;
	u32 nr = 0, room = 0;
	long usize, ret;
	int tries;

	usize = sframe_copy_arg(&req, sizeof(req), SFRAME_FILE_LIST_SIZE_VER0,
				uarg);
	if (usize < 0)
		return usize;
	if (req.flags || req.nr_entries ||
	    !sframe_all_zero(req.reserved, ARRAY_SIZE(req.reserved)))
		return -EINVAL;
	if (req.max_entries > SFRAME_FILE_MAX_ENTRIES)
		return -EINVAL;
	/*
	 * Room for what the store holds now, not for all the caller may
	 * take: any user may ask, and 65536 entries are 6 MiB to zero.  If
	 * the store grows past the room meanwhile, again, a few times.
	 */
	for (tries = 0; tries < 4; tries++) {
		kvfree(infos);
		infos = NULL;
		room = min(req.max_entries, sframe_files_count());
		if (room) {
			infos = kvcalloc(room, sizeof(*infos), GFP_KERNEL);
			if (!infos)
				return -ENOMEM;
		}
		ret = sframe_file_list(infos, room, &nr);
		if (ret || nr <= room || room == req.max_entries)
			break;
	}
	if (!ret && nr > room && room < req.max_entries)
		ret = -EAGAIN;
	if (ret)
		goto out;
	ret = -EFAULT;
	if (infos && copy_to_user(u64_to_user_ptr(req.entries), infos,
				  min(nr, room) * sizeof(*infos)))
		goto out;
	req.nr_entries = nr;
	if (copy_to_user(uarg, &req, min_t(size_t, usize, sizeof(req))))
		goto out;
	ret = 0;
out:
	kvfree(infos);
	return ret;
}

static long sframe_ioctl_get_stats(void __user *uarg)
{
	struct sframe_stats st = {};
	struct sframe_user *user;
	struct sframe_mm *smm;
	long usize;

	usize = sframe_copy_arg(&st, sizeof(st), SFRAME_STATS_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	st.abi_version = SFRAME_UNWIND_ABI_VERSION;
	st.sections = atomic64_read(&sframe_counters.sections);
	st.processes = atomic64_read(&sframe_counters.processes);
	st.registrations = atomic64_read(&sframe_counters.registrations);
	st.registrations_rejected =
		atomic64_read(&sframe_counters.registrations_rejected);
	st.unwinds = atomic64_read(&sframe_counters.unwinds);
	st.frames_sframe = atomic64_read(&sframe_counters.frames_sframe);
	st.frames_fp = atomic64_read(&sframe_counters.frames_fp);
	st.unwind_faults = atomic64_read(&sframe_counters.unwind_faults);
	st.unwind_bad_frames =
		atomic64_read(&sframe_counters.unwind_bad_frames);
	st.samples_deferred = atomic64_read(&sframe_counters.samples_deferred);
	st.samples_nmi = atomic64_read(&sframe_counters.samples_nmi);
	st.sections_discovered =
		atomic64_read(&sframe_counters.sections_discovered);
	st.supplied_bytes = sframe_supplied_bytes();
	st.forks_inherited = atomic64_read(&sframe_counters.forks_inherited);
	st.forks_not_inherited =
		atomic64_read(&sframe_counters.forks_not_inherited);
	st.walks_budget_exhausted =
		atomic64_read(&sframe_counters.walks_budget_exhausted);
	st.samples_timed_out = atomic64_read(&sframe_counters.samples_timed_out);
	sframe_sessions_user_stats(&st);
	smm = current->mm ? sframe_mm_find(current->mm) : NULL;
	st.mm_sections = smm ? sframe_mm_nr_sections(smm) : 0;
	/* What the caller's user holds, charged once per supplied blob. */
	user = sframe_user_current();
	st.user_supplied_bytes =
		user ? sframe_user_usage(user, SFRAME_QUOTA_SUPPLIED_BYTES) : 0;
	sframe_user_put(user);
	st.user_supplied_limit = sframe_supply_user_limit();
	sframe_files_stats(&st);
	sframe_callchain_stats(&st);
	if (copy_to_user(uarg, &st, min_t(size_t, usize, sizeof(st))))
		return -EFAULT;
	return 0;
}

/* The session of file, once SFRAME_IOC_SESSION_START has made one. */
static struct sframe_session *sframe_file_session(struct file *file)
{
	/* Pairs with smp_store_release() in sframe_session_start(). */
	return smp_load_acquire(&file->private_data);
}

static long sframe_ioctl(struct file *file, unsigned int cmd,
			 unsigned long arg)
{
	void __user *uarg = (void __user *)arg;
	struct sframe_session *s;

	/* A kernel thread or an exiting task has no user stack or memory. */
	if (!current->mm)
		return -EINVAL;
	/* The size bits of cmd are not the ABI: the struct's size field is. */
	if (_IOC_TYPE(cmd) != SFRAME_IOC_MAGIC)
		return -ENOTTY;
	switch (_IOC_NR(cmd)) {
	case _IOC_NR(SFRAME_IOC_REGISTER):
		return sframe_ioctl_register(uarg);
	case _IOC_NR(SFRAME_IOC_UNREGISTER):
		return sframe_ioctl_unregister(uarg);
	case _IOC_NR(SFRAME_IOC_UNWIND_SELF):
		return sframe_ioctl_unwind_self(uarg);
	case _IOC_NR(SFRAME_IOC_GET_STATS):
		return sframe_ioctl_get_stats(uarg);
	case _IOC_NR(SFRAME_IOC_SUPPLY):
		return sframe_ioctl_supply(uarg);
	case _IOC_NR(SFRAME_IOC_LIST_SECTIONS):
		return sframe_ioctl_list_sections(uarg);
	case _IOC_NR(SFRAME_IOC_FILE_SUPPLY):
		return sframe_ioctl_file_supply(uarg);
	case _IOC_NR(SFRAME_IOC_FILE_REMOVE):
		return sframe_ioctl_file_remove(uarg);
	case _IOC_NR(SFRAME_IOC_FILE_LIST):
		return sframe_ioctl_file_list(uarg);
	case _IOC_NR(SFRAME_IOC_SESSION_START):
		if (sframe_file_session(file))
			return -EBUSY;
		return sframe_session_start(file, uarg);
	case _IOC_NR(SFRAME_IOC_SESSION_STATS):
		s = sframe_file_session(file);
		return s ? sframe_session_stats(s, uarg) : -EINVAL;
	}
	return -ENOTTY;
}

static int sframe_open(struct inode *inode, struct file *file)
{
	/* misc_open() left the miscdevice here; we keep the session here. */
	file->private_data = NULL;
	return 0;
}

static ssize_t sframe_read(struct file *file, char __user *buf, size_t len,
			   loff_t *ppos)
{
	struct sframe_session *s = sframe_file_session(file);

	return s ? sframe_session_read(s, file, buf, len) : -EINVAL;
}

static __poll_t sframe_poll(struct file *file, poll_table *wait)
{
	struct sframe_session *s = sframe_file_session(file);

	return s ? sframe_session_poll(s, file, wait) : EPOLLERR;
}

static int sframe_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct sframe_session *s = sframe_file_session(file);

	return s ? sframe_session_mmap(s, vma) : -ENODEV;
}

static int sframe_release(struct inode *inode, struct file *file)
{
	struct sframe_session *s = sframe_file_session(file);

	if (s)
		sframe_session_release(s);
	return 0;
}

static const struct file_operations sframe_fops = {
	.owner = THIS_MODULE,
	.open = sframe_open,
	.read = sframe_read,
	.poll = sframe_poll,
	.mmap = sframe_mmap,
	.release = sframe_release,
	.unlocked_ioctl = sframe_ioctl,
	/* No compat_ioctl: the unwinder reads 64-bit AMD64 frames only. */
	.llseek = noop_llseek,
};

static struct miscdevice sframe_miscdev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "sframe_unwind",
	.fops = &sframe_fops,
	.mode = 0666,
};

int sframe_device_init(void)
{
	return misc_register(&sframe_miscdev);
}

void sframe_device_exit(void)
{
	misc_deregister(&sframe_miscdev);
}
