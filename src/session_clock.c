/*-------------------------------------------------------------------------
 *
 * session_clock.c
 *	  The session family's clock: a point in time (ZklStamp) and the time
 *	  elapsed since, for the lease and every bounded wait off the latch.
 *
 * Time is read on two clocks and the larger elapsed time wins:
 * CLOCK_BOOTTIME keeps counting while the process is stopped and while the
 * machine is suspended; a virtual machine paused by its hypervisor may
 * resume with its monotonic clocks not counting the pause, and then the
 * wall clock, once time synchronisation steps it, shows the gap.
 *
 * No state; plain C, any thread.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "session_int.h"

static int64_t
session_clock_ms(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
zkl_stamp_now(ZklStamp *s)
{
	s->boot_ms = session_clock_ms(CLOCK_BOOTTIME);
	s->wall_ms = session_clock_ms(CLOCK_REALTIME);
}

/* How long from a to b, by whichever clock counted more. */
int64_t
zkl_stamp_diff_ms(const ZklStamp *a, const ZklStamp *b)
{
	return Max(b->boot_ms - a->boot_ms, b->wall_ms - a->wall_ms);
}

/* How long since s, by whichever clock counted more. */
int64_t
zkl_stamp_age_ms(const ZklStamp *s)
{
	ZklStamp	now;

	zkl_stamp_now(&now);
	return zkl_stamp_diff_ms(s, &now);
}
