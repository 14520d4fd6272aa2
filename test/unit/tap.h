/*
 * tap.h: the TAP output shared by the unit tests (one file per test
 * program, so the counters live here as statics).
 */
#ifndef ZKLOCK_TAP_H
#define ZKLOCK_TAP_H

#include <stdio.h>

static int	ntests = 0;
static int	nfailed = 0;

static void
check(int cond, const char *what)
{
	ntests++;
	if (!cond)
		nfailed++;
	printf("%sok %d - %s\n", cond ? "" : "not ", ntests, what);
}

/* The plan line; the exit status of the program. */
static int
tap_done(void)
{
	printf("1..%d\n", ntests);
	return nfailed > 0;
}

#endif							/* ZKLOCK_TAP_H */
