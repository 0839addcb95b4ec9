/* SPDX-License-Identifier: GPL-2.0 */
#ifndef SFRAME_DEVICE_H
#define SFRAME_DEVICE_H

int sframe_device_init(void);
void sframe_device_exit(void);

#endif /* SFRAME_DEVICE_H */
