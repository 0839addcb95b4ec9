/* SPDX-License-Identifier: GPL-2.0 */
#ifndef SFRAME_NMI_TEST_H
#define SFRAME_NMI_TEST_H

int sframe_nmi_test_init(void);
void sframe_nmi_test_exit(void);

#endif /* SFRAME_NMI_TEST_H */
