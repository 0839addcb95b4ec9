/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Extensible ioctl arguments: every struct of the uapi starts with its
 * size as the caller knows it; copy_struct_from_user() accepts a larger
 * struct from a newer caller if its unknown tail is zero.
 */
#ifndef SFRAME_UARG_H
#define SFRAME_UARG_H

#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sched/task.h>
#include <linux/types.h>
#include <linux/uaccess.h>

/*
 * Copy the caller's struct of at least min_size bytes into a kernel struct
 * of ksize bytes.  Returns the caller's size or a negative errno.
 */
static inline long sframe_copy_arg(void *karg, size_t ksize,
				   size_t min_size, void __user *uarg)
{
	u32 usize;
	int ret;

	if (get_user(usize, (u32 __user *)uarg))
		return -EFAULT;
	if (usize < min_size || usize > PAGE_SIZE)
		return usize < min_size ? -EINVAL : -E2BIG;
	ret = copy_struct_from_user(karg, ksize, uarg, usize);
	if (ret)
		return ret;
	return usize;
}

static inline bool sframe_all_zero(const u64 *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i])
			return false;
	return true;
}

/*
 * The task with id nr in the caller's pid namespace, referenced (drop it
 * with put_task_struct()), or NULL.
 */
static inline struct task_struct *sframe_get_task(pid_t nr)
{
	struct task_struct *task;

	rcu_read_lock();
	task = pid_task(find_vpid(nr), PIDTYPE_PID);
	if (task)
		get_task_struct(task);
	rcu_read_unlock();
	return task;
}

#endif /* SFRAME_UARG_H */
