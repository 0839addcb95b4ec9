/* SPDX-License-Identifier: GPL-2.0 */
/* Module-wide counters, reported by SFRAME_IOC_GET_STATS. */
#ifndef SFRAME_STATS_H
#define SFRAME_STATS_H

#include <linux/atomic.h>

struct sframe_counters {
	atomic64_t sections;
	atomic64_t processes;
	atomic64_t registrations;
	atomic64_t registrations_rejected;
	atomic64_t unwinds;
	atomic64_t frames_sframe;
	atomic64_t frames_fp;
	atomic64_t unwind_faults;
	atomic64_t unwind_bad_frames;
	atomic64_t samples_deferred;
	atomic64_t samples_nmi;
	atomic64_t sections_discovered;
	atomic64_t forks_inherited;
	atomic64_t forks_not_inherited;
	atomic64_t walks_budget_exhausted;
	atomic64_t samples_timed_out;
};

extern struct sframe_counters sframe_counters;

#endif /* SFRAME_STATS_H */
