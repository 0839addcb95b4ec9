/* SPDX-License-Identifier: GPL-2.0 */
#ifndef SFRAME_NMI_TEST_H
#define SFRAME_NMI_TEST_H

/* Built only for the test suite (Kbuild: SFRAME_TEST_HOOKS=y). */
#ifdef SFRAME_TEST_HOOKS
int sframe_nmi_test_init(void);
void sframe_nmi_test_exit(void);
#else
static inline int sframe_nmi_test_init(void) { return 0; }
static inline void sframe_nmi_test_exit(void) { }
#endif

#endif /* SFRAME_NMI_TEST_H */
