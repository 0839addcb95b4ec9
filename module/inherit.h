/* SPDX-License-Identifier: GPL-2.0 */
/* A fork child inherits its parent's registered and supplied sections. */
#ifndef SFRAME_INHERIT_H
#define SFRAME_INHERIT_H

int sframe_inherit_init(void);
void sframe_inherit_exit(void);

#endif /* SFRAME_INHERIT_H */
