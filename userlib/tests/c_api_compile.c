/* The C API from C: this file is compiled as C11 with -Wall -Wextra -Werror
 * -pedantic (userlib/tests/CMakeLists.txt), so the header is proven to be C.
 * c_api_test.cc calls c_api_from_c() and expects 0. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sframe_client/sframe_client.h"

int c_api_from_c(void);

struct counts {
	unsigned samples;
	unsigned lost;
	uint64_t last_user_pc;
};

static int count_record(void *ctx, const struct sframe_client_record *rec)
{
	struct counts *c = (struct counts *)ctx;

	if (rec->sz < sizeof(struct sframe_client_record))
		return -1000;
	if (rec->type == SFRAME_RECORD_SAMPLE) {
		c->samples++;
		if (rec->nr_user > 0)
			c->last_user_pc = rec->user[rec->nr_user - 1];
	} else if (rec->type == SFRAME_RECORD_LOST) {
		c->lost += (unsigned)rec->lost;
	}
	return 0;
}

/* 0 when everything behaved, else the number of the first check that did
 * not. */
int c_api_from_c(void)
{
	struct sframe_client_device *dev = (struct sframe_client_device *)&dev;
	struct sframe_client_session *sess = NULL;
	struct counts counts = { 0, 0, 0 };
	uint64_t buf[(sizeof(struct sframe_sample_record) + 16 + sizeof(struct sframe_lost_record)) / 8];
	struct sframe_sample_record sample;
	struct sframe_lost_record lost;
	int ret;
	SFRAME_CLIENT_OPTS(sframe_client_session_opts, opts, .device = "/nonexistent/sframe_unwind",
			   .buffer_size = 1u << 16);
	struct sframe_client_stats st = { .sz = sizeof(st) };
	struct sframe_client_file_store_stats fst = { .sz = sizeof(fst) };
	struct sframe_client_perf_callchain_stats cst = { .sz = sizeof(cst) };
	struct sframe_client_file_info files[2];
	uint64_t id = 7;

	if (strcmp(sframe_client_version(), "") == 0)
		return 1;
	if (sframe_client_open("/nonexistent/sframe_unwind", &dev) != -ENOENT || dev != NULL)
		return 2;
	if (strstr(sframe_client_errmsg(), "(ENOENT)") == NULL)
		return 3;
	if (strcmp(sframe_client_errno_name(-EBADMSG), "EBADMSG") != 0)
		return 4;
	if (sframe_client_get_stats(NULL, &st) != -EINVAL || st.sz != sizeof(st))
		return 5;
	ret = sframe_client_session_start(SFRAME_TARGET_EVENTS, 0, &opts, &sess);
	if (ret != -ENOENT || sess != NULL)
		return 6;

	/* A sample with one user PC, then a LOST record. */
	memset(&sample, 0, sizeof(sample));
	sample.header.type = SFRAME_RECORD_SAMPLE;
	sample.header.size = (uint32_t)(sizeof(sample) + 16);
	sample.nr_kernel = 1;
	sample.nr_user = 1;
	memset(&lost, 0, sizeof(lost));
	lost.header.type = SFRAME_RECORD_LOST;
	lost.header.size = (uint32_t)sizeof(lost);
	lost.lost = 3;
	memcpy(buf, &sample, sizeof(sample));
	((uint64_t *)((char *)buf + sizeof(sample)))[0] = 0xffffffff81000000u;
	((uint64_t *)((char *)buf + sizeof(sample)))[1] = 0x401000u;
	memcpy((char *)buf + sizeof(sample) + 16, &lost, sizeof(lost));
	ret = sframe_client_parse_records(buf, sizeof(buf), count_record, &counts);
	if (ret != 2 || counts.samples != 1 || counts.lost != 3 || counts.last_user_pc != 0x401000u)
		return 7;

	/* The file store (0.2.0): a NULL handle is refused before any ioctl. */
	if (sframe_client_file_supply(NULL, 0, buf, sizeof(buf), 0x1000, SFRAME_FILE_F_REPLACE,
				      &id) != -EINVAL || id != 7)
		return 8;
	if (sframe_client_file_remove(NULL, 1) != -EINVAL ||
	    sframe_client_file_remove_fd(NULL, 0) != -EINVAL)
		return 9;
	if (sframe_client_file_list(NULL, files, sizeof(files[0]), 2) != -EINVAL)
		return 10;
	if (sframe_client_file_store_get_stats(NULL, &fst) != -EINVAL ||
	    fst.sz != sizeof(fst))
		return 11;
	if (sizeof(files[0]) != SFRAME_CLIENT_FILE_INFO_SZ_VER0)
		return 12;
	if (sframe_client_perf_callchain_get_stats(NULL, &cst) != -EINVAL ||
	    sizeof(cst) != SFRAME_CLIENT_PERF_CALLCHAIN_STATS_SZ_VER0)
		return 13;

	sframe_client_close(NULL);
	sframe_client_session_close(NULL);
	return 0;
}
