/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Discovery: the .sframe of a mapped ELF file, found without the
 * program's help.
 */
#ifndef SFRAME_DISCOVERY_H
#define SFRAME_DISCOVERY_H

#include <linux/types.h>

bool sframe_discovery_enabled(void);

/*
 * pc lies in no registered range of current's process: find the file
 * mapped there, its PT_GNU_SFRAME, and register it (or remember that
 * there is none).  Process context of current; sleeps.  Returns 0 when a
 * section now covers the file's text.
 */
int sframe_discover(unsigned long pc);

#endif /* SFRAME_DISCOVERY_H */
