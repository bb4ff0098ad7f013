/* A simulated power loss for file sinks (powerloss.c says how and its
 * limits). */
#ifndef TM_SINKCHECK_POWERLOSS_H
#define TM_SINKCHECK_POWERLOSS_H

#include "kit.h"

/* In the child about to commit: from now on every fsync/fdatasync of a
 * file or directory under ROOT records it as durable in SHADOW. */
void kit_pl_arm(const char *root, const char *shadow);
/* Records all of ROOT as durable (the state a round starts from), after
 * emptying SHADOW. 0 or -1. */
int kit_pl_snapshot(const char *root, const char *shadow);
/* Replaces ROOT's contents by its durable image. 0 or -1. */
int kit_pl_reboot(const char *root, const char *shadow);

#endif
